//! What one applied batch changed: the difference between the image before and the image
//! after, as Kafka's `MetadataDelta` (with its `TopicsDelta`, `ClusterDelta`, `ConfigurationsDelta`,
//! `FeaturesDelta` and the smaller sub-deltas) in spirit.
//!
//! A delta is a *net* difference: a key is in it when its value before the batch differs from
//! its value after (a broker fenced and unfenced in one batch is not in it). The records name
//! the keys they may touch ([`Touched`]); the delta compares only those keys of the two
//! images, so building it costs the size of the batch, not of the image, and needs no
//! re-application ([`MetadataDelta::of_batch`]).
//! Deltas compose ([`MetadataDelta::then`]): the delta of two batches is the composition of
//! their deltas (checked by the property test in `delta_tests.rs`).
//!
//! Readers react to a delta instead of walking the image: the replica manager re-examines only
//! the partitions in it (Kafka's `ReplicaManager.applyDelta` with `LocalReplicaChanges`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use uuid::Uuid;

use crate::acl::AclSet;
use crate::image::{BrokerRegistration, MetadataImage, PartitionImage, StoredScramCredential};
use crate::quota::ClientQuotas;
use crate::records::{ConfigResource, MetadataRecord};

/// One value before and after (`None`: absent).
#[derive(Debug, Clone, PartialEq)]
pub struct Change<T> {
    pub old: Option<T>,
    pub new: Option<T>,
}

/// Changed values by key; only keys whose value changed are present.
pub type Changes<K, T> = BTreeMap<K, Change<T>>;

/// The net difference between two images (see the module comment).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetadataDelta {
    /// Topics by id, valued by name: `old: None` created, `new: None` deleted.
    pub topics: Changes<Uuid, String>,
    /// Partitions by (topic id, index): created (`old: None`), changed, or gone with their
    /// topic (`new: None`).
    pub partitions: Changes<(Uuid, i32), PartitionImage>,
    /// Broker registrations (registered, fenced or unfenced, shut down, unregistered).
    pub brokers: Changes<i32, BrokerRegistration>,
    /// The dynamic configs of a resource, as a whole.
    pub configs: Changes<ConfigResource, BTreeMap<String, String>>,
    /// Finalized feature levels.
    pub features: Changes<String, i16>,
    /// Everything no partition depends on: ACLs, quotas, SCRAM credentials, producer ids.
    pub other: OtherChanges,
}

/// The parts of a delta the replica manager ignores.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OtherChanges {
    pub acls: Option<Change<Arc<AclSet>>>,
    pub client_quotas: Option<Change<ClientQuotas>>,
    pub scram_credentials: Changes<(String, i8), StoredScramCredential>,
    pub next_producer_id: Option<Change<i64>>,
}

/// An applied batch: the new image and what changed.
#[derive(Debug, Clone)]
pub struct Applied {
    pub image: MetadataImage,
    pub delta: MetadataDelta,
}

impl MetadataDelta {
    /// Nothing changed.
    pub fn is_empty(&self) -> bool {
        *self == MetadataDelta::default()
    }

    /// Ids of brokers whose ability to lead or receive replicas (`is_active`) changed.
    pub fn brokers_with_new_liveness(&self) -> impl Iterator<Item = i32> + '_ {
        let active = |b: &Option<BrokerRegistration>| b.as_ref().is_some_and(|b| b.is_active());
        self.brokers
            .iter()
            .filter(move |(_, c)| active(&c.old) != active(&c.new))
            .map(|(id, _)| *id)
    }

    /// This delta followed by `later` (the delta of the next batch): the delta from this
    /// one's old image to `later`'s new one.
    pub fn then(self, later: MetadataDelta) -> MetadataDelta {
        MetadataDelta {
            topics: compose(self.topics, later.topics),
            partitions: compose(self.partitions, later.partitions),
            brokers: compose(self.brokers, later.brokers),
            configs: compose(self.configs, later.configs),
            features: compose(self.features, later.features),
            other: OtherChanges {
                acls: compose_one(self.other.acls, later.other.acls),
                client_quotas: compose_one(self.other.client_quotas, later.other.client_quotas),
                scram_credentials: compose(
                    self.other.scram_credentials,
                    later.other.scram_credentials,
                ),
                next_producer_id: compose_one(
                    self.other.next_producer_id,
                    later.other.next_producer_id,
                ),
            },
        }
    }

    /// The delta of `records`, which turned `before` into `after`: what a reader that holds
    /// both images (one applied elsewhere, e.g. by the Raft state machine) computes instead of
    /// applying the records again. Costs the size of the batch.
    pub fn of_batch(
        before: &MetadataImage,
        after: &MetadataImage,
        records: &[(i64, MetadataRecord)],
    ) -> MetadataDelta {
        let mut touched = Touched::default();
        for (_, record) in records {
            touched.note(before, record);
        }
        Self::between(before, after, &touched)
    }

    /// The difference between `before` and `after` on the keys `touched` names.
    fn between(before: &MetadataImage, after: &MetadataImage, touched: &Touched) -> MetadataDelta {
        let name = |image: &MetadataImage, id: &Uuid| image.topic_ids.get(id).cloned();
        let partition = |image: &MetadataImage, (id, index): &(Uuid, i32)| {
            image
                .topic_by_id(id)
                .and_then(|t| t.partitions.get(index).cloned())
        };
        MetadataDelta {
            topics: diff(&touched.topics, |k| name(before, k), |k| name(after, k)),
            partitions: diff(
                &touched.partitions,
                |k| partition(before, k),
                |k| partition(after, k),
            ),
            brokers: diff(
                &touched.brokers,
                |k| before.brokers.get(k).cloned(),
                |k| after.brokers.get(k).cloned(),
            ),
            configs: diff(
                &touched.configs,
                |k| before.configs.get(k).cloned(),
                |k| after.configs.get(k).cloned(),
            ),
            features: diff(
                &touched.features,
                |k| before.features.get(k).copied(),
                |k| after.features.get(k).copied(),
            ),
            other: OtherChanges {
                acls: changed(&before.acls, &after.acls),
                client_quotas: changed(&before.client_quotas, &after.client_quotas),
                scram_credentials: diff(
                    &touched.scram_credentials,
                    |k| before.scram_credentials.get(k).cloned(),
                    |k| after.scram_credentials.get(k).cloned(),
                ),
                next_producer_id: changed(&before.next_producer_id, &after.next_producer_id),
            },
        }
    }
}

