//! Applies metadata images to the local logs: the role Kafka's LeaderAndIsr/StopReplica requests
//! play. For every partition with a replica on this node it opens (or creates) the log and
//! records whether this node leads it; logs of partitions that left the image are deleted, and
//! logs the caught-up image never mentions are set aside as `-stray` directories. A whole image
//! is walked only at boot, after a snapshot and on catching up; every other batch arrives as a
//! delta and only the partitions it may change are examined (`apply_delta`).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use runnel_log::{CompactionConfig, LogDirs};
use runnel_metadata::image::{PartitionImage, TopicImage};
use runnel_metadata::{
    effective_topic_config, BrokerDefaults, EffectiveTopicConfig, MetadataDelta, MetadataImage,
};

use super::local_changes::{self, HostedReplica};
use crate::replica::partition::{log_config, Partition, Role};

/// What applying an image does to a partition log on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Disposition {
    Keep,
    /// Renamed `-delete` and removed: the metadata deleted the topic or moved the replica.
    Delete,
    /// Renamed `-stray` and kept (Kafka's stray replica): on disk, but not in the image.
    Stray,
}

/// The rule for a partition log on disk when an image is applied:
/// * assigned here: kept;
/// * before the node has caught up with the leader's committed metadata offset: kept,
///   whatever the image says. A half-replayed image (a wiped metadata dir, a restart
///   replaying entries after its snapshot) passes through states that are not the present: a
///   replica moved away and back, a topic that exists later. Kafka's brokers do not act on
///   metadata before they reach the leader's high watermark either;
/// * hosted in the previous, caught-up image and gone from this one: deleted, the metadata
///   says so (a deleted topic, a replica moved away);
/// * anything else (found on disk, or only ever seen in a half-replayed image): stray. Never
///   deleted in the pass that found it, nor later: an operator removes it.
pub(crate) fn disposition(assigned: bool, hosted_caught_up: bool, caught_up: bool) -> Disposition {
    if assigned || !caught_up {
        Disposition::Keep
    } else if hosted_caught_up {
        Disposition::Delete
    } else {
        Disposition::Stray
    }
}

/// The partitions hosted here, by topic name and index.
type Hosted = HashMap<String, BTreeMap<i32, Arc<Partition>>>;

/// This broker's role for partition `p` of `image`, with its topic's effective config.
/// A replica in a failed log dir of its broker is not live (KIP-858): the leader never
/// proposes it for the ISR.
fn role_of(
    image: &MetadataImage,
    topic_id: uuid::Uuid,
    p: &PartitionImage,
    config: &Arc<EffectiveTopicConfig>,
) -> Role {
    Role {
        leader: p.leader,
        leader_epoch: p.leader_epoch,
        isr: p.isr.clone(),
        replicas: p.replicas.clone(),
        live_replicas: p
            .replicas
            .iter()
            .copied()
            .filter(|r| image.brokers.get(r).is_some_and(|b| b.is_active()))
            .filter(|r| !image.replica_in_offline_dir(topic_id, p.partition, *r))
            .collect(),
        partition_epoch: p.partition_epoch,
        config: config.clone(),
    }
}

pub struct ReplicaManager {
    node_id: i32,
    logs: LogDirs,
    defaults: BrokerDefaults,
    partitions: RwLock<Hosted>,
    /// Whether the metadata image has caught up with the leader's committed offset, so logs
    /// it does not mention may be set aside (see `disposition`).
    caught_up: AtomicBool,
    /// Whether the previous `apply_image` ran caught up: only a log hosted in a caught-up
    /// image and then dropped from one was *deleted* by the metadata.
    applied_caught_up: AtomicBool,
    /// `replica.lag.time.max.ms`, for the partitions' caught-up rule.
    replica_lag_max_ms: i64,
}

