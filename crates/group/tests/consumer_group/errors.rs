//! Table-driven error codes of ConsumerGroupHeartbeat; every failing request must leave the
//! coordinator unchanged.

use runnel_group::consumer_group::*;

use crate::common::*;

/// A Stable group "g": member "m1" at epoch 1 owning t-0..1.
fn setup() -> Harness {
    let mut h = Harness::new(config());
    h.topic("t", 2);
    h.join("g", "m1", &["t"]);
    h
}

#[test]
fn heartbeat_error_codes() {
    type Case = (&'static str, ConsumerHeartbeat, i16);
    let join = |m: &str| join_req("g", m, &["t"]);
    let cases: Vec<Case> = vec![
        ("v1 empty member id", join(""), 42),
        (
            "blank member id",
            ConsumerHeartbeat {
                api_version: 0,
                ..hb_req("g", " ", 1, None)
            },
            42,
        ),
        ("empty group id", join_req("", "m9", &["t"]), 42),
        // Both go into int16-length record keys: longer ones would not fit (records.rs).
        ("member id over 32767 bytes", join(&"m".repeat(32_768)), 42),
        (
            "group id over 32767 bytes",
            join_req(&"g".repeat(32_768), "m9", &["t"]),
            42,
        ),
        (
            "blank instance id",
            ConsumerHeartbeat {
                instance_id: Some(" ".into()),
                ..join("m9")
            },
            42,
        ),
        (
            "empty rack id",
            ConsumerHeartbeat {
                rack_id: Some(String::new()),
                ..join("m9")
            },
            42,
        ),
        (
            "join without rebalance timeout",
            ConsumerHeartbeat {
                rebalance_timeout_ms: -1,
                ..join("m9")
            },
            42,
        ),
        (
            "join without owned partitions",
            ConsumerHeartbeat {
                topic_partitions: None,
                ..join("m9")
            },
            42,
        ),
        (
            "join owning partitions",
            ConsumerHeartbeat {
                topic_partitions: Some(vec![(uuid::Uuid::nil(), vec![0])]),
                ..join("m9")
            },
            42,
        ),
        (
            "join without subscription",
            ConsumerHeartbeat {
                subscribed_topic_names: None,
                ..join("m9")
            },
            42,
        ),
        (
            "static leave without instance id",
            hb_req("g", "m1", -2, None),
            42,
        ),
        ("epoch below -2", hb_req("g", "m1", -3, None), 42),
        (
            "unknown assignor",
            ConsumerHeartbeat {
                server_assignor: Some("sticky".into()),
                ..join("m9")
            },
            112,
        ),
        (
            "bad regex",
            ConsumerHeartbeat {
                subscribed_topic_regex: Some("(".into()),
                ..join("m9")
            },
            128,
        ),
        ("unknown group", hb_req("nope", "m1", 1, None), 25),
        ("unknown member", hb_req("g", "m9", 1, None), 25),
        ("epoch ahead", hb_req("g", "m1", 2, None), 110),
        ("leave unknown member", hb_req("g", "m9", -1, None), 25),
        ("leave unknown group", hb_req("nope", "m1", -1, None), 25),
        (
            "static leave unknown instance",
            ConsumerHeartbeat {
                instance_id: Some("x".into()),
                ..hb_req("g", "m1", -2, None)
            },
            25,
        ),
        (
            "static heartbeat unknown instance",
            ConsumerHeartbeat {
                instance_id: Some("x".into()),
                ..hb_req("g", "m1", 1, None)
            },
            25,
        ),
    ];
    for (name, req, code) in cases {
        let mut h = setup();
        let before = h.c.describe(&["g".into(), "nope".into()], &h.topics);
        let r = h.send(req);
        assert_eq!(r.error_code, code, "{name}: {r:?}");
        assert!(r.error_message.is_some(), "{name}");
        assert_eq!(
            (r.member_id.clone(), r.assignment.clone()),
            (None, None),
            "{name}"
        );
        assert_eq!(
            h.c.describe(&["g".into(), "nope".into()], &h.topics),
            before,
            "{name} changed state"
        );
    }
}

#[test]
fn stale_epochs_are_fenced() {
    let mut h = setup();
    h.topic("t", 4);
    // Bump m1 to epoch 2 (metadata change); previous epoch 1.
    let owned = h.asg(&[("t", &[0, 1])]);
    assert_eq!(h.hb("g", "m1", 1, Some(&owned)).member_epoch, 2);
    h.topic("t", 6);
    let owned4 = h.asg(&[("t", &[0, 1, 2, 3])]);
    assert_eq!(h.hb("g", "m1", 2, Some(&owned4)).member_epoch, 3);
    // Epoch 1 is neither current (3) nor previous (2).
    assert_eq!(h.hb("g", "m1", 1, Some(&owned)).error_code, 110);
    // The previous epoch, but owning something it does not have, or not saying what it owns.
    let foreign = h.asg(&[("t", &[0, 7])]);
    assert_eq!(h.hb("g", "m1", 2, Some(&foreign)).error_code, 110);
    assert_eq!(h.hb("g", "m1", 2, None).error_code, 110);
    assert_eq!(h.hb("g", "m1", 2, Some(&owned)).error_code, 0);
}

#[test]
fn group_max_size() {
    let mut h = Harness::new(ConsumerGroupConfig {
        max_size: 1,
        ..config()
    });
    h.topic("t", 2);
    h.join("g", "m1", &["t"]);
    let r = h.join("g", "m2", &["t"]);
    assert_eq!(r.error_code, 81);
    assert_eq!(h.describe("g").members.len(), 1);
    // The existing member is not affected.
    assert_eq!(h.hb("g", "m1", 1, None).error_code, 0);
    assert_eq!(h.join("g", "m1", &["t"]).error_code, 0);
}

#[test]
fn failed_first_join_creates_no_group() {
    let mut h = Harness::new(config());
    let r = h.send(ConsumerHeartbeat {
        server_assignor: Some("nope".into()),
        ..join_req("g", "m", &["t"])
    });
    assert_eq!(r.error_code, 112);
    assert!(!h.c.contains("g"));
    assert!(h.c.list().is_empty());
}

#[test]
fn unreleased_and_fenced_instance_ids() {
    let mut h = setup();
    let stat = |m: &str| ConsumerHeartbeat {
        instance_id: Some("inst".into()),
        ..join_req("g", m, &["t"])
    };
    assert_eq!(h.send(stat("s1")).error_code, 0);
    assert_eq!(h.send(stat("s2")).error_code, 111);
    assert_eq!(
        h.send(ConsumerHeartbeat {
            instance_id: Some("inst".into()),
            ..hb_req("g", "s2", -1, None)
        })
        .error_code,
        82
    );
    assert_eq!(
        h.send(ConsumerHeartbeat {
            instance_id: Some("inst".into()),
            ..hb_req("g", "s2", -2, None)
        })
        .error_code,
        82
    );
}
