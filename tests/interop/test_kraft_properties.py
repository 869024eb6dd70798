"""Kafka's KRaft combined-mode `server.properties` starts working Runnel nodes (issue 14):
`runnel broker --config server.properties` and nothing else. `node.id`, `log.dirs`,
`process.roles=broker,controller`, `listeners=PLAINTEXT://...,CONTROLLER://...` with
`controller.listener.names=CONTROLLER` (the CONTROLLER entry is bound as the quorum listener,
not as a Kafka listener), `controller.quorum.voters` or `controller.quorum.bootstrap.servers`
(with `runnel storage format --standalone` / `--initial-controllers`, as kafka-storage.sh)."""

from __future__ import annotations

import socket
import subprocess

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from clients import OP_TIMEOUT, ck_conf, unique_topic
from cluster import free_port
from harness import RUNNEL_BIN, Broker, wait_until


class PropertiesNode(Broker):
    """A node started as Kafka is: `runnel broker --config <server.properties>`."""

    def __init__(self, root, node_id, props_text):
        self.config_path = root / f"server-{node_id}.properties"
        self.config_path.write_text(props_text)
        super().__init__(root / f"node-{node_id}", root / f"node-{node_id}.log",
                         node_id=node_id, name=f"node{node_id}")

    def command(self):
        return [RUNNEL_BIN, "broker", "--config", str(self.config_path)]


