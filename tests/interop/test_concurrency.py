"""Several clients at once: concurrent producers to one partition, fetch long-poll wake-up,
and a topic with many partitions."""

from __future__ import annotations

import threading
import time

from confluent_kafka import TopicPartition

from clients import (
    OP_TIMEOUT,
    ck_consume_all,
    ck_consumer,
    ck_produce,
    create_topic,
    kcat,
    unique_topic,
)
from harness import wait_until


def test_concurrent_producers_one_partition(broker):
    t = create_topic(broker.bootstrap, unique_topic("conc"), 1)
    n_producers, n = 4, 500
    errors = []

    def run(pi):
        try:
            ck_produce(broker.bootstrap, t, [(b"p%d" % pi, b"%d:%d" % (pi, i)) for i in range(n)],
                       partition=0, **{"linger.ms": 1, "batch.num.messages": 50})
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(pi,)) for pi in range(n_producers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(OP_TIMEOUT * 2)
    assert not errors, errors
    recs = ck_consume_all(broker.bootstrap, t, 1)[0]
    assert [o for o, *_ in recs] == list(range(n_producers * n)), "offsets must be dense"
    per_producer = {}
    for _, _, v, _ in recs:
        pi, i = map(int, v.split(b":"))
        per_producer.setdefault(pi, []).append(i)
    assert per_producer == {pi: list(range(n)) for pi in range(n_producers)}, \
        "each producer's records must appear once, in its order"


def test_fetch_long_poll_wakes_on_append(broker):
    """A consumer waiting in a long fetch (fetch.wait.max.ms=5000) gets a new record as soon as
    it is appended, not when the wait expires."""
    t = create_topic(broker.bootstrap, unique_topic("longpoll"), 1)
    c = ck_consumer(broker.bootstrap, **{"fetch.wait.max.ms": 5000, "fetch.min.bytes": 1})
    try:
        c.assign([TopicPartition(t, 0, 0)])
        # not a wait for a condition: gives the consumer time to connect and enter its first
        # fetch, which waits (up to 5 s) because the partition is empty
        time.sleep(1.0)
        sent = time.monotonic()
        ck_produce(broker.bootstrap, t, [(None, b"wake")], partition=0)
        got = wait_until(lambda: (m := c.poll(0.1)) is not None and not m.error() and m,
                         OP_TIMEOUT, interval=0, desc="the record")
        latency = time.monotonic() - sent
    finally:
        c.close()
    assert got.value() == b"wake"
    assert latency < 2.5, f"record arrived after {latency:.2f}s: the long poll was not woken by the append"


def test_many_partitions(broker):
    parts = 200
    t = create_topic(broker.bootstrap, unique_topic("wide"), parts)
    ck_produce(broker.bootstrap, t, [(None, b"p%d" % p) for p in range(parts)],
               partition=list(range(parts)))
    lines = kcat("-b", broker.bootstrap, "-C", "-t", t, "-o", "beginning", "-e", "-q",
                 "-f", "%p:%s\\n", timeout=60).stdout.decode().split()
    assert sorted(lines) == sorted(f"{p}:p{p}" for p in range(parts))
    got = ck_consume_all(broker.bootstrap, t, parts)
    assert {p: [v for _, _, v, _ in recs] for p, recs in got.items()} == \
        {p: [b"p%d" % p] for p in range(parts)}
