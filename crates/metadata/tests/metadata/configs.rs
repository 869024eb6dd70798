//! Topic configs: key table, validation messages, fallback to broker properties, describe,
//! effective config, AlterConfigs / IncrementalAlterConfigs.

use std::collections::BTreeMap;

use runnel_metadata::topic_config::*;
use runnel_metadata::*;

use crate::common::*;

fn props(kv: &[(&str, &str)]) -> BrokerDefaults {
    BrokerDefaults::new(
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

#[test]
fn every_key_default_validates_and_table_is_sorted() {
    assert!(TOPIC_CONFIGS.windows(2).all(|w| w[0].name < w[1].name));
    for def in TOPIC_CONFIGS {
        assert_eq!(
            validate_topic_config(def.name, def.default),
            Ok(()),
            "{}",
            def.name
        );
    }
    for key in [
        "cleanup.policy",
        "compression.type",
        "delete.retention.ms",
        "file.delete.delay.ms",
        "flush.messages",
        "flush.ms",
        "index.interval.bytes",
        "max.compaction.lag.ms",
        "max.message.bytes",
        "message.timestamp.difference.max.ms",
        "message.timestamp.before.max.ms",
        "message.timestamp.after.max.ms",
        "message.timestamp.type",
        "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms",
        "min.insync.replicas",
        "preallocate",
        "retention.bytes",
        "retention.ms",
        "segment.bytes",
        "segment.index.bytes",
        "segment.jitter.ms",
        "segment.ms",
        "unclean.leader.election.enable",
        "message.downconversion.enable",
        "follower.replication.throttled.replicas",
        "leader.replication.throttled.replicas",
        "local.retention.ms",
        "local.retention.bytes",
        "remote.storage.enable",
    ] {
        assert!(topic_config_def(key).is_some(), "{key}");
    }
}

#[test]
fn values_are_validated_like_kafka() {
    let ok = [
        ("cleanup.policy", "delete"),
        ("cleanup.policy", "compact"),
        ("cleanup.policy", "compact,delete"),
        ("cleanup.policy", "delete, compact"),
        ("compression.type", "zstd"),
        ("compression.type", "uncompressed"),
        ("segment.bytes", "14"),
        ("retention.ms", "-1"),
        ("min.cleanable.dirty.ratio", "0.9"),
        ("unclean.leader.election.enable", "TRUE"),
        ("message.timestamp.type", "LogAppendTime"),
        ("leader.replication.throttled.replicas", "*"),
        ("leader.replication.throttled.replicas", "0:1,1:2"),
        ("message.format.version", "2.8-IV1"),
        ("compression.gzip.level", "-1"),
        ("retention.bytes", "-5"),
        // Kafka 4.0's ValidList accepts the empty list (what a SUBTRACT of the last policy leaves).
        ("cleanup.policy", ""),
    ];
    for (k, v) in ok {
        assert_eq!(validate_topic_config(k, v), Ok(()), "{k}={v}");
    }
    let bad = [
        ("nope", "1", "Unknown topic config name: nope"),
        (
            "segment.bytes",
            "13",
            "Invalid value 13 for configuration segment.bytes: Value must be at least 14",
        ),
        (
            "segment.bytes",
            "abc",
            "Invalid value abc for configuration segment.bytes: Not a number of type INT",
        ),
        ("segment.bytes", "4294967296", "Not a number of type INT"),
        ("retention.ms", "-2", "Value must be at least -1"),
        ("cleanup.policy", "compact,shred", "String must be one of"),
        (
            "compression.type",
            "brotli",
            "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer",
        ),
        ("compression.type", "ZSTD", "String must be one of"),
        (
            "min.cleanable.dirty.ratio",
            "1.5",
            "Value must be no more than 1",
        ),
        (
            "min.cleanable.dirty.ratio",
            "NaN",
            "Not a number of type DOUBLE",
        ),
        (
            "preallocate",
            "yes",
            "Expected value to be either true or false",
        ),
        ("min.insync.replicas", "0", "Value must be at least 1"),
        (
            "message.timestamp.type",
            "createtime",
            "String must be one of",
        ),
        (
            "leader.replication.throttled.replicas",
            "0-1",
            "partitionId",
        ),
        ("compression.gzip.level", "10", "between 1 and 9"),
        ("flush.messages", "0", "Value must be at least 1"),
    ];
    for (k, v, msg) in bad {
        let e = validate_topic_config(k, v).unwrap_err();
        assert_eq!(e.code, 40, "{k}={v}");
        assert!(e.message.contains(msg), "{k}={v}: {}", e.message);
    }
}

#[test]
fn fallback_to_broker_properties_with_units_and_sources() {
    let none = BTreeMap::new();
    let eff = effective_topic_config(&none, &BrokerDefaults::default());
    assert_eq!(eff.retention_ms, 604_800_000);
    assert_eq!(eff.segment_bytes, 1_073_741_824);
    assert_eq!(eff.max_message_bytes, 1_048_588);
    assert_eq!(eff.cleanup_policy, "delete");
    assert_eq!(eff.flush_messages, i64::MAX);
    assert_eq!(eff.compression_type, "producer");
    assert!(!eff.unclean_leader_election_enable && eff.deletes() && !eff.compacts());

    let d = props(&[
        ("log.retention.hours", "24"),
        ("log.segment.bytes", "1048576"),
        ("message.max.bytes", "2000000"),
        ("log.cleanup.policy", "compact"),
        ("log.flush.interval.messages", "1"),
        ("log.roll.hours", "1"),
        ("min.insync.replicas", "2"),
        ("unclean.leader.election.enable", "true"),
    ]);
    let eff = effective_topic_config(&none, &d);
    assert_eq!(eff.retention_ms, 86_400_000);
    assert_eq!(eff.segment_bytes, 1_048_576);
    assert_eq!(eff.max_message_bytes, 2_000_000);
    assert_eq!(eff.cleanup_policy, "compact");
    assert_eq!(eff.flush_messages, 1);
    assert_eq!(eff.segment_ms, 3_600_000);
    assert_eq!(eff.min_insync_replicas, 2);
    assert!(eff.unclean_leader_election_enable);
    // ms beats minutes beats hours; negative means unlimited.
    let d2 = props(&[
        ("log.retention.hours", "1"),
        ("log.retention.minutes", "2"),
        ("log.retention.ms", "3"),
    ]);
    assert_eq!(effective_topic_config(&none, &d2).retention_ms, 3);
    assert_eq!(
        effective_topic_config(&none, &props(&[("log.retention.hours", "-1")])).retention_ms,
        -1
    );
    // Overrides beat everything.
    let o: BTreeMap<String, String> = [("retention.ms".to_string(), "5".to_string())].into();
    assert_eq!(effective_topic_config(&o, &d).retention_ms, 5);

    let described = describe_topic_configs(&o, &d);
    let get = |n: &str| described.iter().find(|e| e.name == n).unwrap().clone();
    assert_eq!(get("retention.ms").source, ConfigSource::TopicOverride);
    assert_eq!(get("segment.ms").value.as_deref(), Some("3600000"));
    assert_eq!(get("segment.ms").source, ConfigSource::StaticBroker);
    assert_eq!(get("preallocate").source, ConfigSource::Default);
    assert!(get("preallocate").is_default && !get("segment.ms").is_default);
    assert_eq!(
        [
            ConfigSource::TopicOverride,
            ConfigSource::DynamicBroker,
            ConfigSource::DynamicDefaultBroker,
            ConfigSource::StaticBroker,
            ConfigSource::Default
        ]
        .map(|s| s.id()),
        [1, 2, 3, 4, 5]
    );
    assert_eq!(described.len(), TOPIC_CONFIGS.len());
}

#[test]
fn dynamic_broker_defaults_take_precedence_over_static() {
    let mut h = Harness::with_brokers(&[1]);
    let (r, recs) = h.controller.alter_configs(
        &h.image,
        &ConfigResource::Broker(String::new()),
        &[(
            "log.retention.ms".into(),
            AlterConfigOp::Set,
            Some("1234".into()),
        )],
        true,
        false,
    );
    r.unwrap();
    h.commit(recs);
    let d = props(&[("log.retention.ms", "99")]).with_dynamic(&h.image, Some(1));
    let described = describe_topic_configs(&BTreeMap::new(), &d);
    let e = described.iter().find(|e| e.name == "retention.ms").unwrap();
    assert_eq!(
        (e.value.as_deref(), e.source),
        (Some("1234"), ConfigSource::DynamicDefaultBroker)
    );
    // Broker resources: bad synonym values and bad names are refused.
    let (r, _) = h.controller.alter_configs(
        &h.image,
        &ConfigResource::Broker("1".into()),
        &[(
            "log.retention.ms".into(),
            AlterConfigOp::Set,
            Some("x".into()),
        )],
        true,
        false,
    );
    assert_eq!(code(&r), 40);
    let (r, _) = h.controller.alter_configs(
        &h.image,
        &ConfigResource::Broker("b1".into()),
        &[],
        true,
        false,
    );
    assert_eq!(code(&r), 42);
    // Only topic-config defaults are dynamic; static properties are refused.
    let (r, recs) = h.controller.alter_configs(
        &h.image,
        &ConfigResource::Broker("1".into()),
        &[("log.dirs".into(), AlterConfigOp::Set, Some("/x".into()))],
        true,
        false,
    );
    assert_eq!(code(&r), 42);
    assert!(recs.is_empty());
    // Deleting a key that is not set changes nothing and succeeds (reassign --verify clears
    // the replication throttles that way).
    let (r, recs) = h.controller.alter_configs(
        &h.image,
        &ConfigResource::Broker("1".into()),
        &[(
            "leader.replication.throttled.rate".into(),
            AlterConfigOp::Delete,
            None,
        )],
        true,
        false,
    );
    assert_eq!(code(&r), 0);
    assert!(recs.is_empty());
}

#[test]
fn alter_topic_configs_incremental_and_legacy() {
    let mut h = Harness::with_brokers(&[1]);
    let (out, recs) = h.controller.create_topics(
        &h.image,
        &[CreateTopicRequest {
            configs: vec![
                ("retention.ms".into(), Some("1000".into())),
                ("segment.ms".into(), Some("5000".into())),
            ],
            ..req("t", 1, 1)
        }],
        false,
    );
    let created = out[0].result.clone().unwrap();
    let echoed = created
        .configs
        .iter()
        .find(|e| e.name == "retention.ms")
        .unwrap();
    assert_eq!(
        (echoed.value.as_deref(), echoed.source),
        (Some("1000"), ConfigSource::TopicOverride)
    );
    h.commit(recs);
    let t = ConfigResource::Topic("t".into());
    let alter =
        |h: &mut Harness, ops: Vec<(&str, AlterConfigOp, Option<&str>)>, incremental: bool| {
            let ops: Vec<(String, AlterConfigOp, Option<String>)> = ops
                .into_iter()
                .map(|(k, op, v)| (k.to_string(), op, v.map(String::from)))
                .collect();
            let (r, recs) = h
                .controller
                .alter_configs(&h.image, &t, &ops, incremental, false);
            if r.is_ok() {
                h.commit(recs);
            }
            r
        };
    alter(
        &mut h,
        vec![
            ("retention.ms", AlterConfigOp::Set, Some("2000")),
            ("segment.ms", AlterConfigOp::Delete, None),
        ],
        true,
    )
    .unwrap();
    assert_eq!(
        h.image.topic_overrides("t"),
        [("retention.ms".to_string(), "2000".to_string())].into()
    );
    alter(
        &mut h,
        vec![("cleanup.policy", AlterConfigOp::Append, Some("compact"))],
        true,
    )
    .unwrap();
    assert_eq!(
        h.image.topic_overrides("t")["cleanup.policy"],
        "delete,compact"
    );
    alter(
        &mut h,
        vec![("cleanup.policy", AlterConfigOp::Subtract, Some("delete"))],
        true,
    )
    .unwrap();
    assert_eq!(h.image.topic_overrides("t")["cleanup.policy"], "compact");
    alter(
        &mut h,
        vec![("cleanup.policy", AlterConfigOp::Subtract, Some("compact"))],
        true,
    )
    .unwrap();
    assert_eq!(h.image.topic_overrides("t")["cleanup.policy"], "");
    let e = alter(
        &mut h,
        vec![("retention.ms", AlterConfigOp::Append, Some("1"))],
        true,
    )
    .unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            40,
            "Can't APPEND to key retention.ms because its type is not LIST."
        )
    );
    assert_eq!(
        code(&alter(
            &mut h,
            vec![("segment.bytes", AlterConfigOp::Set, Some("1"))],
            true
        )),
        40
    );
    assert_eq!(
        code(&alter(
            &mut h,
            vec![("x", AlterConfigOp::Set, Some("1"))],
            true
        )),
        40
    );
    assert_eq!(
        code(&alter(
            &mut h,
            vec![
                ("retention.ms", AlterConfigOp::Set, Some("1")),
                ("retention.ms", AlterConfigOp::Delete, None)
            ],
            true
        )),
        42
    );
    // Legacy AlterConfigs replaces the whole set.
    alter(
        &mut h,
        vec![("max.message.bytes", AlterConfigOp::Set, Some("100"))],
        false,
    )
    .unwrap();
    assert_eq!(
        h.image.topic_overrides("t"),
        [("max.message.bytes".to_string(), "100".to_string())].into()
    );
    // Unknown topic, validate_only.
    let (r, _) = h.controller.alter_configs(
        &h.image,
        &ConfigResource::Topic("nope".into()),
        &[],
        true,
        false,
    );
    assert_eq!(code(&r), 3);
    let (r, recs) = h.controller.alter_configs(
        &h.image,
        &t,
        &[("retention.ms".into(), AlterConfigOp::Set, Some("7".into()))],
        true,
        true,
    );
    assert!(r.is_ok() && recs.is_empty());
}
