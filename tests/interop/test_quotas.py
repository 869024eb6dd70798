"""Client quotas (KIP-13 byte rates, KIP-219 throttling, KIP-546 admin API).

* A producer whose client id is limited to 1 MB/s is held to about that rate and sees
  throttle_time_ms > 0 (confluent-kafka's throttle_cb), while a producer with another client id
  on the same broker is not throttled at all.
* `runnel configs --entity-type clients|users --alter/--describe` as kafka-configs.sh, and a
  kafka-python DescribeClientQuotas / AlterClientQuotas round trip (validate_only, strict
  match, INVALID_REQUEST for an unknown key).
* Quotas are metadata records: they survive a restart.
"""

from __future__ import annotations

import subprocess
import time

from confluent_kafka import Producer

from clients import OP_TIMEOUT, ck_conf, create_topic, kp_kwargs, unique_topic
from harness import RUNNEL_BIN, wait_until

MB = 1024 * 1024
INVALID_REQUEST = 42

# Short windows keep the test short: the rate is measured over (3 - 1) to 3 seconds, so the
# burst a fresh sensor lets through is about 2 MB instead of Kafka's default ~10 MB.
QUOTA_OVERRIDES = {"quota.window.num": "3", "quota.window.size.seconds": "1"}


def configs(broker, *args):
    out = subprocess.run(
        [RUNNEL_BIN, "configs", "--bootstrap-server", broker.bootstrap, *args],
        capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout


def kp_admin(bootstrap):
    from kafka import KafkaAdminClient
    return KafkaAdminClient(**kp_kwargs(bootstrap))


def kp_send(kp, request):
    async def go():
        return await kp._manager.send(request)
    return kp._manager.run(go)


def kp_describe(kp, components, strict):
    from kafka.protocol.admin.client_quotas import DescribeClientQuotasRequest as R
    comps = [R.ComponentData(entity_type=t, match_type=m, match=s) for t, m, s in components]
    resp = kp_send(kp, R(components=comps, strict=strict))
    assert resp.error_code == 0, resp.error_message
    return {
        tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)):
            {v.key: v.value for v in entry.values}
        for entry in resp.entries or []
    }


def kp_alter(kp, entity, ops, validate_only=False):
    from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest as R
    entry = R.EntryData(
        entity=[R.EntryData.EntityData(entity_type=t, entity_name=n) for t, n in entity],
        ops=[R.EntryData.OpData(key=k, value=v or 0.0, remove=v is None) for k, v in ops])
    resp = kp_send(kp, R(entries=[entry], validate_only=validate_only))
    return [(e.error_code, e.error_message or None) for e in resp.entries]


def produce_for(bootstrap, topic, client_id, seconds=None, total_bytes=None):
    """Produces 64 KB records until `seconds` pass or `total_bytes` are acknowledged; returns
    (acknowledged bytes, elapsed seconds, throttle events seen)."""
    throttles = []
    acked = [0]
    p = Producer(ck_conf(bootstrap, **{
        "client.id": client_id,
        "linger.ms": 5,
        "batch.size": 256 * 1024,
        "queue.buffering.max.kbytes": 2048,
        "throttle_cb": lambda ev: throttles.append(ev.throttle_time),
    }))

    def done(err, msg):
        assert err is None, err
        acked[0] += len(msg.value())

    payload = b"x" * 65536
    start = time.monotonic()
    deadline = start + (seconds or 60)
    while time.monotonic() < deadline and (total_bytes is None or acked[0] < total_bytes):
        try:
            p.produce(topic, payload, on_delivery=done)
        except BufferError:
            p.poll(0.05)
            continue
        p.poll(0)
    p.flush(OP_TIMEOUT)
    p.poll(0)
    # Until the last acknowledgement: what was queued when the loop ended counts too.
    elapsed = time.monotonic() - start
    return acked[0], elapsed, throttles


