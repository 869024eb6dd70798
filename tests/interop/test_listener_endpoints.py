"""Every listener in the broker registration (issue 14): three nodes, each with a PLAINTEXT and
a SASL_PLAINTEXT listener on different ports. A client on SASL_PLAINTEXT is told every
broker's SASL_PLAINTEXT port (raw Metadata and DescribeCluster-backed admin metadata), and a
real producer bootstrapped from one node's SASL_PLAINTEXT port delivers to partitions led by
the other nodes. Before brokers registered all their listeners, node 1 named nodes 2 and 3 at
their PLAINTEXT (inter-broker) ports, where a SASL client cannot talk."""

from __future__ import annotations

import socket
import struct

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from clients import OP_TIMEOUT, ck_conf, unique_topic
from cluster import Cluster, free_port
from harness import wait_until
from test_security_transport import JAAS, _frame, _recv, _string

SASL = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
        "sasl.username": "alice", "sasl.password": "alice-secret"}


def _cluster(tmp_path):
    cluster = Cluster(tmp_path / "cluster", 3)
    for node in cluster.nodes.values():
        node.sasl_port = free_port()
        node.overrides = {
            "listeners": f"PLAINTEXT://127.0.0.1:{node.kafka_port},"
                         f"SASL_PLAINTEXT://127.0.0.1:{node.sasl_port}",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        }
    return cluster


def _authenticate(s):
    """SaslHandshake v1 + SaslAuthenticate v0 (PLAIN) as alice."""
    s.sendall(_frame(17, 1, 1, _string(b"PLAIN")))
    assert struct.unpack_from(">ih", _recv(s)) == (1, 0)
    token = b"\0alice\0alice-secret"
    s.sendall(_frame(36, 0, 2, struct.pack(">i", len(token)) + token))
    assert struct.unpack_from(">ih", _recv(s)) == (2, 0)


