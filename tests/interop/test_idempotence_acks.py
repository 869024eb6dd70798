"""acks=0/1/all on one broker, and idempotent producers (InitProducerId + sequence numbers)."""

from __future__ import annotations

from collections import defaultdict

import pytest

from clients import (
    OP_TIMEOUT,
    ck_consume_all,
    ck_produce,
    create_topic,
    kp_consume_all,
    kp_kwargs,
    unique_topic,
)
from harness import wait_until


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(broker, acks):
    t = create_topic(broker.bootstrap, unique_topic(f"acks{acks}"), 2)
    recs = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(300)]
    log = ck_produce(broker.bootstrap, t, recs, acks=acks)
    if acks != "0":
        # with acks>=1 the broker assigned every offset: dense per partition
        per_part = defaultdict(list)
        for _, _, p, o in log.acked:
            per_part[p].append(o)
        for p, offs in per_part.items():
            assert sorted(offs) == list(range(len(offs))), f"partition {p}: {sorted(offs)[:10]}"

    # acks=0 gets no response, so wait (with a deadline) until the log has everything
    from confluent_kafka import TopicPartition

    from clients import ck_consumer
    c = ck_consumer(broker.bootstrap)
    try:
        def total():
            return sum(c.get_watermark_offsets(TopicPartition(t, p), timeout=5)[1] for p in (0, 1))
        wait_until(lambda: total() == len(recs), OP_TIMEOUT, interval=0.1,
                   desc=f"high watermarks to sum to {len(recs)}")
    finally:
        c.close()
    got = ck_consume_all(broker.bootstrap, t, 2)
    assert sorted(v for recs_ in got.values() for _, _, v, _ in recs_) == sorted(v for _, v in recs)


def _check_exactly_once_in_order(parts, n, key_of):
    seen = []
    for p, recs in parts.items():
        offs = [o for o, *_ in recs]
        assert offs == list(range(len(offs))), f"partition {p}: offsets not dense"
        vals = [int(v) for _, _, v, _ in recs]
        assert vals == sorted(vals), f"partition {p}: records out of production order"
        for _, k, v, _ in recs:
            assert k == key_of(int(v))
        seen.extend(vals)
    assert len(seen) == n, f"expected {n} records exactly once, found {len(seen)} ({len(set(seen))} distinct)"
    assert sorted(seen) == list(range(n))


def test_idempotent_producer_confluent(broker):
    n, parts = 3000, 4
    t = create_topic(broker.bootstrap, unique_topic("idem-ck"), parts)
    key = lambda i: f"key-{i % 37}".encode()  # noqa: E731
    ck_produce(broker.bootstrap, t, [(key(i), str(i).encode()) for i in range(n)],
               **{"enable.idempotence": True, "linger.ms": 2, "batch.num.messages": 100})
    _check_exactly_once_in_order(kp_consume_all(broker.bootstrap, t), n, key)


def test_idempotent_producer_kafka_python(broker):
    from kafka import KafkaProducer
    n, parts = 1000, 3
    t = create_topic(broker.bootstrap, unique_topic("idem-kp"), parts)
    key = lambda i: f"key-{i % 11}".encode()  # noqa: E731
    p = KafkaProducer(**kp_kwargs(broker.bootstrap, enable_idempotence=True, acks="all", linger_ms=2))
    try:
        futs = [p.send(t, key=key(i), value=str(i).encode()) for i in range(n)]
        p.flush(timeout=OP_TIMEOUT)
        for f in futs:
            f.get(timeout=OP_TIMEOUT)
    finally:
        p.close(timeout=5)
    _check_exactly_once_in_order(ck_consume_all(broker.bootstrap, t, parts), n, key)


def test_acks_all_rejected_when_isr_below_min_insync_replicas(broker):
    """A topic with min.insync.replicas=2
    on one broker is rejected for acks=all with NOT_ENOUGH_REPLICAS (spec E.4)."""
    from confluent_kafka import KafkaError, Producer

    from clients import DeliveryLog, ck_conf
    t = create_topic(broker.bootstrap, unique_topic("mir2"), config={"min.insync.replicas": "2"})
    ck_produce(broker.bootstrap, t, [(b"a", b"1")], acks="1")  # acks=1 is not affected
    p = Producer(ck_conf(broker.bootstrap, acks="all", **{"message.timeout.ms": 3000, "retries": 0}))
    log = DeliveryLog()
    p.produce(t, key=b"b", value=b"2", on_delivery=log)
    p.flush(10)
    assert not log.acked, "acks=all must fail when ISR (1) < min.insync.replicas (2)"
    codes = {e.code() for e, _, _ in log.errors}
    assert codes == {KafkaError.NOT_ENOUGH_REPLICAS}, log.errors
