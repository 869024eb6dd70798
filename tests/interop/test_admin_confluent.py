"""Topic administration through confluent-kafka's AdminClient (librdkafka)."""

from __future__ import annotations

from confluent_kafka import KafkaError
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from clients import (
    OP_TIMEOUT,
    admin,
    create_topic,
    expect_error,
    topic_metadata,
    unique_topic,
    wait_topic_absent,
    wait_topic_ready,
)
from harness import wait_until


def _create(adm, *topics, validate_only=False):
    return adm.create_topics(list(topics), validate_only=validate_only,
                             operation_timeout=10, request_timeout=OP_TIMEOUT)


def _describe(adm, topic):
    res = ConfigResource(ResourceType.TOPIC, topic)
    return adm.describe_configs([res], request_timeout=OP_TIMEOUT)[res].result(timeout=OP_TIMEOUT)


def test_create_topic_with_partitions_and_configs(broker):
    adm = admin(broker.bootstrap)
    t = unique_topic("create")
    fs = _create(adm, NewTopic(t, num_partitions=3, replication_factor=1,
                               config={"retention.ms": "3600000", "cleanup.policy": "delete"}))
    assert fs[t].result(timeout=OP_TIMEOUT) is None
    md = wait_topic_ready(adm, t, 3)
    assert sorted(md.partitions) == [0, 1, 2]
    for p in md.partitions.values():
        assert p.leader == 1, p
        assert list(p.replicas) == [1], p
        assert list(p.isrs) == [1], p
    cfg = _describe(adm, t)
    assert cfg["retention.ms"].value == "3600000"
    assert not cfg["retention.ms"].is_default
    assert cfg["cleanup.policy"].value == "delete"


def test_create_topic_default_partitions_and_rf(broker):
    adm = admin(broker.bootstrap)
    t = unique_topic("defaults")
    # -1 / -1: broker defaults num.partitions=1, default.replication.factor=1 (CreateTopics v4+).
    _create(adm, NewTopic(t))[t].result(timeout=OP_TIMEOUT)
    md = wait_topic_ready(adm, t, 1)
    assert list(md.partitions[0].replicas) == [1]


def test_validate_only_creates_nothing(broker):
    adm = admin(broker.bootstrap)
    t = unique_topic("validate")
    assert _create(adm, NewTopic(t, 4, 1), validate_only=True)[t].result(timeout=OP_TIMEOUT) is None
    assert topic_metadata(adm, t) is None, "validate_only must not create the topic"
    # ... and validation errors are still reported
    expect_error(_create(adm, NewTopic(t, 4, 3), validate_only=True)[t],
                 KafkaError.INVALID_REPLICATION_FACTOR)
    assert topic_metadata(adm, t) is None


def test_duplicate_topic(broker):
    adm = admin(broker.bootstrap)
    t = create_topic(broker.bootstrap, unique_topic("dup"), 2)
    expect_error(_create(adm, NewTopic(t, 2, 1))[t], KafkaError.TOPIC_ALREADY_EXISTS)
    # the existing topic is untouched
    assert len(wait_topic_ready(adm, t, 2).partitions) == 2


def test_invalid_topic_names(broker):
    adm = admin(broker.bootstrap)
    for name in ["bad name", "bad/name", "..", ".", "x" * 250, "caf\u00e9"]:
        expect_error(_create(adm, NewTopic(name, 1, 1))[name], KafkaError.TOPIC_EXCEPTION)
    listed = set(adm.list_topics(timeout=5).topics)
    assert not listed & {"bad name", "bad/name", "..", ".", "x" * 250}


def test_replication_factor_larger_than_brokers(broker):
    adm = admin(broker.bootstrap)
    t = unique_topic("rf3")
    expect_error(_create(adm, NewTopic(t, 1, 3))[t], KafkaError.INVALID_REPLICATION_FACTOR)
    assert topic_metadata(adm, t) is None


def test_zero_partitions(broker):
    adm = admin(broker.bootstrap)
    t = unique_topic("p0")
    expect_error(_create(adm, NewTopic(t, 0, 1))[t], KafkaError.INVALID_PARTITIONS)
    assert topic_metadata(adm, t) is None


def test_invalid_config_value(broker):
    adm = admin(broker.bootstrap)
    t = unique_topic("badcfg")
    expect_error(_create(adm, NewTopic(t, 1, 1, config={"retention.ms": "not-a-number"}))[t],
                 KafkaError.INVALID_CONFIG)
    assert topic_metadata(adm, t) is None


def test_one_bad_topic_does_not_fail_the_others(broker):
    adm = admin(broker.bootstrap)
    good, bad = unique_topic("good"), unique_topic("bad")
    fs = _create(adm, NewTopic(good, 2, 1), NewTopic(bad, 1, 5))
    assert fs[good].result(timeout=OP_TIMEOUT) is None
    expect_error(fs[bad], KafkaError.INVALID_REPLICATION_FACTOR)
    wait_topic_ready(adm, good, 2)


def test_describe_configs_defaults(broker):
    adm = admin(broker.bootstrap)
    t = create_topic(broker.bootstrap, unique_topic("cfgdef"))
    cfg = _describe(adm, t)
    expected = {
        "retention.ms": "604800000",
        "retention.bytes": "-1",
        "segment.bytes": "1073741824",
        "cleanup.policy": "delete",
        "max.message.bytes": "1048588",
        "min.insync.replicas": "1",
    }
    for k, v in expected.items():
        assert k in cfg, f"{k} missing from DescribeConfigs; got {sorted(cfg)}"
        assert cfg[k].value == v, f"{k}={cfg[k].value!r}, expected {v!r}"
        assert cfg[k].is_default, f"{k} should be reported as a default"


