"""A cluster of real `runnel broker` processes on 127.0.0.1, each node broker and controller.

Built on harness.Broker (same logging, same signal-by-pid discipline); like
crates/runnel/tests/support/cluster.rs, every node gets fixed ports chosen at creation (free
ports below the kernel's ephemeral range, see free_port), so a restarted node keeps its client
and controller addresses (the Raft membership stores the controller addresses, and
`--controller-quorum-voters` lists them). Also: the idempotent sequence producer and the
checks shared by test_fault.py and scripts/chaos.
"""

from __future__ import annotations

import os
import random
import socket
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness import RUNNEL_BIN, START_TIMEOUT, Broker, BrokerError, wait_until


# The broker's default log level without openraft's replication chatter.
QUIET_RAFT = ("info,openraft=warn,openraft::replication=off,"
              "openraft::engine::handler::replication_handler=off")


_GIVEN: set[int] = set()


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port():
    """A port on 127.0.0.1 that is free now and likely to stay free while its node is down (a
    restarted node binds the same ports). A kernel-chosen port (bind to 0) is not: once released
    it is back in the ephemeral range, where outgoing connections take it. So the port is drawn
    at random below the ephemeral range, checked by binding, and never handed out twice."""
    low, high = 10000, _ephemeral_low()
    for _ in range(200 if high > low + 1000 else 0):
        port = random.randrange(low, high)
        if port in _GIVEN:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _GIVEN.add(port)
        return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _GIVEN.add(port)
    return port


class ClusterNode(Broker):
    """One node: `--node-id`, a fixed `--listen` port and the cluster's voters."""

    def __init__(self, cluster: "Cluster", node_id: int, data_dir, log_path, overrides):
        super().__init__(data_dir, log_path, overrides=overrides, node_id=node_id,
                         name=f"node{node_id}")
        self.cluster = cluster
        self.kafka_port = free_port()

    def command(self):
        # Without an explicit RUST_LOG, quiet openraft's per-500 ms "peer unreachable" lines
        # while a node is down (they would fill the log tails shown on failure). `env` execs
        # the broker, so the pid signalled is still the broker's.
        prefix = [] if "RUST_LOG" in os.environ else ["env", f"RUST_LOG={QUIET_RAFT}"]
        args = prefix + [
            RUNNEL_BIN, "broker",
            "--node-id", str(self.node_id),
            "--listen", f"127.0.0.1:{self.kafka_port}",
            "--controller-quorum-voters", self.cluster.voters,
            "--data-dir", str(self.data_dir),
        ]
        args += self.extra_args
        for k, v in self.overrides.items():
            args += ["--override", f"{k}={v}"]
        return args

    @property
    def address(self):
        """The client address, also while the node is down."""
        return f"127.0.0.1:{self.kafka_port}"


class Cluster:
    """`n` nodes with ids 1..n under `root` (data in root/node-<id>, logs in root/node-<id>.log).

    `overrides` are Kafka broker properties passed to every node as `--override k=v`.
    """

    def __init__(self, root, n=3, overrides=None):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        controller_ports = [free_port() for _ in range(n)]
        self.voters = ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(controller_ports))
        self.nodes = {
            i: ClusterNode(self, i, self.root / f"node-{i}", self.root / f"node-{i}.log",
                           overrides or {})
            for i in range(1, n + 1)
        }

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self, timeout=START_TIMEOUT):
        """Starts every node at once (the quorum forms only when a majority is up) and waits
        until each listens."""
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            for f in [pool.submit(node.start, timeout) for node in self.nodes.values()]:
                f.result()
        return self

    def node(self, node_id) -> ClusterNode:
        return self.nodes[node_id]

    def kill9(self, node_id):
        return self.nodes[node_id].kill9()

    def sigterm(self, node_id):
        """SIGTERM (controlled shutdown) and wait; returns (returncode, graceful)."""
        return self.nodes[node_id].stop()

    def start_node(self, node_id, timeout=START_TIMEOUT):
        return self.nodes[node_id].start(timeout)

    def stop_all(self):
        for node in self.nodes.values():
            node.stop()

    def kill_all(self):
        for node in self.nodes.values():
            node.kill9()

    # ---- state -----------------------------------------------------------------------------

    @property
    def bootstrap(self):
        """Every node's client address, comma-separated."""
        return ",".join(n.address for n in self.nodes.values())

    def alive(self):
        return [i for i, n in self.nodes.items() if n.alive()]

    def describe(self):
        return "\n".join(n.describe() for n in self.nodes.values())

    def wait_all_brokers(self, admin, timeout=30.0):
        """Waits until the metadata lists every node as a live broker."""
        want = sorted(self.nodes)
        return wait_until(lambda: sorted(admin.list_topics(timeout=5).brokers) == want, timeout,
                          desc=f"brokers {want} in the metadata")


