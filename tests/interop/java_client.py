"""Runs the Java-client scenarios of tests/java (kafka-clients 3.9.1) against running brokers.

tests/java/build.sh installs the client jars and compiles the scenarios into target/java
(scripts/test runs it; `java_classpath()` runs it again once per pytest session, so pytest by
hand works and never runs stale classes). Each scenario is one `java runnel.interop.Main <scenario> <bootstrap>
<nodes> [k=v...]` process that exits 0 only when every check it makes held.
"""

from __future__ import annotations

import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

from harness import REPO

JAVA_OUT = Path(os.environ.get("RUNNEL_JAVA_OUT", REPO / "target" / "java"))


class JavaScenarioFailed(AssertionError):
    pass


@lru_cache(maxsize=1)
def java_classpath() -> str:
    # build.sh is idempotent (a no-op in well under a second when nothing changed), so running
    # it once per session keeps the classes in step with tests/java/src.
    env = dict(os.environ, JAVA_OUT=str(JAVA_OUT), PYTHON=sys.executable)
    subprocess.run([str(REPO / "tests" / "java" / "build.sh")], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    return (JAVA_OUT / "classpath").read_text().strip()


def run_java(scenario: str, bootstrap: str, nodes: int, timeout: float = 110.0, **args) -> str:
    """Runs one scenario; returns its stdout, raises JavaScenarioFailed with its output."""
    cmd = ["java", "-cp", java_classpath(), "runnel.interop.Main", scenario, bootstrap, str(nodes)]
    cmd += [f"{k}={v}" for k, v in args.items()]
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise JavaScenarioFailed(f"java scenario {scenario} did not finish in {timeout}s\n"
                                 f"--- stdout ---\n{exc.stdout}\n--- stderr ---\n{exc.stderr}") from None
    if proc.returncode != 0 or f"PASS {scenario}" not in proc.stdout:
        err = "\n".join(proc.stderr.splitlines()[-60:])
        first = next((line for line in proc.stderr.splitlines() if line.startswith("FAIL ")), "")
        raise JavaScenarioFailed(f"{first or 'java scenario ' + scenario + ' failed'} "
                                 f"(exit {proc.returncode})\n--- stdout ---\n{proc.stdout}\n"
                                 f"--- stderr (tail) ---\n{err}")
    return proc.stdout