def test_alter_configs_replaces(broker):
    adm = admin(broker.bootstrap)
    t = create_topic(broker.bootstrap, unique_topic("alter"), config={"retention.bytes": "1000000"})
    res = ConfigResource(ResourceType.TOPIC, t, set_config={"retention.ms": "1000"})
    adm.alter_configs([res], request_timeout=OP_TIMEOUT)[res].result(timeout=OP_TIMEOUT)
    cfg = wait_until(lambda: (c := _describe(adm, t))["retention.ms"].value == "1000" and c,
                     desc="retention.ms=1000 after AlterConfigs")
    # legacy AlterConfigs replaces the whole set: retention.bytes goes back to its default
    assert cfg["retention.bytes"].value == "-1"
    assert cfg["retention.bytes"].is_default


def test_incremental_alter_configs(broker):
    adm = admin(broker.bootstrap)
    t = create_topic(broker.bootstrap, unique_topic("incr"), config={"retention.bytes": "1000000"})

    def incr(*entries):
        res = ConfigResource(ResourceType.TOPIC, t, incremental_configs=list(entries))
        adm.incremental_alter_configs([res], request_timeout=OP_TIMEOUT)[res].result(timeout=OP_TIMEOUT)

    incr(ConfigEntry("retention.ms", "2000", incremental_operation=AlterConfigOpType.SET))
    cfg = _describe(adm, t)
    assert cfg["retention.ms"].value == "2000"
    assert cfg["retention.bytes"].value == "1000000", "incremental SET must keep other configs"
    incr(ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE))
    cfg = _describe(adm, t)
    assert cfg["retention.ms"].value == "604800000"
    assert cfg["retention.ms"].is_default
    # invalid value -> INVALID_CONFIG, and nothing changes
    res = ConfigResource(ResourceType.TOPIC, t, incremental_configs=[
        ConfigEntry("retention.ms", "abc", incremental_operation=AlterConfigOpType.SET)])
    expect_error(adm.incremental_alter_configs([res], request_timeout=OP_TIMEOUT)[res],
                 KafkaError.INVALID_CONFIG)
    assert _describe(adm, t)["retention.ms"].value == "604800000"


def test_create_partitions(broker):
    adm = admin(broker.bootstrap)
    t = create_topic(broker.bootstrap, unique_topic("grow"), 3)
    fs = adm.create_partitions([NewPartitions(t, 5)], operation_timeout=10, request_timeout=OP_TIMEOUT)
    assert fs[t].result(timeout=OP_TIMEOUT) is None
    md = wait_topic_ready(adm, t, 5)
    assert all(p.leader == 1 for p in md.partitions.values())
    # the count can only grow
    for n in (2, 5):
        fs = adm.create_partitions([NewPartitions(t, n)], operation_timeout=10,
                                   request_timeout=OP_TIMEOUT)
        expect_error(fs[t], KafkaError.INVALID_PARTITIONS)
    missing = unique_topic("nosuch")
    fs = adm.create_partitions([NewPartitions(missing, 2)], request_timeout=OP_TIMEOUT)
    expect_error(fs[missing], KafkaError.UNKNOWN_TOPIC_OR_PART)


def test_delete_topics(broker):
    adm = admin(broker.bootstrap)
    t = create_topic(broker.bootstrap, unique_topic("del"), 2)
    fs = adm.delete_topics([t], operation_timeout=10, request_timeout=OP_TIMEOUT)
    assert fs[t].result(timeout=OP_TIMEOUT) is None
    wait_topic_absent(adm, t)
    missing = unique_topic("nosuch")
    expect_error(adm.delete_topics([missing], request_timeout=OP_TIMEOUT)[missing],
                 KafkaError.UNKNOWN_TOPIC_OR_PART)
    # the name can be reused, starting empty
    create_topic(broker.bootstrap, t, 1)


def test_list_topics_and_brokers(broker):
    adm = admin(broker.bootstrap)
    t1 = create_topic(broker.bootstrap, unique_topic("list"), 1)
    t2 = create_topic(broker.bootstrap, unique_topic("list"), 4)
    md = adm.list_topics(timeout=5)
    assert {t1, t2} <= set(md.topics)
    assert len(md.topics[t2].partitions) == 4
    assert set(md.brokers) == {1}
    b = md.brokers[1]
    assert (b.host, b.port) == ("127.0.0.1", broker.port), "advertised address must be the bound one"
    assert md.controller_id == 1
    assert md.cluster_id, "cluster id must be set"


def test_describe_topics(broker):
    from confluent_kafka import TopicCollection
    adm = admin(broker.bootstrap)
    t = create_topic(broker.bootstrap, unique_topic("desc"), 3)
    d = adm.describe_topics(TopicCollection([t]), request_timeout=OP_TIMEOUT)[t].result(OP_TIMEOUT)
    assert d.name == t
    assert not d.is_internal
    assert [p.id for p in d.partitions] == [0, 1, 2]
    assert all(p.leader.id == 1 and [r.id for r in p.replicas] == [1] for p in d.partitions)


def test_describe_cluster(broker):
    adm = admin(broker.bootstrap)
    c = adm.describe_cluster(request_timeout=OP_TIMEOUT).result(timeout=OP_TIMEOUT)
    assert c.cluster_id
    assert [n.id for n in c.nodes] == [1]
    assert (c.nodes[0].host, c.nodes[0].port) == ("127.0.0.1", broker.port)
    assert c.controller is not None and c.controller.id == 1
    # the cluster id is stable
    assert adm.describe_cluster(request_timeout=OP_TIMEOUT).result(OP_TIMEOUT).cluster_id == c.cluster_id
