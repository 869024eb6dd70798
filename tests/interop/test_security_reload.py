"""Certificate reload without a restart (issue 14): a TLS listener re-reads its PEM key store
when the file changes (modification time or size, checked on each new connection); a new
connection sees the new certificate, and a broken file keeps the previous one."""

from __future__ import annotations

import os
import shutil
import socket
import ssl

import pytest

from harness import wait_until
from test_security_transport import _openssl, certs, listener_port  # noqa: F401

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")


def _second_broker_cert(certs, d):
    """Another broker certificate (CN=rotated) signed by the same CA, as a PEM key store."""
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=rotated",
             "-keyout", "rotated.key", "-out", "rotated.csr", cwd=d)
    (d / "rotated.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", "rotated.csr", "-CA", str(certs / "ca.pem"),
             "-CAkey", str(certs / "ca.key"), "-CAcreateserial", "-days", "2",
             "-extfile", "rotated.ext", "-out", "rotated.pem", cwd=d)
    return (d / "rotated.key").read_text() + (d / "rotated.pem").read_text()


def _peer_subject(port, ca):
    ctx = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            return dict(x[0] for x in s.getpeercert()["subject"])["commonName"]


def _replace(path, text):
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def test_replaced_keystore_is_served_to_new_connections(broker_factory, certs, tmp_path):
    keystore = tmp_path / "keystore.pem"
    keystore.write_text((certs / "broker-keystore.pem").read_text())
    b = broker_factory(overrides={
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
    })
    port = listener_port(b, "SSL")
    assert _peer_subject(port, certs / "ca.pem") == "localhost"
    _replace(keystore, _second_broker_cert(certs, tmp_path))
    wait_until(lambda: _peer_subject(port, certs / "ca.pem") == "rotated", 10,
               desc="the new certificate on a new connection")
    assert "reloaded" in b._log_since_start()
    # A broken replacement is refused; the listener keeps serving the last good certificate.
    _replace(keystore, "not a pem file\n")
    assert _peer_subject(port, certs / "ca.pem") == "rotated"
    wait_until(lambda: "cannot be loaded" in b._log_since_start(), 10, desc="the warning")


def _peer_cert(port, ca):
    """(commonName, serialNumber) of the certificate a new connection to `port` gets."""
    ctx = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            cert = s.getpeercert()
            return dict(x[0] for x in cert["subject"])["commonName"], cert["serialNumber"]


def test_alter_configs_of_the_keystore_location_is_used_by_new_connections(
        broker_factory, certs, tmp_path):
    """kafka-configs --entity-type brokers --entity-name 1 --alter --add-config
    listener.name.ssl.ssl.keystore.location=NEW: the listener serves the new file to new
    connections, without a restart (Kafka's dynamic SSL reconfiguration)."""
    import subprocess

    from harness import RUNNEL_BIN

    b = broker_factory(overrides={
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs / "broker-keystore.pem"),
    })
    port = listener_port(b, "SSL")
    before = _peer_cert(port, certs / "ca.pem")
    assert before[0] == "localhost"
    rotated = tmp_path / "rotated-keystore.pem"
    rotated.write_text(_second_broker_cert(certs, tmp_path))
    subprocess.run([RUNNEL_BIN, "configs", "--bootstrap-server", b.bootstrap,
                    "--entity-type", "brokers", "--entity-name", "1", "--alter",
                    "--add-config", f"listener.name.ssl.ssl.keystore.location={rotated}"],
                   check=True, capture_output=True, text=True, timeout=60)
    wait_until(lambda: _peer_cert(port, certs / "ca.pem")[0] == "rotated", 10,
               desc="the new certificate on a new connection")
    after = _peer_cert(port, certs / "ca.pem")
    assert after[1] != before[1], "another certificate (serial)"
    # Deleting the dynamic value goes back to the static file.
    subprocess.run([RUNNEL_BIN, "configs", "--bootstrap-server", b.bootstrap,
                    "--entity-type", "brokers", "--entity-name", "1", "--alter",
                    "--delete-config", "listener.name.ssl.ssl.keystore.location"],
                   check=True, capture_output=True, text=True, timeout=60)
    wait_until(lambda: _peer_cert(port, certs / "ca.pem") == before, 10,
               desc="the static certificate again")
