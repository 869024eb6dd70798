"""The Java AdminClient against a broker with two log.dirs (JBOD): describeLogDirs answers
per dir, alterReplicaLogDirs moves a replica (and refuses a dir the broker lacks with
LogDirNotFoundException), describeReplicaLogDirs follows the move, and every record reads
back in order afterwards (scenario `admin-alter-log-dirs`, LogDirScenarios.java)."""

from __future__ import annotations

import pytest

from java_client import run_java


@pytest.mark.timeout(150)
def test_java_admin_moves_a_replica_between_log_dirs(broker_factory, tmp_path):
    dirs = f"{tmp_path / 'a'},{tmp_path / 'b'}"
    b = broker_factory(overrides={"log.dirs": dirs})
    run_java("admin-alter-log-dirs", b.bootstrap, 1, timeout=140)
