"""Data and metadata survive a graceful stop and a kill -9."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import Producer

from clients import (
    OP_TIMEOUT,
    DeliveryLog,
    admin,
    ck_conf,
    ck_consume_all,
    ck_produce,
    create_topic,
    kp_consume_all,
    unique_topic,
    wait_topic_absent,
    wait_topic_ready,
)
from harness import wait_until

pytestmark = pytest.mark.slow


def _by_partition(log):
    out = {}
    for k, v, p, o in log.acked:
        out.setdefault(p, {})[o] = (k, v)
    return out


def _consumed(parts):
    return {p: {o: (k, v) for o, k, v, _ in recs} for p, recs in parts.items()}


def test_sigterm_restart_keeps_data_and_metadata(broker_factory):
    from confluent_kafka.admin import ConfigResource, ResourceType
    b = broker_factory()
    t = create_topic(b.bootstrap, unique_topic("persist"), 3, config={"retention.ms": "7200000"})
    gone = create_topic(b.bootstrap, unique_topic("deleted"), 1)
    adm = admin(b.bootstrap)
    adm.delete_topics([gone], request_timeout=OP_TIMEOUT)[gone].result(OP_TIMEOUT)
    wait_topic_absent(adm, gone)
    recs = [(f"k{i}".encode(), f"v{i}".encode() * 20) for i in range(600)]
    log = ck_produce(b.bootstrap, t, recs, acks="all", **{"compression.type": "lz4"})

    rc, graceful = b.stop()
    assert graceful, "broker did not exit within the SIGTERM deadline"
    b.start()

    adm = admin(b.bootstrap)
    wait_topic_ready(adm, t, 3)
    assert adm.list_topics(timeout=5).topics.get(gone) is None, "a deleted topic came back"
    res = ConfigResource(ResourceType.TOPIC, t)
    cfg = adm.describe_configs([res], request_timeout=OP_TIMEOUT)[res].result(OP_TIMEOUT)
    assert cfg["retention.ms"].value == "7200000"

    assert _consumed(kp_consume_all(b.bootstrap, t)) == _by_partition(log)

    # appends continue after the old log end offsets
    before = {p: max(offs) for p, offs in _by_partition(log).items()}
    log2 = ck_produce(b.bootstrap, t, [(f"k{i}".encode(), b"after") for i in range(60)])
    for _, _, p, o in log2.acked:
        assert o > before.get(p, -1), f"partition {p}: offset {o} reused after restart"
    got = _consumed(ck_consume_all(b.bootstrap, t, 3))
    assert sum(map(len, got.values())) == 660


def test_sigterm_is_a_clean_shutdown(broker_factory):
    b = broker_factory()
    t = create_topic(b.bootstrap, unique_topic("clean"), 1)
    ck_produce(b.bootstrap, t, [(None, b"x")] * 10)
    rc, graceful = b.stop()
    assert graceful and rc == 0, f"SIGTERM should shut down cleanly with exit 0, got rc={rc}"
    markers = list(b.data_dir.rglob(".kafka_cleanshutdown"))
    assert markers, f"no .kafka_cleanshutdown under {b.data_dir} (ARCHITECTURE.md: log manager)"


def test_partition_dirs_use_kafka_layout(broker_factory):
    b = broker_factory()
    t = create_topic(b.bootstrap, unique_topic("layout"), 2)
    ck_produce(b.bootstrap, t, [(None, b"x")] * 10, partition=1)
    b.stop()
    for p in (0, 1):
        dirs = [d for d in b.data_dir.rglob(f"{t}-{p}") if d.is_dir()]
        assert len(dirs) == 1, f"expected one {t}-{p} directory under {b.data_dir}"
        names = {f.name for f in dirs[0].iterdir()}
        assert "00000000000000000000.log" in names, names
        assert "00000000000000000000.index" in names, names
        assert "00000000000000000000.timeindex" in names, names


def test_kill9_keeps_every_acknowledged_record(broker_factory):
    """With log.flush.interval.messages=1, a record is acknowledged only once fsynced, so after
    kill -9 (mid-stream) and a restart every acknowledged record is there, at its offset."""
    b = broker_factory(overrides={"log.flush.interval.messages": "1"})
    t = create_topic(b.bootstrap, unique_topic("kill9"), 2)
    p = Producer(ck_conf(b.bootstrap, acks="all", **{"linger.ms": 1, "message.timeout.ms": 4000,
                                                     "retries": 0}))
    log = DeliveryLog()
    stop = threading.Event()

    def produce():
        i = 0
        while not stop.is_set() and i < 200_000:
            try:
                p.produce(t, key=f"k{i}".encode(), value=f"v{i}".encode(), on_delivery=log)
                i += 1
            except BufferError:
                p.poll(0.01)
            p.poll(0)

    th = threading.Thread(target=produce, daemon=True)
    th.start()
    try:
        wait_until(lambda: len(log.acked) >= 1000 or log.errors, OP_TIMEOUT, interval=0.01,
                   desc="1000 acknowledged records")
        assert not log.errors, f"errors before the kill: {log.errors[:3]}"
        b.kill9()
    finally:
        stop.set()
        th.join(10)
    p.purge()
    p.flush(10)  # delivers the failure reports of everything unacknowledged
    acked = _by_partition(log)
    n_acked = len(log.acked)
    assert n_acked >= 1000

    b.start()
    wait_topic_ready(admin(b.bootstrap), t, 2)
    got = _consumed(ck_consume_all(b.bootstrap, t, 2))
    for part, recs in acked.items():
        missing = [o for o in recs if got.get(part, {}).get(o) != recs[o]]
        assert not missing, (f"partition {part}: {len(missing)} of {len(recs)} acknowledged records "
                             f"lost or changed after kill -9, first offsets {missing[:5]}")
    for part, recs in got.items():
        assert sorted(recs) == list(range(len(recs))), f"partition {part}: offsets not dense after recovery"
    # the log is writable after recovery
    ck_produce(b.bootstrap, t, [(b"after", b"kill")])


def test_kill9_default_flush_recovers_a_consistent_log(broker_factory):
    """Without per-message fsync, kill -9 of the process still leaves the page cache: the
    recovered log is a dense prefix containing every record acknowledged with acks=1."""
    b = broker_factory()
    t = create_topic(b.bootstrap, unique_topic("kill9b"), 1)
    log = ck_produce(b.bootstrap, t, [(None, f"v{i}".encode()) for i in range(500)], acks="1")
    b.kill9()
    b.start()
    got = _consumed(ck_consume_all(b.bootstrap, t, 1))
    assert got.get(0) == _by_partition(log)[0]
