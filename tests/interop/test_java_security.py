"""The Java client (kafka-clients 3.9.1) over every secured listener kind (issue 14): the
security scenarios of tests/java/src/runnel/interop/SecurityScenarios.java, each given a client
properties file in Kafka's own names (security.protocol, sasl.mechanism, sasl.jaas.config,
ssl.truststore.type=PEM, ssl.keystore.type=PEM ...).

* SASL_SSL with SCRAM-SHA-512, SASL_PLAINTEXT with PLAIN, SSL with a client certificate: admin
  (create a topic, describe the cluster, a group's committed offsets, end offsets), produce
  with acks=all, consume in a group and commit.
* A wrong password: SaslAuthenticationException (SASL_AUTHENTICATION_FAILED) from the admin and
  the producer, for SCRAM and PLAIN.
* A user without ACLs: TopicAuthorizationException (produce, create), the topic hidden from
  listTopics; after `runnel acls --add --producer` a group commit is GroupAuthorizationException;
  after `--consumer --group` the whole round trip passes.

Certificates come from test_security_transport's fixture (openssl CLI)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from clients import unique_topic
from harness import RUNNEL_BIN
from java_client import run_java
from test_security_transport import certs, listener_port, secure_broker  # noqa: F401

pytestmark = [
    pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI"),
    pytest.mark.skipif(shutil.which("java") is None, reason="needs a JDK"),
]

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def runnel(*args):
    p = subprocess.run([RUNNEL_BIN, *args], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, f"runnel {' '.join(args)}: {p.stderr}"
    return p.stdout


@pytest.fixture(scope="module")
def java_keystore(certs):
    """The client's PEM keystore for Java (key and certificate chain in one file)."""
    path = certs / "client-keystore.pem"
    path.write_text((certs / "client.key").read_text() + (certs / "client.pem").read_text())
    return path


def broker(broker_factory, certs, **extra):
    b = secure_broker(broker_factory, certs, **{
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN", **extra})
    runnel("configs", "--bootstrap-server", b.bootstrap, "--entity-type", "users",
           "--entity-name", "bob", "--alter", "--add-config",
           "SCRAM-SHA-512=[iterations=8192,password=bob-secret]")
    return b


def client_config(tmp_path, b, certs, keystore, mode, password=None):
    """(bootstrap, path of the Java client properties) for `mode`."""
    trust = {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs / "ca.pem")}
    if mode == "sasl_ssl-scram-sha-512":
        props = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                 "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
                                     f'required username="bob" password="{password or "bob-secret"}";',
                 **trust}
        bootstrap = f"localhost:{listener_port(b, 'SASL_SSL')}"
    elif mode == "sasl_plaintext-plain":
        props = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                 "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
                                     f'required username="alice" password="{password or "alice-secret"}";'}
        bootstrap = f"127.0.0.1:{listener_port(b, 'SASL_PLAINTEXT')}"
    else:
        assert mode == "ssl-mtls"
        props = {"security.protocol": "SSL", "ssl.keystore.type": "PEM",
                 "ssl.keystore.location": str(keystore), **trust}
        bootstrap = f"localhost:{listener_port(b, 'SSL')}"
    path = tmp_path / f"{mode}-{password or 'ok'}.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return bootstrap, path


@pytest.mark.parametrize("mode", ["sasl_ssl-scram-sha-512", "sasl_plaintext-plain", "ssl-mtls"])
def test_java_admin_produce_and_group_consume(broker_factory, certs, java_keystore, tmp_path, mode):
    b = broker(broker_factory, certs)
    bootstrap, config = client_config(tmp_path, b, certs, java_keystore, mode)
    run_java("security-round-trip", bootstrap, 1, config=config,
             topic=unique_topic(f"java-{mode}"))


@pytest.mark.parametrize("mode", ["sasl_ssl-scram-sha-512", "sasl_plaintext-plain"])
def test_java_wrong_password_is_sasl_authentication_exception(broker_factory, certs, java_keystore,
                                                              tmp_path, mode):
    b = broker(broker_factory, certs)
    bootstrap, config = client_config(tmp_path, b, certs, java_keystore, mode,
                                      password="wrong-password")
    run_java("security-auth-fails", bootstrap, 1, config=config)


def test_java_denied_without_acls_then_allowed_after_runnel_acls_add(broker_factory, certs,
                                                                     java_keystore, tmp_path):
    # ANONYMOUS (the PLAINTEXT listener) administers; alice (SASL PLAIN) has no ACLs.
    b = broker(broker_factory, certs, **{"authorizer.class.name": STANDARD,
                                         "super.users": "User:ANONYMOUS"})
    topic, group = unique_topic("java-denied"), unique_topic("java-denied-g")
    runnel("topics", "--bootstrap-server", b.bootstrap, "--create", "--topic", topic,
           "--partitions", "1", "--replication-factor", "1")
    bootstrap, config = client_config(tmp_path, b, certs, java_keystore, "sasl_plaintext-plain")
    run_java("security-denied", bootstrap, 1, config=config, topic=topic)
    runnel("acls", "--bootstrap-server", b.bootstrap, "--add", "--allow-principal", "User:alice",
           "--producer", "--topic", topic)
    # The topic is allowed now (Describe comes with --producer), the group is not.
    run_java("security-group-denied", bootstrap, 1, config=config, topic=topic, group=group)
    runnel("acls", "--bootstrap-server", b.bootstrap, "--add", "--allow-principal", "User:alice",
           "--consumer", "--topic", topic, "--group", group)
    run_java("security-round-trip", bootstrap, 1, config=config, topic=topic, group=group,
             create="false")
