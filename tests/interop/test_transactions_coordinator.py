"""The transaction coordinator with a real transactional client (confluent-kafka): InitProducerId
with a transactional.id, commit, abort, transactions in a row, fencing by a second producer with
the same transactional.id, the coordinator's abort of a timed-out transaction, and its state as
DescribeTransactions / ListTransactions (raw requests: the Python clients have no admin call for
them) report it."""

from __future__ import annotations

import socket
import struct
import subprocess

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from clients import OP_TIMEOUT, admin, ck_conf, create_topic, unique_topic
from cluster import Cluster
from conftest import _use
from harness import RUNNEL_BIN, wait_until


def _producer(broker, txn_id, **extra):
    conf = ck_conf(broker.bootstrap, **{"transactional.id": txn_id, "transaction.timeout.ms": 60000})
    conf.update(extra)
    return Producer(conf)


def _uvarint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def _compact_str(s: str):
    b = s.encode()
    return _uvarint(len(b) + 1) + b


class _Reader:
    def __init__(self, buf):
        self.buf, self.off = buf, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.buf, self.off)
        self.off += struct.calcsize(fmt)
        return v[0]

    def uvarint(self):
        shift = value = 0
        while True:
            b = self.buf[self.off]
            self.off += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def compact_str(self):
        n = self.uvarint() - 1
        s = self.buf[self.off:self.off + n].decode()
        self.off += n
        return s

    def tagged(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.off += self.uvarint()


def _request(address, api_key, version, body):
    """A flexible request (header v2) to `host:port`; its body after the response header v1."""
    host, port = address.split(":")
    header = struct.pack(">hhih", api_key, version, 7, 6) + b"txtest" + b"\x00"
    payload = header + body
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        data = b""
        while len(data) < size:
            chunk = s.recv(size - len(data))
            assert chunk, "connection closed"
            data += chunk
    r = _Reader(data)
    assert r.take(">i") == 7
    r.tagged()
    return r


def describe(address, txn_id):
    """DescribeTransactions v0 for one id: (error, state, producer id, epoch, partitions)."""
    body = _uvarint(2) + _compact_str(txn_id) + b"\x00"
    r = _request(address, 65, 0, body)
    r.take(">i")
    assert r.uvarint() == 2
    error = r.take(">h")
    assert r.compact_str() == txn_id
    state = r.compact_str()
    r.take(">i")
    r.take(">q")
    pid = r.take(">q")
    epoch = r.take(">h")
    partitions = []
    for _ in range(r.uvarint() - 1):
        topic = r.compact_str()
        for _ in range(r.uvarint() - 1):
            partitions.append((topic, r.take(">i")))
        r.tagged()
    return error, state, pid, epoch, sorted(partitions)


def list_transactions(address, states=()):
    """ListTransactions v0: {transactional id: state}."""
    body = _uvarint(len(states) + 1) + b"".join(_compact_str(s) for s in states) + _uvarint(1) + b"\x00"
    r = _request(address, 66, 0, body)
    r.take(">i")
    assert r.take(">h") == 0
    for _ in range(r.uvarint() - 1):
        r.compact_str()
    out = {}
    for _ in range(r.uvarint() - 1):
        txn_id = r.compact_str()
        r.take(">q")
        out[txn_id] = r.compact_str()
        r.tagged()
    return out


def _wait_state(address, txn_id, state):
    wait_until(lambda: describe(address, txn_id)[1] == state, OP_TIMEOUT, interval=0.1,
               desc=f"{txn_id} to reach {state}")


def _send(p, topic, n, tag):
    for i in range(n):
        p.produce(topic, key=f"{tag}{i}".encode(), value=f"{tag}-{i}".encode())
    p.flush(OP_TIMEOUT)


@pytest.fixture
def txn_broker(broker_factory):
    # Its own broker: __transaction_state is created by the first FindCoordinator of the test.
    return broker_factory()


def test_commit_abort_and_transactions_in_a_row(txn_broker):
    topic = create_topic(txn_broker.bootstrap, unique_topic("txc"), 2)
    txn_id = unique_topic("txn-id")
    p = _producer(txn_broker, txn_id)
    p.init_transactions(OP_TIMEOUT)
    error, state, pid, epoch, _ = describe(txn_broker.bootstrap, txn_id)
    assert (error, state, epoch) == (0, "Empty", 0) and pid >= 0

    p.begin_transaction()
    _send(p, topic, 10, "a")
    error, state, _, _, partitions = describe(txn_broker.bootstrap, txn_id)
    assert (error, state) == (0, "Ongoing")
    assert {t for t, _ in partitions} == {topic}
    assert list_transactions(txn_broker.bootstrap, ["Ongoing"]).get(txn_id) == "Ongoing"
    p.commit_transaction(OP_TIMEOUT)
    _wait_state(txn_broker.bootstrap, txn_id, "CompleteCommit")
    assert describe(txn_broker.bootstrap, txn_id)[4] == [], "a complete transaction holds no partitions"

    # The next transactions start as soon as the markers are written.
    p.begin_transaction()
    _send(p, topic, 5, "b")
    p.abort_transaction(OP_TIMEOUT)
    _wait_state(txn_broker.bootstrap, txn_id, "CompleteAbort")
    p.begin_transaction()
    _send(p, topic, 5, "c")
    p.commit_transaction(OP_TIMEOUT)
    _wait_state(txn_broker.bootstrap, txn_id, "CompleteCommit")
    assert describe(txn_broker.bootstrap, txn_id)[3] == 0, "the epoch stays within one producer session"
    assert list_transactions(txn_broker.bootstrap).get(txn_id) == "CompleteCommit"
    assert txn_id not in list_transactions(txn_broker.bootstrap, ["Ongoing"])

    # kafka-transactions.sh's list / describe, as `runnel transactions`.
    def tool(*args):
        out = subprocess.run([RUNNEL_BIN, "transactions", "--bootstrap-server", txn_broker.bootstrap,
                              *args], capture_output=True, text=True, timeout=60, check=True)
        return [line.split() for line in out.stdout.splitlines()]
    listed = tool("list")
    assert listed[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert [txn_id, "1", str(pid), "CompleteCommit"] in listed[1:]
    described = tool("describe", "--transactional-id", txn_id)
    assert described[0][:5] == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                                "TransactionState"]
    assert described[1][1:5] == [txn_id, str(pid), "0", "CompleteCommit"]


def _at_transaction_version(broker, level):
    """Finalizes `transaction.version` at `level` (a new cluster is at 2, KIP-890 part 2) with
    `runnel features`, as kafka-features.sh does, and waits until the broker reports it."""
    if level == 2:
        return
    p = subprocess.run([RUNNEL_BIN, "features", "--bootstrap-server", broker.bootstrap,
                        "downgrade", "--feature", f"transaction.version={level}"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr

    def finalized():
        out = subprocess.run([RUNNEL_BIN, "features", "--bootstrap-server", broker.bootstrap,
                              "describe"], capture_output=True, text=True, timeout=60).stdout
        return any(line.startswith("Feature: transaction.version\t")
                   and f"FinalizedVersionLevel: {level}\t" in line for line in out.splitlines())
    wait_until(finalized, timeout=20, desc=f"transaction.version {level}")


# The clients here speak transaction version 1 (EndTxn v3/v4), so their own transaction ends
# keep the epoch at any level; the coordinator's own abort (a fence, a timeout) bumps once
# more on a cluster at 2, as Kafka 4's server-level abort.
@pytest.mark.parametrize("level", [2, 0])
def test_a_second_producer_fences_the_first(txn_broker, level):
    _at_transaction_version(txn_broker, level)
    topic = create_topic(txn_broker.bootstrap, unique_topic("txf"), 1)
    txn_id = unique_topic("txn-fence")
    first = _producer(txn_broker, txn_id)
    first.init_transactions(OP_TIMEOUT)
    first.begin_transaction()
    _send(first, topic, 3, "old")
    assert describe(txn_broker.bootstrap, txn_id)[1] == "Ongoing"

    # The second producer's InitProducerId aborts the open transaction and bumps the epoch.
    second = _producer(txn_broker, txn_id)
    second.init_transactions(OP_TIMEOUT)
    error, state, _, epoch, _ = describe(txn_broker.bootstrap, txn_id)
    # Fence (+1), at level 2 the abort's version 2 bump (+1), then the new session (+1).
    assert (error, state, epoch) == (0, "Empty", 3 if level == 2 else 2)
    with pytest.raises(KafkaException) as raised:
        first.commit_transaction(OP_TIMEOUT)
    assert raised.value.args[0].fatal() or "fenced" in str(raised.value).lower()

    second.begin_transaction()
    _send(second, topic, 3, "new")
    second.commit_transaction(OP_TIMEOUT)
    _wait_state(txn_broker.bootstrap, txn_id, "CompleteCommit")


@pytest.mark.parametrize("level", [2, 0])
def test_a_timed_out_transaction_is_aborted_by_the_coordinator(txn_broker, level):
    _at_transaction_version(txn_broker, level)
    topic = create_topic(txn_broker.bootstrap, unique_topic("txt"), 1)
    txn_id = unique_topic("txn-timeout")
    p = _producer(txn_broker, txn_id, **{"transaction.timeout.ms": 3000, "socket.timeout.ms": 3000})
    p.init_transactions(OP_TIMEOUT)
    p.begin_transaction()
    _send(p, topic, 3, "late")
    _, _, _, epoch, _ = describe(txn_broker.bootstrap, txn_id)
    # The coordinator aborts it (epoch + 1: the producer is fenced; + 2 at level 2) without
    # any client call.
    _wait_state(txn_broker.bootstrap, txn_id, "CompleteAbort")
    assert describe(txn_broker.bootstrap, txn_id)[3] == epoch + (2 if level == 2 else 1)
    with pytest.raises(KafkaException):
        p.commit_transaction(OP_TIMEOUT)


def test_timeouts_above_the_maximum_are_refused(txn_broker):
    p = _producer(txn_broker, unique_topic("txn-max"), **{"transaction.timeout.ms": 900001})
    with pytest.raises(KafkaException) as raised:
        p.init_transactions(OP_TIMEOUT)
    assert "INVALID_TRANSACTION_TIMEOUT" in str(raised.value) or "timeout" in str(raised.value).lower()


def test_unknown_ids_are_not_found(txn_broker):
    # FindCoordinator(TRANSACTION) creates __transaction_state; wait until this broker leads it.
    p = _producer(txn_broker, unique_topic("txn-boot"))
    p.init_transactions(OP_TIMEOUT)
    assert describe(txn_broker.bootstrap, "never-used")[0] == 105  # TRANSACTIONAL_ID_NOT_FOUND


def _coordinator(cluster, txn_id):
    """The node whose DescribeTransactions knows `txn_id` (the others: NOT_COORDINATOR)."""
    def find():
        for i in cluster.alive():
            try:
                if describe(cluster.node(i).address, txn_id)[0] == 0:
                    return i
            except OSError:
                pass
        return None
    return wait_until(find, OP_TIMEOUT, interval=0.2, desc=f"the coordinator of {txn_id}")


@pytest.mark.slow
def test_a_new_coordinator_finishes_the_transaction_after_kill_9(tmp_path, request):
    """3 nodes, RF 3: the coordinator of an open transaction is killed -9; the leader that takes
    over its __transaction_state partition loads the transaction from the replicated log, and
    the producer's commit completes through it."""
    cluster = Cluster(tmp_path / "cluster", 3)
    for node in cluster.nodes.values():
        _use(request, node)
    cluster.start()
    cluster.wait_all_brokers(admin(cluster.bootstrap))
    topic = create_topic(cluster.bootstrap, unique_topic("txk"), 3, replication_factor=3)
    txn_id = unique_topic("txn-kill")
    conf = ck_conf(cluster.bootstrap, **{"transactional.id": txn_id, "transaction.timeout.ms": 60000})
    p = Producer(conf)
    p.init_transactions(OP_TIMEOUT)
    p.begin_transaction()
    _send(p, topic, 30, "k")
    coordinator = _coordinator(cluster, txn_id)
    assert describe(cluster.node(coordinator).address, txn_id)[1] == "Ongoing"
    cluster.kill9(coordinator)
    new = wait_until(lambda: (c := _coordinator(cluster, txn_id)) != coordinator and c, OP_TIMEOUT,
                     interval=0.2, desc="a new coordinator")
    assert describe(cluster.node(new).address, txn_id)[1] == "Ongoing", "loaded from the log"
    p.commit_transaction(OP_TIMEOUT)
    wait_until(lambda: describe(cluster.node(_coordinator(cluster, txn_id)).address, txn_id)[1]
               == "CompleteCommit", OP_TIMEOUT, interval=0.2, desc="CompleteCommit")
    cluster.stop_all()


def test_describe_producers_shows_the_open_transaction(txn_broker):
    """DescribeProducers (API 61) through `runnel transactions describe-producers`, in
    kafka-transactions.sh's columns: the open transaction's first offset while it is open,
    None once its marker ended it."""
    topic = create_topic(txn_broker.bootstrap, unique_topic("txprod"), 1)
    txn_id = unique_topic("txn-id")
    p = _producer(txn_broker, txn_id)
    p.init_transactions(OP_TIMEOUT)
    pid = describe(txn_broker.bootstrap, txn_id)[2]

    def producers():
        out = subprocess.run([RUNNEL_BIN, "transactions", "--bootstrap-server", txn_broker.bootstrap,
                              "describe-producers", "--topic", topic, "--partition", "0"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        rows = [line.split() for line in out.stdout.splitlines()]
        assert rows[0] == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                           "LastTimestamp", "CurrentTransactionStartOffset"]
        return {int(r[0]): r for r in rows[1:]}

    p.begin_transaction()
    p.produce(topic, partition=0, value=b"a")
    p.produce(topic, partition=0, value=b"b")
    p.flush(OP_TIMEOUT)
    row = producers()[pid]
    assert (row[1], row[3], row[5]) == ("0", "1", "0"), row
    p.commit_transaction(OP_TIMEOUT)
    _wait_state(txn_broker.bootstrap, txn_id, "CompleteCommit")
    wait_until(lambda: producers()[pid][5] == "None", OP_TIMEOUT, desc="the marker ends the transaction")
    assert int(producers()[pid][2]) >= 0, "the marker's coordinator epoch"


def test_abort_by_start_offset_ends_the_open_transaction(txn_broker):
    """`runnel transactions abort --start-offset` (kafka-transactions.sh's abort of a hanging
    transaction): the partition's ABORT marker ends the open transaction, so the LSO moves
    past it and read_committed never returns its records."""
    topic = create_topic(txn_broker.bootstrap, unique_topic("txabort"), 1)
    txn_id = unique_topic("txn-id")
    p = _producer(txn_broker, txn_id)
    p.init_transactions(OP_TIMEOUT)
    pid = describe(txn_broker.bootstrap, txn_id)[2]
    p.begin_transaction()
    p.produce(topic, partition=0, value=b"hanging")
    p.flush(OP_TIMEOUT)

    def tool(*args):
        out = subprocess.run([RUNNEL_BIN, "transactions", "--bootstrap-server", txn_broker.bootstrap,
                              *args], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return [line.split() for line in out.stdout.splitlines()]

    start = {int(r[0]): r[5] for r in tool("describe-producers", "--topic", topic, "--partition", "0")[1:]}
    assert start[pid] == "0"
    tool("abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
    rows = {int(r[0]): r for r in tool("describe-producers", "--topic", topic, "--partition", "0")[1:]}
    assert rows[pid][5] == "None", rows
    c = Consumer(ck_conf(txn_broker.bootstrap, **{"group.id": unique_topic("g"), "isolation.level": "read_committed"}))
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=OP_TIMEOUT, cached=False)
        assert high == 2, "read_committed's end (the LSO) is past the aborted record and its marker"
    finally:
        c.close()
    del p
