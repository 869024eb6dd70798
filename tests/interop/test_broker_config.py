"""Broker configuration: --override and --config (TOML) with Kafka property names feed the
topic-level defaults that clients see; invalid settings stop the broker with a clear error."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import ConfigResource, ResourceType

from clients import OP_TIMEOUT, admin, create_topic, unique_topic
from harness import BrokerError


def _topic_config(bootstrap, topic):
    adm = admin(bootstrap)
    res = ConfigResource(ResourceType.TOPIC, topic)
    return adm.describe_configs([res], request_timeout=OP_TIMEOUT)[res].result(OP_TIMEOUT)


def test_overrides_become_topic_defaults(broker_factory):
    b = broker_factory(overrides={"log.retention.hours": "1", "log.segment.bytes": "2097152",
                                  "num.partitions": "4"})
    t = unique_topic("brokercfg")
    adm = admin(b.bootstrap)
    from confluent_kafka.admin import NewTopic
    adm.create_topics([NewTopic(t)], request_timeout=OP_TIMEOUT)[t].result(OP_TIMEOUT)
    from clients import wait_topic_ready
    wait_topic_ready(adm, t, 4)  # num.partitions
    cfg = _topic_config(b.bootstrap, t)
    assert cfg["retention.ms"].value == "3600000", "log.retention.hours=1 -> retention.ms"
    assert cfg["segment.bytes"].value == "2097152"
    assert cfg["retention.bytes"].value == "-1"
    # a value set on the topic wins over the broker's
    t2 = create_topic(b.bootstrap, unique_topic("brokercfg"), config={"retention.ms": "5000"})
    assert _topic_config(b.bootstrap, t2)["retention.ms"].value == "5000"


def test_config_file_toml(broker_factory, tmp_path):
    f = tmp_path / "broker.toml"
    f.write_text('"num.partitions" = 3\n"log.retention.ms" = 7200000\n')
    b = broker_factory(extra_args=["--config", str(f)], overrides={"num.partitions": "2"})
    from kafka import KafkaProducer

    from clients import kp_kwargs
    t = unique_topic("tomlcfg")
    p = KafkaProducer(**kp_kwargs(b.bootstrap, enable_idempotence=False, max_block_ms=10000))
    try:
        assert p.partitions_for(t) == {0, 1}, "--override wins over --config"
    finally:
        p.close(timeout=5)
    assert _topic_config(b.bootstrap, t)["retention.ms"].value == "7200000"


@pytest.mark.parametrize("override", ["num.partitions=zero", "auto.create.topics.enable=maybe",
                                      "num.partitions"])
def test_invalid_override_stops_the_broker(broker_factory, override):
    b = broker_factory(start=False)
    b.extra_args = ["--override", override]
    with pytest.raises(BrokerError) as ei:
        b.start(timeout=15)
    assert b.last_returncode not in (None, 0), "the broker must exit non-zero"
    assert "num.partitions" in str(ei.value) or "auto.create.topics.enable" in str(ei.value), \
        f"the error should name the property:\n{ei.value}"


def test_dynamic_broker_default_becomes_every_topics_default(broker_factory):
    """kafka-configs --entity-type brokers --entity-default: a dynamic cluster-wide default
    for a topic config's broker synonym reaches every topic without an override; a per-broker
    value wins over it; static properties cannot be changed at runtime."""
    import subprocess

    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigSource

    from harness import RUNNEL_BIN

    b = broker_factory()
    adm = admin(b.bootstrap)
    t = create_topic(b.bootstrap, unique_topic("dyncfg"))
    t_own = create_topic(b.bootstrap, unique_topic("dyncfg"), config={"retention.ms": "5000"})

    def configs(*args, check=True):
        return subprocess.run([RUNNEL_BIN, "configs", "--bootstrap-server", b.bootstrap,
                               "--entity-type", "brokers", *args],
                              capture_output=True, text=True, timeout=60, check=check)

    # librdkafka cannot name the default resource (""): the CLI does it, like kafka-configs.sh.
    configs("--entity-default", "--alter", "--add-config", "log.retention.ms=7200000")
    cfg = _topic_config(b.bootstrap, t)
    assert cfg["retention.ms"].value == "7200000"
    assert cfg["retention.ms"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    assert _topic_config(b.bootstrap, t_own)["retention.ms"].value == "5000", "override wins"
    out = configs("--entity-default", "--describe").stdout
    assert "log.retention.ms=7200000" in out, out

    def incr(*entries):
        res = ConfigResource(ResourceType.BROKER, "1", incremental_configs=list(entries))
        return adm.incremental_alter_configs([res], request_timeout=OP_TIMEOUT)[res]

    incr(ConfigEntry("log.retention.ms", "3600000",
                     incremental_operation=AlterConfigOpType.SET)).result(OP_TIMEOUT)
    res = ConfigResource(ResourceType.BROKER, "1")
    mine = adm.describe_configs([res], request_timeout=OP_TIMEOUT)[res].result(OP_TIMEOUT)
    assert mine["log.retention.ms"].value == "3600000"
    assert mine["log.retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert _topic_config(b.bootstrap, t)["retention.ms"].value == "3600000"
    # Bad values and static properties are refused.
    with pytest.raises(Exception) as bad:
        incr(ConfigEntry("log.retention.ms", "abc",
                         incremental_operation=AlterConfigOpType.SET)).result(OP_TIMEOUT)
    assert bad.value.args[0].code() == KafkaError.INVALID_CONFIG
    with pytest.raises(Exception) as static:
        incr(ConfigEntry("log.dirs", "/elsewhere",
                         incremental_operation=AlterConfigOpType.SET)).result(OP_TIMEOUT)
    assert static.value.args[0].code() == KafkaError.INVALID_REQUEST
    # Deleting brings the static/default value back.
    incr(ConfigEntry("log.retention.ms", None,
                     incremental_operation=AlterConfigOpType.DELETE)).result(OP_TIMEOUT)
    configs("--entity-default", "--alter", "--delete-config", "log.retention.ms")
    assert _topic_config(b.bootstrap, t)["retention.ms"].value == "604800000"