impl ReplicaManager {
    pub fn new(
        node_id: i32,
        logs: impl Into<LogDirs>,
        defaults: BrokerDefaults,
        replica_lag_max_ms: i64,
    ) -> Self {
        ReplicaManager {
            replica_lag_max_ms,
            node_id,
            logs: logs.into(),
            defaults,
            partitions: RwLock::new(HashMap::new()),
            caught_up: AtomicBool::new(false),
            applied_caught_up: AtomicBool::new(false),
        }
    }

    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    pub fn get(&self, topic: &str, partition: i32) -> Option<Arc<Partition>> {
        self.partitions.read().get(topic)?.get(&partition).cloned()
    }

    pub fn all(&self) -> Vec<Arc<Partition>> {
        self.partitions
            .read()
            .values()
            .flat_map(|m| m.values().cloned())
            .collect()
    }

    pub fn logs(&self) -> &LogDirs {
        &self.logs
    }

    /// Brings the local replicas in line with `image` by walking all of it: at boot, after a
    /// snapshot replaced the image, and once on catching up (which logs are strays is only
    /// known then). Returns how many partitions were examined.
    pub fn apply_image(&self, image: &MetadataImage) -> usize {
        let current = self.partitions.read().clone();
        let (wanted, examined) = self.assigned_partitions(image, &current);
        self.dispose_unassigned_logs(&wanted, &current);
        let replaced = std::mem::replace(&mut *self.partitions.write(), wanted);
        // Waiters of a partition that left this broker re-check (and find it gone); role
        // changes of the others woke theirs in `set_role`.
        for (topic, gone) in replaced {
            for (index, p) in gone {
                if self
                    .get(&topic, index)
                    .is_none_or(|now| !Arc::ptr_eq(&now, &p))
                {
                    p.wake_waiters();
                }
            }
        }
        examined
    }

    /// Brings the local replicas in line with `image`, re-examining only the partitions
    /// `delta` (what led to `image`) may change (see `local_changes`), as Kafka's
    /// `ReplicaManager.applyDelta`. Returns how many partitions were examined.
    pub fn apply_delta(&self, image: &MetadataImage, delta: &MetadataDelta) -> usize {
        let caught_up = self.caught_up.load(Ordering::Acquire);
        if caught_up != self.applied_caught_up.load(Ordering::Acquire) {
            // Catching up decides which logs on disk are strays: one full pass.
            return self.apply_image(image);
        }
        let keys = {
            let hosted = self.partitions.read();
            // Only broker and config changes reach partitions outside the delta's own.
            let scan = !delta.brokers.is_empty() || !delta.configs.is_empty();
            let roles: Vec<(&str, i32, Vec<i32>)> = hosted
                .iter()
                .filter(|_| scan)
                .flat_map(|(t, m)| m.iter().map(|(i, p)| (t.as_str(), *i, p.role().replicas)))
                .collect();
            let replicas = roles.iter().map(|(topic, index, replicas)| HostedReplica {
                topic,
                index: *index,
                replicas,
            });
            local_changes::affected(self.node_id, image, delta, replicas)
        };
        let dynamic_defaults = self.defaults.with_dynamic(image, Some(self.node_id));
        let mut configs: HashMap<String, Arc<EffectiveTopicConfig>> = HashMap::new();
        for (name, index) in &keys {
            let existing = self.get(name, *index);
            let placed = image.topics.get(name).and_then(|topic| {
                let p = topic.partitions.get(index)?;
                let config = configs.entry(name.clone()).or_insert_with(|| {
                    Arc::new(effective_topic_config(
                        &image.topic_overrides(name),
                        &dynamic_defaults,
                    ))
                });
                self.place(image, topic, p, config, existing.as_ref())
            });
            self.replace_hosted(name, *index, existing, placed, caught_up);
        }
        keys.len()
    }

