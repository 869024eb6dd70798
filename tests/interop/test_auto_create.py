"""auto.create.topics.enable: Metadata and Produce for an unknown topic create it (default), or
not (when disabled)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, Producer

from clients import (
    DeliveryLog,
    admin,
    ck_conf,
    ck_produce,
    create_topic,
    kp_kwargs,
    topic_metadata,
    unique_topic,
    wait_topic_ready,
)


def _kp_partitions_for(bootstrap, topic, max_block_ms=10000):
    from kafka import KafkaProducer
    p = KafkaProducer(**kp_kwargs(bootstrap, max_block_ms=max_block_ms, enable_idempotence=False,
                                  acks=1))
    try:
        return p.partitions_for(topic)  # Metadata request with allow_auto_topic_creation=true
    finally:
        p.close(timeout=5)


def test_auto_create_on_metadata(broker):
    t = unique_topic("auto-md")
    assert _kp_partitions_for(broker.bootstrap, t) == {0}, "num.partitions defaults to 1"
    md = wait_topic_ready(admin(broker.bootstrap), t, 1)
    assert list(md.partitions[0].replicas) == [1]


def test_auto_create_on_produce(broker):
    t = unique_topic("auto-prod")
    log = ck_produce(broker.bootstrap, t, [(b"k", b"v%d" % i) for i in range(5)],
                     **{"allow.auto.create.topics": True})
    assert {p for _, _, p, _ in log.acked} == {0}
    wait_topic_ready(admin(broker.bootstrap), t, 1)


def test_auto_create_uses_num_partitions(broker_factory):
    b = broker_factory(overrides={"num.partitions": "3"})
    t = unique_topic("auto-np")
    assert _kp_partitions_for(b.bootstrap, t) == {0, 1, 2}
    wait_topic_ready(admin(b.bootstrap), t, 3)


def test_metadata_without_allow_auto_creation_does_not_create(broker):
    """Metadata v4+ for a named topic with allow_auto_topic_creation=false (as admin clients
    send it) answers UNKNOWN_TOPIC_OR_PARTITION and creates nothing."""
    from kafka import KafkaAdminClient
    t = unique_topic("auto-no")
    a = KafkaAdminClient(**kp_kwargs(broker.bootstrap))
    try:
        [d] = a.describe_topics([t])
    finally:
        a.close()
    assert (d["name"], d["error_code"]) == (t, 3), d
    assert topic_metadata(admin(broker.bootstrap), t) is None


def test_auto_create_disabled(broker_factory):
    from kafka.errors import KafkaTimeoutError
    b = broker_factory(overrides={"auto.create.topics.enable": "false"})
    t = unique_topic("noauto")

    with pytest.raises(KafkaTimeoutError):
        _kp_partitions_for(b.bootstrap, t, max_block_ms=2000)

    p = Producer(ck_conf(b.bootstrap, **{"allow.auto.create.topics": True,
                                          "topic.metadata.propagation.max.ms": 1000,
                                          "message.timeout.ms": 5000}))
    log = DeliveryLog()
    p.produce(t, value=b"x", on_delivery=log)
    assert p.flush(10) == 0
    assert not log.acked, "produce to an unknown topic must fail when auto-creation is disabled"
    codes = {e.code() for e, _, _ in log.errors}
    assert codes and codes <= {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC}, log.errors

    assert topic_metadata(admin(b.bootstrap), t) is None
    # explicit creation still works
    create_topic(b.bootstrap, t, 2)
    ck_produce(b.bootstrap, t, [(None, b"y")])
