"""Issue 16: describe_topics / describe_cluster with include_authorized_operations report what
the principal may do. Runnel has no authorizer, so, as a Kafka broker without one, every
operation of the resource type (Kafka's AclEntry.supportedOperations): eight for a topic,
seven for the cluster. Not asked for, librdkafka reports none."""

from __future__ import annotations

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclOperation

from clients import OP_TIMEOUT, admin, create_topic, kp_kwargs, unique_topic

TOPIC_OPERATIONS = {AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                    AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE,
                    AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
CLUSTER_OPERATIONS = {AclOperation.CREATE, AclOperation.ALTER, AclOperation.DESCRIBE,
                      AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                      AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE}


def test_confluent_describe_topics_and_cluster_with_authorized_operations(broker):
    adm = admin(broker.bootstrap)
    t = create_topic(broker.bootstrap, unique_topic("ops"), 2)
    asked = adm.describe_topics(TopicCollection([t]), include_authorized_operations=True,
                                request_timeout=OP_TIMEOUT)[t].result(OP_TIMEOUT)
    assert set(asked.authorized_operations) == TOPIC_OPERATIONS
    plain = adm.describe_topics(TopicCollection([t]),
                                request_timeout=OP_TIMEOUT)[t].result(OP_TIMEOUT)
    assert not plain.authorized_operations

    c = adm.describe_cluster(include_authorized_operations=True,
                             request_timeout=OP_TIMEOUT).result(OP_TIMEOUT)
    assert set(c.authorized_operations) == CLUSTER_OPERATIONS
    assert not adm.describe_cluster(request_timeout=OP_TIMEOUT).result(
        OP_TIMEOUT).authorized_operations


def test_kafka_python_describe_topics_and_cluster_report_operations(broker):
    """kafka-python always asks for them (Metadata v8+ and DescribeCluster) and decodes Kafka's
    bit fields into operation names."""
    from kafka import KafkaAdminClient
    t = create_topic(broker.bootstrap, unique_topic("kp-ops"), 1)
    kadmin = KafkaAdminClient(**kp_kwargs(broker.bootstrap))
    try:
        [topic] = kadmin.describe_topics([t])
        assert set(topic["authorized_operations"]) == {op.name for op in TOPIC_OPERATIONS}, topic
        cluster = kadmin.describe_cluster()
        assert set(cluster["authorized_operations"]) == {op.name for op in CLUSTER_OPERATIONS}, \
            cluster
    finally:
        kadmin.close()
