"""Per-broker dynamic configs as librdkafka's admin test (0081) uses them: a property Kafka
lists as dynamic (`sasl.kerberos.min.time.before.relogin`) is accepted for a broker id, with
AlterConfigs and IncrementalAlterConfigs, and described back as a dynamic broker config; a
static one (`log.dirs`) is still refused with INVALID_REQUEST."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                   ResourceType)

from clients import OP_TIMEOUT, admin

KERBEROS = "sasl.kerberos.min.time.before.relogin"


def test_kafkas_dynamic_broker_properties_are_accepted_and_static_ones_refused(broker):
    adm = admin(broker.bootstrap)
    res = ConfigResource(ResourceType.BROKER, "1", set_config={KERBEROS: "58000"})
    adm.alter_configs([res], request_timeout=OP_TIMEOUT)[res].result(OP_TIMEOUT)

    incr = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry(KERBEROS, "59000", incremental_operation=AlterConfigOpType.SET)])
    adm.incremental_alter_configs([incr], request_timeout=OP_TIMEOUT)[incr].result(OP_TIMEOUT)

    described = ConfigResource(ResourceType.BROKER, "1")
    cfg = adm.describe_configs([described], request_timeout=OP_TIMEOUT)[described].result(OP_TIMEOUT)
    assert cfg[KERBEROS].value == "59000"
    assert cfg[KERBEROS].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value

    static = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("log.dirs", "/elsewhere", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as refused:
        adm.incremental_alter_configs([static], request_timeout=OP_TIMEOUT)[static].result(OP_TIMEOUT)
    assert refused.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert "Cannot update these configs dynamically: Set(log.dirs)" in refused.value.args[0].str()

    # Clean up: the shared broker keeps no override.
    undo = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry(KERBEROS, None, incremental_operation=AlterConfigOpType.DELETE)])
    adm.incremental_alter_configs([undo], request_timeout=OP_TIMEOUT)[undo].result(OP_TIMEOUT)
