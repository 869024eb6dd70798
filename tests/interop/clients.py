"""Small helpers around the real clients (confluent-kafka, kafka-python, kcat).

Every helper takes a bootstrap "host:port" and uses short timeouts, so a broken broker makes a
test fail in seconds rather than hang until the per-test timeout.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
import uuid
from collections import defaultdict

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from harness import wait_until

OP_TIMEOUT = 15.0  # seconds, for one admin/client operation


def unique_topic(prefix="t"):
    prefix = re.sub(r"[^a-zA-Z0-9._-]", "-", prefix)[:100]
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ---- confluent-kafka ---------------------------------------------------------------------------

def ck_conf(bootstrap, **extra):
    conf = {
        "bootstrap.servers": bootstrap,
        "socket.timeout.ms": 10000,
        "socket.connection.setup.timeout.ms": 5000,
        "reconnect.backoff.max.ms": 500,
        "log_level": 3,  # librdkafka errors only: keeps failure reports readable
    }
    conf.update(extra)
    return conf


def admin(bootstrap):
    return AdminClient(ck_conf(bootstrap))


def kafka_error(exc):
    """The KafkaError inside a KafkaException raised by a future."""
    assert isinstance(exc, KafkaException), f"expected KafkaException, got {exc!r}"
    return exc.args[0]


def expect_error(future, code, timeout=OP_TIMEOUT):
    """Assert that an admin future fails with KafkaError `code`; return the KafkaError."""
    try:
        res = future.result(timeout=timeout)
    except KafkaException as exc:
        err = kafka_error(exc)
        assert err.code() == code, f"expected {KafkaError(code).name()}, got {err.name()}: {err.str()}"
        return err
    raise AssertionError(f"expected error {KafkaError(code).name()}, but the call succeeded: {res!r}")


def topic_metadata(adm, topic, timeout=5.0):
    """The TopicMetadata of `topic` from a full listing (None if absent).

    A full listing never asks the broker to auto-create the topic.
    """
    md = adm.list_topics(timeout=timeout)
    return md.topics.get(topic)


def wait_topic_ready(adm, topic, partitions, timeout=OP_TIMEOUT):
    """Wait until `topic` is listed with `partitions` partitions, each with a leader."""
    def ready():
        t = topic_metadata(adm, topic)
        if t is None or t.error is not None or len(t.partitions) != partitions:
            return None
        if any(p.leader < 0 or p.error is not None for p in t.partitions.values()):
            return None
        return t
    return wait_until(ready, timeout, desc=f"topic {topic} with {partitions} partitions with leaders")


def wait_topic_absent(adm, topic, timeout=OP_TIMEOUT):
    return wait_until(lambda: topic_metadata(adm, topic) is None, timeout,
                      desc=f"topic {topic} to disappear from metadata")


def create_topic(bootstrap, topic, partitions=1, config=None, replication_factor=1):
    adm = admin(bootstrap)
    fs = adm.create_topics([NewTopic(topic, num_partitions=partitions,
                                     replication_factor=replication_factor, config=config or {})],
                           operation_timeout=10, request_timeout=OP_TIMEOUT)
    fs[topic].result(timeout=OP_TIMEOUT)
    wait_topic_ready(adm, topic, partitions)
    return topic


class DeliveryLog:
    """Collects delivery reports: acked (key, value, partition, offset) and errors."""

    def __init__(self):
        self.acked = []
        self.errors = []

    def __call__(self, err, msg):
        if err is not None:
            self.errors.append((err, msg.key(), msg.value()))
        else:
            self.acked.append((msg.key(), msg.value(), msg.partition(), msg.offset()))


def ck_produce(bootstrap, topic, records, partition=None, timestamps=None, **conf):
    """Produce [(key, value)] with confluent-kafka, flush, and return the DeliveryLog.

    `partition`: None (the partitioner decides), one partition, or one per record.

    Raises if any record was not acknowledged.
    """
    conf.setdefault("linger.ms", 5)
    conf.setdefault("message.timeout.ms", 15000)
    p = Producer(ck_conf(bootstrap, **conf))
    log = DeliveryLog()
    for i, (k, v) in enumerate(records):
        kwargs = {}
        if isinstance(partition, (list, tuple)):
            kwargs["partition"] = partition[i]
        elif partition is not None:
            kwargs["partition"] = partition
        if timestamps is not None:
            kwargs["timestamp"] = timestamps[i]
        while True:
            try:
                p.produce(topic, value=v, key=k, on_delivery=log, **kwargs)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    remaining = p.flush(OP_TIMEOUT + 5)
    assert remaining == 0, f"{remaining} records still in flight after flush"
    assert not log.errors, f"delivery errors: {log.errors[:5]} (of {len(log.errors)})"
    assert len(log.acked) == len(records)
    return log


def ck_consumer(bootstrap, **conf):
    base = {
        # librdkafka insists on a group.id even though we only assign() and never commit.
        "group.id": f"interop-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 100,
    }
    base.update(conf)
    return Consumer(ck_conf(bootstrap, **base))


def ck_consume_all(bootstrap, topic, partitions, timeout=OP_TIMEOUT):
    """Read every partition of `topic` from the beginning up to its end (partition EOF).

    Returns {partition: [(offset, key, value, timestamp_ms)]}.
    """
    c = ck_consumer(bootstrap)
    try:
        c.assign([TopicPartition(topic, p, -2) for p in range(partitions)])  # -2 = beginning
        out = defaultdict(list)
        eof = set()
        other_errors = []
        deadline = time.monotonic() + timeout
        while len(eof) < partitions:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"confluent consumer did not reach the end of {topic} in {timeout}s: "
                    f"eof={sorted(eof)} got={ {p: len(v) for p, v in out.items()} } "
                    f"errors={other_errors[:5]}")
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                else:
                    other_errors.append(m.error())
                    if m.error().fatal():
                        raise AssertionError(f"fatal consumer error: {m.error()}")
                continue
            eof.discard(m.partition())
            out[m.partition()].append((m.offset(), m.key(), m.value(), m.timestamp()[1]))
        return dict(out)
    finally:
        c.close()


# ---- kafka-python ------------------------------------------------------------------------------

def kp_kwargs(bootstrap, **extra):
    kw = dict(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    kw.update(extra)
    return kw


def kp_consumer(bootstrap, **extra):
    from kafka import KafkaConsumer
    kw = dict(group_id=None, enable_auto_commit=False, auto_offset_reset="earliest")
    kw.update(extra)
    return KafkaConsumer(**kp_kwargs(bootstrap, **kw))


def kp_partitions(consumer, topic, timeout=OP_TIMEOUT):
    return sorted(wait_until(lambda: consumer.partitions_for_topic(topic), timeout,
                             desc=f"kafka-python metadata for {topic}"))


def kp_consume_all(bootstrap, topic, timeout=OP_TIMEOUT):
    """Read every partition of `topic` from the beginning to the end offsets found first.

    Returns {partition: [(offset, key, value, timestamp_ms)]}.
    """
    from kafka import TopicPartition as KTP
    c = kp_consumer(bootstrap)
    try:
        tps = [KTP(topic, p) for p in kp_partitions(c, topic)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        end = c.end_offsets(tps)
        out = defaultdict(list)
        deadline = time.monotonic() + timeout
        while any(c.position(tp) < end[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"kafka-python did not reach end offsets {end} of {topic} in {timeout}s; "
                    f"positions={ {tp.partition: c.position(tp) for tp in tps} }")
            for tp, recs in c.poll(timeout_ms=200).items():
                for r in recs:
                    out[tp.partition].append((r.offset, r.key, r.value, r.timestamp))
        return dict(out)
    finally:
        c.close()


# ---- kcat --------------------------------------------------------------------------------------

KCAT = shutil.which("kcat") or shutil.which("kafkacat")


def kcat(*args, input=None, timeout=20, check=True):
    assert KCAT, "kcat is not installed (scripts/test installs it with apt-get)"
    cp = subprocess.run([KCAT, *args], input=input, capture_output=True, timeout=timeout)
    if check and cp.returncode != 0:
        raise AssertionError(
            f"kcat {' '.join(args)} exited {cp.returncode}\nstdout: {cp.stdout[-2000:]!r}\n"
            f"stderr: {cp.stderr.decode(errors='replace')[-4000:]}")
    return cp


# librdkafka log lines look like "%3|1700000000.123|FAIL|rdkafka#producer-1| ...";
# levels 0-3 are emerg/alert/crit/err.
RDKAFKA_ERROR_LOG = re.compile(r"^%[0-3]\|", re.M)


def kcat_errors(stderr: bytes):
    return [line for line in stderr.decode(errors="replace").splitlines()
            if RDKAFKA_ERROR_LOG.match(line)]


def kcat_consume(bootstrap, topic, fmt="%k:%s\\n", extra=()):
    cp = kcat("-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", fmt, *extra)
    errs = kcat_errors(cp.stderr)
    assert not errs, f"kcat consumer logged errors: {errs[:5]}"
    return cp.stdout.decode().splitlines()
