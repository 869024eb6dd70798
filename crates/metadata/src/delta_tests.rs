//! The delta equals the difference of the two images, and deltas compose.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;
use crate::records::SecretBytes;

const TOPICS: [&str; 2] = ["a", "b"];

fn topic_id(i: u8) -> Uuid {
    Uuid::from_u128(u128::from(i % 3) + 1)
}

fn replicas(mask: u8) -> Vec<i32> {
    let v: Vec<i32> = (0..3).filter(|b| mask & (1 << b) != 0).collect();
    if v.is_empty() {
        vec![0]
    } else {
        v
    }
}

/// A record from a small universe, so that many of a random sequence apply.
fn record() -> impl Strategy<Value = MetadataRecord> {
    use MetadataRecord as R;
    prop_oneof![
        (0..3i32, 0..3i64, any::<bool>()).prop_map(|(id, epoch, fenced)| R::RegisterBroker {
            broker_id: id,
            incarnation_id: Uuid::from_u128(id as u128),
            broker_epoch: epoch,
            host: "h".into(),
            port: 9092,
            rack: None,
            fenced,
            endpoints: Vec::new(),
        }),
        (
            0..3i32,
            0..3i64,
            any::<Option<bool>>(),
            any::<Option<bool>>()
        )
            .prop_map(
                |(id, epoch, fenced, shutdown)| R::BrokerRegistrationChange {
                    broker_id: id,
                    broker_epoch: epoch,
                    fenced,
                    in_controlled_shutdown: shutdown,
                }
            ),
        (0..3i32, 0..3i64).prop_map(|(id, epoch)| R::UnregisterBroker {
            broker_id: id,
            broker_epoch: epoch,
        }),
        (0..2usize, any::<u8>()).prop_map(|(n, id)| R::Topic {
            name: TOPICS[n].into(),
            topic_id: topic_id(id),
        }),
        (any::<u8>(), 0..2i32, 1..8u8).prop_map(|(id, p, mask)| R::Partition {
            topic_id: topic_id(id),
            partition_id: p,
            replicas: replicas(mask),
            isr: replicas(mask),
            leader: replicas(mask)[0],
            leader_epoch: 0,
            partition_epoch: 0,
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
        }),
        (any::<u8>(), 0..2i32, 1..8u8, any::<bool>()).prop_map(|(id, p, mask, lead)| {
            R::PartitionChange {
                topic_id: topic_id(id),
                partition_id: p,
                leader: Some(if lead { replicas(mask)[0] } else { -1 }),
                isr: Some(replicas(mask)),
                replicas: None,
                adding_replicas: None,
                removing_replicas: None,
            }
        }),
        any::<u8>().prop_map(|id| R::RemoveTopic {
            topic_id: topic_id(id)
        }),
        (0..3usize, 0..2u8, any::<Option<u8>>()).prop_map(|(r, k, v)| R::Config {
            resource: match r {
                0 => ConfigResource::Broker(String::new()),
                n => ConfigResource::Topic(TOPICS[n - 1].into()),
            },
            name: format!("k{k}"),
            value: v.map(|v| (v % 2).to_string()),
        }),
        (0..3i16).prop_map(|level| R::FeatureLevel {
            name: "f".into(),
            level
        }),
        (0..6i64).prop_map(|next| R::ProducerIds {
            broker_id: 0,
            broker_epoch: 0,
            next_producer_id: next,
        }),
        (any::<bool>(), 0..2u32).prop_map(|(add, i)| if add {
            R::UserScramCredential {
                name: "u".into(),
                mechanism: 1,
                salt: SecretBytes(vec![1]),
                stored_key: SecretBytes(vec![2]),
                server_key: SecretBytes(vec![3]),
                iterations: 4096 + i,
            }
        } else {
            R::RemoveUserScramCredential {
                name: "u".into(),
                mechanism: 1,
            }
        }),
        Just(R::NoOp),
    ]
}

/// The records of `candidates` that apply, in order, each at the next offset after `image`.
fn applicable(
    image: &MetadataImage,
    candidates: Vec<MetadataRecord>,
) -> Vec<(i64, MetadataRecord)> {
    let mut image = image.clone();
    let mut kept = Vec::new();
    for record in candidates {
        let numbered = [(image.offset + 1, record)];
        if let Ok(next) = image.apply(&numbered) {
            image = next;
            kept.extend(numbered);
        }
    }
    kept
}

