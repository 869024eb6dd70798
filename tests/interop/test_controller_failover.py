"""Issue 15: after `kill -9` of the active controller's node, admin clients bootstrapped from
the two surviving brokers create a topic within the election time plus a few seconds.

Brokers name a live broker as the controller id, themselves while live (KRaft brokers name a
random live one), and forward admin requests to the active controller, waiting out the
election; before, they named the quorum leader, so a client that asked while it was dead kept
chasing it: librdkafka waits for the named controller to come up and never asks again
(> 60 s, ~10,000 reconnects a second). A random live broker would do that too whenever it
drew the dead node, which stays unfenced for a session.

Kafka's defaults are kept (broker.session.timeout.ms 9 s): the dead node stays registered and
unfenced for a whole session after the election, so it may still be named as controller then.
"""

from __future__ import annotations

import re
import subprocess
import time

import pytest
from confluent_kafka.admin import NewTopic

from clients import admin as ck_admin
from clients import unique_topic, wait_topic_ready
from cluster import Cluster
from conftest import _use
from harness import RUNNEL_BIN, wait_until

# The quorum elects within its election timeout (1-2 s) once a follower notices the leader is
# gone; "a few seconds" on top covers the client's own round trips on a loaded machine.
ELECTION_PLUS_A_FEW = 12.0


def quorum_leader(address):
    """The quorum leader's id as `runnel metadata-quorum --describe --status` reports it."""
    out = subprocess.run([RUNNEL_BIN, "metadata-quorum", "--bootstrap-server", address,
                          "--describe", "--status"], capture_output=True, text=True, timeout=20)
    m = re.search(r"LeaderId:\s+(-?\d+)", out.stdout)
    return int(m.group(1)) if m and int(m.group(1)) > 0 else None


def kill_the_controller(tmp_path, request):
    """A started 3-node cluster with its active controller's node `kill -9`ed: (cluster, the
    surviving nodes' bootstrap list, the killed id, the monotonic time of the kill)."""
    cluster = Cluster(tmp_path / "cluster", 3)
    for node in cluster.nodes.values():
        _use(request, node)
    cluster.start()
    adm = ck_admin(cluster.bootstrap)
    cluster.wait_all_brokers(adm)
    leader = wait_until(lambda: quorum_leader(cluster.node(1).address), 30,
                        desc="a quorum leader")
    cluster.kill9(leader)
    killed = time.monotonic()
    survivors = ",".join(n.address for i, n in cluster.nodes.items() if i != leader)
    return cluster, survivors, leader, killed


def assert_created_on_survivors(survivors, topic):
    # Its replicas may include the dead node: it stays unfenced until its session expires,
    # as in Kafka, and its leaderships then move to the in-sync survivors.
    wait_topic_ready(ck_admin(survivors), topic, 3)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_confluent_admin_creates_a_topic_right_after_the_controller_dies(tmp_path, request):
    cluster, survivors, leader, killed = kill_the_controller(tmp_path, request)
    try:
        adm = ck_admin(survivors)
        topic = unique_topic("after-controller-kill9")
        # One call, as a user makes it: librdkafka must find a live broker to send it to.
        fs = adm.create_topics([NewTopic(topic, num_partitions=3, replication_factor=2)],
                               operation_timeout=30, request_timeout=60)
        fs[topic].result(timeout=60)
        took = time.monotonic() - killed
        print(f"created {took:.1f} s after the kill of node {leader}")
        assert took <= ELECTION_PLUS_A_FEW, f"created {took:.1f} s after the kill"
        assert_created_on_survivors(survivors, topic)
    finally:
        cluster.kill_all()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_kafka_python_admin_creates_a_topic_right_after_the_controller_dies(tmp_path, request):
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic as KpNewTopic
    from kafka.errors import KafkaError

    cluster, survivors, leader, killed = kill_the_controller(tmp_path, request)
    try:
        topic = unique_topic("kp-after-controller-kill9")
        attempts = []

        # kafka-python sends admin requests to the controller the metadata names and raises
        # when it cannot reach it; a user retries with a new client.
        def create():
            client = KafkaAdminClient(bootstrap_servers=survivors, request_timeout_ms=5000)
            try:
                res = client.create_topics([KpNewTopic(topic, 3, 2)], timeout_ms=10000)
                return [(x["name"], x["error_code"]) for x in res["topics"]] == [(topic, 0)]
            except KafkaError as exc:
                attempts.append(repr(exc))
                return False
            finally:
                client.close()

        wait_until(create, ELECTION_PLUS_A_FEW, interval=0.2,
                   desc=f"kafka-python creating {topic} (failed attempts: {attempts})")
        took = time.monotonic() - killed
        print(f"created {took:.1f} s after the kill of node {leader}")
        assert took <= ELECTION_PLUS_A_FEW, f"created {took:.1f} s after the kill"
        assert_created_on_survivors(survivors, topic)
    finally:
        cluster.kill_all()
