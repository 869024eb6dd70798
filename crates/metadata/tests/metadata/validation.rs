//! Spec C.1-C.4: every rule with its exact code (and KRaft's message where it is pinned).

use runnel_metadata::*;

use crate::common::*;

#[test]
fn c1_topic_names() {
    assert_eq!(validate_topic_name("orders-v1.eu_west"), Ok(()));
    assert_eq!(validate_topic_name(&"a".repeat(249)), Ok(()));
    for bad in [
        "",
        ".",
        "..",
        &"a".repeat(250),
        "a b",
        "a/b",
        "é",
        "a*",
        "a\n",
    ] {
        let e = validate_topic_name(bad).unwrap_err();
        assert_eq!(e.code, 17, "{bad:?}");
        assert!(
            e.message.starts_with("Topic name is invalid"),
            "{}",
            e.message
        );
    }
    assert!(
        is_internal("__consumer_offsets")
            && is_internal("__transaction_state")
            && !is_internal("orders")
    );
}

#[test]
fn c1_collisions() {
    use runnel_metadata::topic_name::validate_new_topic_name;
    let existing = ["a_b", "plain"];
    let e = validate_new_topic_name("a.b", existing).unwrap_err();
    assert_eq!(e.code, 17);
    assert_eq!(e.message, "Topic 'a.b' collides with existing topic: a_b");
    assert!(validate_new_topic_name("a_b2", existing).is_ok());
    assert!(validate_new_topic_name("plain2", existing).is_ok());

    let mut h = Harness::with_brokers(&[1]);
    h.create("metrics.cpu", 1, 1).unwrap();
    assert_eq!(code(&h.create("metrics_cpu", 1, 1)), 17);
    // Within one request too.
    let (out, _) =
        h.controller
            .create_topics(&h.image, &[req("x.y", 1, 1), req("x_y", 1, 1)], false);
    assert_eq!((code(&out[0].result), code(&out[1].result)), (0, 17));
}

#[test]
fn c2_create_topics_rules_in_order() {
    let mut h = Harness::with_brokers(&[1, 2, 3]);
    h.create("exists", 1, 1).unwrap();
    let manual = |name: &str, a: Vec<(i32, Vec<i32>)>| CreateTopicRequest {
        name: name.into(),
        num_partitions: -1,
        replication_factor: -1,
        assignment: a,
        configs: vec![],
    };
    let with_cfg = |name: &str, k: &str, v: Option<&str>| CreateTopicRequest {
        configs: vec![(k.into(), v.map(String::from))],
        ..req(name, 1, 1)
    };
    let cases: Vec<(CreateTopicRequest, i16, &str)> = vec![
        (req("exists", 1, 1), 36, "Topic 'exists' already exists."),
        (
            CreateTopicRequest {
                replication_factor: 2,
                ..manual("m1", vec![(0, vec![1])])
            },
            42,
            "replication factor was not set to -1",
        ),
        (
            CreateTopicRequest {
                num_partitions: 2,
                ..manual("m2", vec![(0, vec![1])])
            },
            42,
            "numPartitions was not set to -1",
        ),
        (req("p0", 0, 1), 37, "non-positive"),
        (req("pneg", -5, 1), 37, "non-positive"),
        (
            req("rf0", 1, 0),
            38,
            "Replication factor must be larger than 0",
        ),
        (req("rf4", 1, 4), 38, "only 3 broker(s)"),
        (req("huge", 1_000_000, 1), 44, "Excessively large"),
        (req("bad name", 1, 1), 17, "Topic name is invalid"),
        (req("bad name", 1, 4), 38, ""), // placement is checked before the name (C.2 7 < 8)
        (
            manual("m3", vec![(0, vec![1, 2]), (1, vec![3])]),
            39,
            "not consistent",
        ),
        (manual("m4", vec![(0, vec![1, 1])]), 39, "more than once"),
        (
            manual("m5", vec![(0, vec![1]), (2, vec![2])]),
            39,
            "consecutive 0-based",
        ),
        (manual("m6", vec![(0, vec![])]), 39, "empty replica list"),
        (
            manual("m7", vec![(0, vec![1, 9])]),
            39,
            "includes broker 9, but no such broker is registered",
        ),
        (
            manual("m8", vec![(0, vec![1]), (0, vec![2])]),
            39,
            "multiple manual partition assignments for partition 0",
        ),
        (
            with_cfg("c1", "no.such.key", Some("1")),
            40,
            "Unknown topic config name: no.such.key",
        ),
        (
            with_cfg("c2", "segment.bytes", Some("13")),
            40,
            "Value must be at least 14",
        ),
        (with_cfg("c3", "retention.ms", None), 40, "Null value"),
        (
            with_cfg("c4", "cleanup.policy", Some("shred")),
            40,
            "String must be one of",
        ),
    ];
    for (r, expected, msg) in cases {
        let (out, records) = h
            .controller
            .create_topics(&h.image, std::slice::from_ref(&r), false);
        let e = out[0].result.clone().expect_err(&r.name);
        assert_eq!(e.code, expected, "{}: {e}", r.name);
        assert!(e.message.contains(msg), "{}: {}", r.name, e.message);
        assert!(records.is_empty());
    }
    // Duplicate names in one request: 42 for both, the other topic succeeds.
    let (out, records) = h.controller.create_topics(
        &h.image,
        &[req("d", 1, 1), req("ok", 1, 1), req("d", 1, 1)],
        false,
    );
    assert_eq!(
        out.iter().map(|o| code(&o.result)).collect::<Vec<_>>(),
        vec![42, 0, 42]
    );
    assert!(records
        .iter()
        .all(|r| !matches!(r, MetadataRecord::Topic { name, .. } if name == "d")));
}

