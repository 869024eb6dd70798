#!/usr/bin/env python3
"""A confluent-kafka (librdkafka) workload producer for runnel-faults.

Idempotent, acks=all, unique values `k<id>.<incarnation>-<seq>` round-robin over the
partitions; one JSON line per outcome on stdout: {"latency": ms, "partition": p, "value": v,
"offset": o} or {... "error": "..."}. Stops (flushing, 30 s at most) on SIGTERM or when stdin
closes; a fatal producer error starts a new incarnation (new producer id)."""

import json
import os
import signal
import sys
import threading
import time

from confluent_kafka import KafkaException, Producer

bootstrap, topic, partitions, ident = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
pace = float(sys.argv[5]) / 1000.0 if len(sys.argv) > 5 else 0.01
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
out_lock = threading.Lock()


def emit(obj):
    with out_lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def producer():
    # RUNNEL_FAULTS_CK_DEBUG=eos prints librdkafka's idempotence decisions (epoch bumps,
    # drains, sequence errors) to stderr, i.e. into the run's output.
    debug = {"debug": os.environ["RUNNEL_FAULTS_CK_DEBUG"]} if os.environ.get("RUNNEL_FAULTS_CK_DEBUG") else {}
    return Producer({
        **debug,
        "bootstrap.servers": bootstrap,
        # Names the process in librdkafka's log lines (`<client.id>#producer-1`).
        "client.id": f"queue-k{ident}",
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "message.timeout.ms": 30000,
        "request.timeout.ms": 5000,
        "socket.timeout.ms": 5000,
        "reconnect.backoff.max.ms": 1000,
    })


seq = 0
incarnation = 0
while not stop.is_set():
    name = f"k{ident}.{incarnation}"
    p = producer()
    fatal = threading.Event()

    def report(err, msg, started, value, partition):
        latency = int((time.monotonic() - started) * 1000)
        rec = {"latency": latency, "partition": partition, "value": value, "producer": name}
        if err is None:
            rec["offset"] = msg.offset()
        else:
            rec["error"] = str(err)
            if err.fatal():
                fatal.set()
        emit(rec)

    while not stop.is_set() and not fatal.is_set():
        value = f"{name}-{seq}"
        partition = seq % partitions
        seq += 1
        started = time.monotonic()
        try:
            p.produce(topic, value.encode(), partition=partition,
                      on_delivery=lambda e, m, s=started, v=value, q=partition: report(e, m, s, v, q))
        except (BufferError, KafkaException) as e:
            emit({"latency": 0, "partition": partition, "value": value, "producer": name,
                  "error": f"produce: {e}"})
            p.poll(0.5)
            continue
        p.poll(0)
        time.sleep(pace)
    left = p.flush(30)
    if left:
        emit({"info": f"{name}: {left} deliveries unanswered after 30 s"})
    incarnation += 1
