"""Security on the wire (issue 14): named listeners, SASL/PLAIN over SASL_PLAINTEXT and
SASL_SSL, TLS with client certificates (mTLS), and Kafka's failure behaviour: a wrong password
answers SASL_AUTHENTICATION_FAILED (58) and closes only that connection; nothing but
ApiVersions/SaslHandshake/SaslAuthenticate is served before authentication.

Certificates are made by the test itself with the openssl CLI (a CA, the broker, a client)."""

from __future__ import annotations

import re
import shutil
import socket
import struct
import subprocess

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from clients import OP_TIMEOUT, ck_conf, unique_topic
from harness import wait_until

LISTENER_RE = re.compile(r"listener (\S+) on 127\.0\.0\.1:(\d+)")
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret" user_admin="admin-secret";')

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test-ca",
             "-keyout", "ca.key", "-out", "ca.pem", cwd=d)
    for name, subject in [("broker", "/CN=localhost"), ("client", "/O=Runnel/CN=alice")]:
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject,
                 "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
        (d / f"{name}.ext").write_text(
            "subjectAltName=DNS:localhost,IP:127.0.0.1\n" if name == "broker"
            else "extendedKeyUsage=clientAuth\n")
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext",
                 "-out", f"{name}.pem", cwd=d)
    # Kafka's PEM keystore: the key and the chain in one file.
    (d / "broker-keystore.pem").write_text((d / "broker.key").read_text() + (d / "broker.pem").read_text())
    return d


def listener_port(broker, name):
    ports = dict((n, int(p)) for n, p in LISTENER_RE.findall(broker._log_since_start()))
    return ports[name]


def secure_broker(broker_factory, certs, **extra):
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,"
                     "SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs / "broker-keystore.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs / "ca.pem"),
        "listener.name.ssl.ssl.client.auth": "required",
    }
    overrides.update(extra)
    return broker_factory(overrides=overrides)


def _round_trip(conf, topic):
    """Produces three records and reads them back in a group over `conf`'s connection."""
    p = Producer(dict(conf))
    for i in range(3):
        p.produce(topic, key=b"k", value=f"v{i}".encode())
    assert p.flush(OP_TIMEOUT) == 0
    c = Consumer(dict(conf, **{"group.id": unique_topic("g"), "auto.offset.reset": "earliest"}))
    c.subscribe([topic])
    got = []
    try:
        def three():
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
            return len(got) >= 3
        wait_until(three, timeout=30, desc="three records consumed")
    finally:
        c.close()
    assert got == [b"v0", b"v1", b"v2"]


def test_sasl_plain_over_plaintext_and_ssl_with_confluent_kafka(broker_factory, certs):
    b = secure_broker(broker_factory, certs, **{"auto.create.topics.enable": "true"})
    plain = ck_conf(f"127.0.0.1:{listener_port(b, 'SASL_PLAINTEXT')}",
                    **{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                       "sasl.username": "alice", "sasl.password": "alice-secret"})
    md = AdminClient(plain).list_topics(timeout=OP_TIMEOUT)
    # Metadata answers the endpoint of the listener the client used.
    assert [(x.host, x.port) for x in md.brokers.values()] == [
        ("127.0.0.1", listener_port(b, "SASL_PLAINTEXT"))]
    _round_trip(plain, unique_topic("sasl-plain"))
    over_tls = ck_conf(f"localhost:{listener_port(b, 'SASL_SSL')}",
                       **{"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                          "sasl.username": "admin", "sasl.password": "admin-secret",
                          "ssl.ca.location": str(certs / "ca.pem")})
    _round_trip(over_tls, unique_topic("sasl-ssl"))


