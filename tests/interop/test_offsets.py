"""ListOffsets (earliest / latest / by timestamp) and DeleteRecords (log start offset)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, TopicPartition

from clients import (
    OP_TIMEOUT,
    admin,
    ck_consume_all,
    ck_consumer,
    ck_produce,
    create_topic,
    expect_error,
    kp_consume_all,
    kp_consumer,
    unique_topic,
)

BASE_TS = 1_700_000_000_000
N = 10


@pytest.fixture
def timed_topic(broker):
    """A 1-partition topic holding N records with timestamps BASE_TS + 1000*i, in 3 requests."""
    t = create_topic(broker.bootstrap, unique_topic("ts"))
    for lo, hi in [(0, 3), (3, 7), (7, N)]:
        ck_produce(broker.bootstrap, t, [(None, f"v{i}".encode()) for i in range(lo, hi)],
                   partition=0, timestamps=[BASE_TS + 1000 * i for i in range(lo, hi)])
    return t


def test_kafka_python_list_offsets(broker, timed_topic):
    from kafka import TopicPartition as KTP
    tp = KTP(timed_topic, 0)
    c = kp_consumer(broker.bootstrap)
    try:
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: N}
        res = c.offsets_for_times({tp: BASE_TS + 2500})[tp]
        assert (res.offset, res.timestamp) == (3, BASE_TS + 3000)
        res = c.offsets_for_times({tp: BASE_TS})[tp]
        assert (res.offset, res.timestamp) == (0, BASE_TS)
        res = c.offsets_for_times({tp: BASE_TS + 9000})[tp]
        assert (res.offset, res.timestamp) == (9, BASE_TS + 9000)
        assert c.offsets_for_times({tp: BASE_TS + 9001})[tp] is None, "after the last record: none"
        res = c.offsets_for_times({tp: 0})[tp]
        assert (res.offset, res.timestamp) == (0, BASE_TS)
    finally:
        c.close()


def test_confluent_offsets_for_times_and_watermarks(broker, timed_topic):
    c = ck_consumer(broker.bootstrap)
    try:
        assert c.get_watermark_offsets(TopicPartition(timed_topic, 0), timeout=10) == (0, N)
        [r] = c.offsets_for_times([TopicPartition(timed_topic, 0, BASE_TS + 4500)], timeout=10)
        assert r.error is None and r.offset == 5
        [r] = c.offsets_for_times([TopicPartition(timed_topic, 0, BASE_TS + 10 ** 6)], timeout=10)
        assert r.offset == -1, "no record at or after the timestamp -> -1 (OFFSET_END)"
    finally:
        c.close()


def test_admin_list_offsets(broker, timed_topic):
    from confluent_kafka.admin import OffsetSpec
    adm = admin(broker.bootstrap)
    tp = TopicPartition(timed_topic, 0)

    def one(spec):
        [f] = adm.list_offsets({tp: spec}, request_timeout=OP_TIMEOUT).values()
        return f.result(timeout=OP_TIMEOUT)

    assert one(OffsetSpec.earliest()).offset == 0
    assert one(OffsetSpec.latest()).offset == N
    r = one(OffsetSpec.for_timestamp(BASE_TS + 6000))
    assert (r.offset, r.timestamp) == (6, BASE_TS + 6000)
    r = one(OffsetSpec.max_timestamp())
    assert (r.offset, r.timestamp) == (9, BASE_TS + 9000)


def test_delete_records_moves_low_watermark(broker):
    t = create_topic(broker.bootstrap, unique_topic("delrec"), 2)
    ck_produce(broker.bootstrap, t, [(None, f"v{i}".encode()) for i in range(N)], partition=0)
    ck_produce(broker.bootstrap, t, [(None, f"w{i}".encode()) for i in range(3)], partition=1)
    adm = admin(broker.bootstrap)
    fs = adm.delete_records([TopicPartition(t, 0, 4)], request_timeout=OP_TIMEOUT, operation_timeout=10)
    [f] = fs.values()
    assert f.result(timeout=OP_TIMEOUT).low_watermark == 4

    c = ck_consumer(broker.bootstrap)
    try:
        assert c.get_watermark_offsets(TopicPartition(t, 0), timeout=10) == (4, N)
        assert c.get_watermark_offsets(TopicPartition(t, 1), timeout=10) == (0, 3), "other partition untouched"
    finally:
        c.close()

    from kafka import TopicPartition as KTP
    kc = kp_consumer(broker.bootstrap)
    try:
        assert kc.beginning_offsets([KTP(t, 0)]) == {KTP(t, 0): 4}
    finally:
        kc.close()

    got = ck_consume_all(broker.bootstrap, t, 2)
    assert [o for o, *_ in got[0]] == list(range(4, N))
    assert [v for _, _, v, _ in got[0]] == [f"v{i}".encode() for i in range(4, N)]
    assert [o for o, *_ in kp_consume_all(broker.bootstrap, t)[0]] == list(range(4, N))

    # beyond the high watermark: OFFSET_OUT_OF_RANGE, nothing changes
    fs = adm.delete_records([TopicPartition(t, 0, N + 5)], request_timeout=OP_TIMEOUT)
    [f] = fs.values()
    expect_error(f, KafkaError.OFFSET_OUT_OF_RANGE)

    # OFFSET_END (-1) deletes everything up to the high watermark
    [f] = adm.delete_records([TopicPartition(t, 0, -1)], request_timeout=OP_TIMEOUT).values()
    assert f.result(timeout=OP_TIMEOUT).low_watermark == N
    c = ck_consumer(broker.bootstrap)
    try:
        assert c.get_watermark_offsets(TopicPartition(t, 0), timeout=10) == (N, N)
    finally:
        c.close()