def _raw_metadata_brokers(port):
    """{node_id: (host, port)} of a Metadata v1 request (no topics) on `port`, SASL PLAIN."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        _authenticate(s)
        s.sendall(_frame(3, 1, 3, struct.pack(">i", 0)))
        body = _recv(s)
    corr, n = struct.unpack_from(">ii", body)
    assert corr == 3
    at, out = 8, {}
    for _ in range(n):
        node_id, host_len = struct.unpack_from(">ih", body, at)
        at += 6
        host = body[at:at + host_len].decode()
        at += host_len
        (bport, rack_len) = struct.unpack_from(">ih", body, at)
        at += 6 + max(rack_len, 0)
        out[node_id] = (host, bport)
    return out


def test_sasl_client_gets_every_brokers_sasl_endpoint(tmp_path):
    cluster = _cluster(tmp_path)
    try:
        cluster.start()
        sasl_of = {i: ("127.0.0.1", n.sasl_port) for i, n in cluster.nodes.items()}
        plain_of = {i: ("127.0.0.1", n.kafka_port) for i, n in cluster.nodes.items()}

        # Raw Metadata on every node's SASL listener names every broker's SASL port; the
        # PLAINTEXT listener keeps naming the PLAINTEXT ports.
        for node in cluster.nodes.values():
            wait_until(lambda: len(_raw_metadata_brokers(node.sasl_port)) == 3, timeout=60,
                       desc=f"three brokers in node {node.node_id}'s metadata")
            assert _raw_metadata_brokers(node.sasl_port) == sasl_of
        admin_plain = AdminClient(ck_conf(cluster.node(1).address))
        assert {i: (b.host, b.port) for i, b in
                admin_plain.list_topics(timeout=OP_TIMEOUT).brokers.items()} == plain_of

        # A real client bootstrapped from node 1's SASL port alone produces to partitions led
        # by every node (librdkafka dials the leaders at the ports Metadata named).
        bootstrap = f"127.0.0.1:{cluster.node(1).sasl_port}"
        admin = AdminClient(ck_conf(bootstrap, **SASL))
        assert {i: (b.host, b.port) for i, b in
                admin.list_topics(timeout=OP_TIMEOUT).brokers.items()} == sasl_of
        topic = unique_topic("endpoints")
        admin.create_topics([NewTopic(topic, 6, 1)])[topic].result(OP_TIMEOUT)

        def leaders():
            t = admin.list_topics(topic, timeout=5).topics.get(topic)
            if t is None or t.error is not None or len(t.partitions) != 6:
                return None
            if any(p.error is not None or p.leader < 0 for p in t.partitions.values()):
                return None
            return {p: pm.leader for p, pm in t.partitions.items()}
        wait_until(lambda: leaders() is not None, timeout=60, desc="six partitions led")
        led = leaders()
        assert set(led.values()) - {1}, f"every partition led by node 1: {led}"

        p = Producer(ck_conf(bootstrap, **SASL, acks="all", **{"message.timeout.ms": 30000}))
        delivered, failed = set(), []

        def report(err, msg):
            if err is None:
                delivered.add(msg.partition())
            else:
                failed.append(err)
        for part in led:
            p.produce(topic, value=f"v{part}".encode(), partition=part, on_delivery=report)
        assert p.flush(60) == 0
        assert not failed, failed
        assert delivered == set(led), (delivered, led)
    finally:
        cluster.kill_all()


def _metadata_v6(port, topic):
    """Metadata v6 for `topic` on `port` (SASL PLAIN): (broker ids, {partition: (error,
    leader)})."""
    name = topic.encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        _authenticate(s)
        s.sendall(_frame(3, 6, 3, struct.pack(">i", 1) + _string(name) + b"\x00"))
        body = _recv(s)
    at = 8  # correlation id, throttle_time_ms
    (n,) = struct.unpack_from(">i", body, at)
    at += 4
    brokers = []
    for _ in range(n):
        node_id, host_len = struct.unpack_from(">ih", body, at)
        at += 6 + host_len
        (_port, rack_len) = struct.unpack_from(">ih", body, at)
        at += 6 + max(rack_len, 0)
        brokers.append(node_id)
    (cluster_len,) = struct.unpack_from(">h", body, at)
    at += 2 + max(cluster_len, 0) + 4  # cluster id, controller id
    (topics,) = struct.unpack_from(">i", body, at)
    at += 4
    assert topics == 1
    _err, tlen = struct.unpack_from(">hh", body, at)
    at += 4 + tlen + 1
    (parts,) = struct.unpack_from(">i", body, at)
    at += 4
    out = {}
    for _ in range(parts):
        err, index, leader = struct.unpack_from(">hii", body, at)
        at += 10
        for _array in range(3):  # replicas, isr, offline
            (k,) = struct.unpack_from(">i", body, at)
            at += 4 + 4 * max(k, 0)
        out[index] = (err, leader)
    return sorted(brokers), out


def test_broker_without_the_listener_is_left_out(tmp_path):
    """Node 3 has no SASL_PLAINTEXT listener: a SASL client is not told of it, and a partition
    it leads has leader -1 with LISTENER_NOT_FOUND (72), as Kafka's MetadataCache."""
    cluster = _cluster(tmp_path)
    node3 = cluster.node(3)
    node3.overrides = {"listeners": f"PLAINTEXT://127.0.0.1:{node3.kafka_port}"}
    try:
        cluster.start()
        admin = AdminClient(ck_conf(cluster.node(1).address))
        cluster.wait_all_brokers(admin, timeout=60)
        topic = unique_topic("off-listener")
        admin.create_topics([NewTopic(topic, 2, replica_assignment=[[3], [1]])])[topic].result(
            OP_TIMEOUT)

        def led():
            t = admin.list_topics(topic, timeout=5).topics.get(topic)
            return (t is not None and t.error is None and len(t.partitions) == 2
                    and all(p.leader >= 0 for p in t.partitions.values()))
        wait_until(led, timeout=60, desc="both partitions led")
        brokers, parts = _metadata_v6(cluster.node(1).sasl_port, topic)
        assert brokers == [1, 2]
        assert parts == {0: (72, -1), 1: (0, 1)}
    finally:
        cluster.kill_all()