def test_mtls_with_confluent_kafka_and_kafka_python(broker_factory, certs):
    b = secure_broker(broker_factory, certs)
    port = listener_port(b, "SSL")
    conf = ck_conf(f"localhost:{port}", **{
        "security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem"),
        "ssl.certificate.location": str(certs / "client.pem"),
        "ssl.key.location": str(certs / "client.key")})
    _round_trip(conf, unique_topic("mtls"))
    # ssl.client.auth=required: no certificate, no connection.
    no_cert = ck_conf(f"localhost:{port}", **{
        "security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem")})
    with pytest.raises(KafkaException):
        AdminClient(no_cert).list_topics(timeout=5)

    from kafka import KafkaAdminClient
    adm = KafkaAdminClient(bootstrap_servers=f"localhost:{port}", security_protocol="SSL",
                           ssl_cafile=str(certs / "ca.pem"), ssl_certfile=str(certs / "client.pem"),
                           ssl_keyfile=str(certs / "client.key"), request_timeout_ms=10000)
    try:
        assert isinstance(adm.list_topics(), list)
    finally:
        adm.close()


def test_kafka_python_sasl_plain(broker_factory, certs):
    from kafka import KafkaConsumer, KafkaProducer
    b = secure_broker(broker_factory, certs)
    bootstrap = f"127.0.0.1:{listener_port(b, 'SASL_PLAINTEXT')}"
    auth = dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                sasl_plain_username="alice", sasl_plain_password="alice-secret")
    topic = unique_topic("kp-sasl")
    p = KafkaProducer(bootstrap_servers=bootstrap, **auth)
    p.send(topic, b"hello").get(timeout=OP_TIMEOUT)
    p.close()
    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                      consumer_timeout_ms=15000, **auth)
    try:
        assert [m.value for m in c][:1] == [b"hello"]
    finally:
        c.close()


# ---- raw frames: Kafka's failure behaviour ------------------------------------------------

def _frame(api_key, version, corr, body):
    header = struct.pack(">hhih", api_key, version, corr, 4) + b"test"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def _recv(s):
    def exact(n):
        buf = b""
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return buf
    (size,) = struct.unpack(">i", exact(4))
    return exact(size)


def _closed(s):
    s.settimeout(10)
    try:
        return s.recv(1) == b""
    except ConnectionError:
        return True


def _string(text):
    return struct.pack(">h", len(text)) + text


def test_wrong_password_answers_58_and_closes_only_that_connection(broker_factory, certs):
    b = secure_broker(broker_factory, certs)
    port = listener_port(b, "SASL_PLAINTEXT")
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(_frame(17, 1, 1, _string(b"PLAIN")))
    corr, err, n = struct.unpack_from(">ihi", _recv(s))
    assert (corr, err, n) == (1, 0, 1)
    token = b"\0alice\0not-the-password"
    s.sendall(_frame(36, 1, 2, struct.pack(">i", len(token)) + token))
    body = _recv(s)
    corr, err, msg_len = struct.unpack_from(">ihh", body)
    message = body[8:8 + msg_len].decode()
    assert (corr, err) == (2, 58), message
    assert "not-the-password" not in message
    assert _closed(s)
    # Logged once, with the address and the principal; never the secret.
    wait_until(lambda: "authentication of User:alice failed" in b._log_since_start(),
               timeout=10, desc="the failure logged")
    log = b._log_since_start()
    assert log.count("authentication of User:alice failed") == 1
    assert "not-the-password" not in log

    # Before authentication only the SASL APIs and ApiVersions are served: Metadata closes it.
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(_frame(18, 0, 3, b""))
    assert struct.unpack_from(">ih", _recv(s)) == (3, 0)
    s.sendall(_frame(3, 1, 4, struct.pack(">i", -1)))
    assert _closed(s)

    # The other listeners (and the right password) still work.
    ok = ck_conf(f"127.0.0.1:{port}", **{"security.protocol": "SASL_PLAINTEXT",
                                          "sasl.mechanism": "PLAIN", "sasl.username": "alice",
                                          "sasl.password": "alice-secret"})
    assert AdminClient(ok).list_topics(timeout=OP_TIMEOUT).brokers
    bad = dict(ok, **{"sasl.password": "wrong"})
    with pytest.raises(KafkaException):
        AdminClient(bad).list_topics(timeout=5)
    assert AdminClient(ck_conf(b.bootstrap)).list_topics(timeout=OP_TIMEOUT).brokers


# ---- SCRAM (credentials through KIP-554, stored salted in the metadata) --------------------

