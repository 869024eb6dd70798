"""Exactly-once consume-transform-produce across kill -9 (issue 13), with the Java client (the
reference implementation of Kafka's transactional producer). 3 nodes, RF 3: the Java loop
(tests/java ExactlyOnceScenarios, `txn-eos-loop`) reads the input topic read_committed, writes
every record to the output topic and commits its consumer offsets with
sendOffsetsToTransaction, one transaction per poll of at most 100 records, restarting with the
same transactional.id after any error. Mid-run the transaction coordinator is killed -9 (and
restarted), later the leader of an output partition. At the end every input value is in the
output, read read_committed, exactly once.

The second test kills the loop *process* instead: mid-transaction (records sent and flushed to
the output partitions, not committed) it is killed -9, and a new instance starts with the same
transactional.id. Its initTransactions must fence the dead one (a higher epoch) and abort the
open transaction long before transaction.timeout.ms would, and the output must again hold
every input exactly once while the aborted records stay visible to read_uncommitted only."""

from __future__ import annotations

import subprocess
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from clients import OP_TIMEOUT, admin, ck_conf, create_topic, unique_topic
from cluster import Cluster, partition_states
from conftest import _use
from harness import wait_until
from java_client import java_classpath
from test_transactions_coordinator import _compact_str, _request, _uvarint, describe

N = 3000
PARTITIONS = 3


def _coordinator(cluster, txn_id):
    def find():
        for i in cluster.alive():
            try:
                if describe(cluster.node(i).address, txn_id)[0] == 0:
                    return i
            except OSError:
                pass
        return None
    return wait_until(find, OP_TIMEOUT, interval=0.2, desc=f"the coordinator of {txn_id}")


class _Loop(threading.Thread):
    """The Java loop's process; `progress` follows its "progress=" lines."""

    def __init__(self, cmd):
        super().__init__(daemon=True)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.progress = 0
        self.lines = []

    def run(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())
            if line.startswith("progress="):
                self.progress = int(line.split("=", 1)[1])

    def wait_progress(self, at_least, desc):
        wait_until(lambda: self.progress >= at_least or self.proc.poll() is not None, 120,
                   interval=0.05, desc=desc)
        assert self.proc.poll() is None, f"the loop ended before {desc}:\n" + "\n".join(self.lines[-30:])


def _read_committed(bootstrap, topic, isolation="read_committed"):
    c = Consumer(ck_conf(bootstrap, **{"group.id": unique_topic("eos-check"),
                                       "isolation.level": isolation,
                                       "auto.offset.reset": "earliest",
                                       "enable.auto.commit": False}))
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    ends = {tp.partition: c.get_watermark_offsets(tp, timeout=OP_TIMEOUT, cached=False)[1] for tp in tps}
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    values = []
    positions = {p: 0 for p in range(PARTITIONS)}
    deadline = time.monotonic() + OP_TIMEOUT
    try:
        while any(positions[p] < ends[p] for p in positions):
            assert time.monotonic() < deadline, f"reading {topic}: at {positions}, end {ends}"
            for m in c.consume(500, timeout=0.5):
                if m.error() is None:
                    values.append(m.value().decode())
            for tp in c.position(tps):
                if tp.offset >= 0:
                    positions[tp.partition] = tp.offset
    finally:
        c.close()
    return values