/// The slow diff: every key of both images compared.
fn slow_diff(before: &MetadataImage, after: &MetadataImage) -> MetadataDelta {
    fn keys<'a, K: Ord + Clone + 'a>(
        a: impl Iterator<Item = &'a K>,
        b: impl Iterator<Item = &'a K>,
    ) -> BTreeSet<K> {
        a.chain(b).cloned().collect()
    }
    fn changes<K: Ord + Clone, T: PartialEq>(
        keys: BTreeSet<K>,
        old: impl Fn(&K) -> Option<T>,
        new: impl Fn(&K) -> Option<T>,
    ) -> Changes<K, T> {
        let mut out = Changes::new();
        for k in keys {
            let (o, n) = (old(&k), new(&k));
            if o != n {
                out.insert(k, Change { old: o, new: n });
            }
        }
        out
    }
    let partition_keys = |image: &MetadataImage| -> Vec<(Uuid, i32)> {
        image
            .topics
            .values()
            .flat_map(|t| t.partitions.keys().map(|p| (t.id, *p)))
            .collect()
    };
    let partition = |image: &MetadataImage, (id, p): &(Uuid, i32)| {
        image
            .topic_by_id(id)
            .and_then(|t| t.partitions.get(p).cloned())
    };
    MetadataDelta {
        topics: changes(
            keys(before.topic_ids.keys(), after.topic_ids.keys()),
            |k| before.topic_ids.get(k).cloned(),
            |k| after.topic_ids.get(k).cloned(),
        ),
        partitions: changes(
            keys(partition_keys(before).iter(), partition_keys(after).iter()),
            |k| partition(before, k),
            |k| partition(after, k),
        ),
        brokers: changes(
            keys(before.brokers.keys(), after.brokers.keys()),
            |k| before.brokers.get(k).cloned(),
            |k| after.brokers.get(k).cloned(),
        ),
        configs: changes(
            keys(before.configs.keys(), after.configs.keys()),
            |k| before.configs.get(k).cloned(),
            |k| after.configs.get(k).cloned(),
        ),
        features: changes(
            keys(before.features.keys(), after.features.keys()),
            |k| before.features.get(k).copied(),
            |k| after.features.get(k).copied(),
        ),
        other: OtherChanges {
            acls: (before.acls != after.acls).then(|| Change {
                old: Some(before.acls.clone()),
                new: Some(after.acls.clone()),
            }),
            client_quotas: (before.client_quotas != after.client_quotas).then(|| Change {
                old: Some(before.client_quotas.clone()),
                new: Some(after.client_quotas.clone()),
            }),
            scram_credentials: changes(
                keys(
                    before.scram_credentials.keys(),
                    after.scram_credentials.keys(),
                ),
                |k| before.scram_credentials.get(k).cloned(),
                |k| after.scram_credentials.get(k).cloned(),
            ),
            next_producer_id: (before.next_producer_id != after.next_producer_id).then_some(
                Change {
                    old: Some(before.next_producer_id),
                    new: Some(after.next_producer_id),
                },
            ),
        },
    }
}

#[test]
fn a_removed_topic_takes_its_partitions_and_configs_into_the_delta() {
    let id = topic_id(0);
    let base = MetadataImage::empty("c".into())
        .apply(&[
            (
                0,
                MetadataRecord::Topic {
                    name: "a".into(),
                    topic_id: id,
                },
            ),
            (
                1,
                MetadataRecord::Partition {
                    topic_id: id,
                    partition_id: 0,
                    replicas: vec![0],
                    isr: vec![0],
                    leader: 0,
                    leader_epoch: 0,
                    partition_epoch: 0,
                    adding_replicas: Vec::new(),
                    removing_replicas: Vec::new(),
                },
            ),
            (
                2,
                MetadataRecord::Config {
                    resource: ConfigResource::Topic("a".into()),
                    name: "k".into(),
                    value: Some("v".into()),
                },
            ),
        ])
        .unwrap();
    let applied = base
        .apply_with_delta(&[(3, MetadataRecord::RemoveTopic { topic_id: id })])
        .unwrap();
    let d = &applied.delta;
    assert_eq!(d.topics[&id].new, None);
    assert_eq!(d.partitions[&(id, 0)].new, None);
    assert_eq!(d.configs[&ConfigResource::Topic("a".into())].new, None);
    assert_eq!(*d, slow_diff(&base, &applied.image));
}

#[test]
fn records_that_change_nothing_make_an_empty_delta() {
    let base = MetadataImage::empty("c".into());
    let applied = base
        .apply_with_delta(&[(0, MetadataRecord::NoOp), (1, MetadataRecord::NoOp)])
        .unwrap();
    assert!(applied.delta.is_empty());
}

proptest! {
    /// For random record sequences, split anywhere: the delta of each chunk is the slow diff of
    /// its two images, and the two chunks' deltas composed are the delta of the whole.
    #[test]
    fn the_delta_is_the_difference_of_the_images_and_composes(
        candidates in proptest::collection::vec(record(), 0..60),
        split in any::<prop::sample::Index>(),
    ) {
        let base = MetadataImage::empty("c".into());
        let records = applicable(&base, candidates);
        let at = split.index(records.len() + 1);
        let whole = base.apply_with_delta(&records).unwrap();
        prop_assert_eq!(&whole.delta, &slow_diff(&base, &whole.image));
        let first = base.apply_with_delta(&records[..at]).unwrap();
        let second = first.image.apply_with_delta(&records[at..]).unwrap();
        prop_assert_eq!(&second.image, &whole.image);
        prop_assert_eq!(&first.delta, &slow_diff(&base, &first.image));
        prop_assert_eq!(&second.delta, &slow_diff(&first.image, &second.image));
        prop_assert_eq!(first.delta.then(second.delta), whole.delta);
    }
}