def test_scram_sha_512_over_sasl_ssl_with_confluent_kafka_and_kafka_python(broker_factory, certs):
    from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)
    b = secure_broker(broker_factory, certs, **{
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN"})
    adm = AdminClient(ck_conf(b.bootstrap))
    fs = adm.alter_user_scram_credentials([
        UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                     b"bob-secret", b"some-salt-bytes"),
        UserScramCredentialUpsertion("weak", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 10),
                                     b"x"),
    ])
    fs["bob"].result(timeout=OP_TIMEOUT)
    with pytest.raises(KafkaException):  # fewer than 4096 iterations: UNACCEPTABLE_CREDENTIAL
        fs["weak"].result(timeout=OP_TIMEOUT)
    described = adm.describe_user_scram_credentials(["bob"])["bob"].result(timeout=OP_TIMEOUT)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 8192)]
    # Never the password in the broker's log.
    assert "bob-secret" not in b._log_since_start()

    port = listener_port(b, "SASL_SSL")
    scram = ck_conf(f"localhost:{port}", **{
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "bob", "sasl.password": "bob-secret",
        "ssl.ca.location": str(certs / "ca.pem")})
    _round_trip(scram, unique_topic("scram"))
    with pytest.raises(KafkaException):
        AdminClient(dict(scram, **{"sasl.password": "nope"})).list_topics(timeout=5)

    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=f"localhost:{port}", security_protocol="SASL_SSL",
                      sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="bob",
                      sasl_plain_password="bob-secret", ssl_cafile=str(certs / "ca.pem"))
    try:
        p.send(unique_topic("scram-kp"), b"x").get(timeout=OP_TIMEOUT)
    finally:
        p.close()


def test_add_scram_bootstraps_a_user_without_resetting_a_changed_password(broker_factory, certs, tmp_path):
    from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)
    b = broker_factory(overrides={
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256"},
        extra_args=["--add-scram", "SCRAM-SHA-256=[name=carol,password=carol-secret,iterations=8192]"],
        data_dir=tmp_path / "scram-data")

    def conf(password):
        return ck_conf(f"127.0.0.1:{listener_port(b, 'SASL_PLAINTEXT')}", **{
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "carol", "sasl.password": password})

    wait_until(lambda: AdminClient(conf("carol-secret")).list_topics(timeout=3).brokers,
               timeout=30, desc="the bootstrap user authenticates")
    assert "carol-secret" not in b._log_since_start()
    adm = AdminClient(ck_conf(b.bootstrap))  # kept alive until the result is in
    adm.alter_user_scram_credentials([
        UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                     b"changed")])["carol"].result(timeout=OP_TIMEOUT)
    b.restart()
    wait_until(lambda: AdminClient(conf("changed")).list_topics(timeout=3).brokers,
               timeout=30, desc="the changed password still works after a restart")
    with pytest.raises(KafkaException):
        AdminClient(conf("carol-secret")).list_topics(timeout=3)


def test_runnel_configs_manages_scram_users(broker_factory, certs):
    import subprocess as sp
    from harness import RUNNEL_BIN
    b = broker_factory(overrides={
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512"})

    def configs(*args):
        return sp.run([RUNNEL_BIN, "configs", "--bootstrap-server", b.bootstrap,
                       "--entity-type", "users", *args],
                      capture_output=True, text=True, timeout=60, check=True).stdout

    out = configs("--entity-name", "dana", "--alter", "--add-config",
                  "SCRAM-SHA-512=[iterations=8192,password=dana-secret]")
    assert out.strip() == "Completed updating config for user dana."
    assert configs("--describe", "--entity-name", "dana").strip() == (
        "SCRAM credential configs for user-principal 'dana' are SCRAM-SHA-512=iterations=8192")
    conf = ck_conf(f"127.0.0.1:{listener_port(b, 'SASL_PLAINTEXT')}", **{
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "dana", "sasl.password": "dana-secret"})
    assert AdminClient(conf).list_topics(timeout=OP_TIMEOUT).brokers
    configs("--entity-name", "dana", "--alter", "--delete-config", "SCRAM-SHA-512")
    assert configs("--describe", "--entity-name", "dana").strip() == ""
    with pytest.raises(KafkaException):
        AdminClient(conf).list_topics(timeout=3)
