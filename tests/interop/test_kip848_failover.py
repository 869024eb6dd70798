"""Durable KIP-848 groups (issue 12): a `group.protocol=consumer` group of confluent-kafka
(librdkafka) consumers keeps its members and assignment when its group coordinator is
`kill -9`ed in a 3-node cluster. The group's records were replicated to the other nodes'
`__consumer_offsets` replicas, so the new coordinator answers the members' heartbeats at
their epochs: no member is revoked or loses its partitions, and every record produced before
and after the kill is read exactly once (the members commit after every poll round, and
nothing is redelivered since no partition changes hands).
The Java KafkaConsumer (group.protocol=consumer, tests/java GroupFailoverScenarios) runs the
same kill -9 scenario. The protocol-level twin is crates/runnel/tests/consumer_group_durable.rs.
"""

from __future__ import annotations

import subprocess
import threading

import pytest
from confluent_kafka import Consumer, KafkaError
from confluent_kafka.admin import NewTopic

from clients import admin as ck_admin
from clients import ck_conf, ck_produce, unique_topic
from cluster import Cluster, partition_states
from conftest import _use
from harness import wait_until
from java_client import java_classpath

PARTITIONS = 4
OVERRIDES = {
    "broker.session.timeout.ms": 2000,
    "broker.heartbeat.interval.ms": 300,
    # One coordinator for every group: the one the test kills.
    "offsets.topic.num.partitions": 1,
}
WAIT = 60.0


class Member:
    """A consumer-protocol member recording its rebalance callbacks and what it read."""

    def __init__(self, bootstrap, group, topic):
        self.events = []
        self.seen = []
        self.c = Consumer(ck_conf(bootstrap, **{
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }))
        self.c.subscribe([topic],
                         on_assign=lambda c, ps: self.events.append(("assign", ps)),
                         on_revoke=lambda c, ps: self.events.append(("revoke", ps)),
                         on_lost=lambda c, ps: self.events.append(("lost", ps)))

    def poll(self):
        got = False
        for m in self.c.consume(100, 0.05):
            if m.error():
                assert not m.error().fatal(), m.error()
                continue
            self.seen.append((m.partition(), m.offset()))
            got = True
        if got:
            # At-least-once: commit what was read (a coordinator error is retried later).
            try:
                self.c.commit(asynchronous=False)
            except Exception as e:  # noqa: BLE001 - KafkaException while the coordinator moves
                assert e.args[0].code() != KafkaError.FENCED_MEMBER_EPOCH, e

    def partitions(self):
        return sorted(tp.partition for tp in self.c.assignment())


def _new_cluster(tmp_path, request):
    cluster = Cluster(tmp_path / "cluster", 3, OVERRIDES)
    for node in cluster.nodes.values():
        _use(request, node)
    return cluster


def _start_with_topic(cluster):
    """Starts the 3 nodes; a topic of PARTITIONS partitions, 3 replicas, a full ISR everywhere."""
    cluster.start()
    adm = ck_admin(cluster.bootstrap)
    cluster.wait_all_brokers(adm)
    topic = unique_topic("kip848-failover")
    fs = adm.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=3,
                                     config={"min.insync.replicas": "2"})],
                           operation_timeout=10, request_timeout=15)
    fs[topic].result(timeout=15)
    wait_until(lambda: (s := partition_states(adm, topic)) and len(s) == PARTITIONS and all(
        leader > 0 and isr == [1, 2, 3] for leader, _, isr in s.values()), WAIT,
        desc="a leader and a full ISR for every partition")
    return adm, topic


def _produce(cluster, topic, start, n):
    return ck_produce(cluster.bootstrap, topic,
                      [(f"k{i}".encode(), f"v{i}".encode()) for i in range(start, start + n)],
                      partition=[i % PARTITIONS for i in range(n)])


