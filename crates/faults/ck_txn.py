#!/usr/bin/env python3
"""The transactional workload of runnel-faults, on confluent-kafka (librdkafka).

    ck_txn.py produce BOOTSTRAP TOPIC PARTITIONS ID PACE_MS SEED
    ck_txn.py follow  BOOTSTRAP TOPIC PARTITIONS ID
    ck_txn.py final   BOOTSTRAP TOPIC PARTITIONS DEADLINE_S

produce: a transactional producer (transactional.id faults-txn-<ID>) runs transactions of 1-4
unique values `t<ID>.<incarnation>-<n>.<i>` on random partitions; about a third are aborted on
purpose (never asked to commit). One JSON line per transaction on stdout:
{"txn": name, "values": [[partition, value], ...], "outcome": "committed" | "aborted" |
"unknown", "latency": ms, "error": "..."}. "aborted" means commit was never requested (so no
value of it may ever be read committed); "unknown" means a commit was requested and not
confirmed. A fatal error (fenced, ...) starts a new incarnation on the same transactional.id.
follow: a read_committed consumer from the log start, {"read": [partition, offset, value]} per
record, until stdin closes or SIGTERM.
final: read_committed reads of every partition from the log start until one reaches, on every
partition, the high watermark (so no transaction is open); then {"final": [p, o, v]} per record
of that read and {"done": true|false, "detail": "..."}.
"""

import json
import os
import random
import signal
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

mode, bootstrap, topic, partitions = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
out_lock = threading.Lock()


def emit(obj):
    with out_lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def watch_stdin():
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()


def kafka_error(e):
    return e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None


def produce(ident, pace, seed):
    watch_stdin()
    rng = random.Random(seed * 1000 + int(ident))
    debug = {"debug": os.environ["RUNNEL_FAULTS_CK_DEBUG"]} if os.environ.get("RUNNEL_FAULTS_CK_DEBUG") else {}
    incarnation = 0
    while not stop.is_set():
        p = Producer({
            **debug,
            "bootstrap.servers": bootstrap,
            "transactional.id": f"faults-txn-{ident}",
            "acks": "all",
            "linger.ms": 5,
            "transaction.timeout.ms": 20000,
            "message.timeout.ms": 15000,
            "request.timeout.ms": 5000,
            "socket.timeout.ms": 5000,
            "reconnect.backoff.max.ms": 1000,
        })
        try:
            p.init_transactions(30)
        except KafkaException as e:
            emit({"info": f"t{ident}.{incarnation}: init_transactions: {e}"})
            incarnation += 1
            time.sleep(1)
            continue
        n = 0
        healthy = True
        while healthy and not stop.is_set():
            name = f"t{ident}.{incarnation}-{n}"
            n += 1
            values = []
            abort = rng.random() < 0.33
            commit_requested = False
            outcome, error = None, None
            started = time.monotonic()
            try:
                p.begin_transaction()
                for i in range(rng.randint(1, 4)):
                    part = rng.randrange(partitions)
                    value = f"{name}.{i}"
                    values.append([part, value])
                    p.produce(topic, value.encode(), partition=part)
                # Written (or failed) before the decision, so an abort really has data to hide.
                p.flush(15)
                if abort:
                    p.abort_transaction(30)
                    outcome = "aborted"
                else:
                    commit_requested = True
                    for attempt in range(3):
                        try:
                            p.commit_transaction(30)
                            outcome = "committed"
                            break
                        except KafkaException as e:
                            err = kafka_error(e)
                            if err is None or not err.retriable() or attempt == 2:
                                raise
            except (KafkaException, BufferError) as e:
                error = str(e)
                outcome = "unknown" if commit_requested else "aborted"
                err = kafka_error(e) if isinstance(e, KafkaException) else None
                if err is not None and err.fatal():
                    healthy = False
                else:
                    try:
                        p.abort_transaction(30)
                    except KafkaException as e2:
                        error += f"; abort: {e2}"
                        healthy = False
            emit({"txn": name, "values": values, "outcome": outcome, "error": error,
                  "latency": int((time.monotonic() - started) * 1000)})
            time.sleep(pace)
        incarnation += 1


def reader(group, eof):
    return Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "enable.partition.eof": eof,
        "session.timeout.ms": 10000,
        "socket.timeout.ms": 5000,
    })


def assign_all(c):
    c.assign([TopicPartition(topic, q, -2) for q in range(partitions)])  # -2: OFFSET_BEGINNING


def follow(ident):
    watch_stdin()
    c = reader(f"faults-txn-follow-{ident}", False)
    assign_all(c)
    while not stop.is_set():
        for m in c.consume(100, 0.5):
            if m.error() is None:
                emit({"read": [m.partition(), m.offset(), m.value().decode(errors="replace")]})
    c.close()


def high_watermarks():
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "faults-txn-hw",
                  "isolation.level": "read_uncommitted", "socket.timeout.ms": 5000})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, q), timeout=5, cached=False)[1]
                for q in range(partitions)]
    finally:
        c.close()


def final(deadline_s):
    deadline = time.monotonic() + deadline_s
    detail = "no attempt"
    while time.monotonic() < deadline:
        try:
            hw = high_watermarks()
        except KafkaException as e:
            detail = f"high watermarks: {e}"
            time.sleep(1)
            continue
        c = reader("faults-txn-final", True)
        assign_all(c)
        records, eof = [], {}
        while len(eof) < partitions and time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                if m.error() is None:
                    records.append([m.partition(), m.offset(), m.value().decode(errors="replace")])
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    eof[m.partition()] = m.offset()
        c.close()
        if len(eof) == partitions and all(eof[q] >= hw[q] for q in range(partitions)):
            for r in records:
                emit({"final": r})
            emit({"done": True, "detail": f"{len(records)} records up to {hw}"})
            return
        detail = f"read_committed end {eof} below high watermarks {hw} (a transaction open?)"
        time.sleep(2)
    emit({"done": False, "detail": detail})


if mode == "produce":
    produce(sys.argv[5], float(sys.argv[6]) / 1000.0, int(sys.argv[7]))
elif mode == "follow":
    follow(sys.argv[5])
elif mode == "final":
    final(float(sys.argv[5]))
else:
    sys.exit(f"unknown mode {mode}")
