"""Authenticated traffic inside the cluster (issue 14): three nodes whose inter-broker listener
is SASL_SSL (PLAIN over TLS, certificates made by the test). The brokers' replica fetchers and
inter-broker calls authenticate with the broker's own credentials
(`sasl.mechanism.inter.broker.protocol`, the listener's `sasl.jaas.config` username/password,
the listener's trust store), and with the StandardAuthorizer only `User:broker` (a super user)
may fetch as a follower. Formation, replication to every replica, and failover.

The controller (Raft) listener can be secured too (`controller.listener.names` mapped to
SASL_SSL in `listener.security.protocol.map`): every node authenticates to the others' quorum
ports with `sasl.mechanism.controller.protocol` and the listener's JAAS username/password, and
a quorum frame sent without authenticating is refused (connection closed, nothing changes)."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import json
import struct

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from clients import ck_conf, unique_topic
from cluster import Cluster, partition_states
from conftest import _use
from harness import RUNNEL_BIN, wait_until
from test_security_transport import certs  # noqa: F401 (the certs fixture)

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="broker" password="broker-secret" '
        'user_broker="broker-secret" user_admin="admin-secret";')


CONTROLLER_SASL_SSL = {
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map":
        "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL",
    "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
    "listener.name.controller.plain.sasl.jaas.config": JAAS,
    "sasl.mechanism.controller.protocol": "PLAIN",
}


def _secure_cluster(tmp_path, request, certs, extra=None):
    cluster = Cluster(tmp_path / "cluster", 3)
    for node in cluster.nodes.values():
        node.overrides = {
            "listeners": f"PLAINTEXT://127.0.0.1:{node.kafka_port},SASL_SSL://127.0.0.1:0",
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(certs / "broker-keystore.pem"),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(certs / "ca.pem"),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:broker;User:admin",
            **(extra or {}),
        }
        _use(request, node)
    return cluster.start()


def _sasl_port(node):
    import re
    m = re.findall(r"listener SASL_SSL on 127\.0\.0\.1:(\d+)", node._log_since_start())
    return int(m[-1])


def _formation_replication_and_failover(cluster, certs, kill_quorum_leader=False):
    bootstrap = ",".join(f"127.0.0.1:{_sasl_port(n)}" for n in cluster.nodes.values())
    conf = ck_conf(bootstrap, **{
        "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
        "sasl.username": "admin", "sasl.password": "admin-secret",
        "ssl.ca.location": str(certs / "ca.pem")})
    from confluent_kafka.admin import AdminClient
    adm = AdminClient(conf)
    wait_until(lambda: sorted(adm.list_topics(timeout=5).brokers) == [1, 2, 3], 60,
               desc="three brokers registered")

    topic = unique_topic("sasl-ssl-repl")
    adm.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)],
                      operation_timeout=30)[topic].result(timeout=60)
    # A new partition's ISR is all of its replicas; the acks=all writes below are what need the
    # followers to fetch (over SASL_SSL as User:broker): without inter-broker authentication
    # they fail (checked by disabling it: the flush times out with all 50 records unsent).
    states = wait_until(
        lambda: (s := partition_states(adm, topic)) and s[0][2] == [1, 2, 3] and s, 60,
        desc="ISR of all three replicas")
    leader = states[0][0]

    p = Producer(dict(conf, **{"acks": "all", "enable.idempotence": True}))
    for i in range(50):
        p.produce(topic, str(i).encode())
    assert p.flush(30) == 0

    if kill_quorum_leader:
        # The active controller (quorum leader) goes: the survivors must elect a new one over
        # the secured controller listener before anything below can be decided.
        leader = int(_quorum_status(cluster.node(1))["LeaderId"])
    cluster.kill9(leader)
    wait_until(lambda: (s := partition_states(adm, topic)) and s[0][0] not in (leader, -1), 60,
               desc="a new leader after the kill")
    p = Producer(dict(conf, **{"acks": "all"}))
    for i in range(50, 60):
        p.produce(topic, str(i).encode())
    assert p.flush(30) == 0

    c = Consumer(dict(conf, **{"group.id": "g", "enable.auto.commit": False}))
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = []

    def all_read():
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            got.append(int(m.value()))
        return sorted(set(got)) == list(range(60))
    wait_until(all_read, 60, interval=0, desc="all 60 records after the failover")
    c.close()


@pytest.mark.timeout(180)
def test_sasl_ssl_inter_broker_formation_replication_and_failover(tmp_path, request, certs):
    cluster = _secure_cluster(tmp_path, request, certs)
    _formation_replication_and_failover(cluster, certs)


def _quorum_status(node):
    """`runnel metadata-quorum --describe --status` against the node's PLAINTEXT listener, as
    a dict of its keys."""
    out = subprocess.run([RUNNEL_BIN, "metadata-quorum", "--bootstrap-server", node.address,
                          "--describe", "--status"], capture_output=True, text=True, timeout=20)
    return dict(re.findall(r"^(\w+):\s+(.*?)\s*$", out.stdout, re.M))


def _cluster_id(node):
    text = (node.data_dir / "meta.properties").read_text()
    return re.search(r"^cluster\.id=(\S+)$", text, re.M).group(1)


def _raw_quorum_frame(port, body, ca=None):
    """Sends one length-prefixed quorum frame without authenticating (over TLS trusting `ca`
    when given, so only SASL is skipped); returns what came back before the node closed the
    connection (b"" if nothing)."""
    data = json.dumps(body).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        s = raw
        if ca is not None:
            import ssl
            s = ssl.create_default_context(cafile=str(ca)).wrap_socket(
                raw, server_hostname="127.0.0.1")
        s.sendall(struct.pack(">I", len(data)) + data)
        got = b""
        try:
            while chunk := s.recv(65536):
                got += chunk
        except (ConnectionResetError, OSError):
            pass
        return got


@pytest.mark.timeout(240)
def test_sasl_ssl_controller_listener(tmp_path, request, certs):
    """Controller AND inter-broker listeners SASL_SSL: the quorum forms (every Raft RPC and
    controller RPC authenticated), replicates, and survives a kill -9 of the quorum leader;
    an unauthenticated, well-formed Join frame with the right cluster id is refused (the
    connection closed without an answer) and the quorum's observers stay unchanged."""
    # The test's own tools (metadata-quorum, the describe request) use the PLAINTEXT listener.
    tools = {"super.users": "User:broker;User:admin;User:ANONYMOUS"}
    cluster = _secure_cluster(tmp_path, request, certs, {**CONTROLLER_SASL_SSL, **tools})
    for node in cluster.nodes.values():
        assert "controller listener CONTROLLER: SASL_SSL" in node._log_since_start()
    wait_until(lambda: _quorum_status(cluster.node(1)).get("LeaderId", "-1") not in ("-1", ""),
               60, desc="a quorum leader over SASL_SSL")
    cluster_id = _cluster_id(cluster.node(1))
    ports = [int(a.rsplit(":", 1)[1]) for a in cluster.voters.split(",")]
    join = {"cluster_id": cluster_id,
            "request": {"Join": {"node_id": 99, "address": "127.0.0.1:1"}}}
    for port in ports:
        # Plain TCP on the TLS port: the TLS layer answers with an alert record (content type
        # 21) at most, never a quorum response.
        got = _raw_quorum_frame(port, join)
        assert got == b"" or got[0] == 21, f"an unauthenticated frame was answered: {got!r}"
        # TLS done but no SASL: the frame is not a SASL request, so the connection is closed
        # without an answer.
        assert _raw_quorum_frame(port, join, ca=certs / "ca.pem") == b""
    status = _quorum_status(cluster.node(1))
    assert "99" not in status.get("CurrentObservers", ""), status
    # The refusals were counted (Runnel's describe request, Kafka's metric name).
    assert sum(_security_stats(n)["failed-authentication-total"]
               for n in cluster.nodes.values()) >= 2 * len(ports)
    _formation_replication_and_failover(cluster, certs, kill_quorum_leader=True)
    status = _quorum_status(next(n for n in cluster.nodes.values() if n.alive()))
    assert "99" not in status.get("CurrentObservers", ""), status


def _security_stats(node):
    """Runnel's describe request ({"what": "security"}, api key 32000) on the node's
    PLAINTEXT listener: its authentication counters."""
    body = json.dumps({"what": "security"}).encode()
    client_id = b"test"
    header = struct.pack(">hhih", 32000, 0, 7, len(client_id)) + client_id
    frame = header + body
    with socket.create_connection(("127.0.0.1", node.kafka_port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", _recv_exact(s, 4))[0]
        resp = _recv_exact(s, size)
    # correlation id, then the JSON body.
    return json.loads(resp[4:])


def _recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, "connection closed"
        buf += chunk
    return buf