#[test]
fn c2_defaults_manual_and_validate_only() {
    let mut h = Harness::new(ControllerConfig {
        num_partitions: 3,
        default_replication_factor: 2,
        ..Default::default()
    });
    for b in [1, 2, 3] {
        h.add_broker(b, None, true);
    }
    let (out, recs) = h
        .controller
        .create_topics(&h.image, &[req("defaults", -1, -1)], true);
    let created = out[0].result.clone().unwrap();
    assert_eq!((created.num_partitions, created.replication_factor), (3, 2));
    assert!(recs.is_empty(), "validate_only creates nothing");
    assert!(!created.topic_id.is_nil());
    let manual = CreateTopicRequest {
        name: "manual".into(),
        num_partitions: -1,
        replication_factor: -1,
        assignment: vec![(1, vec![3, 1]), (0, vec![2, 3])],
        configs: vec![],
    };
    let (out, recs) = h.controller.create_topics(&h.image, &[manual], false);
    assert_eq!(out[0].result.as_ref().unwrap().num_partitions, 2);
    h.commit(recs);
    assert_eq!(h.image.partition("manual", 0).unwrap().replicas, vec![2, 3]);
    assert_eq!(h.image.partition("manual", 1).unwrap().replicas, vec![3, 1]);
}

#[test]
fn c2_no_usable_brokers() {
    let mut h = Harness::new(ControllerConfig::default());
    assert_eq!(code(&h.create("t", 1, 1)), 38);
    h.add_broker(1, None, false);
    let e = h.create("t", 1, 1).unwrap_err();
    assert_eq!(e.code, 38);
    assert!(
        e.message.contains("All brokers are currently fenced"),
        "{}",
        e.message
    );
}

#[test]
fn c2_partial_racks_is_unknown_server_error() {
    let mut h = Harness::new(ControllerConfig::default());
    h.add_broker(1, Some("a"), true);
    h.add_broker(2, None, true);
    let e = h.create("t", 2, 2).unwrap_err();
    assert_eq!(e.code, -1);
    assert!(e.message.contains("Not all brokers have rack information"));
}

