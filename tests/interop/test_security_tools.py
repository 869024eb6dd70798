"""The project's own client over TLS and SASL (issue 14): every `runnel` tool takes Kafka's
`--command-config FILE` (security.protocol, sasl.mechanism, sasl.jaas.config or
sasl.username/sasl.password, ssl.ca.location / ssl.truststore.location, a client keystore for
mTLS); `runnel acls` adds, lists and removes ACLs with kafka-acls.sh's flags and output, and a
user denied before `runnel acls --add` is allowed after it.

Certificates are made by the test with the openssl CLI (test_security_transport's fixture)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from clients import unique_topic
from harness import RUNNEL_BIN, wait_until
from test_security_transport import certs, listener_port  # noqa: F401 (the certs fixture)

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_alice="alice-secret" user_admin="admin-secret";')


def runnel(*args, stdin=None, check=True):
    p = subprocess.run([RUNNEL_BIN, *args], input=stdin, capture_output=True, text=True,
                       timeout=60)
    if check and p.returncode != 0:
        raise AssertionError(f"runnel {' '.join(args)} failed ({p.returncode}): {p.stderr}")
    return p


def props_file(tmp_path, name, props):
    path = tmp_path / f"{name}.properties"
    path.write_text("# written by the test\n" + "".join(f"{k}={v}\n" for k, v in props.items()))
    return str(path)


def test_tools_over_sasl_ssl_scram_and_mtls_with_command_config(broker_factory, certs, tmp_path):
    b = broker_factory(overrides={
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs / "broker-keystore.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs / "ca.pem"),
        "listener.name.ssl.ssl.client.auth": "required",
    })
    runnel("configs", "--bootstrap-server", b.bootstrap, "--entity-type", "users",
           "--entity-name", "bob", "--alter", "--add-config",
           "SCRAM-SHA-512=[iterations=8192,password=bob-secret]")
    sasl_ssl = f"127.0.0.1:{listener_port(b, 'SASL_SSL')}"
    scram = props_file(tmp_path, "scram", {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="bob" password="bob-secret";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs / "ca.pem"),
    })
    topic = unique_topic("tools-scram")
    runnel("topics", "--bootstrap-server", sasl_ssl, "--command-config", scram, "--create",
           "--topic", topic, "--partitions", "1", "--replication-factor", "1")
    assert topic in runnel("topics", "--bootstrap-server", sasl_ssl, "--command-config", scram,
                           "--list").stdout.split()
    runnel("produce", "--bootstrap-server", sasl_ssl, "--topic", topic,
           "--producer.config", scram, stdin="one\ntwo\n")
    out = runnel("consume", "--bootstrap-server", sasl_ssl, "--topic", topic, "--from-beginning",
                 "--max-messages", "2", "--timeout-ms", "20000", "--consumer.config", scram).stdout
    assert out.split() == ["one", "two"]

    # A wrong password is the broker's SASL_AUTHENTICATION_FAILED, and nothing is done.
    wrong = props_file(tmp_path, "wrong", {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "bob", "sasl.password": "nope", "ssl.ca.location": str(certs / "ca.pem")})
    p = runnel("topics", "--bootstrap-server", sasl_ssl, "--command-config", wrong, "--create",
               "--topic", topic + "-x", "--partitions", "1", "--replication-factor", "1",
               check=False)
    assert p.returncode != 0 and "SASL_AUTHENTICATION_FAILED" in p.stderr, p.stderr
    assert "nope" not in p.stderr
    assert topic + "-x" not in runnel("topics", "--bootstrap-server", b.bootstrap,
                                      "--list").stdout.split()

    # mTLS with librdkafka's names for the client certificate.
    mtls = props_file(tmp_path, "mtls", {
        "security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem"),
        "ssl.certificate.location": str(certs / "client.pem"),
        "ssl.key.location": str(certs / "client.key")})
    ssl = f"127.0.0.1:{listener_port(b, 'SSL')}"
    out = runnel("consume", "--bootstrap-server", ssl, "--topic", topic, "--from-beginning",
                 "--max-messages", "2", "--timeout-ms", "20000", "--command-config", mtls).stdout
    assert out.split() == ["one", "two"]
    # Without a client certificate the required-auth listener refuses the handshake.
    no_cert = props_file(tmp_path, "nocert", {
        "security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem")})
    p = runnel("topics", "--bootstrap-server", ssl, "--command-config", no_cert, "--list",
               check=False)
    assert p.returncode != 0
    # A mechanism the client does not speak is named before anything is sent.
    bad = props_file(tmp_path, "bad", {"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI",
                                       "ssl.ca.location": str(certs / "ca.pem")})
    p = runnel("topics", "--bootstrap-server", sasl_ssl, "--command-config", bad, "--list",
               check=False)
    assert p.returncode != 0 and "GSSAPI" in p.stderr, p.stderr


def test_runnel_acls_add_list_remove_and_a_denied_user_is_then_allowed(broker_factory, certs,
                                                                         tmp_path):
    b = broker_factory(overrides={
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": STANDARD,
        "super.users": "User:admin",
    })
    sasl = f"127.0.0.1:{listener_port(b, 'SASL_PLAINTEXT')}"

    def user(name):
        return props_file(tmp_path, name, {
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                                f'required username="{name}" password="{name}-secret";'})

    admin, alice = user("admin"), user("alice")
    topic = unique_topic("acl-tool")
    runnel("topics", "--bootstrap-server", sasl, "--command-config", admin, "--create",
           "--topic", topic, "--partitions", "1", "--replication-factor", "1")

    p = runnel("produce", "--bootstrap-server", sasl, "--topic", topic, "--command-config", alice,
               stdin="denied\n", check=False)
    assert p.returncode != 0 and "TOPIC_AUTHORIZATION_FAILED" in p.stderr, p.stderr

    out = runnel("acls", "--bootstrap-server", sasl, "--command-config", admin, "--add",
                 "--allow-principal", "User:alice", "--producer", "--topic", topic).stdout
    pattern = f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)"
    assert out.startswith(f"Adding ACLs for resource `{pattern}`: \n"), out
    for op in ("WRITE", "DESCRIBE", "CREATE"):
        assert f"\t(principal=User:alice, host=*, operation={op}, permissionType=ALLOW)" in out

    runnel("acls", "--bootstrap-server", sasl, "--command-config", admin, "--add",
           "--allow-principal", "User:alice", "--consumer", "--topic", topic, "--group", "g1")

    def produced():
        runnel("produce", "--bootstrap-server", sasl, "--topic", topic, "--command-config", alice,
               stdin="allowed\n")
        return True
    wait_until(produced, timeout=20, desc="alice may produce after runnel acls --add")
    out = runnel("consume", "--bootstrap-server", sasl, "--topic", topic, "--group", "g1",
                 "--from-beginning", "--max-messages", "1", "--timeout-ms", "20000",
                 "--command-config", alice).stdout
    assert out.split()[:1] == ["allowed"]

    listed = runnel("acls", "--bootstrap-server", sasl, "--command-config", admin, "--list",
                    "--topic", topic).stdout
    assert f"Current ACLs for resource `{pattern}`: \n" in listed
    assert "operation=READ, permissionType=ALLOW" in listed
    by_principal = runnel("acls", "--bootstrap-server", sasl, "--command-config", admin, "--list",
                          "--principal", "User:alice").stdout
    assert by_principal.startswith("ACLs for principal `User:alice`\n")
    assert "name=g1" in by_principal

    # Alice may not manage ACLs herself (CLUSTER Alter), and --remove --force removes them all.
    p = runnel("acls", "--bootstrap-server", sasl, "--command-config", alice, "--add",
               "--allow-principal", "User:alice", "--operation", "All", "--cluster", check=False)
    assert p.returncode != 0 and "CLUSTER_AUTHORIZATION_FAILED" in p.stderr, p.stderr
    runnel("acls", "--bootstrap-server", sasl, "--command-config", admin, "--remove", "--force",
           "--topic", topic)
    assert "name=" + topic + "," not in runnel(
        "acls", "--bootstrap-server", sasl, "--command-config", admin, "--list").stdout

    def denied_again():
        p = runnel("produce", "--bootstrap-server", sasl, "--topic", topic,
                   "--command-config", alice, stdin="x\n", check=False)
        return p.returncode != 0 and "TOPIC_AUTHORIZATION_FAILED" in p.stderr
    wait_until(denied_again, timeout=20, desc="alice is denied again after --remove")
