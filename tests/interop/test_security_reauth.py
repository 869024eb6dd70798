"""KIP-368 re-authentication (`connections.max.reauth.ms`) and the authentication counters
(issue 14): SaslAuthenticate v1+ answers the session lifetime; a connection that has not
re-authenticated when its session expires is closed on its next request; re-authentication on
a live connection works (raw frames, and librdkafka through confluent-kafka, which
re-authenticates on its own); failures are counted (Runnel's describe request, Kafka's metric
names) and logged once per client address and principal."""

from __future__ import annotations

import json
import shutil
import socket
import struct
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition, OFFSET_BEGINNING

from clients import ck_conf, unique_topic
from harness import wait_until
from test_security_transport import JAAS, _closed, _frame, _recv, _string, certs, listener_port  # noqa: F401

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")

REAUTH_MS = 3000


def _broker(broker_factory, **extra):
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "connections.max.reauth.ms": str(REAUTH_MS),
    }
    overrides.update(extra)
    return broker_factory(overrides=overrides)


def _authenticate(s, user, password, corr=1):
    """SaslHandshake v1 + SaslAuthenticate v1 (PLAIN); returns (error, session_lifetime_ms)."""
    s.sendall(_frame(17, 1, corr, _string(b"PLAIN")))
    got_corr, err = struct.unpack_from(">ih", _recv(s))
    assert (got_corr, err) == (corr, 0)
    token = b"\0" + user + b"\0" + password
    s.sendall(_frame(36, 1, corr + 1, struct.pack(">i", len(token)) + token))
    body = _recv(s)
    got_corr, err, msg_len = struct.unpack_from(">ihh", body)
    assert got_corr == corr + 1
    at = 8 + max(msg_len, 0)
    (auth_len,) = struct.unpack_from(">i", body, at)
    at += 4 + max(auth_len, 0)
    if err != 0:
        return err, None
    (lifetime,) = struct.unpack_from(">q", body, at)
    return err, lifetime


def _api_versions(s, corr):
    """ApiVersions v0 answered? (False once the broker closed the connection.)"""
    try:
        s.sendall(_frame(18, 0, corr, b""))
        return struct.unpack_from(">ih", _recv(s)) == (corr, 0)
    except (ConnectionError, OSError):
        return False


def _stats(broker):
    body = json.dumps({"what": "security"}).encode()
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as s:
        s.sendall(_frame(32000, 0, 9, body))
        return json.loads(_recv(s)[4:])


def _sasl(broker):
    return socket.create_connection(("127.0.0.1", listener_port(broker, "SASL_PLAINTEXT")),
                                    timeout=10)


def test_session_lifetime_expiry_closes_on_next_request(broker_factory, certs):
    b = _broker(broker_factory)
    s = _sasl(b)
    started = time.monotonic()
    assert _authenticate(s, b"alice", b"alice-secret") == (0, REAUTH_MS)
    assert _api_versions(s, 3)
    before = _stats(b)["expired-connections-killed-count"]
    # Past the session's end (the condition is the clock itself), the next request closes it.
    time.sleep(max(0.0, REAUTH_MS / 1000 + 0.3 - (time.monotonic() - started)))
    assert not _api_versions(s, 4)
    assert _closed(s)
    assert _stats(b)["expired-connections-killed-count"] == before + 1
    # Without connections.max.reauth.ms sessions never expire and the lifetime is 0.


def test_no_lifetime_without_connections_max_reauth_ms(broker_factory, certs):
    b = _broker(broker_factory, **{"connections.max.reauth.ms": "0"})
    s = _sasl(b)
    assert _authenticate(s, b"alice", b"alice-secret") == (0, 0)
    assert _api_versions(s, 3)


