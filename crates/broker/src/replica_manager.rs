//! Applies metadata images to the local logs: the role Kafka's LeaderAndIsr/StopReplica requests
//! play. For every partition with a replica on this node it opens (or creates) the log and
//! records whether this node leads it; logs of partitions that left the image are deleted.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use parking_lot::RwLock;
use runnel_log::{CompactionConfig, LogManager};
use runnel_metadata::{effective_topic_config, BrokerDefaults, MetadataImage};
use tokio::sync::Notify;

use crate::partition::{log_config, Partition, Role};

pub struct ReplicaManager {
    node_id: i32,
    logs: LogManager,
    defaults: BrokerDefaults,
    partitions: RwLock<HashMap<String, BTreeMap<i32, Arc<Partition>>>>,
    /// Woken after every append so long-polling fetches can re-check.
    pub appended: Notify,
    /// Whether the metadata image has caught up with the log, so stray logs may be deleted.
    caught_up: std::sync::atomic::AtomicBool,
    /// `replica.lag.time.max.ms`, for the partitions' caught-up rule.
    replica_lag_max_ms: i64,
}

impl ReplicaManager {
    pub fn new(
        node_id: i32,
        logs: LogManager,
        defaults: BrokerDefaults,
        replica_lag_max_ms: i64,
    ) -> Self {
        ReplicaManager {
            replica_lag_max_ms,
            node_id,
            logs,
            defaults,
            partitions: RwLock::new(HashMap::new()),
            appended: Notify::new(),
            caught_up: std::sync::atomic::AtomicBool::new(false),
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

    pub fn logs(&self) -> &LogManager {
        &self.logs
    }

    /// Brings the local replicas in line with `image`.
    pub fn apply_image(&self, image: &MetadataImage) {
        let mut wanted: HashMap<String, BTreeMap<i32, Arc<Partition>>> = HashMap::new();
        let current = self.partitions.read().clone();
        // Dynamic broker configs (kafka-configs --entity-type brokers) sit between the static
        // properties and topic overrides.
        let dynamic_defaults = self.defaults.with_dynamic(image, Some(self.node_id));
        for (name, topic) in &image.topics {
            let config = Arc::new(effective_topic_config(
                &image.topic_overrides(name),
                &dynamic_defaults,
            ));
            for (&index, p) in &topic.partitions {
                if !p.replicas.contains(&self.node_id) {
                    continue;
                }
                let role = Role {
                    leader: p.leader,
                    leader_epoch: p.leader_epoch,
                    isr: p.isr.clone(),
                    replicas: p.replicas.clone(),
                    live_replicas: p
                        .replicas
                        .iter()
                        .copied()
                        .filter(|r| image.brokers.get(r).is_some_and(|b| b.is_active()))
                        .collect(),
                    partition_epoch: p.partition_epoch,
                    config: config.clone(),
                };
                let existing = current
                    .get(name)
                    .and_then(|m| m.get(&index))
                    .filter(|e| e.topic_id == topic.id)
                    .cloned();
                let partition = match existing {
                    Some(partition) => {
                        partition.set_role(role);
                        partition
                    }
                    None => match self.open_log(name, index, topic.id, &config) {
                        Ok(log) => Arc::new(Partition::new(
                            name.clone(),
                            index,
                            topic.id,
                            log,
                            role,
                            self.node_id,
                            self.replica_lag_max_ms,
                        )),
                        Err(e) => {
                            tracing::error!(topic = %name, partition = index, error = %e, "cannot open partition log");
                            continue;
                        }
                    },
                };
                wanted
                    .entry(name.clone())
                    .or_default()
                    .insert(index, partition);
            }
        }
        // Logs the image no longer assigns here are deleted. Logs found on disk at startup that
        // no image has mentioned yet are only deleted once this node has caught up with the
        // metadata log: a half-replayed image must never cost data.
        let caught_up = self.caught_up.load(std::sync::atomic::Ordering::Acquire);
        for (topic, index) in self.logs.partitions() {
            let keep = wanted.get(&topic).is_some_and(|m| m.contains_key(&index));
            let known = current.get(&topic).is_some_and(|m| m.contains_key(&index));
            if !keep && (known || caught_up) {
                tracing::info!(topic = %topic, partition = index, "deleting partition log no longer assigned here");
                if let Err(e) = self.logs.delete(&topic, index) {
                    tracing::error!(topic = %topic, partition = index, error = %e, "cannot delete partition log");
                }
            }
        }
        *self.partitions.write() = wanted;
        // New leaders may unblock fetches waiting for a partition to appear.
        self.appended.notify_waiters();
    }

    /// Marks this node as caught up with the metadata log (see `apply_image`).
    pub fn set_caught_up(&self) {
        self.caught_up
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Opens or creates a partition's log. A leftover log of a deleted topic with the same
    /// name (another topic id) is removed first: the image is the truth.
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
                tracing::info!(
                    topic,
                    partition = index,
                    "replacing the log of a deleted topic with the same name"
                );
                self.logs.delete(topic, index)?;
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
            let plan = {
                let log = p.log.lock();
                if !log.needs_compaction(now_ms, &compaction) {
                    continue;
                }
                log.prepare_compaction(now_ms, &compaction)
            };
            let result = plan.and_then(|plan| match plan {
                Some(plan) => {
                    let outcome = plan.run()?;
                    p.log.lock().finish_compaction(outcome).map(Some)
                }
                None => Ok(None),
            });
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

    /// Retention for every local log; returns the number of segments deleted.
    pub fn enforce_retention(&self, now_ms: i64) -> usize {
        let mut deleted = 0;
        for p in self.all() {
            // A compact-only topic keeps its old segments: the cleaner shrinks them instead.
            if !p.role().config.deletes() {
                continue;
            }
            match p.log.lock().enforce_retention(now_ms) {
                Ok(n) => deleted += n,
                Err(e) => {
                    tracing::error!(topic = %p.topic, partition = p.index, error = %e, "retention failed")
                }
            }
        }
        deleted
    }
}
