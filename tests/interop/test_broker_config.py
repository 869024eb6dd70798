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
