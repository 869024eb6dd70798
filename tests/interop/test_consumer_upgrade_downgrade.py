"""Online migration between the classic protocol and KIP-848 (issue 12), with librdkafka.

`group.consumer.migration.policy` (default `bidirectional`): a classic consumer owns a group;
a `group.protocol=consumer` consumer joins the same group id, which converts the group to a
consumer group whose classic member keeps being served through JoinGroup / SyncGroup /
Heartbeat; both get partitions. When the consumer-protocol member closes, the group converts
back to a classic group and the classic consumer gets every partition again. Both consumers
commit every record they read before reading on, so across both switches every record is
read exactly once. A second test kills the coordinator of a 3-node cluster while the group
is migrated: the new coordinator loads the group with its classic member from the log.
The pure twin is crates/group/tests/migration/.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic

from clients import OP_TIMEOUT, admin, ck_conf, ck_produce, unique_topic, wait_topic_ready
from cluster import Cluster, partition_states
from conftest import _use
from harness import wait_until

PARTITIONS = 4
WAIT = 60.0
# Fast group timers, so each reconciliation step takes a heartbeat of well under a second.
OVERRIDES = {
    "group.initial.rebalance.delay.ms": 0,
    "group.consumer.min.heartbeat.interval.ms": 500,
    "group.consumer.heartbeat.interval.ms": 500,
    "offsets.topic.num.partitions": 1,
}
COMMIT_RETRY_S = 30.0


class Member:
    """A consumer that commits each record it reads (synchronously, retried while the
    coordinator is unavailable) before it reads the next one."""

    def __init__(self, bootstrap, group, topic, protocol):
        self.name = protocol
        self.seen = []
        self.events = []
        conf = {
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
        if protocol == "consumer":
            conf["group.protocol"] = "consumer"
        else:
            # librdkafka's default assignors (range, roundrobin): the eager protocol.
            conf.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
        self.c = Consumer(ck_conf(bootstrap, **conf))
        self.c.subscribe([topic],
                         on_assign=lambda c, ps: self.events.append(("assign", _ps(ps))),
                         on_revoke=lambda c, ps: self.events.append(("revoke", _ps(ps))),
                         on_lost=lambda c, ps: self.events.append(("lost", _ps(ps))))

    def poll(self):
        for m in self.c.consume(50, 0.05):
            if m.error():
                assert not m.error().fatal(), f"{self.name}: {m.error()}"
                continue
            self._commit(m)
            self.seen.append((m.partition(), m.offset()))

    def _commit(self, m):
        tp = TopicPartition(m.topic(), m.partition(), m.offset() + 1)
        deadline = time.monotonic() + COMMIT_RETRY_S
        while True:
            try:
                self.c.commit(offsets=[tp], asynchronous=False)
                return
            except KafkaException as e:
                err = e.args[0]
                assert not err.fatal(), f"{self.name}: commit failed: {err}"
                assert time.monotonic() < deadline, f"{self.name}: commit never succeeded: {err}"
                self.c.poll(0.1)

    def partitions(self):
        return sorted(tp.partition for tp in self.c.assignment())


def _ps(partitions):
    return sorted(tp.partition for tp in partitions)


def produce(bootstrap, topic, start, n):
    log = ck_produce(bootstrap, topic,
                     [(f"k{i}".encode(), f"v{i}".encode()) for i in range(start, start + n)],
                     partition=[i % PARTITIONS for i in range(n)])
    return {(p, o) for (_, _, p, o) in log.acked}


def poll_until(members, predicate, desc, timeout=WAIT):
    def step():
        for m in members:
            m.poll()
        return predicate()

    return wait_until(step, timeout, interval=0.01, desc=desc)


def read_exactly_once(members, expected):
    seen = [r for m in members for r in m.seen]
    duplicates = sorted({r for r in seen if seen.count(r) > 1})
    assert not duplicates, f"read twice: {duplicates[:10]}"
    assert set(seen) == expected, f"missing: {sorted(expected - set(seen))[:10]}"


def migrate_and_back(bootstrap, topic, group, kill=None):
    """The scenario of both tests; `kill()` (if given) runs while the group is migrated.
    Returns the classic consumer's rebalance events before it closes."""
    expected = produce(bootstrap, topic, 0, 200)
    classic = Member(bootstrap, group, topic, "classic")
    members = [classic]
    try:
        poll_until(members, lambda: classic.partitions() == [0, 1, 2, 3]
                   and set(classic.seen) >= expected,
                   "the classic consumer owns every partition and read the first batch")

        modern = Member(bootstrap, group, topic, "consumer")
        members.append(modern)
        poll_until(members, lambda: len(classic.partitions()) == 2
                   and len(modern.partitions()) == 2,
                   "both consumers get two partitions (the group was upgraded)")
        assert sorted(classic.partitions() + modern.partitions()) == [0, 1, 2, 3]
        expected |= produce(bootstrap, topic, 200, 200)
        poll_until(members, lambda: {r for m in members for r in m.seen} >= expected,
                   "the second batch read by both")

        if kill is not None:
            kill()
            expected |= produce(bootstrap, topic, 400, 200)
            poll_until(members, lambda: {r for m in members for r in m.seen} >= expected,
                       "the third batch read after the coordinator moved")
            assert len(classic.partitions()) == 2 and len(modern.partitions()) == 2

        modern.c.close()
        members.remove(modern)
        poll_until([classic], lambda: classic.partitions() == [0, 1, 2, 3],
                   "the classic consumer gets every partition back (the group was downgraded)")
        expected |= produce(bootstrap, topic, 600, 200)
        # Earlier batches were partly read by the consumer-protocol member.
        poll_until([classic], lambda: {r for m in (classic, modern) for r in m.seen} >= expected,
                   "the last batch read")
        read_exactly_once([classic, modern], expected)
        # The classic consumer's rebalance callbacks so far (closing it revokes once more).
        return list(classic.events)
    finally:
        for m in members:
            try:
                m.c.close()
            except Exception:  # noqa: BLE001
                pass


