"""Transactions end to end with confluent-kafka (issue 13): a transactional producer's committed
records reach a read_committed consumer, aborted ones never do (a read_uncommitted consumer sees
them), and offsets sent with send_offsets_to_transaction are committed only with the transaction."""

from __future__ import annotations

import time
import uuid
from collections import defaultdict

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from clients import OP_TIMEOUT, ck_conf, create_topic, kp_kwargs, unique_topic


def _producer(bootstrap, tid):
    p = Producer(ck_conf(bootstrap, **{"transactional.id": tid, "transaction.timeout.ms": 60000}))
    p.init_transactions(OP_TIMEOUT)
    return p


def _read_all(bootstrap, topic, partitions, isolation, timeout=OP_TIMEOUT):
    """Every record value of `topic` up to the end the consumer's isolation level allows."""
    c = Consumer(ck_conf(bootstrap, **{
        "group.id": f"txn-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
        "isolation.level": isolation,
        "fetch.wait.max.ms": 100,
    }))
    try:
        c.assign([TopicPartition(topic, p, -2) for p in range(partitions)])
        out, eof = defaultdict(list), set()
        deadline = time.monotonic() + timeout
        while len(eof) < partitions:
            assert time.monotonic() < deadline, f"no end of {topic} for {isolation}: {dict(out)}"
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                    continue
                raise AssertionError(f"consumer error: {m.error()}")
            eof.discard(m.partition())
            out[m.partition()].append(m.value())
        return [v for p in sorted(out) for v in out[p]]
    finally:
        c.close()


def test_committed_visible_aborted_never_to_read_committed(broker):
    topic = create_topic(broker.bootstrap, unique_topic("txn"), 2)
    p = _producer(broker.bootstrap, f"tid-{uuid.uuid4().hex[:8]}")
    name = topic
    p.begin_transaction()
    for i in range(10):
        p.produce(name, value=f"c1-{i}".encode(), partition=i % 2)
    p.commit_transaction(OP_TIMEOUT)
    p.begin_transaction()
    for i in range(10):
        p.produce(name, value=f"a-{i}".encode(), partition=i % 2)
    p.flush(OP_TIMEOUT)
    p.abort_transaction(OP_TIMEOUT)
    p.begin_transaction()
    for i in range(10):
        p.produce(name, value=f"c2-{i}".encode(), partition=i % 2)
    p.commit_transaction(OP_TIMEOUT)

    committed = _read_all(broker.bootstrap, name, 2, "read_committed")
    assert sorted(committed) == sorted([f"c1-{i}".encode() for i in range(10)]
                                       + [f"c2-{i}".encode() for i in range(10)])
    uncommitted = _read_all(broker.bootstrap, name, 2, "read_uncommitted")
    assert sorted(v for v in uncommitted if v.startswith(b"a-")) == sorted(
        f"a-{i}".encode() for i in range(10))


def test_an_open_transaction_is_invisible_until_committed(broker):
    name = create_topic(broker.bootstrap, unique_topic("txnopen"), 1)
    p = _producer(broker.bootstrap, f"tid-{uuid.uuid4().hex[:8]}")
    p.begin_transaction()
    p.produce(name, value=b"pending", partition=0)
    p.flush(OP_TIMEOUT)
    assert _read_all(broker.bootstrap, name, 1, "read_committed") == []
    assert _read_all(broker.bootstrap, name, 1, "read_uncommitted") == [b"pending"]
    p.commit_transaction(OP_TIMEOUT)
    assert _read_all(broker.bootstrap, name, 1, "read_committed") == [b"pending"]