    /// Puts `placed` where `existing` was (the `apply_delta` step for one partition): a
    /// replaced or dropped partition wakes its waiters, and a dropped one's log is disposed of.
    fn replace_hosted(
        &self,
        topic: &str,
        index: i32,
        existing: Option<Arc<Partition>>,
        placed: Option<Arc<Partition>>,
        caught_up: bool,
    ) {
        let was_hosted = existing.is_some();
        if let Some(old) = &existing {
            if placed.as_ref().is_none_or(|p| !Arc::ptr_eq(p, old)) {
                old.wake_waiters();
            }
        }
        let assigned = placed.is_some();
        {
            let mut hosted = self.partitions.write();
            match placed {
                Some(p) => {
                    hosted
                        .entry(topic.to_string())
                        .or_default()
                        .insert(index, p);
                }
                None => {
                    if let Some(m) = hosted.get_mut(topic) {
                        m.remove(&index);
                        if m.is_empty() {
                            hosted.remove(topic);
                        }
                    }
                }
            }
        }
        if !assigned && self.logs.get(topic, index).is_some() {
            self.dispose_log(
                topic,
                index,
                disposition(false, was_hosted && caught_up, caught_up),
            );
        }
    }

    /// The partitions `image` assigns here, each with its role: the hosted ones (same topic
    /// id) given their new role, the others opened (or created); and how many were examined.
    fn assigned_partitions(&self, image: &MetadataImage, current: &Hosted) -> (Hosted, usize) {
        let mut wanted = Hosted::new();
        let mut examined = 0;
        // Dynamic broker configs (kafka-configs --entity-type brokers) sit between the static
        // properties and topic overrides.
        let dynamic_defaults = self.defaults.with_dynamic(image, Some(self.node_id));
        for (name, topic) in &image.topics {
            let config = Arc::new(effective_topic_config(
                &image.topic_overrides(name),
                &dynamic_defaults,
            ));
            for (&index, p) in &topic.partitions {
                examined += 1;
                let existing = current.get(name).and_then(|m| m.get(&index));
                if let Some(partition) = self.place(image, topic, p, &config, existing) {
                    wanted
                        .entry(name.clone())
                        .or_default()
                        .insert(index, partition);
                }
            }
        }
        (wanted, examined)
    }

    /// Partition `p` of `topic` as this node hosts it under `image`: `existing` (if of the
    /// same topic id) given its new role, or its log opened (or created); `None` when this
    /// node is not a replica or the log cannot open.
    fn place(
        &self,
        image: &MetadataImage,
        topic: &TopicImage,
        p: &PartitionImage,
        config: &Arc<EffectiveTopicConfig>,
        existing: Option<&Arc<Partition>>,
    ) -> Option<Arc<Partition>> {
        if !p.replicas.contains(&self.node_id) {
            return None;
        }
        let role = role_of(image, topic.id, p, config);
        if let Some(partition) = existing.filter(|e| e.topic_id == topic.id) {
            partition.set_role(role);
            return Some(partition.clone());
        }
        let index = p.partition;
        match self.open_log(&topic.name, index, topic.id, config) {
            Ok(log) => Some(Arc::new(Partition::new(
                topic.name.clone(),
                index,
                topic.id,
                log,
                role,
                self.node_id,
                self.replica_lag_max_ms,
            ))),
            Err(e) => {
                tracing::error!(topic = %topic.name, partition = index, error = %e, "cannot open partition log");
                None
            }
        }
    }

    /// Logs the image does not assign here: kept, deleted or set aside as strays (see
    /// `disposition`).
    fn dispose_unassigned_logs(&self, wanted: &Hosted, current: &Hosted) {
        let caught_up = self.caught_up.load(Ordering::Acquire);
        let previous_caught_up = self.applied_caught_up.swap(caught_up, Ordering::AcqRel);
        for (topic, index) in self.logs.partitions() {
            let assigned = wanted.get(&topic).is_some_and(|m| m.contains_key(&index));
            let hosted =
                previous_caught_up && current.get(&topic).is_some_and(|m| m.contains_key(&index));
            self.dispose_log(&topic, index, disposition(assigned, hosted, caught_up));
        }
    }