def server_properties(node_id, kafka_port, controller_port, data_dir, quorum):
    """Kafka's config/server.properties (4.x, combined mode) with this node's values."""
    return f"""# Licensed to the Apache Software Foundation (ASF) ... (Kafka's sample, trimmed)
############################# Server Basics #############################
process.roles=broker,controller
node.id={node_id}
{quorum}

############################# Socket Server Settings #############################
listeners=PLAINTEXT://127.0.0.1:{kafka_port},CONTROLLER://127.0.0.1:{controller_port}
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://127.0.0.1:{kafka_port},CONTROLLER://127.0.0.1:{controller_port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600

############################# Log Basics #############################
log.dirs={data_dir}
num.partitions=1
num.recovery.threads.per.data.dir=1

############################# Internal Topic Settings  #############################
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1

############################# Log Retention Policy #############################
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""


def _listening(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def _round_trip(bootstrap, topic, replication):
    admin = AdminClient(ck_conf(bootstrap))
    admin.create_topics([NewTopic(topic, 1, replication)])[topic].result(OP_TIMEOUT)
    p = Producer(ck_conf(bootstrap, acks="all"))
    for i in range(3):
        p.produce(topic, value=f"v{i}".encode())
    assert p.flush(OP_TIMEOUT) == 0
    c = Consumer(ck_conf(bootstrap, **{"group.id": unique_topic("g"),
                                       "auto.offset.reset": "earliest"}))
    c.subscribe([topic])
    got = []
    try:
        def three():
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
            return len(got) >= 3
        wait_until(three, timeout=60, desc="three records consumed")
    finally:
        c.close()
    assert got == [b"v0", b"v1", b"v2"]
    return admin


def _format(node, *args):
    subprocess.run([RUNNEL_BIN, "storage", "format", "--config", str(node.config_path),
                    "--cluster-id", "J8qXRwI-Qyi2G0guFTiuYw", *args],
                   check=True, capture_output=True, timeout=60)


def _nodes(tmp_path, n, quorum_of):
    kafka = [free_port() for _ in range(n)]
    ctrl = [free_port() for _ in range(n)]
    nodes = []
    for i in range(n):
        text = server_properties(i + 1, kafka[i], ctrl[i], tmp_path / f"node-{i + 1}",
                                 quorum_of(ctrl))
        nodes.append(PropertiesNode(tmp_path, i + 1, text))
    return nodes, kafka, ctrl


def _start_all(nodes):
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(len(nodes)) as pool:
        for f in [pool.submit(n.start) for n in nodes]:
            f.result()


def test_one_node_with_static_voters(tmp_path):
    nodes, kafka, ctrl = _nodes(
        tmp_path, 1, lambda c: f"controller.quorum.voters=1@127.0.0.1:{c[0]}")
    try:
        _start_all(nodes)
        node = nodes[0]
        assert node.port == kafka[0]
        # The CONTROLLER entry is the quorum listener, not a Kafka listener.
        assert f"controller (quorum) listener bound address=127.0.0.1:{ctrl[0]}" in \
            node._log_since_start()
        assert "listener CONTROLLER" not in node._log_since_start()
        assert (tmp_path / "node-1" / "meta.properties").exists(), "log.dirs is the data dir"
        admin = _round_trip(f"127.0.0.1:{kafka[0]}", unique_topic("kraft1"), 1)
        md = admin.list_topics(timeout=OP_TIMEOUT)
        assert [(b.host, b.port) for b in md.brokers.values()] == [("127.0.0.1", kafka[0])]
    finally:
        for n in nodes:
            n.stop()


def test_one_node_with_bootstrap_servers_formatted_standalone(tmp_path):
    nodes, kafka, ctrl = _nodes(
        tmp_path, 1, lambda c: f"controller.quorum.bootstrap.servers=127.0.0.1:{c[0]}")
    try:
        _format(nodes[0], "--standalone")
        _start_all(nodes)
        _round_trip(f"127.0.0.1:{kafka[0]}", unique_topic("kraft1b"), 1)
    finally:
        for n in nodes:
            n.stop()


def test_three_nodes_with_static_voters(tmp_path):
    nodes, kafka, ctrl = _nodes(
        tmp_path, 3,
        lambda c: "controller.quorum.voters=" + ",".join(
            f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(c)))
    try:
        _start_all(nodes)
        bootstrap = ",".join(f"127.0.0.1:{p}" for p in kafka)
        admin = AdminClient(ck_conf(bootstrap))
        wait_until(lambda: sorted(admin.list_topics(timeout=5).brokers) == [1, 2, 3], 60,
                   desc="three brokers in the metadata")
        for p in ctrl:
            assert _listening(p), f"controller port {p}"
        _round_trip(bootstrap, unique_topic("kraft3"), 3)
    finally:
        for n in nodes:
            n.stop()


def test_three_nodes_with_bootstrap_servers_and_initial_controllers(tmp_path):
    dir_ids = [subprocess.run([RUNNEL_BIN, "storage", "random-uuid"], check=True,
                              capture_output=True, text=True, timeout=30).stdout.strip()
               for _ in range(3)]
    nodes, kafka, ctrl = _nodes(
        tmp_path, 3,
        lambda c: "controller.quorum.bootstrap.servers=" + ",".join(f"127.0.0.1:{p}" for p in c))
    initial = ",".join(f"{i + 1}@127.0.0.1:{p}:{d}" for i, (p, d) in enumerate(zip(ctrl, dir_ids)))
    try:
        for n in nodes:
            _format(n, "--initial-controllers", initial)
        _start_all(nodes)
        bootstrap = ",".join(f"127.0.0.1:{p}" for p in kafka)
        admin = AdminClient(ck_conf(bootstrap))
        wait_until(lambda: sorted(admin.list_topics(timeout=5).brokers) == [1, 2, 3], 60,
                   desc="three brokers in the metadata")
        _round_trip(bootstrap, unique_topic("kraft3b"), 3)
    finally:
        for n in nodes:
            n.stop()


def test_bootstrap_servers_of_several_controllers_need_a_format(tmp_path):
    nodes, _, _ = _nodes(
        tmp_path, 2,
        lambda c: "controller.quorum.bootstrap.servers=" + ",".join(f"127.0.0.1:{p}" for p in c))
    out = subprocess.run(nodes[0].command(), capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "initial-controllers" in out.stdout + out.stderr
