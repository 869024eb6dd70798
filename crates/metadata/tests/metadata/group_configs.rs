//! Group config resources (resource type 32): Kafka 4.0's `GroupConfig` keys, their checks
//! against the broker's `group.consumer.*` / `group.share.*` bounds, Config records of
//! resource `Group`, DescribeConfigs entries and the effective config the coordinator reads.

use std::collections::BTreeMap;

use proptest::prelude::*;
use runnel_metadata::topic_config::BrokerDefaults;
use runnel_metadata::*;

use crate::common::*;

fn broker(kv: &[(&str, &str)]) -> BrokerDefaults {
    BrokerDefaults::new(
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

fn overrides(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Incremental SET (a value) / DELETE (None) operations.
type Ops<'a> = &'a [(&'a str, Option<&'a str>)];

fn set(h: &mut Harness, group: &str, kv: Ops) -> Result<(), ApiError> {
    let ops: Vec<_> = kv
        .iter()
        .map(|(k, v)| {
            let op = if v.is_some() {
                AlterConfigOp::Set
            } else {
                AlterConfigOp::Delete
            };
            (k.to_string(), op, v.map(String::from))
        })
        .collect();
    let (r, recs) = h.controller.alter_configs(
        &h.image,
        &ConfigResource::Group(group.into()),
        &ops,
        true,
        false,
    );
    if r.is_ok() {
        h.commit(recs);
    }
    r
}

#[test]
fn keys_are_kafkas_and_sorted() {
    assert!(GROUP_CONFIGS.windows(2).all(|w| w[0].name < w[1].name));
    let names: Vec<_> = GROUP_CONFIGS.iter().map(|d| d.name).collect();
    assert_eq!(
        names,
        [
            "consumer.heartbeat.interval.ms",
            "consumer.session.timeout.ms",
            "share.auto.offset.reset",
            "share.heartbeat.interval.ms",
            "share.record.lock.duration.ms",
            "share.session.timeout.ms"
        ]
    );
    for def in GROUP_CONFIGS {
        assert!(group_config_doc(def.name).is_some(), "{}", def.name);
    }
    assert_eq!(
        validate_group_configs(&BTreeMap::new(), &broker(&[])),
        Ok(())
    );
}

#[test]
fn describe_reports_the_broker_value_as_default_and_overrides_as_group() {
    let d = broker(&[("group.consumer.session.timeout.ms", "50000")]);
    let entries = describe_group_configs(
        &overrides(&[("consumer.heartbeat.interval.ms", "6000")]),
        &d,
    );
    let get = |n: &str| entries.iter().find(|e| e.name == n).unwrap();
    let session = get("consumer.session.timeout.ms");
    assert_eq!(
        (session.value.as_deref(), session.source),
        (Some("50000"), ConfigSource::Default)
    );
    let hb = get("consumer.heartbeat.interval.ms");
    assert_eq!(
        (hb.value.as_deref(), hb.source),
        (Some("6000"), ConfigSource::Group)
    );
    assert_eq!(ConfigSource::Group.id(), 8);
    assert_eq!(
        get("share.auto.offset.reset").value.as_deref(),
        Some("latest")
    );
}

#[test]
fn alter_validates_like_kafkas_group_config() {
    let mut h = Harness::with_brokers(&[1]);
    set(
        &mut h,
        "g",
        &[("consumer.session.timeout.ms", Some("50000"))],
    )
    .unwrap();
    assert_eq!(
        h.image.group_configs("g"),
        overrides(&[("consumer.session.timeout.ms", "50000")])
    );
    let stored = h
        .image
        .configs
        .keys()
        .find(|r| matches!(r, ConfigResource::Group(_)))
        .unwrap();
    assert_eq!((stored.resource_type(), stored.name()), (32, "g"));

    let cases: &[(Ops, i16, &str)] = &[
        (&[("consumer.session.timeout.ms", Some("44999"))], 40,
            "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"),
        (&[("consumer.session.timeout.ms", Some("60001"))], 40,
            "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
        (&[("consumer.heartbeat.interval.ms", Some("15001"))], 40,
            "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms"),
        (&[("share.record.lock.duration.ms", Some("999"))], 40, "Value must be at least 1000"),
        (&[("share.record.lock.duration.ms", Some("14999"))], 40,
            "share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"),
        (&[("consumer.heartbeat.interval.ms", Some("abc"))], 40, "Not a number of type INT"),
        (&[("share.auto.offset.reset", Some("none"))], 40, "String must be one of: latest, earliest"),
        (&[("no.such.key", Some("1"))], 40, "Unknown group config name: no.such.key"),
        (&[("consumer.session.timeout.ms", None), ("consumer.session.timeout.ms", None)], 42, "duplicate"),
    ];
    for (ops, want_code, want) in cases {
        let e = set(&mut h, "g", ops).unwrap_err();
        assert_eq!(e.code, *want_code, "{ops:?}: {}", e.message);
        assert!(e.message.contains(want), "{ops:?}: {}", e.message);
    }
    assert_eq!(
        h.image.group_configs("g"),
        overrides(&[("consumer.session.timeout.ms", "50000")])
    );

    let e = set(
        &mut h,
        "",
        &[("consumer.session.timeout.ms", Some("50000"))],
    )
    .unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (42, "Default group resources are not allowed.")
    );
    let (r, _) = h.controller.alter_configs(
        &h.image,
        &ConfigResource::Group("g".into()),
        &[(
            "consumer.session.timeout.ms".into(),
            AlterConfigOp::Append,
            Some("1".into()),
        )],
        true,
        false,
    );
    assert_eq!(
        r.unwrap_err().message,
        "Can't APPEND to key consumer.session.timeout.ms because its type is not LIST."
    );

    set(&mut h, "g", &[("consumer.session.timeout.ms", None)]).unwrap();
    assert!(h.image.group_configs("g").is_empty());
}

#[test]
fn bounds_come_from_the_controllers_broker_properties() {
    let mut h = Harness::new(ControllerConfig {
        defaults: broker(&[
            ("group.consumer.min.session.timeout.ms", "1000"),
            ("group.consumer.min.heartbeat.interval.ms", "500"),
        ]),
        ..Default::default()
    });
    set(
        &mut h,
        "g",
        &[
            ("consumer.session.timeout.ms", Some("2000")),
            ("consumer.heartbeat.interval.ms", Some("500")),
        ],
    )
    .unwrap();
    let e = set(
        &mut h,
        "g",
        &[("consumer.heartbeat.interval.ms", Some("2000"))],
    )
    .unwrap_err();
    assert_eq!(
        e.message,
        "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
    );
}

#[test]
fn effective_config_layers_override_broker_and_default() {
    let d = broker(&[("group.consumer.heartbeat.interval.ms", "7000")]);
    let e = effective_group_config(&overrides(&[("consumer.session.timeout.ms", "50000")]), &d);
    assert_eq!(
        e,
        EffectiveGroupConfig {
            consumer_session_timeout_ms: 50000,
            consumer_heartbeat_interval_ms: 7000,
            share_session_timeout_ms: 45000,
            share_heartbeat_interval_ms: 5000,
            share_record_lock_duration_ms: 30000,
            share_auto_offset_reset: "latest".into(),
        }
    );
    // A stored value that does not parse falls back to the broker's, never panics.
    let e = effective_group_config(&overrides(&[("consumer.heartbeat.interval.ms", "x")]), &d);
    assert_eq!(e.consumer_heartbeat_interval_ms, 7000);
}

proptest! {
    /// Accepted exactly when both values lie within the broker's bounds and the session
    /// timeout exceeds the heartbeat interval.
    #[test]
    fn session_and_heartbeat_checks(session in 0i64..80_000, heartbeat in 0i64..20_000) {
        let o = overrides(&[
            ("consumer.session.timeout.ms", &session.to_string()),
            ("consumer.heartbeat.interval.ms", &heartbeat.to_string()),
        ]);
        let ok = (45_000..=60_000).contains(&session)
            && (5_000..=15_000).contains(&heartbeat)
            && session > heartbeat;
        let r = validate_group_configs(&o, &broker(&[]));
        prop_assert_eq!(r.is_ok(), ok, "{:?}", r);
        if let Err(e) = r {
            prop_assert_eq!(e.code, 40);
        }
    }
}