def test_send_offsets_to_transaction_commits_only_with_the_transaction(broker):
    name = create_topic(broker.bootstrap, unique_topic("txnoff"), 1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    c = Consumer(ck_conf(broker.bootstrap, **{"group.id": group, "enable.auto.commit": False}))
    try:
        p = _producer(broker.bootstrap, f"tid-{uuid.uuid4().hex[:8]}")
        meta = c.consumer_group_metadata()
        p.begin_transaction()
        p.produce(name, value=b"x", partition=0)
        p.send_offsets_to_transaction([TopicPartition(name, 0, 5)], meta, OP_TIMEOUT)
        p.abort_transaction(OP_TIMEOUT)
        got = c.committed([TopicPartition(name, 0)], timeout=OP_TIMEOUT)
        assert got[0].offset < 0, f"an aborted transaction's offset was committed: {got}"
        p.begin_transaction()
        p.produce(name, value=b"y", partition=0)
        p.send_offsets_to_transaction([TopicPartition(name, 0, 7)], meta, OP_TIMEOUT)
        p.commit_transaction(OP_TIMEOUT)
        deadline = time.monotonic() + OP_TIMEOUT
        while True:
            got = c.committed([TopicPartition(name, 0)], timeout=OP_TIMEOUT)
            if got[0].offset == 7:
                break
            assert time.monotonic() < deadline, f"committed offset not visible: {got}"
            time.sleep(0.1)
    finally:
        c.close()


def test_aborted_records_stay_hidden_after_a_kill9_restart(broker_factory):
    """The `.txnindex` (or, if the crash lost it, the replay of the log tail) still tells
    read_committed consumers which records were aborted after an unclean restart."""
    b = broker_factory()
    name = create_topic(b.bootstrap, unique_topic("txnkill"), 1)
    p = _producer(b.bootstrap, f"tid-{uuid.uuid4().hex[:8]}")
    p.begin_transaction()
    p.produce(name, value=b"aborted", partition=0)
    p.flush(OP_TIMEOUT)
    p.abort_transaction(OP_TIMEOUT)
    p.begin_transaction()
    p.produce(name, value=b"committed", partition=0)
    p.commit_transaction(OP_TIMEOUT)
    assert _read_all(b.bootstrap, name, 1, "read_committed") == [b"committed"]
    del p
    b.kill9()
    b.start()
    # The HW is recovered from the checkpoint or re-learned; wait until everything is back.
    deadline = time.monotonic() + OP_TIMEOUT
    while True:
        uncommitted = _read_all(b.bootstrap, name, 1, "read_uncommitted")
        if b"committed" in uncommitted:
            break
        assert time.monotonic() < deadline, f"records not back after the restart: {uncommitted}"
        time.sleep(0.2)
    assert _read_all(b.bootstrap, name, 1, "read_committed") == [b"committed"]


def _committed(bootstrap, group, topic, isolation="read_uncommitted"):
    """The group's committed offset of partition 0, through OffsetFetch (librdkafka sets
    require_stable only for read_committed)."""
    c = Consumer(ck_conf(bootstrap, **{
        "group.id": group, "enable.auto.commit": False, "isolation.level": isolation}))
    try:
        return c.committed([TopicPartition(topic, 0)], timeout=OP_TIMEOUT)[0].offset
    finally:
        c.close()


def _wait_committed(bootstrap, group, topic, want):
    deadline = time.monotonic() + OP_TIMEOUT
    while True:
        try:
            got = _committed(bootstrap, group, topic)
        except Exception as e:  # the coordinator is still loading after a restart
            got = e
        if got == want:
            return
        assert time.monotonic() < deadline, f"committed offset {got!r}, expected {want}"
        time.sleep(0.2)


def test_transactional_offsets_are_pending_until_the_marker_and_survive_a_kill9_reload(
        broker_factory):
    """TxnOffsetCommit offsets are invisible while the transaction is open, committed by its
    COMMIT marker, never by an aborted one, and the group partition's replay after a kill -9
    honours the markers (aborted offsets stay dropped, committed ones stay)."""
    b = broker_factory()
    name = create_topic(b.bootstrap, unique_topic("txnoffkill"), 1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    meta_consumer = Consumer(ck_conf(b.bootstrap, **{"group.id": group}))
    meta = meta_consumer.consumer_group_metadata()
    meta_consumer.close()
    p = _producer(b.bootstrap, f"tid-{uuid.uuid4().hex[:8]}")
    p.begin_transaction()
    p.produce(name, value=b"a", partition=0)
    p.send_offsets_to_transaction([TopicPartition(name, 0, 5)], meta, OP_TIMEOUT)
    assert _committed(b.bootstrap, group, name) < 0, "visible before the transaction ended"
    p.commit_transaction(OP_TIMEOUT)
    _wait_committed(b.bootstrap, group, name, 5)
    p.begin_transaction()
    p.produce(name, value=b"b", partition=0)
    p.send_offsets_to_transaction([TopicPartition(name, 0, 9)], meta, OP_TIMEOUT)
    p.abort_transaction(OP_TIMEOUT)
    assert _committed(b.bootstrap, group, name) == 5
    del p
    b.kill9()
    b.start()
    _wait_committed(b.bootstrap, group, name, 5)
    # The restarted coordinator serves new transactional commits too.
    p = _producer(b.bootstrap, f"tid-{uuid.uuid4().hex[:8]}")
    p.begin_transaction()
    p.produce(name, value=b"c", partition=0)
    p.send_offsets_to_transaction([TopicPartition(name, 0, 11)], meta, OP_TIMEOUT)
    p.commit_transaction(OP_TIMEOUT)
    _wait_committed(b.bootstrap, group, name, 11)


def test_kafka_python_transactional_producer(broker):
    """kafka-python's own transactional producer (the pinned 3.0.12 has one, issue 13): a
    committed transaction reaches read_committed readers and an aborted one only
    read_uncommitted ones, offsets sent with a transaction become the group's committed
    offsets with it, and a second producer with the same transactional.id fences the first."""
    from kafka import KafkaProducer, OffsetAndMetadata
    from kafka import TopicPartition as KTopicPartition
    from kafka.errors import InvalidProducerEpochError, ProducerFencedError

    topic = create_topic(broker.bootstrap, unique_topic("kp-txn"), 2)
    tid = f"kp-tid-{uuid.uuid4().hex[:8]}"
    p = KafkaProducer(**kp_kwargs(broker.bootstrap, transactional_id=tid))
    p.init_transactions()
    p.begin_transaction()
    for i in range(10):
        p.send(topic, value=f"c-{i}".encode(), partition=i % 2)
    p.commit_transaction()
    p.begin_transaction()
    for i in range(5):
        p.send(topic, value=f"a-{i}".encode(), partition=i % 2)
    p.flush()
    p.abort_transaction()
    group = unique_topic("kp-txn-group")
    p.begin_transaction()
    p.send(topic, value=b"o-0", partition=0)
    p.send_offsets_to_transaction({KTopicPartition(topic, 0): OffsetAndMetadata(7, "", -1)}, group)
    p.commit_transaction()
    committed = _read_all(broker.bootstrap, topic, 2, "read_committed")
    assert sorted(committed) == sorted([f"c-{i}".encode() for i in range(10)] + [b"o-0"])
    assert len(_read_all(broker.bootstrap, topic, 2, "read_uncommitted")) == 16
    c = Consumer(ck_conf(broker.bootstrap, **{"group.id": group, "enable.auto.commit": False}))
    try:
        assert c.committed([TopicPartition(topic, 0)], timeout=OP_TIMEOUT)[0].offset == 7
    finally:
        c.close()
    # A second producer with the same id fences the first: its next transaction fails.
    p2 = KafkaProducer(**kp_kwargs(broker.bootstrap, transactional_id=tid))
    p2.init_transactions()
    with pytest.raises((ProducerFencedError, InvalidProducerEpochError)):
        p.begin_transaction()
        p.send(topic, value=b"zombie", partition=0).get(timeout=OP_TIMEOUT)
        p.commit_transaction()
    p.close(timeout=5)
    p2.begin_transaction()
    p2.send(topic, value=b"p2", partition=1)
    p2.commit_transaction()
    p2.close(timeout=5)
    assert b"zombie" not in _read_all(broker.bootstrap, topic, 2, "read_committed")