    fn dispose_log(&self, topic: &str, index: i32, disposition: Disposition) {
        match disposition {
            Disposition::Keep => {}
            Disposition::Delete => {
                tracing::info!(topic = %topic, partition = index, "deleting partition log no longer assigned here");
                if let Err(e) = self.logs.delete(topic, index) {
                    tracing::error!(topic = %topic, partition = index, error = %e, "cannot delete partition log");
                }
            }
            Disposition::Stray => match self.logs.rename_stray(topic, index) {
                Ok(to) => tracing::warn!(topic = %topic, partition = index, dir = ?to,
                    "partition log not in the caught-up metadata image: kept as a stray directory"),
                Err(e) => {
                    tracing::error!(topic = %topic, partition = index, error = %e, "cannot set a stray partition log aside")
                }
            },
        }
    }

    /// Marks this node as caught up with the leader's committed metadata offset (see
    /// `disposition`); the next `apply_image` sets aside the logs that image does not know.
    pub fn set_caught_up(&self) {
        self.caught_up.store(true, Ordering::Release);
    }

    /// Opens or creates a partition's log. A log of another topic id with the same name (a
    /// deleted topic's leftover, or a damaged `partition.metadata`) is set aside as a stray
    /// first: the image is the truth, but one changed byte in that file must not delete a
    /// partition's acknowledged records (Kafka's stray-replica handling keeps them too).
    fn open_log(
        &self,
        topic: &str,
        index: i32,
        topic_id: uuid::Uuid,
        config: &runnel_metadata::EffectiveTopicConfig,
    ) -> Result<runnel_log::SharedLog, runnel_log::LogError> {
        match self
            .logs
            .get_or_create(topic, index, topic_id, log_config(config))
        {
            Err(runnel_log::LogError::InconsistentTopicId { .. }) => {
                let to = self.logs.rename_stray(topic, index)?;
                tracing::warn!(
                    topic,
                    partition = index,
                    dir = ?to,
                    "the partition's log has another topic id (a deleted topic's, or a damaged partition.metadata): kept as a stray directory; remove it by hand when it is not needed"
                );
                self.logs
                    .get_or_create(topic, index, topic_id, log_config(config))
            }
            other => other,
        }
    }

    /// One cleaning pass over every compacted log that needs it. The heavy rewrite runs
    /// without the log's lock (plan under the lock, run outside, swap under the lock), so
    /// produce and fetch keep going. Returns the number of logs cleaned.
    pub fn compact_logs(&self, now_ms: i64) -> usize {
        let mut cleaned = 0;
        for p in self.all() {
            let config = p.role().config;
            if !config.compacts() {
                continue;
            }
            let compaction = CompactionConfig {
                min_cleanable_dirty_ratio: config.min_cleanable_dirty_ratio,
                delete_retention_ms: config.delete_retention_ms,
                min_compaction_lag_ms: config.min_compaction_lag_ms,
                max_compaction_lag_ms: config.max_compaction_lag_ms,
            };
            // A log moving between dirs is not compacted meanwhile (Kafka's
            // abortAndPauseCleaning): its sealed segments must not change under the copy.
            if !self.logs.begin_cleaning(&p.topic, p.index) {
                continue;
            }
            let result = Self::compact_one(&p, now_ms, &compaction);
            self.logs.end_cleaning(&p.topic, p.index);
            match result {
                Ok(Some(stats)) => {
                    cleaned += 1;
                    tracing::info!(topic = %p.topic, partition = p.index, removed = stats.records_removed,
                        before = stats.bytes_before, after = stats.bytes_after, "compacted log");
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::error!(topic = %p.topic, partition = p.index, error = %e, "compaction failed")
                }
            }
        }
        cleaned
    }

    fn compact_one(
        p: &Partition,
        now_ms: i64,
        compaction: &CompactionConfig,
    ) -> Result<Option<runnel_log::CleanStats>, runnel_log::LogError> {
        let plan = {
            let log = p.lock_log();
            if !log.needs_compaction(now_ms, compaction) {
                return Ok(None);
            }
            log.prepare_compaction(now_ms, compaction)?
        };
        match plan {
            Some(plan) => {
                let outcome = plan.run()?;
                p.lock_log().finish_compaction(outcome).map(Some)
            }
            None => Ok(None),
        }
    }

