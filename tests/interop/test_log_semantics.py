"""Log behaviour seen through real clients: size limits, small fetch sizes, LogAppendTime,
offset reset, topic re-creation, retention, and older protocol versions."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, Producer, TopicPartition

from clients import (
    OP_TIMEOUT,
    DeliveryLog,
    admin,
    ck_conf,
    ck_consume_all,
    ck_consumer,
    ck_produce,
    create_topic,
    kp_consume_all,
    kp_consumer,
    kp_kwargs,
    unique_topic,
    wait_topic_absent,
)
from harness import wait_until


def _produce_one(bootstrap, topic, value, **conf):
    p = Producer(ck_conf(bootstrap, **{"message.max.bytes": 10_000_000, "retries": 0,
                                       "message.timeout.ms": 10000, **conf}))
    log = DeliveryLog()
    p.produce(topic, value=value, partition=0, on_delivery=log)
    assert p.flush(OP_TIMEOUT) == 0
    return log


def test_record_batch_too_large(broker):
    t = create_topic(broker.bootstrap, unique_topic("big"))
    # broker message.max.bytes = 1048588 by default
    log = _produce_one(broker.bootstrap, t, b"x" * 2_000_000)
    assert [e.code() for e, _, _ in log.errors] == [KafkaError.MSG_SIZE_TOO_LARGE], log.errors
    assert _produce_one(broker.bootstrap, t, b"y" * 900_000).acked, "a 900 KB record fits"
    # topic-level max.message.bytes
    t2 = create_topic(broker.bootstrap, unique_topic("big2"), config={"max.message.bytes": "2000"})
    log = _produce_one(broker.bootstrap, t2, b"z" * 5000)
    assert [e.code() for e, _, _ in log.errors] == [KafkaError.MSG_SIZE_TOO_LARGE], log.errors
    assert _produce_one(broker.bootstrap, t2, b"z" * 500).acked
    c = ck_consumer(broker.bootstrap)
    try:
        assert c.get_watermark_offsets(TopicPartition(t2, 0), timeout=10) == (0, 1), \
            "the rejected batch must not be in the log"
    finally:
        c.close()


def test_fetch_smaller_than_a_batch_still_progresses(broker):
    """KIP-74: a fetch returns at least the first batch even when it exceeds the size limits."""
    t = create_topic(broker.bootstrap, unique_topic("smallfetch"))
    recs = [(None, bytes([65 + i]) * 10_000) for i in range(20)]
    ck_produce(broker.bootstrap, t, recs, partition=0, **{"linger.ms": 50})
    from kafka import TopicPartition as KTP
    c = kp_consumer(broker.bootstrap, max_partition_fetch_bytes=1024, fetch_max_bytes=1024)
    try:
        tp = KTP(t, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        got = []

        def more():
            for rs in c.poll(timeout_ms=200).values():
                got.extend(r.value for r in rs)
            return len(got) >= 20
        wait_until(more, OP_TIMEOUT, interval=0, desc="20 records with 1 KiB fetch limits")
    finally:
        c.close()
    assert got == [v for _, v in recs]


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_log_append_time(broker, codec):
    t = create_topic(broker.bootstrap, unique_topic("lat"),
                     config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    ck_produce(broker.bootstrap, t, [(None, b"v%d" % i) for i in range(5)], partition=0,
               timestamps=[1_000_000_000_000 + i for i in range(5)],
               **{"compression.type": codec, "linger.ms": 20})
    after = int(time.time() * 1000)
    c = ck_consumer(broker.bootstrap)
    try:
        c.assign([TopicPartition(t, 0, 0)])
        msgs = []

        def more():
            m = c.poll(0.2)
            if m is not None and not m.error():
                msgs.append(m)
            return len(msgs) >= 5
        wait_until(more, OP_TIMEOUT, interval=0, desc="5 records")
    finally:
        c.close()
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME
    for m in msgs:
        ts_type, ts = m.timestamp()
        assert ts_type == TIMESTAMP_LOG_APPEND_TIME, (ts_type, ts)
        assert before - 1000 <= ts <= after + 1000, f"append time {ts} not in [{before}, {after}]"


def test_out_of_range_offset_resets(broker):
    t = create_topic(broker.bootstrap, unique_topic("oor"))
    ck_produce(broker.bootstrap, t, [(None, b"r%d" % i) for i in range(5)], partition=0)
    from kafka import TopicPartition as KTP
    c = kp_consumer(broker.bootstrap, auto_offset_reset="earliest")
    try:
        tp = KTP(t, 0)
        c.assign([tp])
        c.seek(tp, 1000)  # beyond the end: OFFSET_OUT_OF_RANGE, then reset to earliest
        got = []

        def more():
            for rs in c.poll(timeout_ms=200).values():
                got.extend(r.offset for r in rs)
            return len(got) >= 5
        wait_until(more, OP_TIMEOUT, interval=0, desc="records after the offset reset")
    finally:
        c.close()
    assert got == [0, 1, 2, 3, 4]


def test_recreated_topic_starts_empty(broker):
    t = create_topic(broker.bootstrap, unique_topic("recreate"), 2)
    ck_produce(broker.bootstrap, t, [(None, b"old%d" % i) for i in range(10)], partition=1)
    adm = admin(broker.bootstrap)
    adm.delete_topics([t], request_timeout=OP_TIMEOUT)[t].result(OP_TIMEOUT)
    wait_topic_absent(adm, t)
    create_topic(broker.bootstrap, t, 2)
    c = ck_consumer(broker.bootstrap)
    try:
        assert c.get_watermark_offsets(TopicPartition(t, 1), timeout=10) == (0, 0)
    finally:
        c.close()
    ck_produce(broker.bootstrap, t, [(None, b"new")], partition=1)
    assert [v for _, _, v, _ in ck_consume_all(broker.bootstrap, t, 2)[1]] == [b"new"]


@pytest.mark.slow
def test_time_retention_deletes_old_segments(broker_factory):
    """Spec J.6: whole segments whose largest timestamp is older than retention.ms go, oldest
    first, stopping at the first one that does not qualify; when the whole log qualifies, a new
    empty segment is rolled first and the log start offset becomes the log end offset."""
    b = broker_factory(overrides={"log.retention.check.interval.ms": "200"})
    cfg = {"segment.bytes": "1048576", "retention.ms": "60000"}
    all_old = create_topic(b.bootstrap, unique_topic("ret-all"), 1, config=cfg)
    mixed = create_topic(b.bootstrap, unique_topic("ret-mixed"), 1, config=cfg)
    old = int(time.time() * 1000) - 3_600_000  # an hour ago: past retention.ms
    n = 3000
    for t in (all_old, mixed):
        ck_produce(b.bootstrap, t, [(None, b"r" * 1000)] * n, partition=0, timestamps=[old] * n)
    new = ck_produce(b.bootstrap, mixed, [(None, b"new%d" % i) for i in range(200)], partition=0)
    assert min(o for *_, o in new.acked) == n

    c = ck_consumer(b.bootstrap)
    try:
        def start(t):
            return c.get_watermark_offsets(TopicPartition(t, 0), timeout=5)
        wait_until(lambda: start(all_old) == (n, n), 20, interval=0.2,
                   desc=f"{all_old}: every segment deleted, log start = log end = {n}")
        lo, hi = wait_until(lambda: (w := start(mixed))[0] > 0 and w, 20, interval=0.2,
                            desc=f"{mixed}: the log start offset to move past old segments")
    finally:
        c.close()
    assert hi == n + 200
    assert 0 < lo < n, f"the segment holding the new records must stay (log start {lo})"
    got = kp_consume_all(b.bootstrap, mixed)[0]
    assert [o for o, *_ in got] == list(range(lo, n + 200))
    # the fully-retained log is still writable, at its old end offset
    assert [o for *_, o in ck_produce(b.bootstrap, all_old, [(None, b"again")], partition=0).acked] == [n]


@pytest.mark.parametrize("api_version", [(1, 0), (2, 1), (2, 8)])
def test_kafka_python_pinned_protocol_versions(broker, api_version):
    """kafka-python pinned to an older Kafka release (api_version=...) sends the request
    versions of that release instead of negotiating the newest ones."""
    from kafka import KafkaProducer
    t = create_topic(broker.bootstrap, unique_topic("pin"), 2)
    p = KafkaProducer(**kp_kwargs(broker.bootstrap, api_version=api_version, acks=1,
                                  enable_idempotence=False))
    try:
        futs = [p.send(t, key=b"k%d" % i, value=b"v%d" % i) for i in range(50)]
        p.flush(timeout=OP_TIMEOUT)
        for f in futs:
            f.get(timeout=OP_TIMEOUT)
    finally:
        p.close(timeout=5)
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    c = KafkaConsumer(**kp_kwargs(broker.bootstrap, api_version=api_version, group_id=None,
                                  enable_auto_commit=False, auto_offset_reset="earliest"))
    try:
        tps = [KTP(t, 0), KTP(t, 1)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        assert sum(c.end_offsets(tps).values()) == 50
        got = []

        def more():
            for rs in c.poll(timeout_ms=200).values():
                got.extend(r.value for r in rs)
            return len(got) >= 50
        wait_until(more, OP_TIMEOUT, interval=0, desc="50 records")
    finally:
        c.close()
    assert sorted(got) == sorted(b"v%d" % i for i in range(50))