#[test]
fn c3_delete_topics_rules() {
    let mut h = Harness::with_brokers(&[1]);
    let id = h.create("t", 1, 1).unwrap().topic_id;
    h.create("__consumer_offsets", 1, 1).unwrap();
    let unknown = uuid::Uuid::from_u128(99);
    let refs = [
        TopicRef::Name("missing".into()),
        TopicRef::Id(unknown),
        TopicRef::Name("dup".into()),
        TopicRef::Name("dup".into()),
        TopicRef::Name("__consumer_offsets".into()),
    ];
    let (res, recs) = h.controller.delete_topics(&h.image, &refs, 6);
    assert_eq!(
        res.iter().map(|r| code(&r.2)).collect::<Vec<_>>(),
        vec![3, 100, 42, 42, 42]
    );
    assert!(recs.is_empty());
    // Name and id of the same topic: one removal, both succeed.
    let (res, recs) =
        h.controller
            .delete_topics(&h.image, &[TopicRef::Name("t".into()), TopicRef::Id(id)], 6);
    assert_eq!(
        res.iter().map(|r| r.2.clone()).collect::<Vec<_>>(),
        vec![Ok(id), Ok(id)]
    );
    assert_eq!(res[1].1.as_deref(), Some("t"));
    assert_eq!(recs, vec![MetadataRecord::RemoveTopic { topic_id: id }]);

    let mut off = Harness::new(ControllerConfig {
        delete_topic_enable: false,
        ..Default::default()
    });
    off.add_broker(1, None, true);
    off.create("t", 1, 1).unwrap();
    for (version, expected) in [(0, 42), (2, 42), (3, 73), (6, 73)] {
        let (res, recs) =
            off.controller
                .delete_topics(&off.image, &[TopicRef::Name("t".into())], version);
        assert_eq!(code(&res[0].2), expected, "v{version}");
        assert!(recs.is_empty());
    }
}

#[test]
fn c4_create_partitions_rules() {
    let mut h = Harness::with_brokers(&[1, 2, 3]);
    h.create("t", 2, 2).unwrap();
    let cp = |name: &str, count: i32, a: Option<Vec<Vec<i32>>>| CreatePartitionsRequest {
        name: name.into(),
        count,
        assignment: a,
    };
    let cases: Vec<(CreatePartitionsRequest, i16, &str)> = vec![
        (cp("missing", 3, None), 3, "This server does not host this topic-partition."),
        (cp("t", 2, None), 37, "Topic already has 2 partition(s)."),
        (cp("t", 1, None), 37, "The topic t currently has 2 partition(s); 1 would not be an increase."),
        (cp("t", -4, None), 37, "would not be an increase"),
        (cp("t", 2_000_000, None), 44, "Excessively large"),
        (cp("t", 4, Some(vec![vec![1, 2]])), 39, "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."),
        (cp("t", 3, Some(vec![])), 39, "but only 0 assignment(s)"),
        (cp("t", 3, Some(vec![vec![1]])), 39, "includes a partition with 1 replica(s), but this is not consistent with previous partitions, which have 2 replica(s)."),
        (cp("t", 3, Some(vec![vec![1, 1]])), 39, "includes the broker 1 more than once."),
        (cp("t", 3, Some(vec![vec![1, 12]])), 39, "includes broker 12, but no such broker is registered."),
    ];
    for (r, expected, msg) in cases {
        let (res, recs) = h
            .controller
            .create_partitions(&h.image, std::slice::from_ref(&r), false);
        let e = res[0].1.clone().unwrap_err();
        assert_eq!(e.code, expected, "{r:?}: {e}");
        assert!(e.message.contains(msg), "{r:?}: {}", e.message);
        assert!(recs.is_empty());
    }
    let (res, _) =
        h.controller
            .create_partitions(&h.image, &[cp("t", 3, None), cp("t", 4, None)], false);
    assert!(res.iter().all(|r| code(&r.1) == 42), "duplicates");
    // RF > usable brokers for automatic placement: 38.
    let mut small = Harness::with_brokers(&[1, 2]);
    small.create("t", 1, 2).unwrap();
    let recs = small.controller.fence_broker(&small.image, 2);
    small.commit(recs);
    let (res, _) = small
        .controller
        .create_partitions(&small.image, &[cp("t", 2, None)], false);
    assert_eq!(code(&res[0].1), 38);
    // validate_only: ok, no records.
    let (res, recs) = h
        .controller
        .create_partitions(&h.image, &[cp("t", 5, None)], true);
    assert_eq!(code(&res[0].1), 0);
    assert!(recs.is_empty());
}

