"""Fetch from the closest replica (KIP-392) on a 3-node cluster with racks.

Every node has its own `broker.rack` (rack-1, rack-2, rack-3) and Kafka's
`replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector`. A consumer
with `client.rack` set to a follower's rack must get its records from that follower, identical
to what was produced; when that follower stops, it must go back to the leader without loss or
duplicates, and return to the follower once it is back in the ISR.

Which broker served a consumer's records is read from the brokers' own logs: with
`runnel_broker::handlers::fetch_follower_read=debug`, each consumer fetch that returns records
logs "consumer fetch served role=leader|follower topic=... partition=... offset=... bytes=..."
(documented in crates/broker/src/handlers/fetch_follower_read.rs).
"""

from __future__ import annotations

import os
import re
import signal
import threading

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from clients import admin as ck_admin
from clients import ck_conf, unique_topic, wait_topic_ready
from cluster import QUIET_RAFT, Cluster, partition_states
from conftest import _use
from harness import wait_until
from java_client import run_java

SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
SERVED = re.compile(r'consumer fetch served role="?(leader|follower)"? topic=(\S+) partition=(\d+) '
                    r'offset=(\d+) bytes=(\d+)')


@pytest.fixture
def rack_cluster(tmp_path, request, monkeypatch):
    monkeypatch.setenv("RUST_LOG", QUIET_RAFT + ",runnel_broker::handlers::fetch_follower_read=debug")
    cluster = Cluster(tmp_path / "cluster", 3, overrides={
        "replica.selector.class": SELECTOR,
        "replica.lag.time.max.ms": "5000",
    })
    for i, node in cluster.nodes.items():
        node.overrides["broker.rack"] = f"rack-{i}"
        _use(request, node)
    cluster.start()
    cluster.wait_all_brokers(ck_admin(cluster.bootstrap))
    yield cluster
    cluster.stop_all()


def served(node, topic):
    """[(role, offset)] of the consumer fetches of `topic` this node served, from its log."""
    text = node.log_path.read_text("utf-8", "replace")
    return [(m.group(1), int(m.group(4))) for m in SERVED.finditer(text)
            if m.group(2) == topic and int(m.group(5)) > 0]


def setup_topic(cluster):
    """An RF-3 single-partition topic with all three replicas in sync: (topic, leader, follower)."""
    adm = ck_admin(cluster.bootstrap)
    topic = unique_topic("rack")
    adm.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)])[topic].result(30)
    wait_topic_ready(adm, topic, 1)
    state = wait_until(lambda: (lambda s: s if s and len(s[0][2]) == 3 else None)(
        partition_states(adm, topic)), 30, desc="ISR of 3")
    leader, replicas, _ = state[0]
    follower = next(r for r in replicas if r != leader)
    return topic, leader, follower


def produce(cluster, topic, start, count):
    p = Producer(ck_conf(cluster.bootstrap, acks="all", **{"enable.idempotence": True}))
    errors = []
    for i in range(start, start + count):
        p.produce(topic, value=f"v{i}".encode(), partition=0,
                  on_delivery=lambda err, _msg: err and errors.append(err))
    assert p.flush(30) == 0
    assert not errors, errors


def wait_isr(cluster, topic, size, timeout=40):
    adm = ck_admin(cluster.bootstrap)
    return wait_until(lambda: (lambda s: s if s and len(s[0][2]) == size else None)(
        partition_states(adm, topic)), timeout, desc=f"ISR of {size}")


def rack_consumer(cluster, rack):
    return Consumer(ck_conf(cluster.bootstrap, **{
        "group.id": unique_topic("g"),
        "client.rack": rack,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 200,
    }))


def read(consumer, into, want, timeout=60):
    """Polls until `into` holds `want` records ((offset, value) pairs)."""
    def enough():
        m = consumer.poll(0.2)
        if m is not None and m.error() is None:
            into.append((m.offset(), m.value().decode()))
        return len(into) >= want
    wait_until(enough, timeout, interval=0, desc=f"{want} records")