/// The keys a batch may have changed, noted record by record.
#[derive(Debug, Default)]
struct Touched {
    topics: BTreeSet<Uuid>,
    partitions: BTreeSet<(Uuid, i32)>,
    brokers: BTreeSet<i32>,
    configs: BTreeSet<ConfigResource>,
    features: BTreeSet<String>,
    scram_credentials: BTreeSet<(String, i8)>,
}

impl Touched {
    /// Notes the keys `record` may change; `image` is the image before the whole batch. That
    /// is enough for a net difference: a key that differs between the two images is either
    /// in `after` (then a record of the batch wrote it) or in `before` (then a record changed
    /// or removed it, and a removed topic's partitions and configs are listed in `before`).
    fn note(&mut self, image: &MetadataImage, record: &MetadataRecord) {
        use MetadataRecord as R;
        match record {
            R::RegisterBroker { broker_id, .. }
            | R::BrokerRegistrationChange { broker_id, .. }
            | R::UnregisterBroker { broker_id, .. } => {
                self.brokers.insert(*broker_id);
            }
            // The replicas of a failed dir change state with the broker's registration.
            R::BrokerDirsOffline {
                broker_id,
                replicas,
                ..
            } => {
                self.brokers.insert(*broker_id);
                self.partitions.extend(replicas.iter().copied());
            }
            R::Topic { topic_id, .. } => {
                self.topics.insert(*topic_id);
            }
            R::Partition {
                topic_id,
                partition_id,
                ..
            }
            | R::PartitionChange {
                topic_id,
                partition_id,
                ..
            } => {
                self.partitions.insert((*topic_id, *partition_id));
            }
            R::RemoveTopic { topic_id } => self.note_removed_topic(image, topic_id),
            R::Config { resource, .. } => {
                self.configs.insert(resource.clone());
            }
            R::FeatureLevel { name, .. } => {
                self.features.insert(name.clone());
            }
            R::UserScramCredential {
                name, mechanism, ..
            }
            | R::RemoveUserScramCredential { name, mechanism } => {
                self.scram_credentials.insert((name.clone(), *mechanism));
            }
            // Compared as wholes in `between` (they are behind `Arc` or small).
            R::ProducerIds { .. }
            | R::AccessControlEntry { .. }
            | R::RemoveAccessControlEntry { .. }
            | R::ClientQuota { .. }
            | R::NoOp => {}
        }
    }

    /// A removed topic takes its partitions and its configs with it.
    fn note_removed_topic(&mut self, image: &MetadataImage, topic_id: &Uuid) {
        self.topics.insert(*topic_id);
        if let Some(topic) = image.topic_by_id(topic_id) {
            self.partitions
                .extend(topic.partitions.keys().map(|index| (*topic_id, *index)));
            self.configs
                .insert(ConfigResource::Topic(topic.name.clone()));
        }
    }
}

fn diff<K: Ord + Clone, T: PartialEq>(
    keys: &BTreeSet<K>,
    old: impl Fn(&K) -> Option<T>,
    new: impl Fn(&K) -> Option<T>,
) -> Changes<K, T> {
    keys.iter()
        .filter_map(|k| {
            let change = Change {
                old: old(k),
                new: new(k),
            };
            (change.old != change.new).then(|| (k.clone(), change))
        })
        .collect()
}

fn changed<T: PartialEq + Clone>(old: &T, new: &T) -> Option<Change<T>> {
    (old != new).then(|| Change {
        old: Some(old.clone()),
        new: Some(new.clone()),
    })
}

/// `first` then `later`, per key: the oldest old value and the newest new one; a key back
/// where it started is no change.
fn compose<K: Ord, T: PartialEq>(first: Changes<K, T>, later: Changes<K, T>) -> Changes<K, T> {
    let mut out = first;
    for (key, change) in later {
        let old = match out.remove(&key) {
            Some(earlier) => earlier.old,
            None => change.old,
        };
        if old != change.new {
            out.insert(
                key,
                Change {
                    old,
                    new: change.new,
                },
            );
        }
    }
    out
}

fn compose_one<T: PartialEq>(
    first: Option<Change<T>>,
    later: Option<Change<T>>,
) -> Option<Change<T>> {
    match (first, later) {
        (Some(f), Some(l)) => (f.old != l.new).then_some(Change {
            old: f.old,
            new: l.new,
        }),
        (f, None) => f,
        (None, l) => l,
    }
}

#[cfg(test)]
#[path = "delta_tests.rs"]
mod tests;