@pytest.mark.slow
@pytest.mark.timeout(360)
def test_consume_transform_produce_is_exactly_once_across_kill_9(tmp_path, request):
    cluster = Cluster(tmp_path / "cluster", 3)
    for node in cluster.nodes.values():
        _use(request, node)
    cluster.start()
    cluster.wait_all_brokers(admin(cluster.bootstrap))
    source = create_topic(cluster.bootstrap, unique_topic("eos-in"), PARTITIONS, replication_factor=3)
    sink = create_topic(cluster.bootstrap, unique_topic("eos-out"), PARTITIONS, replication_factor=3)
    p = Producer(ck_conf(cluster.bootstrap, **{"enable.idempotence": True}))
    for i in range(N):
        p.produce(source, key=str(i).encode(), value=str(i).encode())
    assert p.flush(OP_TIMEOUT) == 0
    txn_id = unique_topic("eos-id")
    cmd = ["java", "-cp", java_classpath(), "runnel.interop.Main", "txn-eos-loop", cluster.bootstrap, "3",
           f"input={source}", f"output={sink}", f"group={unique_topic('eos-group')}", f"id={txn_id}",
           "pause_ms=100", "budget_ms=240000"]
    loop = _Loop(cmd)
    loop.start()
    try:
        loop.wait_progress(N // 5, "a fifth of the input")
        coordinator = _coordinator(cluster, txn_id)
        cluster.kill9(coordinator)
        cluster.start_node(coordinator)
        at = loop.progress
        loop.wait_progress(at + N // 5, "progress after the coordinator's kill")
        leader = wait_until(lambda: (s := partition_states(admin(cluster.bootstrap), sink)) and s[0][0],
                            OP_TIMEOUT, desc="the output's leader")
        cluster.kill9(leader)
        cluster.start_node(leader)
        try:
            loop.proc.wait(timeout=240)
        except subprocess.TimeoutExpired:
            raise AssertionError("the loop did not finish:\n" + "\n".join(loop.lines[-40:])) from None
    finally:
        if loop.proc.poll() is None:
            loop.proc.kill()
        loop.join(5)
    stderr = loop.proc.stderr.read()
    assert loop.proc.returncode == 0, "\n".join(loop.lines[-40:]) + "\n" + stderr[-4000:]
    assert "PASS txn-eos-loop" in loop.lines, loop.lines[-10:]
    values = _read_committed(cluster.bootstrap, sink)
    counts = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    duplicated = sorted((v for v, c in counts.items() if c > 1), key=int)
    missing = [str(i) for i in range(N) if str(i) not in counts]
    restarts = next((line for line in loop.lines if line.startswith("restarts=")), "?")
    assert not duplicated and not missing, (
        f"{len(duplicated)} duplicated (first {duplicated[:10]}), {len(missing)} missing (first "
        f"{missing[:10]}); {restarts}")
    assert len(values) == N
    cluster.stop_all()


def _exactly_once(values, n):
    counts = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    duplicated = sorted((v for v, c in counts.items() if c > 1), key=int)
    missing = [str(i) for i in range(n) if str(i) not in counts]
    assert not duplicated and not missing, (
        f"{len(duplicated)} duplicated (first {duplicated[:10]}), {len(missing)} missing (first "
        f"{missing[:10]})")
    assert len(values) == n


def _loop_cluster(tmp_path, request, n):
    """A 3-node cluster with n input records; returns (cluster, sink, the loop's command)."""
    cluster = Cluster(tmp_path / "cluster", 3)
    for node in cluster.nodes.values():
        _use(request, node)
    cluster.start()
    cluster.wait_all_brokers(admin(cluster.bootstrap))
    source = create_topic(cluster.bootstrap, unique_topic("eos-in"), PARTITIONS, replication_factor=3)
    sink = create_topic(cluster.bootstrap, unique_topic("eos-out"), PARTITIONS, replication_factor=3)
    p = Producer(ck_conf(cluster.bootstrap, **{"enable.idempotence": True}))
    for i in range(n):
        p.produce(source, key=str(i).encode(), value=str(i).encode())
    assert p.flush(OP_TIMEOUT) == 0
    # transaction.timeout.ms far above the test's run time: only the new instance's
    # InitProducerId can end the first one's transaction.
    base = ["java", "-cp", java_classpath(), "runnel.interop.Main", "txn-eos-loop", cluster.bootstrap, "3",
            f"input={source}", f"output={sink}", f"group={unique_topic('eos-group')}",
            f"id={unique_topic('eos-id')}", "txn_timeout_ms=600000", "budget_ms=150000"]
    return cluster, sink, base


def _wait_open_transaction(cluster, loop, txn_id):
    """Waits for the loop's "open-txn" line; returns (records in it, coordinator, pid, epoch)."""
    wait_until(lambda: any(line.startswith("open-txn") for line in loop.lines)
               or loop.proc.poll() is not None, 120, desc="the first loop's open transaction")
    assert loop.proc.poll() is None, "\n".join(loop.lines[-30:])
    open_records = int(next(line for line in loop.lines if line.startswith("open-txn")).split("=")[1])
    coordinator = _coordinator(cluster, txn_id)
    error, state, pid, epoch, partitions = describe(cluster.node(coordinator).address, txn_id)
    assert (error, state) == (0, "Ongoing"), (error, state)
    assert partitions, partitions
    return open_records, coordinator, pid, epoch


def _run_to_end(loop, timeout=150):
    try:
        loop.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError("the loop did not finish:\n" + "\n".join(loop.lines[-40:])) from None
    finally:
        if loop.proc.poll() is None:
            loop.proc.kill()
        loop.join(5)
    stderr = loop.proc.stderr.read()
    assert loop.proc.returncode == 0, "\n".join(loop.lines[-40:]) + "\n" + stderr[-4000:]
    assert "PASS txn-eos-loop" in loop.lines, loop.lines[-10:]


def _check_fenced_and_exactly_once(cluster, sink, txn_id, n, pid, epoch, open_records):
    # The same producer id with a higher epoch: the first instance is fenced.
    error, state, pid2, epoch2, _ = describe(cluster.node(_coordinator(cluster, txn_id)).address, txn_id)
    assert error == 0 and pid2 == pid and epoch2 > epoch, (error, state, pid, epoch, pid2, epoch2)
    assert state in ("CompleteCommit", "Empty"), state
    _exactly_once(_read_committed(cluster.bootstrap, sink), n)
    # The first instance's open transaction is in the output log, aborted.
    uncommitted = _read_committed(cluster.bootstrap, sink, isolation="read_uncommitted")
    assert len(uncommitted) == n + open_records, (len(uncommitted), n, open_records)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_restarted_loop_fences_the_killed_one_and_aborts_its_open_transaction(tmp_path, request):
    n = 1000
    cluster, sink, base = _loop_cluster(tmp_path, request, n)
    txn_id = next(a for a in base if a.startswith("id=")).split("=", 1)[1]
    first = _Loop(base + [f"stall_at={n // 3}"])
    first.start()
    try:
        open_records, coordinator, pid, epoch = _wait_open_transaction(cluster, first, txn_id)
        committed_before = first.progress
        first.proc.kill()  # SIGKILL: no close, no abort from the client
        first.proc.wait(timeout=10)
    finally:
        if first.proc.poll() is None:
            first.proc.kill()
        first.join(5)
    # Killed mid-transaction: the coordinator still has it open.
    assert describe(cluster.node(coordinator).address, txn_id)[1] == "Ongoing"
    second = _Loop(base)
    second.start()
    _run_to_end(second)
    # The second instance re-did exactly what the first had not committed.
    assert second.progress == n - committed_before, (second.progress, n, committed_before)
    _check_fenced_and_exactly_once(cluster, sink, txn_id, n, pid, epoch, open_records)
    cluster.stop_all()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_zombie_loop_cannot_commit_after_a_new_instance_started(tmp_path, request):
    """The first instance is not killed but stalls mid-transaction (a zombie: a GC pause, a
    partition from the cluster); a new instance with the same transactional.id takes over and
    finishes; when the zombie then commits, it is fenced (ProducerFencedException) and nothing
    of its transaction reaches read_committed readers."""
    n = 600
    cluster, sink, base = _loop_cluster(tmp_path, request, n)
    txn_id = next(a for a in base if a.startswith("id=")).split("=", 1)[1]
    resume = tmp_path / "resume"
    # A short max.poll.interval.ms so the stalled consumer leaves the group and the new
    # instance gets the partitions without waiting five minutes.
    zombie = _Loop(base + [f"stall_at={n // 3}", f"resume_file={resume}", "max_poll_interval_ms=10000"])
    zombie.start()
    try:
        open_records, _, pid, epoch = _wait_open_transaction(cluster, zombie, txn_id)
        second = _Loop(base)
        second.start()
        _run_to_end(second)
        resume.write_text("go")
        _run_to_end(zombie, timeout=60)
    finally:
        if zombie.proc.poll() is None:
            zombie.proc.kill()
    fenced = [line for line in zombie.lines if line.startswith("zombie fenced: ")]
    assert fenced and fenced[0].split(": ")[1] in ("ProducerFencedException", "InvalidProducerEpochException"), \
        zombie.lines[-10:]
    _check_fenced_and_exactly_once(cluster, sink, txn_id, n, pid, epoch, open_records)
    cluster.stop_all()


def _group_coordinator(cluster, group):
    """FindCoordinator v4 (key type 0, the group) at a live node: the coordinator's node id."""
    node = cluster.node(cluster.alive()[0])
    body = b"\x00" + _uvarint(2) + _compact_str(group) + b"\x00"
    r = _request(node.address, 10, 4, body)
    r.take(">i")
    assert r.uvarint() == 2
    assert r.compact_str() == group
    node_id = r.take(">i")
    r.compact_str()
    r.take(">i")
    assert r.take(">h") == 0
    return node_id


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_pending_transactional_offsets_survive_a_group_coordinator_kill_9(tmp_path, request):
    """The loop stalls after sendOffsetsToTransaction, so the group coordinator holds that
    transaction's offsets pending; the group coordinator (leader of the group's
    __consumer_offsets partition) is killed -9 and restarted; then the loop commits. The new
    coordinator must have reloaded the pending offsets from the log and materialize them with
    the COMMIT marker. The loop ends right after that commit and a second instance finishes
    from the group's committed offsets: had they been lost, it would read that transaction's
    records again and the output would hold duplicates."""
    n = 600
    cluster, sink, base = _loop_cluster(tmp_path, request, n)
    txn_id = next(a for a in base if a.startswith("id=")).split("=", 1)[1]
    group = next(a for a in base if a.startswith("group=")).split("=", 1)[1]
    resume = tmp_path / "resume"
    loop = _Loop(base + [f"stall_at={n // 3}", "stall_after_offsets=true", f"resume_file={resume}"])
    loop.start()
    try:
        _, coordinator, _, _ = _wait_open_transaction(cluster, loop, txn_id)
        partitions = describe(cluster.node(coordinator).address, txn_id)[4]
        assert any(t == "__consumer_offsets" for t, _ in partitions), partitions
        group_coordinator = wait_until(lambda: _group_coordinator(cluster, group), OP_TIMEOUT,
                                       desc="the group's coordinator")
        cluster.kill9(group_coordinator)
        cluster.start_node(group_coordinator)
        resume.write_text("go")
        _run_to_end(loop)
    finally:
        if loop.proc.poll() is None:
            loop.proc.kill()
    assert "resumed commit ok" in loop.lines, loop.lines[-20:]
    assert loop.progress < n, loop.progress
    second = _Loop(base)
    second.start()
    _run_to_end(second)
    assert second.progress == n - loop.progress, (second.progress, loop.progress)
    _exactly_once(_read_committed(cluster.bootstrap, sink), n)
    cluster.stop_all()
