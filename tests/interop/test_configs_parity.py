"""DescribeConfigs / IncrementalAlterConfigs parity with Kafka 4.x, as kafka-python's and
confluent-kafka-python's own integration suites exercise it: every config's KIP-569 type,
`listeners` / `advertised.listeners` among the broker configs, the empty list a SUBTRACT
leaves (`cleanup.policy=`), and group config resources (resource type 32,
`consumer.session.timeout.ms` per group) validated against the broker's
`group.consumer.min/max.*` settings and kept in the metadata log like Kafka's ConfigRecord."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource

from clients import OP_TIMEOUT, admin, create_topic, expect_error, kp_kwargs, unique_topic
from cluster import Cluster, free_port
from conftest import _use
from harness import Broker, wait_until

GROUP = ConfigResource.Type.GROUP


def _kp_admin(bootstrap):
    from kafka import KafkaAdminClient
    return KafkaAdminClient(**kp_kwargs(bootstrap))


def _kp_describe(kp, resource_type, name):
    from kafka.admin import ConfigResource as KpResource
    out = kp.describe_configs([KpResource(resource_type, name)], config_filter="all")
    return out[resource_type.lower()][name]


def _ck_describe(adm, restype, name):
    res = ConfigResource(restype, name)
    return adm.describe_configs([res], request_timeout=OP_TIMEOUT)[res].result(OP_TIMEOUT)


def _ck_incremental(adm, restype, name, *entries):
    res = ConfigResource(restype, name, incremental_configs=list(entries))
    return adm.incremental_alter_configs([res], request_timeout=OP_TIMEOUT)[res]


def _set(name, value):
    return ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)


def test_every_config_has_its_type_kafka_python(broker):
    topic = create_topic(broker.bootstrap, unique_topic("types"))
    kp = _kp_admin(broker.bootstrap)
    try:
        topic_cfg = _kp_describe(kp, "TOPIC", topic)
        untyped = sorted(k for k, c in topic_cfg.items() if c.get("config_type") in (None, "UNKNOWN"))
        assert not untyped, f"topic configs without a type: {untyped}"
        assert topic_cfg["retention.ms"]["config_type"] == "LONG"
        assert topic_cfg["cleanup.policy"]["config_type"] == "LIST"
        assert topic_cfg["min.cleanable.dirty.ratio"]["config_type"] == "DOUBLE"
        assert topic_cfg["preallocate"]["config_type"] == "BOOLEAN"
        assert topic_cfg["max.message.bytes"]["config_type"] == "INT"
        assert topic_cfg["compression.type"]["config_type"] == "STRING"
        broker_cfg = _kp_describe(kp, "BROKER", "1")
        untyped = sorted(k for k, c in broker_cfg.items() if c.get("config_type") in (None, "UNKNOWN"))
        assert not untyped, f"broker configs without a type: {untyped}"
        assert broker_cfg["offsets.topic.replication.factor"]["config_type"] == "SHORT"
        for key in ("listeners", "advertised.listeners"):
            assert broker_cfg[key]["value"] == f"PLAINTEXT://{broker.bootstrap}", key
            assert broker_cfg[key]["config_type"] == "STRING"
        assert broker_cfg["node.id"]["value"] == "1"
    finally:
        kp.close()


class _FixedPortBroker(Broker):
    """A broker on a chosen port, so --advertise can name it under another host name."""

    def __init__(self, port, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fixed_port = port

    def command(self):
        return [f"127.0.0.1:{self.fixed_port}" if a == "127.0.0.1:0" else a for a in super().command()]


def test_advertised_listeners_confluent(tmp_path, request):
    port = free_port()
    b = _FixedPortBroker(port, tmp_path / "data", tmp_path / "broker.log",
                         extra_args=["--advertise", f"localhost:{port}"])
    _use(request, b)
    b.start()
    try:
        cfg = _ck_describe(admin(b.bootstrap), ConfigResource.Type.BROKER, "1")
        assert cfg["advertised.listeners"].value == f"PLAINTEXT://localhost:{port}"
        assert cfg["advertised.listeners"].source == ConfigSource.STATIC_BROKER_CONFIG.value
        assert cfg["listeners"].value == f"PLAINTEXT://127.0.0.1:{port}"
        assert cfg["listeners"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    finally:
        b.stop()


def test_subtract_to_the_empty_list(broker):
    adm = admin(broker.bootstrap)
    t = create_topic(broker.bootstrap, unique_topic("subtract"))
    _ck_incremental(adm, ConfigResource.Type.TOPIC, t, ConfigEntry(
        "cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT)).result(OP_TIMEOUT)
    cfg = _ck_describe(adm, ConfigResource.Type.TOPIC, t)
    assert cfg["cleanup.policy"].value == ""
    assert cfg["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    # a bad element is still refused
    expect_error(_ck_incremental(adm, ConfigResource.Type.TOPIC, t, ConfigEntry(
        "cleanup.policy", "shred", incremental_operation=AlterConfigOpType.APPEND)), KafkaError.INVALID_CONFIG)
    # kafka-python: the same SUBTRACT through its own protocol code
    t2 = create_topic(broker.bootstrap, unique_topic("subtract-kp"))
    from kafka.admin import AlterConfigOp
    from kafka.admin import ConfigResource as KpResource
    kp = _kp_admin(broker.bootstrap)
    try:
        kp.alter_configs([KpResource("TOPIC", t2, {"cleanup.policy": (AlterConfigOp.SUBTRACT, "delete")})],
                         incremental=True)
        assert _kp_describe(kp, "TOPIC", t2)["cleanup.policy"]["value"] == ""
    finally:
        kp.close()


def test_group_config_resource_confluent(broker):
    adm = admin(broker.bootstrap)
    group = unique_topic("cfg-group")
    cfg = _ck_describe(adm, GROUP, group)
    assert cfg["consumer.session.timeout.ms"].value == "45000"
    assert cfg["consumer.session.timeout.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert cfg["consumer.heartbeat.interval.ms"].value == "5000"
    assert {"share.session.timeout.ms", "share.heartbeat.interval.ms", "share.record.lock.duration.ms",
            "share.auto.offset.reset"} <= set(cfg)

    _ck_incremental(adm, GROUP, group, _set("consumer.session.timeout.ms", "50000")).result(OP_TIMEOUT)
    cfg = _ck_describe(adm, GROUP, group)
    assert cfg["consumer.session.timeout.ms"].value == "50000"
    assert cfg["consumer.session.timeout.ms"].source == ConfigSource.GROUP_CONFIG.value
    assert cfg["consumer.heartbeat.interval.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    # Kafka's GroupConfig checks: the broker's min/max (45000..60000 by default), the session
    # above the heartbeat, known names, typed values.
    for entry in (_set("consumer.session.timeout.ms", "10000"), _set("consumer.session.timeout.ms", "60001"),
                  _set("consumer.heartbeat.interval.ms", "4999"), _set("consumer.heartbeat.interval.ms", "abc"),
                  _set("share.record.lock.duration.ms", "999"), _set("no.such.group.config", "1")):
        expect_error(_ck_incremental(adm, GROUP, group, entry), KafkaError.INVALID_CONFIG)
    assert _ck_describe(adm, GROUP, group)["consumer.session.timeout.ms"].value == "50000"

    _ck_incremental(adm, GROUP, group, ConfigEntry(
        "consumer.session.timeout.ms", None, incremental_operation=AlterConfigOpType.DELETE)).result(OP_TIMEOUT)
    cfg = _ck_describe(adm, GROUP, group)
    assert cfg["consumer.session.timeout.ms"].value == "45000"
    assert cfg["consumer.session.timeout.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def test_group_config_resource_kafka_python(broker):
    from kafka.admin import ConfigResource as KpResource
    group = unique_topic("cfg-group-kp")
    kp = _kp_admin(broker.bootstrap)
    try:
        kp.alter_configs([KpResource("GROUP", group, {"consumer.heartbeat.interval.ms": "6000"})],
                         incremental=True)
        cfg = _kp_describe(kp, "GROUP", group)
        assert cfg["consumer.heartbeat.interval.ms"]["value"] == "6000"
        assert cfg["consumer.heartbeat.interval.ms"]["config_source"] == "DYNAMIC_GROUP_CONFIG"
        assert cfg["consumer.heartbeat.interval.ms"]["config_type"] == "INT"
        assert cfg["share.auto.offset.reset"]["config_type"] == "STRING"
    finally:
        kp.close()


@pytest.mark.slow
def test_group_configs_follow_broker_bounds_and_survive_restart(broker_factory):
    b = broker_factory(overrides={"group.consumer.min.session.timeout.ms": "10000",
                                  "group.consumer.session.timeout.ms": "20000"})
    adm = admin(b.bootstrap)
    group = unique_topic("cfg-bounds")
    assert _ck_describe(adm, GROUP, group)["consumer.session.timeout.ms"].value == "20000"
    _ck_incremental(adm, GROUP, group, _set("consumer.session.timeout.ms", "15000")).result(OP_TIMEOUT)
    expect_error(_ck_incremental(adm, GROUP, group, _set("consumer.session.timeout.ms", "9999")),
                 KafkaError.INVALID_CONFIG)
    b.restart()
    cfg = _ck_describe(admin(b.bootstrap), GROUP, group)
    assert cfg["consumer.session.timeout.ms"].value == "15000", "lost from the metadata log"
    assert cfg["consumer.session.timeout.ms"].source == ConfigSource.GROUP_CONFIG.value


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_group_configs_replicate_through_the_quorum(tmp_path, request):
    cluster = Cluster(tmp_path / "cluster", 3)
    for node in cluster.nodes.values():
        _use(request, node)
    cluster.start()
    try:
        cluster.wait_all_brokers(admin(cluster.bootstrap))
        group = unique_topic("cfg-quorum")
        first = admin(cluster.node(1).address)
        _ck_incremental(first, GROUP, group, _set("consumer.session.timeout.ms", "55000")).result(OP_TIMEOUT)
        for node_id in (2, 3):
            adm = admin(cluster.node(node_id).address)
            wait_until(lambda: _ck_describe(adm, GROUP, group)["consumer.session.timeout.ms"].value == "55000",
                       15, desc=f"the group config on node {node_id}")
    finally:
        cluster.stop_all()
