"""`sasl.server.max.receive.size` (issue 14; Kafka's default 524288): before a connection's
first authentication on a SASL listener, a frame announcing more than that is refused as a
failed authentication and the connection closed without its body being read (Kafka's
`SaslServerAuthenticator`: "invalid receive size"); after authentication, and on a listener
without SASL, `socket.request.max.bytes` is the only bound."""

from __future__ import annotations

import shutil
import socket
import struct

import pytest

from test_security_reauth import _authenticate, _stats
from test_security_transport import JAAS, _frame, _recv, _string, listener_port

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")

BIG = 600 * 1024


def _uvarint(n):
    out = b""
    while n >= 0x80:
        out += bytes([(n & 0x7F) | 0x80])
        n >>= 7
    return out + bytes([n])


def _big_api_versions(corr):
    """An ApiVersions v3 request of about BIG bytes (its client_software_name is long)."""
    header = struct.pack(">hhih", 18, 3, corr, 4) + b"test" + b"\0"
    name = b"a" * BIG
    body = _uvarint(len(name) + 1) + name + _uvarint(len(b"1.0") + 1) + b"1.0" + b"\0"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def _answered(s, corr):
    (got,) = struct.unpack_from(">i", _recv(s))
    return got == corr


def _closed_within(s, seconds):
    """True once the broker closes `s` (EOF or reset) within `seconds`; False if it keeps it open."""
    s.settimeout(seconds)
    try:
        return s.recv(1) == b""
    except ConnectionError:
        return True
    except socket.timeout:
        return False


def _broker(broker_factory):
    return broker_factory(overrides={
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    })


def test_an_oversized_frame_before_authentication_is_refused_unread(broker_factory):
    b = _broker(broker_factory)
    port = listener_port(b, "SASL_PLAINTEXT")
    before = _stats(b)["failed-authentication-total"]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(_frame(17, 1, 1, _string(b"PLAIN")))
        assert struct.unpack_from(">ih", _recv(s)) == (1, 0)
        # Only the size prefix: the broker must close without waiting for (or allocating) the
        # 600 KB it announces. Without the limit it waits for the body until
        # connections.max.idle.ms (10 minutes).
        s.sendall(struct.pack(">i", BIG))
        assert _closed_within(s, 10), "the broker waited for a 600 KB unauthenticated frame"
    assert _stats(b)["failed-authentication-total"] == before + 1
    assert "sasl.server.max.receive.size" in b._log_since_start()

    # The same frame after authentication is served.
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        assert _authenticate(s, b"alice", b"alice-secret") == (0, 0)
        s.sendall(_big_api_versions(5))
        assert _answered(s, 5)

    # A listener without SASL reads it before anything else.
    with socket.create_connection(("127.0.0.1", b.port), timeout=10) as s:
        s.sendall(_big_api_versions(7))
        assert _answered(s, 7)


def test_the_limit_is_listener_prefixable(broker_factory):
    b = broker_factory(overrides={
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_plaintext.sasl.server.max.receive.size": "64",
    })
    with socket.create_connection(("127.0.0.1", listener_port(b, "SASL_PLAINTEXT")),
                                  timeout=10) as s:
        # A 100-byte SaslHandshake is over this listener's 64 bytes.
        s.sendall(_frame(17, 1, 1, _string(b"P" * 80)))
        assert _closed_within(s, 10)