def partition_states(admin, topic, timeout=5.0):
    """{partition: (leader, replicas, sorted isr)} of `topic` from confluent-kafka's metadata,
    or None while the topic is unknown or a partition reports an error."""
    t = admin.list_topics(topic, timeout=timeout).topics.get(topic)
    if t is None or t.error is not None:
        return None
    out = {}
    for p, pm in t.partitions.items():
        if pm.error is not None:
            return None
        out[p] = (pm.leader, list(pm.replicas), sorted(pm.isrs))
    return out


class SequenceProducer(threading.Thread):
    """confluent-kafka's idempotent acks=all producer writing str(seq) to partition
    seq % partitions until `stop` is set, then flushing. Delivery reports fill `acked`
    {seq: (partition, offset)} and `failed` {seq: KafkaError}; a fatal error (an idempotent
    producer that cannot go on, e.g. after a sequence gap) lands in `fatal`."""

    def __init__(self, bootstrap, topic, partitions, interval=0.002, **conf):
        super().__init__(name="sequence-producer", daemon=True)
        from confluent_kafka import Producer

        from clients import ck_conf
        settings = {
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 60000,
            "request.timeout.ms": 10000,
            "retry.backoff.max.ms": 1000,
            "error_cb": self._on_error,
        }
        settings.update(conf)
        self.producer = Producer(ck_conf(bootstrap, **settings))
        self.topic = topic
        self.partitions = partitions
        self.interval = interval
        self.acked = {}
        self.failed = {}
        self.fatal = None
        self.sent = 0
        self.remaining = None
        self.stop = threading.Event()

    def _on_error(self, err):
        if err.fatal():
            self.fatal = err

    def _report(self, seq):
        def on_delivery(err, msg):
            if err is None:
                self.acked[seq] = (msg.partition(), msg.offset())
            else:
                self.failed[seq] = err
        return on_delivery

    def run(self):
        from confluent_kafka import KafkaException
        seq = 0
        try:
            while not self.stop.is_set() and self.fatal is None:
                try:
                    self.producer.produce(self.topic, value=str(seq).encode(),
                                          partition=seq % self.partitions,
                                          on_delivery=self._report(seq))
                    seq += 1
                except BufferError:
                    pass  # the queue is full while the cluster fails over: serve callbacks
                self.producer.poll(self.interval)
            self.sent = seq
            self.remaining = self.producer.flush(60)
        except KafkaException as exc:  # produce/poll/flush raise once the producer is fatal
            self.sent = seq
            try:
                self.producer.poll(0.1)  # serve error_cb, which carries the original error
            except KafkaException:
                pass
            self.fatal = self.fatal or exc.args[0]
            self.remaining = len(self.producer)

    def wait_progress(self, more, desc, timeout=30.0):
        """Waits until `more` further records were acknowledged; fails at once on a fatal
        producer error."""
        start = len(self.acked)
        wait_until(lambda: self.fatal is not None or len(self.acked) >= start + more, timeout,
                   interval=0.02, desc=desc)
        if self.fatal is not None:
            raise AssertionError(f"fatal producer error while waiting for {desc}: {self.fatal}")

    def finish(self, timeout=90.0):
        self.stop.set()
        self.join(timeout)
        if self.is_alive():
            raise AssertionError(f"the producer did not finish its flush in {timeout}s")


def check_sequences(consumed, acked, partitions):
    """Compares what a consumer read ({partition: [(offset, key, value, ts)]}) with the acked
    sequence numbers. Returns {"consumed", "missing", "duplicates", "disorder", "misplaced"}:
    counts and lists (missing acked seqs, seqs read more than once, (partition, a, b) where b
    followed a although produced earlier, (partition, seq) in the wrong partition)."""
    counts = Counter()
    disorder, misplaced = [], []
    for p, recs in consumed.items():
        seqs = [int(v) for _, _, v, _ in recs]
        disorder += [(p, a, b) for a, b in zip(seqs, seqs[1:]) if b <= a]
        misplaced += [(p, s) for s in seqs if s % partitions != p]
        counts.update(seqs)
    return {
        "consumed": sum(counts.values()),
        "missing": sorted(s for s in acked if s not in counts),
        "duplicates": sorted(s for s, n in counts.items() if n > 1),
        "disorder": disorder,
        "misplaced": misplaced,
    }


__all__ = ["Cluster", "ClusterNode", "BrokerError", "SequenceProducer", "check_sequences",
           "free_port", "partition_states"]
