"""Start, stop, restart and kill a real `runnel broker` process; wait on conditions.

No sleeps-and-hope: every wait is a poll loop with a deadline that fails loudly, and every
process is signalled by its own pid only.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
if not _target.is_absolute():
    _target = REPO / _target
RUNNEL_BIN = os.environ.get("RUNNEL_BIN", str(_target / "debug" / "runnel"))

LISTEN_RE = re.compile(r"listening on (127\.0\.0\.1):(\d+)")
ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

START_TIMEOUT = float(os.environ.get("RUNNEL_START_TIMEOUT", "30"))
STOP_TIMEOUT = float(os.environ.get("RUNNEL_STOP_TIMEOUT", "15"))


class WaitTimeout(AssertionError):
    pass


def wait_until(predicate, timeout=10.0, interval=0.05, desc="condition"):
    """Poll `predicate()` until it returns a truthy value (returned) or `timeout` passes.

    Exceptions raised by the predicate count as "not yet"; the last one is reported.
    """
    deadline = time.monotonic() + timeout
    last_exc = None
    last_val = None
    while True:
        try:
            last_val = predicate()
            if last_val:
                return last_val
        except Exception as exc:  # noqa: BLE001 - reported below
            last_exc = exc
        if time.monotonic() >= deadline:
            detail = f"; last exception: {last_exc!r}" if last_exc else f"; last value: {last_val!r}"
            raise WaitTimeout(f"timed out after {timeout}s waiting for {desc}{detail}")
        time.sleep(interval)


class BrokerError(AssertionError):
    pass


class Broker:
    """One `runnel broker` process on 127.0.0.1 with an ephemeral port.

    The process's stdout and stderr go to `log_path` (appended across restarts, each start
    marked), which the test report shows when a test fails.
    """

    _all: list["Broker"] = []

    def __init__(self, data_dir, log_path, overrides=None, node_id=1, name="broker", extra_args=()):
        self.data_dir = Path(data_dir)
        self.extra_args = list(extra_args)
        self.log_path = Path(log_path)
        self.overrides = dict(overrides or {})
        self.node_id = node_id
        self.name = name
        self.proc: subprocess.Popen | None = None
        self.host = None
        self.port = None
        self.starts = 0
        self.expected_down = True  # True while we stopped/killed it on purpose
        self.last_returncode = None
        self._log_offset = 0
        Broker._all.append(self)

    # ---- lifecycle -------------------------------------------------------------------------

    def command(self):
        args = [
            RUNNEL_BIN, "broker",
            "--node-id", str(self.node_id),
            "--listen", "127.0.0.1:0",
            "--data-dir", str(self.data_dir),
        ]
        args += self.extra_args
        for k, v in self.overrides.items():
            args += ["--override", f"{k}={v}"]
        return args

    def start(self, timeout=START_TIMEOUT):
        if self.alive():
            raise BrokerError(f"{self.name} already running (pid {self.proc.pid})")
        if not os.access(RUNNEL_BIN, os.X_OK):
            raise BrokerError(
                f"RUNNEL_BIN={RUNNEL_BIN} is not an executable; build it first "
                "(cargo build) or point RUNNEL_BIN at the binary")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        cmd = self.command()
        with open(self.log_path, "ab") as f:
            f.write(f"\n===== start #{self.starts}: {' '.join(cmd)}\n".encode())
            self._log_offset = f.tell()
        env = dict(os.environ)
        env.setdefault("RUST_BACKTRACE", "1")
        env.setdefault("RUST_LOG", "info")
        env["NO_COLOR"] = "1"
        logf = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT, env=env)
        finally:
            logf.close()
        self.expected_down = False
        self.host = self.port = None
        deadline = time.monotonic() + timeout
        while True:
            m = LISTEN_RE.search(self._log_since_start())
            if m and int(m.group(2)) != 0:
                self.host, self.port = m.group(1), int(m.group(2))
                return self
            rc = self.proc.poll()
            if rc is not None:
                self.expected_down = True
                self.last_returncode = rc
                raise BrokerError(
                    f"{self.name} exited with code {rc} before printing 'listening on "
                    f"127.0.0.1:PORT'.\n--- log ---\n{self.log_tail()}")
            if time.monotonic() >= deadline:
                self._signal_and_wait(signal.SIGKILL, 5)
                self.expected_down = True
                raise BrokerError(
                    f"{self.name} did not print 'listening on 127.0.0.1:PORT' within "
                    f"{timeout}s.\n--- log ---\n{self.log_tail()}")
            time.sleep(0.02)

    def stop(self, timeout=STOP_TIMEOUT):
        """SIGTERM, then SIGKILL after `timeout`. Returns (returncode, graceful: bool)."""
        self.expected_down = True
        if self.proc is None or self.proc.poll() is not None:
            return (self.proc.returncode if self.proc else None), True
        graceful = self._signal_and_wait(signal.SIGTERM, timeout)
        if not graceful:
            self._signal_and_wait(signal.SIGKILL, 10)
        self.last_returncode = self.proc.returncode
        return self.proc.returncode, graceful

    def kill9(self):
        self.expected_down = True
        if self.proc is not None and self.proc.poll() is None:
            self._signal_and_wait(signal.SIGKILL, 10)
        self.last_returncode = self.proc.returncode if self.proc else None
        return self.last_returncode

    def restart(self, timeout=START_TIMEOUT):
        """Graceful stop (if running), then start on the same data dir. The port changes."""
        self.stop()
        return self.start(timeout)

    def _signal_and_wait(self, sig, timeout):
        try:
            os.kill(self.proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    # ---- state -----------------------------------------------------------------------------

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    @property
    def bootstrap(self):
        if self.port is None:
            raise BrokerError(f"{self.name} is not running")
        return f"{self.host}:{self.port}"

    def _log_since_start(self):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_offset)
                data = f.read()
        except FileNotFoundError:
            return ""
        return ANSI_RE.sub("", data.decode("utf-8", "replace"))

    def log_tail(self, lines=60):
        try:
            text = ANSI_RE.sub("", self.log_path.read_text("utf-8", "replace"))
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def describe(self):
        state = f"pid {self.proc.pid} alive" if self.alive() else f"exited rc={self.last_returncode}"
        return f"{self.name} [{state}] port={self.port} data={self.data_dir} log={self.log_path}"

    @classmethod
    def kill_all_leftovers(cls):
        for b in cls._all:
            if b.alive():
                b.expected_down = True
                b._signal_and_wait(signal.SIGKILL, 5)