def test_a_producer_limited_to_1mb_per_s_is_held_there_and_others_are_not(broker_factory):
    b = broker_factory(overrides=QUOTA_OVERRIDES)
    topic = create_topic(b.bootstrap, unique_topic("quota"))
    out = configs(b, "--entity-type", "clients", "--entity-name", "slow", "--alter",
                  "--add-config", "producer_byte_rate=1048576")
    assert "Completed updating config for client slow." in out
    wait_until(lambda: "producer_byte_rate=1048576.0" in configs(
        b, "--entity-type", "clients", "--entity-name", "slow", "--describe"),
        desc="the quota is visible")

    # Unthrottled first, so the machine's own speed is known: far above the quota.
    fast_bytes, fast_secs, fast_throttles = produce_for(b.bootstrap, topic, "fast",
                                                        total_bytes=12 * MB)
    fast_rate = fast_bytes / fast_secs
    assert fast_throttles == [], fast_throttles
    assert fast_rate > 3 * MB, f"unthrottled rate {fast_rate / MB:.2f} MB/s"

    slow_bytes, slow_secs, slow_throttles = produce_for(b.bootstrap, topic, "slow", seconds=5)
    slow_rate = slow_bytes / slow_secs
    print(f"quota 1 MB/s: throttled {slow_rate / MB:.2f} MB/s (max throttle "
          f"{max(slow_throttles or [0]):.3f} s), unthrottled {fast_rate / MB:.2f} MB/s")
    assert slow_throttles and max(slow_throttles) > 0, "no throttle_time_ms seen"
    # About 1 MB/s: the burst of a fresh 3 s window plus 1 MB/s, well under the fast rate.
    assert slow_rate < 2 * MB, f"throttled rate {slow_rate / MB:.2f} MB/s"
    assert slow_rate > 0.3 * MB, f"throttled rate {slow_rate / MB:.2f} MB/s"

    # The quota did not leak to the other client id.
    _, _, again = produce_for(b.bootstrap, topic, "fast", total_bytes=2 * MB)
    assert again == []


def test_kafka_python_round_trip_and_kafka_errors(broker_factory):
    b = broker_factory()
    kp = kp_admin(b.bootstrap)
    try:
        user_client = [("user", "alice"), ("client-id", None)]
        assert kp_alter(kp, user_client, [("consumer_byte_rate", 2048.0)],
                        validate_only=True) == [(0, None)]
        # validate_only wrote nothing.
        assert kp_describe(kp, [], strict=False) == {}
        assert kp_alter(kp, user_client, [("consumer_byte_rate", 2048.0),
                                          ("request_percentage", 50.0)]) == [(0, None)]
        assert kp_alter(kp, [("client-id", None)], [("producer_byte_rate", 4096.0)]) == [(0, None)]
        key = (("client-id", None), ("user", "alice"))
        wait_until(lambda: key in kp_describe(kp, [], strict=False), desc="alter is visible")
        assert kp_describe(kp, [("user", 0, "alice")], strict=False) == {
            key: {"consumer_byte_rate": 2048.0, "request_percentage": 50.0}}
        # Strict: only entities made of exactly the filter's types.
        assert kp_describe(kp, [("user", 0, "alice")], strict=True) == {}
        assert kp_describe(kp, [("client-id", 1, None)], strict=True) == {
            (("client-id", None),): {"producer_byte_rate": 4096.0}}
        # Kafka's errors.
        [(code, _)] = kp_alter(kp, [("user", "alice")], [("no_such_quota", 1.0)])
        assert code == INVALID_REQUEST
        [(code, _)] = kp_alter(kp, [("user", "alice")], [("producer_byte_rate", 1.5)])
        assert code == INVALID_REQUEST
        [(code, _)] = kp_alter(kp, [("group", "g")], [("producer_byte_rate", 1.0)])
        assert code == INVALID_REQUEST
        # Remove one key.
        assert kp_alter(kp, user_client, [("request_percentage", None)]) == [(0, None)]
        wait_until(lambda: kp_describe(kp, [("user", 0, "alice")], strict=False) == {
            key: {"consumer_byte_rate": 2048.0}}, desc="removal is visible")
    finally:
        kp.close()


def test_quotas_survive_a_restart_and_users_describe(broker_factory):
    b = broker_factory()
    configs(b, "--entity-type", "users", "--entity-name", "bob", "--alter",
            "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152")
    out = configs(b, "--entity-type", "users", "--entity-default", "--alter",
                  "--add-config", "request_percentage=25")
    assert "Completed updating default config for users in the cluster." in out
    want_bob = ("Quota configs for user-principal 'bob' are "
                "consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0")
    want_default = "Quota configs for the default user-principal are request_percentage=25.0"
    wait_until(lambda: want_bob in configs(b, "--entity-type", "users", "--describe"),
               desc="user quota visible")
    b.restart()
    out = configs(b, "--entity-type", "users", "--describe")
    assert want_bob in out and want_default in out, out
    out = configs(b, "--entity-type", "users", "--entity-name", "bob", "--describe")
    assert want_bob in out and "default" not in out, out
    configs(b, "--entity-type", "users", "--entity-name", "bob", "--alter",
            "--delete-config", "producer_byte_rate")
    wait_until(lambda: "Quota configs for user-principal 'bob' are consumer_byte_rate=2097152.0"
               in configs(b, "--entity-type", "users", "--entity-name", "bob", "--describe"),
               desc="deletion visible")