def test_reauthentication_on_a_live_connection(broker_factory, certs):
    b = _broker(broker_factory)
    s = _sasl(b)
    started = time.monotonic()
    assert _authenticate(s, b"alice", b"alice-secret") == (0, REAUTH_MS)
    before = _stats(b)
    # Re-authenticate late in the first session (2 of its 3 s); the connection outlives it,
    # since the new session runs 3 s from the re-authentication.
    time.sleep(max(0.0, 2.0 - (time.monotonic() - started)))
    assert _authenticate(s, b"alice", b"alice-secret", corr=10) == (0, REAUTH_MS)
    time.sleep(max(0.0, REAUTH_MS / 1000 + 0.3 - (time.monotonic() - started)))
    assert _api_versions(s, 20), "the renewed session was closed at the old expiry"
    after = _stats(b)
    assert after["successful-reauthentication-total"] == \
        before["successful-reauthentication-total"] + 1
    # Another principal on re-authentication: SASL_AUTHENTICATION_FAILED, connection closed.
    assert _authenticate(s, b"admin", b"admin-secret", corr=30) == (58, None)
    assert _closed(s)
    assert _stats(b)["failed-reauthentication-total"] == after["failed-reauthentication-total"] + 1


def test_failures_counted_and_logged_once_per_address_and_principal(broker_factory, certs):
    b = _broker(broker_factory)
    before = _stats(b)["failed-authentication-total"]
    for _ in range(5):
        s = _sasl(b)
        assert _authenticate(s, b"alice", b"bad-pass-xyz")[0] == 58
        assert _closed(s)
    s = _sasl(b)
    assert _authenticate(s, b"mallory", b"bad-pass-xyz")[0] == 58
    assert _stats(b)["failed-authentication-total"] == before + 6
    log = b._log_since_start()
    assert log.count("authentication of User:alice failed") == 1, log[-3000:]
    assert log.count("authentication of User:mallory failed") == 1
    assert "bad-pass-xyz" not in log
    # Other connections are unaffected.
    s = _sasl(b)
    assert _authenticate(s, b"alice", b"alice-secret")[0] == 0


def _cli_counters(broker):
    """`runnel metadata --security`: the counters as name=value lines."""
    import subprocess

    from harness import RUNNEL_BIN
    out = subprocess.run([RUNNEL_BIN, "metadata", "--bootstrap-server", broker.bootstrap,
                          "--security"], check=True, capture_output=True, text=True, timeout=60)
    return {k: int(v) for k, v in (line.split("=", 1) for line in out.stdout.splitlines())}


def test_runnel_metadata_security_prints_the_counters(broker_factory, certs):
    b = _broker(broker_factory)
    before = _cli_counters(b)
    assert before == _stats(b)
    assert set(before) == {"failed-authentication-total", "successful-authentication-total",
                           "failed-reauthentication-total", "successful-reauthentication-total",
                           "expired-connections-killed-count"}
    s = _sasl(b)
    assert _authenticate(s, b"alice", b"wrong-password")[0] == 58
    s = _sasl(b)
    assert _authenticate(s, b"alice", b"alice-secret")[0] == 0
    after = _cli_counters(b)
    assert after["failed-authentication-total"] == before["failed-authentication-total"] + 1
    assert after["successful-authentication-total"] == \
        before["successful-authentication-total"] + 1


@pytest.mark.timeout(120)
def test_confluent_kafka_reauthenticates_and_keeps_producing(broker_factory, certs):
    b = _broker(broker_factory)
    conf = ck_conf(f"127.0.0.1:{listener_port(b, 'SASL_PLAINTEXT')}", **{
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.username": "alice", "sasl.password": "alice-secret"})
    topic = unique_topic("reauth")
    before = _stats(b)
    errors = []
    p = Producer(dict(conf, **{"acks": "all", "error_cb": errors.append}))
    sent = 0
    # Keep the connection busy across three session lifetimes: librdkafka re-authenticates
    # before each expiry, so no connection is closed by the broker.
    deadline = time.monotonic() + 3 * REAUTH_MS / 1000 + 1
    while time.monotonic() < deadline:
        p.produce(topic, str(sent).encode())
        sent += 1
        p.poll(0.05)
    assert p.flush(30) == 0
    after = _stats(b)
    assert after["successful-reauthentication-total"] >= \
        before["successful-reauthentication-total"] + 2, after
    assert after["expired-connections-killed-count"] == before["expired-connections-killed-count"]
    assert not [e for e in errors if "authentication" in str(e).lower()], errors
    c = Consumer(dict(conf, **{"group.id": "g", "enable.auto.commit": False}))
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = set()

    def all_read():
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.add(int(m.value()))
        return len(got) == sent
    wait_until(all_read, 60, interval=0, desc="every record read back")
    c.close()
