"""Records written by one client are read back, byte for byte and in order, by the others:
confluent-kafka (librdkafka) -> kafka-python + kcat, and kafka-python -> confluent-kafka + kcat,
with every compression codec; keyed records land on Java's murmur2 partition."""

from __future__ import annotations

import json

import pytest

from clients import (
    OP_TIMEOUT,
    ck_consume_all,
    ck_produce,
    create_topic,
    kcat_consume,
    kp_consume_all,
    kp_kwargs,
    unique_topic,
)
from harness import REPO

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
N = 200


def _records(tag):
    # compressible values of varying length, plus one empty value
    recs = [(f"k{i}".encode(), f"{tag}-value-{i}-".encode() + b"x" * (i % 97)) for i in range(N)]
    recs[7] = (b"k7", b"")
    return recs


def _values(parts, partition=0):
    return [(k, v) for _, k, v, _ in parts.get(partition, [])]


def _check_offsets(parts, n, partition=0):
    offsets = [o for o, *_ in parts.get(partition, [])]
    assert offsets == list(range(n)), f"offsets not dense from 0: {offsets[:10]}...{offsets[-5:]}"


def _kcat_lines(recs):
    return [f"{k.decode()}:{v.decode()}" for k, v in recs]


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_produce_kafka_python_and_kcat_consume(broker, codec):
    t = create_topic(broker.bootstrap, unique_topic(f"ck-{codec}"))
    recs = _records(f"ck-{codec}")
    log = ck_produce(broker.bootstrap, t, recs, partition=0,
                     **{"compression.type": codec, "linger.ms": 20, "acks": "all"})
    assert sorted(o for *_, o in log.acked) == list(range(N))

    got = kp_consume_all(broker.bootstrap, t)
    _check_offsets(got, N)
    assert _values(got) == recs

    assert kcat_consume(broker.bootstrap, t) == _kcat_lines(recs)


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_produce_confluent_and_kcat_consume(broker, codec):
    from kafka import KafkaProducer
    from kafka import codec as kcodec
    available = {"none": True, "gzip": kcodec.has_gzip(), "snappy": kcodec.has_snappy(),
                 "lz4": kcodec.has_lz4(), "zstd": kcodec.has_zstd()}
    if not available[codec]:
        pytest.skip(f"kafka-python has no {codec} codec library installed "
                    "(python-snappy / lz4 / zstandard, see tests/interop/requirements.txt)")
    t = create_topic(broker.bootstrap, unique_topic(f"kp-{codec}"))
    recs = _records(f"kp-{codec}")
    p = KafkaProducer(**kp_kwargs(broker.bootstrap, acks=1, enable_idempotence=False, linger_ms=20,
                                  compression_type=None if codec == "none" else codec))
    try:
        futures = [p.send(t, key=k, value=v, partition=0) for k, v in recs]
        p.flush(timeout=OP_TIMEOUT)
        offsets = [f.get(timeout=OP_TIMEOUT).offset for f in futures]
    finally:
        p.close(timeout=5)
    assert offsets == list(range(N))

    got = ck_consume_all(broker.bootstrap, t, 1)
    _check_offsets(got, N)
    assert _values(got) == recs

    assert kcat_consume(broker.bootstrap, t) == _kcat_lines(recs)


def test_headers_and_timestamps_round_trip(broker):
    from confluent_kafka import Producer

    from clients import DeliveryLog, ck_conf
    t = create_topic(broker.bootstrap, unique_topic("hdr"))
    p = Producer(ck_conf(broker.bootstrap))
    log = DeliveryLog()
    ts = 1_600_000_000_000
    for i in range(5):
        p.produce(t, key=None if i == 0 else f"k{i}", value=f"v{i}", partition=0, timestamp=ts + i,
                  headers=[("h1", f"x{i}".encode()), ("h2", None)], on_delivery=log)
    assert p.flush(OP_TIMEOUT) == 0 and not log.errors, log.errors

    from kafka import TopicPartition as KTP

    from clients import kp_consumer
    c = kp_consumer(broker.bootstrap)
    try:
        tp = KTP(t, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        got = []
        from harness import wait_until

        def more():
            for recs in c.poll(timeout_ms=200).values():
                got.extend(recs)
            return len(got) >= 5
        wait_until(more, OP_TIMEOUT, interval=0, desc="5 records")
    finally:
        c.close()
    assert [r.key for r in got] == [None, b"k1", b"k2", b"k3", b"k4"]
    assert [r.value for r in got] == [f"v{i}".encode() for i in range(5)]
    assert [r.timestamp for r in got] == [ts + i for i in range(5)]
    assert [list(r.headers) for r in got] == [[("h1", f"x{i}".encode()), ("h2", None)] for i in range(5)]


def test_murmur2_partitioning_agrees(broker):
    """Java-compatible key partitioning: confluent's murmur2_random and kafka-python's default
    partitioner send each key to (murmur2(key) & 0x7fffffff) % 10 (tests/data/murmur2_vectors.json),
    and the broker stores it there."""
    from kafka import KafkaProducer
    vectors = json.loads((REPO / "tests/data/murmur2_vectors.json").read_text())["cases"]
    cases = [(bytes.fromhex(c["key_hex"]), c["java_partition"]["10"]) for c in vectors]
    cases = [(k, p) for k, p in cases if k]  # empty keys: clients differ, not a broker matter
    assert len(cases) >= 10
    t = create_topic(broker.bootstrap, unique_topic("murmur"), 10)

    log = ck_produce(broker.bootstrap, t, [(k, b"ck:" + k) for k, _ in cases],
                     partitioner="murmur2_random")
    ck_parts = {v[3:]: p for _, v, p, _ in log.acked}

    prod = KafkaProducer(**kp_kwargs(broker.bootstrap, acks=1, enable_idempotence=False))
    try:
        futs = [(k, prod.send(t, key=k, value=b"kp:" + k)) for k, _ in cases]
        prod.flush(timeout=OP_TIMEOUT)
        kp_parts = {k: f.get(timeout=OP_TIMEOUT).partition for k, f in futs}
    finally:
        prod.close(timeout=5)

    expected = dict(cases)
    assert ck_parts == expected, "confluent murmur2_random disagrees with Java's partitioner"
    assert kp_parts == expected, "kafka-python disagrees with Java's partitioner"

    stored = {}
    for part, recs in kp_consume_all(broker.bootstrap, t).items():
        for _, k, v, _ in recs:
            stored[v] = part
    assert stored == {**{b"ck:" + k: p for k, p in cases}, **{b"kp:" + k: p for k, p in cases}}