/// Caught: the partition limit was per topic (100,000 each), so one CreateTopics or
/// CreatePartitions of many topics created unbounded partitions while every other controller
/// request waited. Kafka's limit is 10,000 for the whole request, POLICY_VIOLATION for all of
/// it.
#[test]
fn at_most_10000_partitions_per_request() {
    let mut h = Harness::with_brokers(&[1, 2, 3]);
    let many = |n: usize, each: i32| -> Vec<CreateTopicRequest> {
        (0..n).map(|i| req(&format!("t.{i}"), each, 1)).collect()
    };
    let (out, recs) = h.controller.create_topics(&h.image, &many(11, 1000), false);
    assert!(recs.is_empty());
    for o in &out {
        let e = o.result.clone().unwrap_err();
        assert_eq!(e.code, 44, "{e}");
        assert_eq!(
            e.message,
            "Excessively large number of partitions per request."
        );
    }
    let mut manual = req("m", -1, -1);
    manual.assignment = (0..10_001).map(|p| (p, vec![1])).collect();
    let (out, _) = h.controller.create_topics(&h.image, &[manual], true);
    assert_eq!(code(&out[0].result), 44, "manual assignments count too");
    // Exactly 10,000 in one request is allowed (and named t.0 .. t.9, checked in O(1) each).
    let (out, recs) = h.controller.create_topics(&h.image, &many(10, 1000), false);
    assert!(out.iter().all(|o| o.result.is_ok()), "{out:?}");
    h.commit(recs);
    let (out, _) = h
        .controller
        .create_topics(&h.image, &[req("t_1", 1, 1)], true);
    assert_eq!(code(&out[0].result), 17, "collision with an existing topic");
    // CreatePartitions: 5,001 more for each of two topics is 10,002 in one request.
    let cp = |name: &str, count: i32| CreatePartitionsRequest {
        name: name.into(),
        count,
        assignment: None,
    };
    let (res, recs) =
        h.controller
            .create_partitions(&h.image, &[cp("t.0", 6001), cp("t.1", 6001)], false);
    assert!(recs.is_empty());
    assert!(res.iter().all(|r| code(&r.1) == 44), "{res:?}");
    let (res, _) =
        h.controller
            .create_partitions(&h.image, &[cp("t.0", 6000), cp("t.1", 6000)], true);
    assert!(res.iter().all(|r| r.1.is_ok()), "{res:?}");
}

/// Caught: CreatePartitions on `__consumer_offsets` was allowed, which remaps every group to
/// another partition (and coordinator) and strands its committed offsets.
#[test]
fn partitions_cannot_be_added_to_internal_topics() {
    let mut h = Harness::with_brokers(&[1, 2, 3]);
    h.create("__consumer_offsets", 3, 1).unwrap();
    let (res, recs) = h.controller.create_partitions(
        &h.image,
        &[CreatePartitionsRequest {
            name: "__consumer_offsets".into(),
            count: 4,
            assignment: None,
        }],
        false,
    );
    assert!(recs.is_empty());
    let e = res[0].1.clone().unwrap_err();
    assert_eq!(e.code, 42, "{e}");
    assert!(e.message.contains("internal topic"), "{e}");
}
