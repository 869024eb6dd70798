"""Fault test with confluent-kafka (librdkafka) as producer and consumer: three brokers, a topic
with RF 3 and min.insync.replicas=2, an idempotent acks=all producer writing sequence numbers
while the leader is `kill -9`ed, restarted, and another broker killed. Every acknowledged record
must be read back exactly once, in production order per partition, and a preferred election
(confluent-kafka's AdminClient.elect_leaders) must put every leadership back on its preferred
replica. The Rust twin is crates/runnel/tests/fault.rs; the long version is scripts/chaos.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import ElectionType, KafkaError
from confluent_kafka.admin import NewTopic

from clients import admin as ck_admin
from clients import ck_consume_all, unique_topic
from cluster import Cluster, SequenceProducer, check_sequences, partition_states
from conftest import _use
from harness import wait_until

PARTITIONS = 3
OVERRIDES = {
    "broker.session.timeout.ms": 2000,
    "broker.heartbeat.interval.ms": 300,
    # The explicit preferred election at the end must be what moves leaders back.
    "auto.leader.rebalance.enable": "false",
}
WAIT = 30.0


def states(adm, topic):
    s = partition_states(adm, topic)
    return s if s is not None and len(s) == PARTITIONS else None


def kill9_and_recover(cluster, adm, topic, victim, producer):
    """kill -9 `victim`, wait for other leaders and new acknowledgements, restart it, wait until
    it is back in every ISR. Returns the failover time (kill to new leaders)."""
    killed = time.monotonic()
    cluster.kill9(victim)
    wait_until(lambda: (s := states(adm, topic)) and all(
        leader > 0 and leader != victim for leader, _, _ in s.values()), WAIT,
        desc=f"new leaders other than the killed node {victim}")
    failover = time.monotonic() - killed
    producer.wait_progress(200, "acknowledgements from the new leaders")
    cluster.start_node(victim)
    wait_until(lambda: (s := states(adm, topic)) and all(
        isr == [1, 2, 3] for _, _, isr in s.values()), WAIT,
        desc=f"node {victim} back in every ISR")
    producer.wait_progress(200, "acknowledgements with the full ISR again")
    return failover


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_idempotent_acks_all_confluent_survives_kill9s(tmp_path, request):
    started = time.monotonic()
    cluster = Cluster(tmp_path / "cluster", 3, OVERRIDES)
    for node in cluster.nodes.values():
        _use(request, node)  # logs in the report on failure; an unexpected death fails the test
    producer = None
    try:
        cluster.start()
        adm = ck_admin(cluster.bootstrap)
        cluster.wait_all_brokers(adm)
        topic = unique_topic("fault")
        fs = adm.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=3,
                                         config={"min.insync.replicas": "2"})],
                               operation_timeout=10, request_timeout=15)
        fs[topic].result(timeout=15)
        wait_until(lambda: (s := states(adm, topic)) and all(
            leader > 0 and isr == [1, 2, 3] for leader, _, isr in s.values()), WAIT,
            desc="a leader and a full ISR for every partition")
        preferred = {p: replicas[0] for p, (_, replicas, _) in states(adm, topic).items()}

        producer = SequenceProducer(cluster.bootstrap, topic, PARTITIONS)
        producer.start()
        producer.wait_progress(300, "the first acknowledgements")

        first = states(adm, topic)[0][0]
        failover1 = kill9_and_recover(cluster, adm, topic, first, producer)
        # Another leader: the one of the lowest partition not led by the first victim.
        second = next(s[0] for _, s in sorted(states(adm, topic).items()) if s[0] != first)
        failover2 = kill9_and_recover(cluster, adm, topic, second, producer)
        producer.finish()

        leaders_before = {p: s[0] for p, s in states(adm, topic).items()}
        # No request_timeout / operation_timeout: confluent-kafka 2.16.1's binding rejects them
        # (SystemError / TypeError); the defaults follow socket.timeout.ms.
        results = adm.elect_leaders(ElectionType.PREFERRED, None).result(timeout=20)
        for tp, err in results.items():
            # ELECTION_NOT_NEEDED: already led by its preferred replica.
            assert err is None or err.args[0].code() == KafkaError.ELECTION_NOT_NEEDED, (tp, err)
        wait_until(lambda: (s := states(adm, topic)) and all(
            leader == replicas[0] and isr == [1, 2, 3] for leader, replicas, isr in s.values()),
            WAIT, desc="every partition led by its preferred replica")
        leaders_after = {p: s[0] for p, s in states(adm, topic).items()}
        assert leaders_after == preferred

        consumed = ck_consume_all(cluster.bootstrap, topic, PARTITIONS, timeout=WAIT)
        c = check_sequences(consumed, producer.acked, PARTITIONS)
        summary = (
            f"sent {producer.sent}, acked {len(producer.acked)}, failed {len(producer.failed)}, "
            f"unflushed {producer.remaining}, fatal {producer.fatal}, consumed {c['consumed']}, "
            f"missing {len(c['missing'])}, duplicates {len(c['duplicates'])}, "
            f"out of order {len(c['disorder'])}; victims {first} then {second}, "
            f"failovers {failover1:.1f}s / {failover2:.1f}s; leaders before the election "
            f"{leaders_before}, after {leaders_after}; {time.monotonic() - started:.1f}s")
        print(summary)
        assert not c["missing"], f"acknowledged records missing (first {c['missing'][:20]}): {summary}"
        assert not c["duplicates"], (
            f"records present more than once (first {c['duplicates'][:20]}): {summary}")
        assert not c["disorder"], f"records out of production order (first {c['disorder'][:10]}): {summary}"
        assert not c["misplaced"], f"records in the wrong partition: {c['misplaced'][:10]}"
        assert producer.fatal is None, f"fatal producer error {producer.fatal}: {summary}"
        failed = sorted(producer.failed.items())[:5]
        assert not producer.failed, f"deliveries failed (first {failed}): {summary}"
        assert producer.remaining == 0, summary
        assert len(producer.acked) > 1000, f"too little was produced: {summary}"
    finally:
        if producer is not None and producer.is_alive():
            producer.stop.set()
            producer.join(10)
        # kill -9: a graceful stop of the last nodes waits for a controller that is gone.
        cluster.kill_all()
