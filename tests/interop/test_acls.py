"""Authorization (issue 14): Kafka's StandardAuthorizer semantics with real clients.

Until SASL lands every connection is `User:ANONYMOUS`, so a test switches between "admin"
(super.users=User:ANONYMOUS) and "unprivileged" (no super users) by restarting the broker with
other properties; ACLs are metadata and survive the restart.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from clients import admin, ck_conf, create_topic, expect_error, unique_topic

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ANON = "User:ANONYMOUS"
TIMEOUT = 20


def _props(super_user: bool):
    return {
        "authorizer.class.name": STANDARD,
        "super.users": ANON if super_user else "User:admin",
    }


def _as(broker, super_user: bool):
    broker.overrides.update(_props(super_user))
    broker.restart()
    return broker


def _acl(name, op, perm=AclPermissionType.ALLOW, pattern=ResourcePatternType.LITERAL,
         rtype=ResourceType.TOPIC):
    return AclBinding(rtype, name, pattern, ANON, "*", op, perm)


def _add(bootstrap, acls):
    adm = admin(bootstrap)
    fs = adm.create_acls(acls, request_timeout=TIMEOUT)
    for f in fs.values():
        f.result(timeout=TIMEOUT)


def _produce_error(bootstrap, topic):
    """Produce one record; the delivery error code (None when acknowledged)."""
    p = Producer(ck_conf(bootstrap, **{"message.timeout.ms": 5000, "enable.idempotence": False}))
    errors = []
    p.produce(topic, b"v", on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert errors, "no delivery report"
    return errors[0].code() if errors[0] is not None else None


def test_no_authorizer_refuses_acl_requests_as_security_disabled(broker_factory):
    # kafka-python raises the top-level error of DescribeAcls (librdkafka reports an empty
    # list for it).
    from kafka import KafkaAdminClient
    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ResourcePatternFilter
    from kafka.admin import ResourceType as KpResourceType, ACLResourcePatternType
    from kafka.errors import SecurityDisabledError

    b = broker_factory()
    adm = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=TIMEOUT * 1000)
    try:
        everything = ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                               permission_type=ACLPermissionType.ANY,
                               resource_pattern=ResourcePatternFilter(
                                   KpResourceType.ANY, None, ACLResourcePatternType.ANY))
        try:
            adm.describe_acls(everything)
        except SecurityDisabledError:
            pass
        else:
            raise AssertionError("DescribeAcls without an authorizer must be SECURITY_DISABLED")
    finally:
        adm.close()


def test_super_user_versus_denied_then_allowed_by_acls(broker_factory):
    b = broker_factory(overrides=_props(super_user=True))
    topic = create_topic(b.bootstrap, unique_topic("acl"))
    assert _produce_error(b.bootstrap, topic) is None

    _as(b, super_user=False)
    assert _produce_error(b.bootstrap, topic) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    adm = admin(b.bootstrap)
    fs = adm.create_topics([NewTopic(unique_topic("nope"), 1, 1)], request_timeout=TIMEOUT)
    for f in fs.values():
        expect_error(f, KafkaError.TOPIC_AUTHORIZATION_FAILED)
    fs = adm.delete_topics([topic], request_timeout=TIMEOUT)
    expect_error(fs[topic], KafkaError.TOPIC_AUTHORIZATION_FAILED)
    write = _acl(topic, AclOperation.WRITE)
    expect_error(adm.create_acls([write], request_timeout=TIMEOUT)[write],
                 KafkaError.CLUSTER_AUTHORIZATION_FAILED)
    # Metadata hides what the principal may not describe.
    assert topic not in adm.list_topics(timeout=10).topics

    _as(b, super_user=True)
    _add(b.bootstrap, [_acl(topic, AclOperation.WRITE)])
    _as(b, super_user=False)
    assert _produce_error(b.bootstrap, topic) is None
    adm = admin(b.bootstrap)
    assert topic in adm.list_topics(timeout=10).topics


def test_prefixed_allow_and_a_deny_that_overrides_it(broker_factory):
    b = broker_factory(overrides=_props(super_user=True))
    prefix = unique_topic("app") + "-"
    open_topic = create_topic(b.bootstrap, prefix + "open")
    secret = create_topic(b.bootstrap, prefix + "secret")
    other = create_topic(b.bootstrap, unique_topic("other"))
    _add(b.bootstrap, [
        _acl(prefix, AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED),
        _acl(secret, AclOperation.WRITE, perm=AclPermissionType.DENY),
    ])
    _as(b, super_user=False)
    assert _produce_error(b.bootstrap, open_topic) is None
    assert _produce_error(b.bootstrap, secret) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _produce_error(b.bootstrap, other) == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_describe_and_delete_acls_with_filters(broker_factory):
    b = broker_factory(overrides=_props(super_user=True))
    t1, t2 = unique_topic("f1"), unique_topic("f2")
    _add(b.bootstrap, [_acl(t1, AclOperation.READ), _acl(t2, AclOperation.WRITE),
                       _acl("grp", AclOperation.READ, rtype=ResourceType.GROUP)])
    adm = admin(b.bootstrap)
    only_topics = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None,
                                   AclOperation.ANY, AclPermissionType.ANY)
    listed = adm.describe_acls(only_topics, request_timeout=TIMEOUT).result(timeout=TIMEOUT)
    assert sorted(a.name for a in listed) == sorted([t1, t2])
    only_t1 = AclBindingFilter(ResourceType.TOPIC, t1, ResourcePatternType.LITERAL, None, None,
                               AclOperation.ANY, AclPermissionType.ANY)
    deleted = adm.delete_acls([only_t1], request_timeout=TIMEOUT)[only_t1].result(timeout=TIMEOUT)
    assert [a.name for a in deleted] == [t1]
    # The ACLs are metadata: they survive a restart.
    b.restart()
    adm = admin(b.bootstrap)
    listed = adm.describe_acls(only_topics, request_timeout=TIMEOUT).result(timeout=TIMEOUT)
    assert [a.name for a in listed] == [t2]


def test_configs_log_dirs_and_transactions_are_authorized(broker_factory):
    """The admin and transaction APIs check Kafka's operations: AlterConfigs and
    DescribeConfigs on the topic, DescribeLogDirs on the cluster, a transactional producer's
    Write on its transactional id; each is allowed once the ACL is added."""
    from confluent_kafka.admin import ConfigResource

    b = broker_factory(overrides=_props(True))
    t = create_topic(b.bootstrap, unique_topic("authz-cfg"))
    _as(b, False)
    adm = admin(b.bootstrap)
    resource = ConfigResource(ConfigResource.Type.TOPIC, t, set_config={"retention.ms": "60000"})
    err = expect_error(adm.alter_configs([resource])[resource], KafkaError.TOPIC_AUTHORIZATION_FAILED)
    assert err is not None
    described = ConfigResource(ConfigResource.Type.TOPIC, t)
    expect_error(adm.describe_configs([described])[described],
                 KafkaError.TOPIC_AUTHORIZATION_FAILED)

    txn = Producer(ck_conf(b.bootstrap, **{"transactional.id": "authz-txn"}))
    try:
        txn.init_transactions(15)
        raise AssertionError("init_transactions without Write on the transactional id")
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, e

    from kafka import KafkaAdminClient
    from kafka.errors import ClusterAuthorizationFailedError
    kp = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=TIMEOUT * 1000)
    try:
        try:
            kp.describe_log_dirs()
            # kafka-python < v3 of the API carries no top-level error: no results then.
        except ClusterAuthorizationFailedError:
            pass
    finally:
        kp.close()

    _as(b, True)
    _add(b.bootstrap, [_acl(t, AclOperation.ALTER_CONFIGS)])
    _as(b, False)
    adm = admin(b.bootstrap)
    adm.alter_configs([resource])[resource].result(timeout=TIMEOUT)
    # ALTER_CONFIGS implies DESCRIBE_CONFIGS.
    got = adm.describe_configs([described])[described].result(timeout=TIMEOUT)
    assert got["retention.ms"].value == "60000"
