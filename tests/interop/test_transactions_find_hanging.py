"""`runnel transactions find-hanging` (kafka-transactions.sh's FindHangingTransactionsCommand):
a transaction open on a partition for longer than --max-transaction-timeout minutes is hanging
when its coordinator does not expect to end it there. An ongoing transaction the coordinator
knows is not reported; one whose coordinator state was lost (the `__transaction_state` logs
removed while the broker was down, so nothing will ever write its marker) is, and `abort
--start-offset` ends it."""

from __future__ import annotations

import shutil
import subprocess

from confluent_kafka import Consumer, Producer, TopicPartition

from clients import OP_TIMEOUT, ck_conf, create_topic, unique_topic
from harness import RUNNEL_BIN, wait_until

HEADERS = ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
           "LastTimestamp", "Duration(min)"]


def _tool(bootstrap, *args, ok=True):
    out = subprocess.run([RUNNEL_BIN, "transactions", "--bootstrap-server", bootstrap, *args],
                         capture_output=True, text=True, timeout=60)
    if ok:
        assert out.returncode == 0, out.stderr
    return out


def _hanging(bootstrap, *scope):
    out = _tool(bootstrap, "find-hanging", "--max-transaction-timeout", "0", *scope)
    rows = [line.split() for line in out.stdout.splitlines()]
    assert rows[0] == HEADERS, out.stdout
    return rows[1:]


def test_find_hanging_reports_only_transactions_their_coordinator_forgot(broker_factory):
    b = broker_factory()
    topic = create_topic(b.bootstrap, unique_topic("hang"), 2)
    p = Producer(ck_conf(b.bootstrap, **{"transactional.id": unique_topic("hang-id"),
                                         "transaction.timeout.ms": 900000}))
    p.init_transactions(OP_TIMEOUT)
    p.begin_transaction()
    p.produce(topic, partition=1, value=b"open")
    p.flush(OP_TIMEOUT)
    producers = _tool(b.bootstrap, "describe-producers", "--topic", topic, "--partition", "1")
    pid = int(producers.stdout.splitlines()[1].split()[0])

    # Open for more than 0 minutes (the last write was at least a request ago), but its
    # coordinator holds the partition: not hanging.
    assert _hanging(b.bootstrap, "--broker-id", "1") == []
    assert _hanging(b.bootstrap, "--topic", topic) == []

    # The coordinator's state is lost: nothing will ever end the transaction on the partition.
    b.stop()
    del p
    for d in b.data_dir.rglob("__transaction_state-*"):
        if d.is_dir():
            shutil.rmtree(d)
    b.start()
    rows = wait_until(lambda: _hanging(b.bootstrap, "--broker-id", "1") or None, OP_TIMEOUT,
                      interval=0.5, desc="the hanging transaction")
    assert len(rows) == 1, rows
    row = rows[0]
    assert (row[0], row[1], int(row[2]), row[5]) == (topic, "1", pid, "0"), row
    assert row[7] == "0", "open for less than a minute"
    assert _hanging(b.bootstrap, "--topic", topic, "--partition", "1") == rows
    assert _hanging(b.bootstrap, "--topic", topic, "--partition", "0") == []
    assert _hanging(b.bootstrap, "--broker-id", "2") == [], "broker 2 holds no replica"

    # kafka-transactions.sh's remedy; afterwards nothing hangs and read_committed moves on.
    _tool(b.bootstrap, "abort", "--topic", topic, "--partition", "1", "--start-offset", "0")
    assert _hanging(b.bootstrap, "--broker-id", "1") == []
    c = Consumer(ck_conf(b.bootstrap, **{"group.id": unique_topic("g"), "isolation.level": "read_committed"}))
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, 1), timeout=OP_TIMEOUT, cached=False)
        assert high == 2, "the LSO is past the aborted record and its marker"
    finally:
        c.close()


def test_find_hanging_needs_a_scope(broker):
    out = _tool(broker.bootstrap, "find-hanging", ok=False)
    assert out.returncode != 0
    assert "requires either --topic or --broker-id" in out.stderr
    out = _tool(broker.bootstrap, "find-hanging", "--broker-id", "1", "--partition", "0", ok=False)
    assert out.returncode != 0
    assert "The --partition argument requires --topic to be provided" in out.stderr