    /// Clean shutdown, before the logs close: every partition's producer state as of its LEO.
    pub fn snapshot_producers(&self) {
        for p in self.all() {
            p.snapshot_producers();
        }
    }

    /// Retention for every local log; returns the number of segments deleted.
    pub fn enforce_retention(&self, now_ms: i64) -> usize {
        let mut deleted = 0;
        for p in self.all() {
            // A compact-only topic keeps its old segments: the cleaner shrinks them instead.
            if !p.role().config.deletes() {
                continue;
            }
            match p.lock_log().enforce_retention(now_ms) {
                Ok(n) => deleted += n,
                Err(e) => {
                    tracing::error!(topic = %p.topic, partition = p.index, error = %e, "retention failed")
                }
            }
        }
        deleted
    }
}

#[cfg(test)]
mod tests {
    use super::{disposition, Disposition, ReplicaManager};
    use crate::replica::test_records::{partition, registration as register};
    use runnel_metadata::{BrokerDefaults, MetadataImage, MetadataRecord};
    use uuid::Uuid;

    /// Issue 10 §5: a batch that changes no partition of this node (a heartbeat's
    /// registration, another broker) examines none; a partition change examines one.
    #[test]
    fn a_delta_examines_only_the_partitions_it_may_change() {
        let dir = tempfile::tempdir().unwrap();
        let logs =
            runnel_log::LogManager::open(dir.path().to_path_buf(), Default::default()).unwrap();
        let manager = ReplicaManager::new(1, logs, BrokerDefaults::new(Default::default()), 30_000);
        let topic = Uuid::from_u128(9);
        let mut records = vec![
            register(1, 1, false),
            register(2, 1, false),
            MetadataRecord::Topic {
                name: "t".into(),
                topic_id: topic,
            },
        ];
        records.extend((0..3).map(|p| partition(topic, p, vec![1, 2])));
        let numbered: Vec<_> = (0..).zip(records).collect();
        let image = MetadataImage::empty("c".into()).apply(&numbered).unwrap();
        assert_eq!(manager.apply_image(&image), 3, "boot walks every partition");
        assert_eq!(manager.all().len(), 3);

        let next = |image: &MetadataImage, records: Vec<MetadataRecord>| {
            let numbered: Vec<_> = (image.offset + 1..).zip(records).collect();
            image.apply_with_delta(&numbered).unwrap()
        };
        let heartbeat = next(&image, vec![register(2, 1, false), register(3, 1, false)]);
        assert_eq!(manager.apply_delta(&heartbeat.image, &heartbeat.delta), 0);

        let change = next(
            &heartbeat.image,
            vec![MetadataRecord::PartitionChange {
                topic_id: topic,
                partition_id: 2,
                leader: Some(2),
                isr: None,
                replicas: None,
                adding_replicas: None,
                removing_replicas: None,
            }],
        );
        assert_eq!(manager.apply_delta(&change.image, &change.delta), 1);
        let moved = manager.get("t", 2).unwrap().role();
        assert_eq!((moved.leader, moved.leader_epoch), (2, 1));
        assert_eq!(manager.get("t", 0).unwrap().role().leader, 1);
    }

    /// Caught (issue 9, item 5): a node that had not caught up with the leader deleted the
    /// logs its partial image did not mention, and a caught-up one deleted stray logs instead
    /// of keeping them.
    #[test]
    fn logs_are_deleted_only_by_a_caught_up_image_and_strays_are_kept() {
        use Disposition::*;
        // (assigned, hosted in the previous caught-up image, caught up) -> disposition
        let cases = [
            ((true, true, true), Keep),
            ((true, false, false), Keep),
            ((false, true, false), Keep),
            ((false, false, false), Keep),
            ((false, true, true), Delete),
            ((false, false, true), Stray),
        ];
        for ((assigned, hosted, caught_up), want) in cases {
            assert_eq!(
                disposition(assigned, hosted, caught_up),
                want,
                "{assigned} {hosted} {caught_up}"
            );
        }
    }
}
