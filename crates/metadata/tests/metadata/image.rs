//! The image: apply sequences, rejection of inconsistent records, immutability.

use std::sync::Arc;

use runnel_metadata::*;
use uuid::Uuid;

const T: Uuid = Uuid::from_u128(0xA);

fn at(records: Vec<MetadataRecord>, first: i64) -> Vec<(i64, MetadataRecord)> {
    records
        .into_iter()
        .enumerate()
        .map(|(i, r)| (first + i as i64, r))
        .collect()
}

fn broker(id: i32) -> MetadataRecord {
    MetadataRecord::RegisterBroker {
        broker_id: id,
        incarnation_id: Uuid::from_u128(100 + id as u128),
        broker_epoch: 1,
        host: "h".into(),
        port: 9092,
        rack: None,
        fenced: false,
        endpoints: Vec::new(),
    }
}

fn partition(id: i32, replicas: Vec<i32>, isr: Vec<i32>, leader: i32) -> MetadataRecord {
    MetadataRecord::Partition {
        topic_id: T,
        partition_id: id,
        replicas,
        isr,
        leader,
        leader_epoch: 0,
        partition_epoch: 0,
        adding_replicas: vec![],
        removing_replicas: vec![],
    }
}

fn change(id: i32, leader: Option<i32>, isr: Option<Vec<i32>>) -> MetadataRecord {
    MetadataRecord::PartitionChange {
        topic_id: T,
        partition_id: id,
        leader,
        isr,
        replicas: None,
        adding_replicas: None,
        removing_replicas: None,
    }
}

fn base() -> MetadataImage {
    MetadataImage::empty("c".into())
        .apply(&at(
            vec![
                broker(1),
                broker(2),
                MetadataRecord::Topic {
                    name: "t".into(),
                    topic_id: T,
                },
                partition(0, vec![1, 2], vec![], -1),
                partition(1, vec![2, 1], vec![], -1),
                MetadataRecord::Config {
                    resource: ConfigResource::Topic("t".into()),
                    name: "retention.ms".into(),
                    value: Some("1000".into()),
                },
            ],
            0,
        ))
        .unwrap()
}

#[test]
fn apply_builds_topics_brokers_and_configs() {
    let img = base();
    assert_eq!(img.offset, 5);
    assert_eq!(img.live_brokers().count(), 2);
    assert_eq!(img.topic("t").unwrap().partitions.len(), 2);
    assert_eq!(img.topic_by_id(&T).unwrap().name, "t");
    assert_eq!(img.partition("t", 1).unwrap().replicas, vec![2, 1]);
    assert_eq!(
        img.topic_overrides("t")
            .get("retention.ms")
            .map(String::as_str),
        Some("1000")
    );
    assert_eq!(img.check_consistency(), Ok(()));
}

#[test]
fn partition_change_epochs() {
    let img = base();
    // First election keeps the recorded leader epoch (0); the partition epoch grows.
    let img = img
        .apply(&at(vec![change(0, Some(1), Some(vec![1, 2]))], 6))
        .unwrap();
    let p = img.partition("t", 0).unwrap();
    assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (1, 0, 1));
    // ISR-only change: partition epoch only.
    let img = img
        .apply(&at(vec![change(0, None, Some(vec![1]))], 7))
        .unwrap();
    let p = img.partition("t", 0).unwrap();
    assert_eq!(
        (p.leader, p.leader_epoch, p.partition_epoch, p.isr.clone()),
        (1, 0, 2, vec![1])
    );
    // Leader change: both.
    let img = img
        .apply(&at(
            vec![change(0, Some(-1), None), change(0, Some(2), Some(vec![2]))],
            8,
        ))
        .unwrap();
    let p = img.partition("t", 0).unwrap();
    assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (2, 2, 4));
}

#[test]
fn old_image_is_unchanged() {
    let old = base();
    let snapshot = old.clone();
    let topic_before = Arc::clone(old.topic("t").unwrap());
    let new = old
        .apply(&at(
            vec![
                change(0, Some(1), Some(vec![1, 2])),
                MetadataRecord::RemoveTopic { topic_id: T },
            ],
            6,
        ))
        .unwrap();
    assert_eq!(old, snapshot);
    assert_eq!(old.partition("t", 0).unwrap().leader, -1);
    assert_eq!(**old.topic("t").unwrap(), *topic_before);
    assert!(new.topic("t").is_none());
    assert!(
        new.topic_overrides("t").is_empty(),
        "configs go with the topic"
    );
    // Untouched topics are shared, not copied.
    let other = old.apply(&at(vec![MetadataRecord::NoOp], 6)).unwrap();
    assert!(Arc::ptr_eq(
        other.topic("t").unwrap(),
        old.topic("t").unwrap()
    ));
}