def _described_elsewhere(adm, group, victim):
    """The group as a coordinator other than `victim` describes it, or None."""
    try:
        d = adm.describe_consumer_groups([group])[group].result(timeout=10)
    except Exception:  # noqa: BLE001 - the coordinator may still be moving
        return None
    return d if d.coordinator.id != victim else None


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_consumer_group_keeps_its_assignment_across_a_coordinator_kill9(tmp_path, request):
    cluster = _new_cluster(tmp_path, request)
    members = []
    try:
        adm, topic = _start_with_topic(cluster)
        first = _produce(cluster, topic, 0, 400)
        group = unique_topic("g848-failover")
        members = [Member(cluster.bootstrap, group, topic) for _ in range(2)]
        expected = {(p, o) for (_, _, p, o) in first.acked}

        def stable_and_read():
            for m in members:
                m.poll()
            return (sorted(len(m.partitions()) for m in members) == [2, 2]
                    and {r for m in members for r in m.seen} >= expected)

        wait_until(stable_and_read, WAIT, interval=0.01,
                   desc="two members with two partitions each, everything read")
        before = [m.partitions() for m in members]
        events_before = [len(m.events) for m in members]

        described = adm.describe_consumer_groups([group])[group].result(timeout=15)
        victim = described.coordinator.id
        assert sorted(len(mm.assignment.topic_partitions) for mm in described.members) == [2, 2]
        cluster.kill9(victim)

        second = _produce(cluster, topic, 400, 400)
        expected |= {(p, o) for (_, _, p, o) in second.acked}

        def all_read():
            for m in members:
                m.poll()
            return {r for m in members for r in m.seen} >= expected

        wait_until(all_read, WAIT, interval=0.01, desc="every record read after the kill")

        # The new coordinator has the group: same members, same partitions.
        d = wait_until(lambda: _described_elsewhere(adm, group, victim), WAIT,
                       desc="the group on a new coordinator")
        assert len(d.members) == 2, d
        # Keep polling for ~10 s (two heartbeat intervals) on the new coordinator: still
        # nobody rebalances.
        for _ in range(100):
            for m in members:
                m.poll()
        after = [m.partitions() for m in members]
        new_events = [m.events[n:] for m, n in zip(members, events_before)]
        assert after == before, f"assignment changed: {before} -> {after}"
        assert new_events == [[], []], f"rebalance callbacks after the kill: {new_events}"
        seen = [r for m in members for r in m.seen]
        assert len(seen) == len(set(seen)), "a record was read twice without a rebalance"
    finally:
        for m in members:
            try:
                m.c.close()
            except Exception:  # noqa: BLE001
                pass
        cluster.kill_all()


class _JavaGroup(threading.Thread):
    """The Java scenario's process; `lines` collects its stdout as it comes."""

    def __init__(self, cmd, stderr_path):
        super().__init__(daemon=True)
        # stderr to a file: a pipe nobody reads until the end could fill and stall the JVM.
        self.stderr_path = stderr_path
        with open(stderr_path, "w") as err:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=err, text=True)
        self.lines = []
        self.start()

    def run(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())

    def wait_line(self, prefix):
        wait_until(lambda: any(l.startswith(prefix) for l in self.lines)
                   or self.proc.poll() is not None, WAIT + 30, interval=0.05,
                   desc=f"the Java group's '{prefix}' line")
        assert any(l.startswith(prefix) for l in self.lines), self.report()

    def report(self):
        err = self.stderr_path.read_text()
        return "--- stdout ---\n" + "\n".join(self.lines) + "\n--- stderr ---\n" + err[-6000:]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_java_consumer_group_keeps_its_assignment_across_a_coordinator_kill9(tmp_path, request):
    """The Java KafkaConsumer with group.protocol=consumer, same scenario: the scenario checks
    no rebalance callback (assigned, revoked or lost), unchanged partitions and every record
    read exactly once; the test kills the coordinator and checks the group moved."""
    cluster = _new_cluster(tmp_path, request)
    java = None
    try:
        adm, topic = _start_with_topic(cluster)
        _produce(cluster, topic, 0, 400)
        group = unique_topic("g848-java-failover")
        resume, check = tmp_path / "resume", tmp_path / "check"
        java = _JavaGroup(["java", "-cp", java_classpath(), "runnel.interop.Main",
                           "consumer-protocol-coordinator-kill", cluster.bootstrap, "3",
                           f"topic={topic}", f"group={group}", f"partitions={PARTITIONS}",
                           f"resume_file={resume}", f"check_file={check}"],
                          tmp_path / "java.stderr")
        java.wait_line("stable ")
        described = adm.describe_consumer_groups([group])[group].result(timeout=15)
        victim = described.coordinator.id
        assert sorted(len(m.assignment.topic_partitions) for m in described.members) == [2, 2]
        cluster.kill9(victim)
        _produce(cluster, topic, 400, 400)
        resume.touch()
        java.wait_line("caught-up ")
        d = wait_until(lambda: _described_elsewhere(adm, group, victim), WAIT,
                       desc="the group on a new coordinator")
        assert sorted(len(m.assignment.topic_partitions) for m in d.members) == [2, 2], d
        check.touch()
        java.proc.wait(timeout=WAIT + 30)
        java.join(timeout=10)
        assert java.proc.returncode == 0 and "PASS consumer-protocol-coordinator-kill" in java.lines, \
            java.report()
    finally:
        if java and java.proc.poll() is None:
            java.proc.kill()
        cluster.kill_all()
