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

    ck_txn.py process BOOTSTRAP IN_TOPIC PARTITIONS ID OUT_TOPIC LAUNCH [FAULT]

process: the consume-transform-produce loop of the exactly-once workload. A read_committed
member of group faults-ctp (shared by every processor) consumes IN_TOPIC; per batch, one transaction
(transactional.id faults-ctp-<ID>) writes `<input value>@<input offset>@<txn>` for every input to the
same partition of OUT_TOPIC and commits the consumed offsets with send_offsets_to_transaction
(TxnOffsetCommit, with the group's metadata, KIP-447). One JSON line per transaction:
{"ctp": name, "inputs": [[p, o, v], ...], "offsets": [[p, next], ...], "outcome": ...,
"latency": ms, "error": ...} with the outcomes of `produce`. After any failed transaction the
consumer is rebuilt, so it starts again from the committed offsets. A fatal error (fenced by a
newer instance with the same transactional.id, ...) ends the process (exit 3): the harness
starts the next one. A librdkafka call still running 15 s past its own timeout (known case 9
of docs/faults.md, ck_watchdog.py) ends it too (exit 4), after the open transaction's line
(aborted, or unknown once its commit was requested). LAUNCH numbers the processes (`x<ID>.<LAUNCH>.<incarnation>-<n>`). FAULT
`offsets-outside` is the self-test's deliberate bug: the offsets are committed outside the
transaction, after it, and the process sometimes dies between the two.
"""

import json
import os
import random
import signal
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from ck_watchdog import Watchdog

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
            "client.id": f"txn{ident}",
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


def ck_debug():
    """RUNNEL_FAULTS_CK_DEBUG=cgrp,eos,... turns librdkafka's debug contexts on (stderr)."""
    return {"debug": os.environ["RUNNEL_FAULTS_CK_DEBUG"]} if os.environ.get("RUNNEL_FAULTS_CK_DEBUG") else {}


def ctp_consumer(ident):
    return Consumer({
        **ck_debug(),
        "bootstrap.servers": bootstrap,
        # Names the process in librdkafka's debug lines (`<client.id>#consumer-2`).
        "client.id": f"ctp{ident}-in",
        "group.id": "faults-ctp",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 1000,
        "socket.timeout.ms": 5000,
        "reconnect.backoff.max.ms": 1000,
    })


def ctp_producer(ident):
    return Producer({
        **ck_debug(),
        "bootstrap.servers": bootstrap,
        "client.id": f"ctp{ident}-out",
        "transactional.id": f"faults-ctp-{ident}",
        "acks": "all",
        "linger.ms": 5,
        "transaction.timeout.ms": 20000,
        "message.timeout.ms": 15000,
        "request.timeout.ms": 5000,
        "socket.timeout.ms": 5000,
        "reconnect.backoff.max.ms": 1000,
    })


def ctp_transaction(p, c, name, batch, out_topic, fault, state, wd):
    """One transaction over `batch`, committing its consumed offsets in it. `state` gets
    "offsets" ([[partition, next offset], ...]) and "commit_requested"; raises on failure.
    The blocking calls run under the watchdog `wd` (ck_watchdog.py)."""
    offsets = {}
    for m in batch:
        offsets[m.partition()] = max(offsets.get(m.partition(), 0), m.offset() + 1)
    state["offsets"] = sorted(offsets.items())
    tps = [TopicPartition(topic, q, o) for q, o in state["offsets"]]
    p.begin_transaction()
    for m in batch:
        value = f"{m.value().decode(errors='replace')}@{m.offset()}@{name}"
        p.produce(out_topic, value.encode(), partition=m.partition())
    if fault != "offsets-outside":
        meta = c.consumer_group_metadata()
        wd.call("send_offsets_to_transaction", 30,
                lambda: p.send_offsets_to_transaction(tps, meta, 30))
    state["commit_requested"] = True
    for attempt in range(3):
        try:
            wd.call("commit_transaction", 30, lambda: p.commit_transaction(30))
            break
        except KafkaException as e:
            err = kafka_error(e)
            if err is None or not err.retriable() or attempt == 2:
                raise
    if fault == "offsets-outside":
        # The deliberate bug: the outputs are committed, the offsets not yet; a crash here
        # makes the next process read these inputs again.
        if random.random() < 0.2:
            emit({"ctp": name, "inputs": state["inputs"], "offsets": state["offsets"],
                  "outcome": "committed", "error": None, "latency": 0})
            os._exit(9)
        c.commit(offsets=tps, asynchronous=False)


def ctp_batches(ident, p, c, launch, incarnation, out_topic, fault, counter, wd, pending):
    """Transactions over what `c` consumes until one fails or the run stops; returns whether
    the failure was fatal (the producer is unusable). `pending["txn"]` names the transaction
    in progress for the watchdog's report."""
    while not stop.is_set():
        batch = [m for m in wd.call("consume", 0.5, lambda: c.consume(50, 0.5))
                 if m.error() is None]
        if not batch:
            continue
        name = f"x{ident}.{launch}.{incarnation}-{counter[0]}"
        counter[0] += 1
        state = {"offsets": [], "commit_requested": False,
                 "inputs": [[m.partition(), m.offset(), m.value().decode(errors="replace")]
                            for m in batch]}
        started = time.monotonic()
        pending["txn"] = (name, state, started)
        error, fatal = None, False
        try:
            ctp_transaction(p, c, name, batch, out_topic, fault, state, wd)
        except (KafkaException, BufferError) as e:
            error = str(e)
            err = kafka_error(e) if isinstance(e, KafkaException) else None
            fatal = err is not None and err.fatal()
            if not fatal:
                try:
                    wd.call("abort_transaction", 30, lambda: p.abort_transaction(30))
                except KafkaException as e2:
                    error += f"; abort: {e2}"
                    fatal = True
        # As for `produce`: "aborted" only if commit was never requested.
        outcome = "committed" if error is None else (
            "unknown" if state["commit_requested"] else "aborted")
        with wd.lock:  # one line per transaction: this one or the watchdog's
            pending["txn"] = None
            emit({"ctp": name, "inputs": state["inputs"], "offsets": state["offsets"],
                  "outcome": outcome, "error": error,
                  "latency": int((time.monotonic() - started) * 1000)})
        if error is not None:
            return fatal
    return False


def on_stuck(ident, launch, pending):
    """The watchdog's end of a process stuck in a librdkafka call (case 9 of docs/faults.md):
    the open transaction's line (aborted, or unknown once its commit was requested), then the
    process exits and the harness starts the next one."""
    def report(call):
        error = (f"stuck: {call} did not return within its timeout + 15 s "
                 "(confluentinc/librdkafka#5511, #5456); the process exits")
        txn = pending.get("txn")
        if txn is not None:
            name, state, started = txn
            emit({"ctp": name, "inputs": state["inputs"], "offsets": state["offsets"],
                  "outcome": "unknown" if state["commit_requested"] else "aborted",
                  "error": error, "latency": int((time.monotonic() - started) * 1000)})
        emit({"info": f"x{ident}.{launch}: {error}"})
        os._exit(4)
    return report


def process(ident, out_topic, launch, fault):
    watch_stdin()
    incarnation = 0
    counter = [0]
    pending = {"txn": None}
    wd = Watchdog(on_stuck(ident, launch, pending))
    while not stop.is_set():
        p = ctp_producer(ident)
        try:
            wd.call("init_transactions", 30, lambda: p.init_transactions(30))
        except KafkaException as e:
            err = kafka_error(e)
            emit({"info": f"x{ident}.{launch}.{incarnation}: init_transactions: {e}"})
            if err is not None and err.fatal():
                os._exit(3)
            incarnation += 1
            time.sleep(1)
            continue
        fatal = False
        while not fatal and not stop.is_set():
            c = ctp_consumer(ident)
            c.subscribe([topic])
            fatal = ctp_batches(ident, p, c, launch, incarnation, out_topic, fault, counter,
                                wd, pending)
            # Rebuilt after a failure, so it starts from the committed offsets again.
            try:
                wd.call("consumer close", 30, c.close)
            except KafkaException:
                pass
        if fatal:
            emit({"info": f"x{ident}.{launch}.{incarnation}: fatal error; this process ends"})
            os._exit(3)
        incarnation += 1


if mode == "produce":
    produce(sys.argv[5], float(sys.argv[6]) / 1000.0, int(sys.argv[7]))
elif mode == "follow":
    follow(sys.argv[5])
elif mode == "final":
    final(float(sys.argv[5]))
elif mode == "process":
    process(sys.argv[5], sys.argv[6], sys.argv[7], sys.argv[8] if len(sys.argv) > 8 else None)
else:
    sys.exit(f"unknown mode {mode}")