@pytest.mark.timeout(240)
def test_classic_group_upgrades_and_downgrades_online(broker_factory):
    b = broker_factory(OVERRIDES)
    adm = admin(b.bootstrap)
    topic = unique_topic("migrate")
    fs = adm.create_topics([NewTopic(topic, PARTITIONS, 1)], operation_timeout=OP_TIMEOUT)
    fs[topic].result(OP_TIMEOUT)
    wait_topic_ready(adm, topic, PARTITIONS)
    group = unique_topic("g-migrate")
    events = migrate_and_back(b.bootstrap, topic, group)
    # The classic consumer was told to rejoin twice (upgrade, downgrade), each time giving
    # its partitions back first (eager), and never lost them.
    assert not [e for e in events if e[0] == "lost"], events
    assert events[-1] == ("assign", [0, 1, 2, 3]), events


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_migrated_group_survives_a_coordinator_kill9(tmp_path, request):
    cluster = Cluster(tmp_path / "cluster", 3, {
        **OVERRIDES,
        "broker.session.timeout.ms": 2000,
        "broker.heartbeat.interval.ms": 300,
    })
    for node in cluster.nodes.values():
        _use(request, node)
    try:
        cluster.start()
        adm = admin(cluster.bootstrap)
        cluster.wait_all_brokers(adm)
        topic = unique_topic("migrate-failover")
        fs = adm.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=3,
                                         config={"min.insync.replicas": "2"})],
                               operation_timeout=10, request_timeout=15)
        fs[topic].result(timeout=15)
        wait_until(lambda: (s := partition_states(adm, topic)) and len(s) == PARTITIONS and all(
            leader > 0 and isr == [1, 2, 3] for leader, _, isr in s.values()), WAIT,
            desc="a leader and a full ISR for every partition")
        group = unique_topic("g-migrate-failover")

        def kill_coordinator():
            d = adm.describe_consumer_groups([group])[group].result(timeout=15)
            victim = d.coordinator.id
            cluster.kill9(victim)

        migrate_and_back(cluster.bootstrap, topic, group, kill=kill_coordinator)
    finally:
        cluster.kill_all()
