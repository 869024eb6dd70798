//! KIP-848 group timeouts from configuration, over TCP against the real binary: the broker's
//! `group.consumer.heartbeat.interval.ms` is what members are told, a group's own
//! `consumer.heartbeat.interval.ms` (resource type 32, IncrementalAlterConfigs) overrides it for
//! that group only and takes effect on the next heartbeat, and an invalid broker value stops the
//! broker at start.

mod support;

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use support::*;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// A join (epoch 0) of `member` to `group` subscribed to `t`; the interval it is told.
fn join_interval(wire: &mut Wire, group: &str, member: &str) -> i32 {
    let req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(member))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
        .with_topic_partitions(Some(vec![]));
    let resp: ConsumerGroupHeartbeatResponse = wire.call(ApiKey::ConsumerGroupHeartbeat, 1, &req);
    assert_eq!(resp.error_code, 0, "join failed: {resp:?}");
    resp.heartbeat_interval_ms
}

fn wait_for_coordinator(broker: &TestBroker) {
    wait_until("a group coordinator", || {
        let req = FindCoordinatorRequest::default().with_key(s("g"));
        Wire::try_connect(&broker.addr)
            .and_then(|mut w| {
                w.try_call::<_, FindCoordinatorResponse>(ApiKey::FindCoordinator, 3, &req)
            })
            .is_some_and(|r| r.error_code == 0)
    });
}

fn set_group_interval(wire: &mut Wire, group: &str, ms: &str) -> i16 {
    let alter = IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(32)
            .with_resource_name(s(group))
            .with_configs(vec![
                incremental_alter_configs_request::AlterableConfig::default()
                    .with_name(s("consumer.heartbeat.interval.ms"))
                    .with_config_operation(0)
                    .with_value(Some(s(ms))),
            ]),
    ]);
    let resp: IncrementalAlterConfigsResponse =
        wire.call(ApiKey::IncrementalAlterConfigs, 1, &alter);
    resp.responses[0].error_code
}

#[test]
fn broker_and_group_heartbeat_intervals_reach_members() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(
        dir.path(),
        &[
            "offsets.topic.num.partitions=1",
            "group.consumer.heartbeat.interval.ms=6000",
        ],
    );
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("t", 2, 1, &[]).0, 0);
    wait_for_coordinator(&broker);
    assert_eq!(join_interval(&mut wire, "g", "member-g-0000000001"), 6000);

    assert_eq!(set_group_interval(&mut wire, "g", "7000"), 0);
    // The override reaches the coordinator through the metadata image: wait for it.
    let mut n = 1;
    wait_until("the group's own interval", || {
        n += 1;
        join_interval(&mut wire, "g", &format!("member-g-{n:010}")) == 7000
    });
    assert_eq!(
        join_interval(&mut wire, "other", "member-o-0000000001"),
        6000
    );
    // Outside group.consumer.min/max.heartbeat.interval.ms (5000..15000): INVALID_CONFIG.
    assert_eq!(set_group_interval(&mut wire, "g", "100"), 40);
}

#[test]
fn an_invalid_broker_group_consumer_setting_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_runnel"))
        .args([
            "broker",
            "--node-id",
            "1",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(dir.path())
        .args(["--override", "group.consumer.heartbeat.interval.ms=50000"])
        .output()
        .expect("run the broker");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("group.consumer.heartbeat.interval.ms"),
        "stderr: {stderr}"
    );
}
