"""`ssl.principal.mapping.rules` (issue 14): Kafka's `RULE:pattern/replacement/[LU]` rules turn
the client certificate's DN (`CN=alice,O=Runnel`) into the principal the authorizer sees; a
DN no rule applies to fails the authentication (Kafka's NoMatchingRule), and only that
connection is closed."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from clients import OP_TIMEOUT, ck_conf, unique_topic
from harness import wait_until
from test_security_transport import certs, listener_port, secure_broker  # noqa: F401

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def _mtls(b, certs):
    return ck_conf(f"localhost:{listener_port(b, 'SSL')}", **{
        "security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem"),
        "ssl.certificate.location": str(certs / "client.pem"),
        "ssl.key.location": str(certs / "client.key")})


def test_rule_maps_the_certificate_to_the_principal(broker_factory, certs):
    # Only User:ALICE (the upper-cased CN) is a super user on the SSL listener: the mapped
    # principal is what may create a topic.
    b = secure_broker(broker_factory, certs, **{
        "authorizer.class.name": STANDARD, "super.users": "User:ANONYMOUS;User:ALICE",
        "listener.name.ssl.ssl.principal.mapping.rules":
            "RULE:^CN=([^,]*),OU=Ops.*$/$1@ops/L, RULE:^CN=([^,]*),O=Runnel$/$1/U, DEFAULT"})
    admin = AdminClient(_mtls(b, certs))
    topic = unique_topic("mapped")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(OP_TIMEOUT)
    assert topic in admin.list_topics(timeout=OP_TIMEOUT).topics


def test_unmapped_principal_is_not_a_super_user(broker_factory, certs):
    # The same super user with DEFAULT: the principal is the full DN, not ALICE.
    b = secure_broker(broker_factory, certs, **{
        "authorizer.class.name": STANDARD, "super.users": "User:ANONYMOUS;User:ALICE"})
    admin = AdminClient(_mtls(b, certs))
    topic = unique_topic("unmapped")
    with pytest.raises(KafkaException) as e:
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(OP_TIMEOUT)
    assert "AUTHORIZATION" in str(e.value).upper(), e.value


def test_no_matching_rule_fails_the_authentication(broker_factory, certs):
    b = secure_broker(broker_factory, certs, **{
        "listener.name.ssl.ssl.principal.mapping.rules": "RULE:^CN=bob,.*$/bob/"})
    with pytest.raises(KafkaException):
        AdminClient(_mtls(b, certs)).list_topics(timeout=5)
    wait_until(lambda: "no ssl.principal.mapping.rules rule applies to CN=alice,O=Runnel"
               in b._log_since_start(), timeout=10, desc="the refusal logged")
    # Other listeners are unaffected.
    assert AdminClient(ck_conf(b.bootstrap)).list_topics(timeout=OP_TIMEOUT) is not None


def test_invalid_rules_are_a_startup_error(broker_factory, certs):
    from harness import BrokerError
    with pytest.raises(BrokerError) as e:
        secure_broker(broker_factory, certs, **{
            "listener.name.ssl.ssl.principal.mapping.rules": "RULE:^CN=(.*)$/$1/X"})
    assert "ssl.principal.mapping.rules" in str(e.value)