def consume_for(bootstrap, topic, client_id, seconds, until_bytes=None):
    """Reads `topic` from the beginning for `seconds` (or until `until_bytes` are read);
    returns (bytes read, throttle events)."""
    from confluent_kafka import Consumer, TopicPartition
    throttles = []
    c = Consumer(ck_conf(bootstrap, **{
        "client.id": client_id,
        "group.id": f"g-{client_id}",
        "enable.auto.commit": False,
        "throttle_cb": lambda ev: throttles.append(ev.throttle_time),
    }))
    got = 0
    try:
        c.assign([TopicPartition(topic, 0, -2)])
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and (until_bytes is None or got < until_bytes):
            m = c.poll(0.1)
            if m is not None and not m.error():
                got += len(m.value())
    finally:
        c.close()
    return got, throttles


def test_a_consumer_limited_to_1mb_per_s_is_held_there(broker_factory):
    b = broker_factory(overrides=QUOTA_OVERRIDES)
    topic = create_topic(b.bootstrap, unique_topic("cquota"))
    produced, _, _ = produce_for(b.bootstrap, topic, "loader", total_bytes=16 * MB)
    configs(b, "--entity-type", "clients", "--entity-name", "slow-reader", "--alter",
            "--add-config", "consumer_byte_rate=1048576")
    wait_until(lambda: "consumer_byte_rate=1048576.0" in configs(
        b, "--entity-type", "clients", "--entity-name", "slow-reader", "--describe"),
        desc="the quota is visible")
    seconds = 5
    slow, slow_throttles = consume_for(b.bootstrap, topic, "slow-reader", seconds)
    assert slow_throttles and max(slow_throttles) > 0, "no throttle_time_ms seen"
    print(f"consumer quota 1 MB/s: throttled read {slow / seconds / MB:.2f} MB/s")
    assert slow / seconds < 2 * MB, f"throttled read {slow / seconds / MB:.2f} MB/s"
    assert slow > 0
    # Another client id reads everything, unthrottled.
    fast, fast_throttles = consume_for(b.bootstrap, topic, "fast-reader", 60, until_bytes=produced)
    assert fast_throttles == []
    assert fast == produced, (fast, produced)


def test_quota_apis_need_describe_and_alter_configs_on_the_cluster(broker_factory):
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType,
                                       ResourcePatternType, ResourceType)
    from kafka.protocol.admin.client_quotas import DescribeClientQuotasRequest
    from clients import admin

    standard = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    b = broker_factory(overrides={"authorizer.class.name": standard, "super.users": "User:admin"})
    kp = kp_admin(b.bootstrap)
    try:
        resp = kp_send(kp, DescribeClientQuotasRequest(components=[], strict=False))
        assert resp.error_code == 31  # CLUSTER_AUTHORIZATION_FAILED
        assert kp_alter(kp, [("user", "x")], [("producer_byte_rate", 1.0)])[0][0] == 31
    finally:
        kp.close()
    # Grant ALTER_CONFIGS on the cluster (as a super user), then both work (AlterConfigs
    # implies DescribeConfigs).
    b.overrides["super.users"] = "User:ANONYMOUS"
    b.restart()
    acl = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                     "User:ANONYMOUS", "*", AclOperation.ALTER_CONFIGS, AclPermissionType.ALLOW)
    adm = admin(b.bootstrap)
    for f in adm.create_acls([acl], request_timeout=OP_TIMEOUT).values():
        f.result(timeout=OP_TIMEOUT)
    b.overrides["super.users"] = "User:admin"
    b.restart()
    kp = kp_admin(b.bootstrap)
    try:
        assert kp_alter(kp, [("user", "x")], [("producer_byte_rate", 1.0)]) == [(0, None)]
        wait_until(lambda: kp_describe(kp, [], strict=False) == {
            (("user", "x"),): {"producer_byte_rate": 1.0}}, desc="alter is visible")
    finally:
        kp.close()
