"""Topic administration through kafka-python's KafkaAdminClient (its own protocol code)."""

from __future__ import annotations

import pytest

from clients import admin, ck_produce, kp_kwargs, unique_topic, wait_topic_absent, wait_topic_ready
from harness import wait_until


@pytest.fixture
def kadmin(broker):
    from kafka import KafkaAdminClient
    a = KafkaAdminClient(**kp_kwargs(broker.bootstrap))
    yield a
    a.close()


def test_create_describe_delete(broker, kadmin):
    from kafka.admin import ConfigResource, ConfigResourceType
    t = unique_topic("kp-admin")
    res = kadmin.create_topics({t: {"num_partitions": 3, "replication_factor": 1,
                                    "configs": {"retention.ms": "3600000"}}}, timeout_ms=10000)
    assert [(x["name"], x["error_code"]) for x in res["topics"]] == [(t, 0)], res
    wait_topic_ready(admin(broker.bootstrap), t, 3)
    assert t in kadmin.list_topics()

    cfg = kadmin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t)])
    topic_cfg = cfg["topic"][t]
    assert topic_cfg["retention.ms"]["value"] == "3600000", topic_cfg
    assert topic_cfg["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    all_cfg = kadmin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t)],
                                      config_filter="all")["topic"][t]
    assert all_cfg["cleanup.policy"]["value"] == "delete"
    assert all_cfg["segment.bytes"]["value"] == "1073741824"

    res = kadmin.delete_topics([t], timeout_ms=10000)
    assert [(x["name"], x["error_code"]) for x in res["topics"]] == [(t, 0)], res
    wait_until(lambda: t not in kadmin.list_topics(), 10, desc=f"{t} gone from kafka-python listing")
    wait_topic_absent(admin(broker.bootstrap), t)


def test_errors_are_raised(broker, kadmin):
    from kafka.errors import (
        InvalidPartitionsError,
        InvalidReplicationFactorError,
        InvalidTopicError,
        TopicAlreadyExistsError,
        UnknownTopicOrPartitionError,
    )
    t = unique_topic("kp-err")
    kadmin.create_topics({t: {"num_partitions": 1, "replication_factor": 1}})
    with pytest.raises(TopicAlreadyExistsError):
        kadmin.create_topics({t: {"num_partitions": 1, "replication_factor": 1}})
    with pytest.raises(InvalidReplicationFactorError):
        kadmin.create_topics({unique_topic("kp-rf"): {"num_partitions": 1, "replication_factor": 2}})
    with pytest.raises(InvalidPartitionsError):
        kadmin.create_topics({unique_topic("kp-p0"): {"num_partitions": 0, "replication_factor": 1}})
    with pytest.raises(InvalidTopicError):
        kadmin.create_topics({"no spaces allowed": {"num_partitions": 1, "replication_factor": 1}})
    with pytest.raises(UnknownTopicOrPartitionError):
        kadmin.delete_topics([unique_topic("kp-missing")])


def test_create_partitions_and_describe_topics(broker, kadmin):
    t = unique_topic("kp-grow")
    kadmin.create_topics({t: {"num_partitions": 2, "replication_factor": 1}})
    wait_topic_ready(admin(broker.bootstrap), t, 2)
    kadmin.create_partitions({t: 4})
    wait_topic_ready(admin(broker.bootstrap), t, 4)
    [d] = kadmin.describe_topics([t])
    assert d["name"] == t and d["error_code"] == 0
    assert sorted(p["partition_index"] for p in d["partitions"]) == [0, 1, 2, 3]
    assert all(p["leader_id"] == 1 for p in d["partitions"])
    ck_produce(broker.bootstrap, t, [(None, b"x")], partition=3)


def test_describe_cluster(broker, kadmin):
    c = kadmin.describe_cluster()
    assert c["controller_id"] == 1, c
    assert [(b["broker_id"], b["host"], b["port"]) for b in c["brokers"]] == [(1, "127.0.0.1", broker.port)]
    assert c["cluster_id"]