#[test]
fn inconsistent_records_are_rejected_and_nothing_is_applied() {
    let img = base();
    let unknown = Uuid::from_u128(0xB);
    let bad: Vec<(&str, Vec<MetadataRecord>)> = vec![
        (
            "unknown topic id",
            vec![MetadataRecord::RemoveTopic { topic_id: unknown }],
        ),
        (
            "duplicate topic name",
            vec![MetadataRecord::Topic {
                name: "t".into(),
                topic_id: unknown,
            }],
        ),
        (
            "duplicate topic id",
            vec![MetadataRecord::Topic {
                name: "u".into(),
                topic_id: T,
            }],
        ),
        (
            "nil topic id",
            vec![MetadataRecord::Topic {
                name: "u".into(),
                topic_id: Uuid::nil(),
            }],
        ),
        (
            "partition of unknown topic",
            vec![MetadataRecord::Partition {
                topic_id: unknown,
                partition_id: 0,
                replicas: vec![1],
                isr: vec![],
                leader: -1,
                leader_epoch: 0,
                partition_epoch: 0,
                adding_replicas: vec![],
                removing_replicas: vec![],
            }],
        ),
        (
            "duplicate partition",
            vec![partition(1, vec![1], vec![], -1)],
        ),
        (
            "gap in partition ids",
            vec![partition(3, vec![1], vec![], -1)],
        ),
        ("empty replicas", vec![partition(2, vec![], vec![], -1)]),
        (
            "duplicate replica",
            vec![partition(2, vec![1, 1], vec![], -1)],
        ),
        (
            "leader not in isr",
            vec![partition(2, vec![1, 2], vec![2], 1)],
        ),
        (
            "isr not subset",
            vec![partition(2, vec![1, 2], vec![3], -1)],
        ),
        (
            "change of unknown partition",
            vec![change(9, Some(1), Some(vec![1]))],
        ),
        (
            "change leader outside isr",
            vec![change(0, Some(2), Some(vec![1]))],
        ),
        (
            "config of unknown topic",
            vec![MetadataRecord::Config {
                resource: ConfigResource::Topic("nope".into()),
                name: "a".into(),
                value: Some("b".into()),
            }],
        ),
        (
            "unknown broker",
            vec![MetadataRecord::BrokerRegistrationChange {
                broker_id: 9,
                broker_epoch: 1,
                fenced: Some(true),
                in_controlled_shutdown: None,
            }],
        ),
        (
            "stale broker epoch",
            vec![MetadataRecord::BrokerRegistrationChange {
                broker_id: 1,
                broker_epoch: 0,
                fenced: Some(true),
                in_controlled_shutdown: None,
            }],
        ),
        (
            "producer ids going back",
            vec![
                MetadataRecord::ProducerIds {
                    broker_id: 1,
                    broker_epoch: 1,
                    next_producer_id: 10,
                },
                MetadataRecord::ProducerIds {
                    broker_id: 1,
                    broker_epoch: 1,
                    next_producer_id: 5,
                },
            ],
        ),
    ];
    for (what, mut records) in bad {
        // A valid record first proves the whole batch is rejected, not just the bad record.
        records.insert(
            0,
            MetadataRecord::FeatureLevel {
                name: "metadata.version".into(),
                level: 7,
            },
        );
        let before = img.clone();
        assert!(
            img.apply(&at(records, 6)).is_err(),
            "{what} must be rejected"
        );
        assert_eq!(img, before, "{what}: image changed");
    }
    // Offsets must increase.
    assert!(matches!(
        img.apply(&[(5, MetadataRecord::NoOp)]),
        Err(ImageError::NonIncreasingOffset { .. })
    ));
    assert!(img
        .apply(&[(7, MetadataRecord::NoOp), (7, MetadataRecord::NoOp)])
        .is_err());
}

#[test]
fn brokers_fence_unfence_and_unregister() {
    let img = base();
    let img = img
        .apply(&at(
            vec![MetadataRecord::BrokerRegistrationChange {
                broker_id: 2,
                broker_epoch: 1,
                fenced: Some(true),
                in_controlled_shutdown: None,
            }],
            6,
        ))
        .unwrap();
    assert_eq!(
        img.live_brokers().map(|b| b.id).collect::<Vec<_>>(),
        vec![1]
    );
    let img = img
        .apply(&at(
            vec![MetadataRecord::UnregisterBroker {
                broker_id: 2,
                broker_epoch: 1,
            }],
            7,
        ))
        .unwrap();
    assert!(!img.brokers.contains_key(&2));
}

/// A registration names each listener's endpoint and none for a listener it lacks; an old
/// registration without endpoints answers its one address on every listener.
#[test]
fn broker_endpoints_by_listener() {
    let sasl = BrokerEndpoint {
        name: "SASL_PLAINTEXT".into(),
        host: "h".into(),
        port: 9093,
        security_protocol: 2,
    };
    let plain = BrokerEndpoint {
        name: "PLAINTEXT".into(),
        host: "h".into(),
        port: 9092,
        security_protocol: 0,
    };
    let mut with = broker(1);
    if let MetadataRecord::RegisterBroker { endpoints, .. } = &mut with {
        *endpoints = vec![plain, sasl];
    }
    let image = MetadataImage::empty("c".into())
        .apply(&at(vec![with, broker(2)], 0))
        .unwrap();
    let b1 = &image.brokers[&1];
    assert_eq!(b1.endpoint("SASL_PLAINTEXT"), Some(("h", 9093)));
    assert_eq!(b1.endpoint("PLAINTEXT"), Some(("h", 9092)));
    assert_eq!(b1.endpoint("SSL"), None);
    assert_eq!(
        image.brokers[&2].endpoint("SASL_PLAINTEXT"),
        Some(("h", 9092))
    );
}
