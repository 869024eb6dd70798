"""Consumer groups with real clients (classic protocol): partitions shared within a group, every
record read exactly once, rebalances on join/leave/death, committed offsets resumed, several
groups independent, and kafka-python / kcat members."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from clients import (OP_TIMEOUT, ck_conf, ck_produce, create_topic, kcat, kp_kwargs,
                     unique_topic)
from harness import RUNNEL_BIN, wait_until

FAST_GROUPS = {"group.initial.rebalance.delay.ms": "0"}


@pytest.fixture
def fast_broker(broker_factory):
    return broker_factory(overrides=FAST_GROUPS)


def group_consumer(bootstrap, group, **conf):
    base = {
        "group.id": group,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        "enable.auto.commit": False,
        "fetch.wait.max.ms": 100,
        "topic.metadata.refresh.interval.ms": 1000,
    }
    base.update(conf)
    return Consumer(ck_conf(bootstrap, **base))


def produce_keyed(bootstrap, topic, n, partitions):
    records = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(n)]
    log = ck_produce(bootstrap, topic, records, partition=[i % partitions for i in range(n)])
    return {(p, o) for (_, _, p, o) in log.acked}


class Members:
    """Several consumers polled in turn from one thread (each needs polls to take part)."""

    def __init__(self, consumers):
        self.consumers = list(consumers)
        self.seen = {id(c): [] for c in self.consumers}

    def poll_round(self, timeout=0.05):
        for c in self.consumers:
            m = c.poll(timeout)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF or not m.error().fatal(), m.error()
                continue
            self.seen[id(c)].append((m.partition(), m.offset()))

    def all_seen(self):
        return [r for c in self.consumers for r in self.seen[id(c)]]

    def assignments(self):
        return [sorted(tp.partition for tp in c.assignment()) for c in self.consumers]

    def close(self):
        for c in self.consumers:
            c.close()


def test_three_members_share_six_partitions_and_read_everything_once(fast_broker):
    bs = fast_broker.bootstrap
    topic = unique_topic("grp3")
    create_topic(bs, topic, partitions=6)
    group = unique_topic("g")
    members = Members(group_consumer(bs, group) for _ in range(3))
    try:
        for c in members.consumers:
            c.subscribe([topic])
        # Produce once the group is stable: records read before a rebalance that moves their
        # partition (without a commit) would legitimately be read again by the new owner.
        wait_until(lambda: (members.poll_round(), [len(a) for a in members.assignments()] == [2, 2, 2])[1],
                   timeout=40, desc="a stable group of 3 members with 2 partitions each")
        expected = produce_keyed(bs, topic, 600, 6)

        def done():
            members.poll_round()
            sizes = [len(a) for a in members.assignments()]
            return sizes == [2, 2, 2] and len(members.all_seen()) >= len(expected)

        wait_until(done, timeout=40, desc="3 members with 2 partitions each reading 600 records")
        seen = members.all_seen()
        assert len(seen) == len(set(seen)), "a record was read twice"
        assert set(seen) == expected
        owned = [p for a in members.assignments() for p in a]
        assert sorted(owned) == list(range(6)), "each partition has exactly one owner"
    finally:
        members.close()


def test_more_members_than_partitions_leaves_one_idle(fast_broker):
    bs = fast_broker.bootstrap
    topic = unique_topic("grp7")
    create_topic(bs, topic, partitions=6)
    group = unique_topic("g")
    members = Members(group_consumer(bs, group) for _ in range(7))
    try:
        for c in members.consumers:
            c.subscribe([topic])

        def stable():
            members.poll_round(0.02)
            sizes = sorted(len(a) for a in members.assignments())
            return sizes == [0, 1, 1, 1, 1, 1, 1]

        wait_until(stable, timeout=40, desc="6 members with one partition each and one idle")
    finally:
        members.close()


def test_member_leaving_hands_over_partitions_without_loss(fast_broker):
    bs = fast_broker.bootstrap
    topic = unique_topic("grpleave")
    create_topic(bs, topic, partitions=4)
    first = produce_keyed(bs, topic, 200, 4)
    group = unique_topic("g")
    a, b = group_consumer(bs, group), group_consumer(bs, group)
    members = Members([a, b])
    try:
        a.subscribe([topic])
        b.subscribe([topic])
        wait_until(lambda: (members.poll_round(), members.assignments())[1] in ([[0, 1], [2, 3]], [[2, 3], [0, 1]])
                   and len(members.all_seen()) >= 200, timeout=40, desc="two members sharing 4 partitions")
        for c in (a, b):
            c.commit(asynchronous=False)
        b.close()
        members.consumers.remove(b)
        second = produce_keyed(bs, topic, 200, 4)
        wait_until(lambda: (members.poll_round(), len(a.assignment()) == 4)[1]
                   and set(members.seen[id(a)]) | set(members.seen[id(b)]) >= first | second,
                   timeout=40, desc="the remaining member owning all partitions and reading the rest")
    finally:
        members.close()


def test_killed_member_is_evicted_after_session_timeout(fast_broker, tmp_path):
    bs = fast_broker.bootstrap
    topic = unique_topic("grpkill")
    create_topic(bs, topic, partitions=2)
    group = unique_topic("g")
    script = tmp_path / "member.py"
    script.write_text(textwrap.dedent(f"""
        import sys, time
        from confluent_kafka import Consumer
        c = Consumer({{"bootstrap.servers": "{bs}", "group.id": "{group}", "session.timeout.ms": 6000,
                      "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest", "log_level": 0}})
        c.subscribe(["{topic}"])
        while True:
            c.poll(0.1)
            if c.assignment():
                print("assigned", flush=True)
    """))
    child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    survivor = group_consumer(bs, group)
    try:
        assert child.stdout.readline().strip() == "assigned"
        survivor.subscribe([topic])
        wait_until(lambda: (survivor.poll(0.1), len(survivor.assignment()) == 1)[1], timeout=40,
                   desc="survivor sharing the topic with the child")
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        start = time.monotonic()
        wait_until(lambda: (survivor.poll(0.1), len(survivor.assignment()) == 2)[1], timeout=40,
                   desc="survivor owning both partitions after the dead member's session expired")
        assert time.monotonic() - start >= 3, "eviction should wait for the session timeout"
    finally:
        if child.poll() is None:
            child.kill()
        survivor.close()


def test_two_groups_each_read_everything(fast_broker):
    bs = fast_broker.bootstrap
    topic = unique_topic("grp2")
    create_topic(bs, topic, partitions=3)
    expected = produce_keyed(bs, topic, 90, 3)
    for _ in range(2):
        members = Members([group_consumer(bs, unique_topic("g"))])
        try:
            members.consumers[0].subscribe([topic])
            wait_until(lambda: (members.poll_round(), set(members.all_seen()) >= expected)[1],
                       timeout=40, desc="one group reading everything")
        finally:
            members.close()


def test_new_member_resumes_from_committed_offsets(fast_broker):
    bs = fast_broker.bootstrap
    topic = unique_topic("grpcommit")
    create_topic(bs, topic, partitions=1)
    produce_keyed(bs, topic, 100, 1)
    group = unique_topic("g")
    c = group_consumer(bs, group)
    try:
        c.subscribe([topic])
        got = []
        wait_until(lambda: (got.extend(m for m in [c.poll(0.1)] if m is not None and not m.error()),
                            len(got) >= 40)[1], timeout=40, desc="first 40 records")
        last = got[39]
        c.commit(offsets=[TopicPartition(topic, 0, last.offset() + 1)], asynchronous=False)
        committed = c.committed([TopicPartition(topic, 0)], timeout=OP_TIMEOUT)
        assert committed[0].offset == last.offset() + 1
    finally:
        c.close()
    c2 = group_consumer(bs, group)
    try:
        c2.subscribe([topic])
        first = []
        wait_until(lambda: (first.extend(m for m in [c2.poll(0.1)] if m is not None and not m.error()),
                            len(first) > 0)[1], timeout=40, desc="the resumed member's first record")
        assert first[0].offset() == last.offset() + 1, "resumes exactly at the committed offset"
    finally:
        c2.close()


def test_kafka_python_group_consumer_reads_and_commits(fast_broker):
    from kafka import KafkaConsumer
    bs = fast_broker.bootstrap
    topic = unique_topic("grpkp")
    create_topic(bs, topic, partitions=3)
    expected = produce_keyed(bs, topic, 60, 3)
    group = unique_topic("g")
    consumer = KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=20000, **kp_kwargs(bs))
    try:
        seen = set()
        for m in consumer:
            seen.add((m.partition, m.offset))
            if seen >= expected:
                break
        assert seen == expected
        consumer.commit()
        from kafka import TopicPartition as KTP
        for p in range(3):
            assert consumer.committed(KTP(topic, p)) == 20
    finally:
        consumer.close()


def test_kcat_balanced_consumer(fast_broker):
    bs = fast_broker.bootstrap
    topic = unique_topic("grpkcat")
    create_topic(bs, topic, partitions=2)
    produce_keyed(bs, topic, 20, 2)
    group = unique_topic("g")
    cp = kcat("-b", bs, "-G", group, "-o", "beginning", "-e", "-q", "-f", "%s\\n", topic, timeout=60)
    values = sorted(cp.stdout.decode().split())
    assert values == sorted(f"v{i}" for i in range(20))


def test_kip848_consumer_protocol_members_share_partitions_and_commit(fast_broker):
    """librdkafka with group.protocol=consumer: the broker assigns (KIP-848), no JoinGroup."""
    bs = fast_broker.bootstrap
    topic = unique_topic("grp848")
    create_topic(bs, topic, partitions=4)
    expected = produce_keyed(bs, topic, 200, 4)
    group = unique_topic("g848")

    def member():
        return Consumer(ck_conf(bs, **{
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }))

    members = Members([member(), member()])
    try:
        for c in members.consumers:
            c.subscribe([topic])

        def shared():
            members.poll_round()
            sizes = sorted(len(a) for a in members.assignments())
            return sizes == [2, 2] and set(members.all_seen()) >= expected

        wait_until(shared, timeout=60, desc="two KIP-848 members with 2 partitions each reading everything")
        owned = [p for a in members.assignments() for p in a]
        assert sorted(owned) == [0, 1, 2, 3]
        c = members.consumers[0]
        c.commit(asynchronous=False)
        committed = c.committed([TopicPartition(topic, p) for p in sorted(tp.partition for tp in c.assignment())],
                                timeout=OP_TIMEOUT)
        assert all(tp.offset > 0 for tp in committed), committed
        # `runnel groups` describes consumer-protocol groups through ConsumerGroupDescribe:
        # both members with two partitions each, and the server-side assignor.
        out = subprocess.run([RUNNEL_BIN, "groups", "--bootstrap-server", bs, "--describe",
                              "--group", group, "--members"],
                             capture_output=True, text=True, timeout=60, check=True).stdout
        rows = [line.split() for line in out.splitlines() if line.startswith(group)]
        assert sorted(int(r[-1]) for r in rows) == [2, 2], out
        state = subprocess.run([RUNNEL_BIN, "groups", "--bootstrap-server", bs, "--describe",
                                "--group", group, "--state"],
                               capture_output=True, text=True, timeout=60, check=True).stdout
        assert "Stable" in state and "uniform" in state, state
    finally:
        members.close()
