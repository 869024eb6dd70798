"""The Java client (kafka-clients 3.9.1, the client Kafka itself, Streams, Connect, Flink and
Spark use) against 1 node and 3 nodes: every scenario of tests/java/src/runnel/interop runs
as its own JVM (see java_client.py) against the shared single broker or a module-wide
3-node cluster, and passes only if all its checks on real outcomes held.

A scenario that fails because of a known Runnel defect is marked xfail(strict=True) with the
defect, so it turns into a failure (XPASS) the moment the defect is fixed.
"""

from __future__ import annotations

import re
import time

import pytest

from clients import admin as ck_admin
from cluster import Cluster
from conftest import _use
from harness import wait_until
from java_client import run_java

# Runnel's Raft election timeout range is 1-2 s (crates/raft/src/config.rs).
ELECTION_TIMEOUT_MAX_MS = 2000

SCENARIOS = [
    "admin-cluster",
    "admin-topics",
    "admin-configs",
    "admin-create-partitions",
    "admin-offsets",
    "admin-groups",
    "admin-elect-leaders",
    "admin-reassign",
    "admin-log-dirs",
    "produce-compression",
    "consumer-classic-range",
    "consumer-classic-cooperative",
    "consumer-classic-static",
    "consumer-protocol-consumer",
    "consumer-rebalance-no-loss",
    "config-types",
    "config-subtract-to-empty",
    "txn-commit-abort-fence",
]

# (scenario, nodes) -> the Runnel defect that makes it fail today.
KNOWN_DEFECTS: dict[tuple[str, int], str] = {}


@pytest.fixture(scope="module")
def cluster3(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("java-cluster3"), 3)
    c.start()
    c.wait_all_brokers(ck_admin(c.bootstrap))
    yield c
    c.stop_all()


@pytest.fixture(params=[1, 3], ids=["1node", "3nodes"])
def target(request):
    """(bootstrap, nodes) of the shared single broker or of the module's 3-node cluster."""
    if request.param == 1:
        b = request.getfixturevalue("broker")
        return b.bootstrap, 1
    c = request.getfixturevalue("cluster3")
    for node in c.nodes.values():
        _use(request, node)
    return c.bootstrap, 3


@pytest.mark.timeout(150)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_java_scenario(scenario, target, request):
    bootstrap, nodes = target
    defect = KNOWN_DEFECTS.get((scenario, nodes))
    if defect:
        request.applymarker(pytest.mark.xfail(reason=defect, strict=True))
    run_java(scenario, bootstrap, nodes, timeout=140)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_java_admin_create_topics_after_controller_kill9(tmp_path, request):
    """kill -9 of the active Raft controller's node; an AdminClient bootstrapped at the two
    survivors must create a topic within the election time plus a few seconds."""
    cluster = Cluster(tmp_path / "cluster", 3)
    for node in cluster.nodes.values():
        _use(request, node)
    cluster.start()
    try:
        cluster.wait_all_brokers(ck_admin(cluster.bootstrap))
        out = run_java("quorum-leader", cluster.bootstrap, 3, timeout=60)
        leader = int(re.search(r"quorum-leader=(\d+)", out).group(1))
        killed_at_ms = int(time.time() * 1000)
        cluster.kill9(leader)
        survivors = ",".join(n.address for i, n in cluster.nodes.items() if i != leader)
        out = run_java("create-topic-within", survivors, 3, timeout=90, killed=leader,
                       killed_at_ms=killed_at_ms, budget_ms=ELECTION_TIMEOUT_MAX_MS + 8000)
        print(f"killed the quorum leader node {leader}: {out.strip()}")  # shown with -rA
        wait_until(lambda: len(cluster.alive()) == 2, 5, desc="two survivors still running")
    finally:
        cluster.stop_all()