def assert_exactly(records, count):
    assert [o for o, _ in records] == list(range(count)), "lost or duplicated offsets"
    assert [v for _, v in records] == [f"v{i}" for i in range(count)]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_librdkafka_reads_from_its_racks_follower_and_falls_back_to_the_leader(rack_cluster):
    cluster = rack_cluster
    topic, leader, follower = setup_topic(cluster)
    rack = f"rack-{follower}"
    produce(cluster, topic, 0, 200)
    consumer = rack_consumer(cluster, rack)
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = []
        read(consumer, got, 200)
        assert_exactly(got, 200)
        # Every record came from the follower in the client's rack, none from the leader.
        assert served(cluster.node(follower), topic), "the rack's follower served nothing"
        assert served(cluster.node(leader), topic) == []

        # The follower stops: the consumer goes back to the leader and misses nothing.
        cluster.sigterm(follower)
        wait_isr(cluster, topic, 2)
        produce(cluster, topic, 200, 100)
        read(consumer, got, 300)
        assert_exactly(got, 300)
        assert served(cluster.node(leader), topic), "the leader served nothing"

        # Back in the ISR, the follower is preferred again (reconsidered on each fetch).
        cluster.start_node(follower)
        wait_isr(cluster, topic, 3)
        before = len(served(cluster.node(follower), topic))
        produce(cluster, topic, 300, 100)
        read(consumer, got, 400)
        assert_exactly(got, 400)
        wait_until(lambda: len(served(cluster.node(follower), topic)) > before, 30,
                   desc="the follower serving again")
        for _ in range(10):  # nothing beyond what was produced
            m = consumer.poll(0.1)
            assert m is None or m.error() is not None, m
    finally:
        consumer.close()


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_client_in_the_leaders_rack_or_no_rack_reads_from_the_leader(rack_cluster):
    cluster = rack_cluster
    topic, leader, follower = setup_topic(cluster)
    produce(cluster, topic, 0, 50)
    for rack in (f"rack-{leader}", "rack-elsewhere"):
        consumer = rack_consumer(cluster, rack)
        try:
            consumer.assign([TopicPartition(topic, 0, 0)])
            got = []
            read(consumer, got, 50)
            assert_exactly(got, 50)
        finally:
            consumer.close()
    assert all(role == "leader" for role, _ in served(cluster.node(leader), topic))
    assert served(cluster.node(leader), topic)
    for other in cluster.nodes:
        if other != leader:
            assert served(cluster.node(other), topic) == []


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_java_consumer_reads_from_its_racks_follower(rack_cluster):
    cluster = rack_cluster
    topic, leader, follower = setup_topic(cluster)
    produce(cluster, topic, 0, 300)
    run_java("consumer-rack-fetch", cluster.bootstrap, 3, topic=topic, rack=f"rack-{follower}",
             count=300)
    assert served(cluster.node(follower), topic), "the rack's follower served nothing"
    assert served(cluster.node(leader), topic) == []


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_follower_out_of_the_isr_is_no_longer_preferred(rack_cluster):
    """The follower freezes (SIGSTOP, by pid): once the leader drops it from the ISR after
    replica.lag.time.max.ms, a consumer in its rack is served by the leader, every record once."""
    cluster = rack_cluster
    topic, leader, follower = setup_topic(cluster)
    frozen = cluster.node(follower)
    os.kill(frozen.proc.pid, signal.SIGSTOP)
    try:
        produce(cluster, topic, 0, 100)  # acks=all: committed once the ISR shrank
        wait_isr(cluster, topic, 2)
        consumer = rack_consumer(cluster, f"rack-{follower}")
        try:
            consumer.assign([TopicPartition(topic, 0, 0)])
            got = []
            read(consumer, got, 100)
            assert_exactly(got, 100)
        finally:
            consumer.close()
    finally:
        os.kill(frozen.proc.pid, signal.SIGCONT)
    assert served(cluster.node(leader), topic), "the leader served nothing"
    assert served(frozen, topic) == []


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_java_consumer_goes_back_to_the_leader_when_its_follower_stops(rack_cluster):
    cluster = rack_cluster
    topic, leader, follower = setup_topic(cluster)
    produce(cluster, topic, 0, 200)
    outcome = {}

    def consume():
        try:
            run_java("consumer-rack-fetch", cluster.bootstrap, 3, topic=topic,
                     rack=f"rack-{follower}", count=400)
            outcome["ok"] = True
        except BaseException as exc:  # reported by the test thread below
            outcome["error"] = exc

    java = threading.Thread(target=consume, daemon=True)
    java.start()
    wait_until(lambda: served(cluster.node(follower), topic), 60,
               desc="the Java consumer reading from its rack's follower")
    cluster.sigterm(follower)
    wait_isr(cluster, topic, 2)
    produce(cluster, topic, 200, 200)
    java.join(120)
    assert not java.is_alive(), "the Java scenario did not finish"
    if "error" in outcome:
        raise outcome["error"]
    assert served(cluster.node(leader), topic), "the leader served nothing"


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_read_committed_at_the_follower_stops_at_its_last_stable_offset(rack_cluster):
    """A read_committed consumer served by its rack's follower sees the committed records only:
    not the aborted ones, and not an open transaction's until it commits (the follower's own
    LSO and aborted-transaction index)."""
    cluster = rack_cluster
    topic, leader, follower = setup_topic(cluster)
    p = Producer(ck_conf(cluster.bootstrap, **{"transactional.id": unique_topic("tx"),
                                                "transaction.timeout.ms": 60000}))
    p.init_transactions(30)

    def txn(values, end):
        p.begin_transaction()
        for v in values:
            p.produce(topic, value=v.encode(), partition=0)
        p.flush(30)
        if end:
            end(30)

    txn([f"c{i}" for i in range(10)], p.commit_transaction)
    txn([f"a{i}" for i in range(10)], p.abort_transaction)
    txn([f"c{i}" for i in range(10, 20)], p.commit_transaction)
    txn([f"o{i}" for i in range(5)], None)  # left open

    consumer = Consumer(ck_conf(cluster.bootstrap, **{
        "group.id": unique_topic("g"), "client.rack": f"rack-{follower}",
        "isolation.level": "read_committed", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "fetch.wait.max.ms": 200}))
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values = []

        def until(n):
            def enough():
                m = consumer.poll(0.2)
                if m is not None and m.error() is None:
                    values.append(m.value().decode())
                return len(values) >= n
            wait_until(enough, 60, interval=0, desc=f"{n} committed records")

        until(20)
        for _ in range(10):  # the open transaction stays invisible
            m = consumer.poll(0.1)
            assert m is None or m.error() is not None, m.value()
        assert values == [f"c{i}" for i in range(20)]
        p.commit_transaction(30)
        until(25)
        assert values[20:] == [f"o{i}" for i in range(5)]
    finally:
        consumer.close()
    assert served(cluster.node(follower), topic), "the rack's follower served nothing"
    assert served(cluster.node(leader), topic) == []
