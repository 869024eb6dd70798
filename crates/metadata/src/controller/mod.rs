//! The pure controller: it *decides*. Given the current image and a request it validates
//! (spec C), places replicas (spec A, B) and returns per-item results plus the records to
//! commit; after each commit, [`Controller::on_commit`] drives the partition and replica state
//! machines (spec D) and returns the leader/ISR changes to commit next.
//!
//! The controller never mutates an image and never performs I/O: the shell that owns it
//! applies the records to the speculative image ([`Pipeline`]: committed plus in flight),
//! appends them to the metadata log without waiting for the commit, and calls `on_commit` with
//! the speculative image; a failed append reverts to the committed image with a fresh
//! controller. All randomness (topic ids, Kafka's random start index and shift) comes from one
//! seeded RNG, so a run is reproducible from its seed and its inputs.

mod acls;
mod alter_configs;
mod alter_partition;
mod bootstrap_features;
mod brokers;
mod commit;
mod controlled_shutdown;
mod create_partitions;
mod create_topics;
mod delete_topics;
mod elect_leaders;
mod events;
pub mod offline_dirs;
pub mod op;
pub mod pipeline;
mod reassign;
mod rebalance;
mod scram;
mod sessions;
mod update_features;

use std::collections::{BTreeMap, BTreeSet, HashSet};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use uuid::Uuid;

use crate::image::MetadataImage;
use crate::placement::PlacementPolicy;
use crate::state_machine::{PartitionState, ReplicaState, StateChangeEvent};
use crate::topic_config::{BrokerDefaults, ConfigEntry};
use crate::ApiError;

pub use acls::{CreateAcls, DeleteAcls};
pub use alter_configs::{AlterConfigOp, AlterConfigs};
pub use alter_partition::AlterPartition;
pub use bootstrap_features::BootstrapFeatures;
pub use brokers::PRODUCER_ID_BLOCK_SIZE;
pub use brokers::{AllocateProducerIds, RegisterBroker, ShutdownComplete};
pub use controlled_shutdown::ControlledShutdown;
pub use create_partitions::{CreatePartitions, CreatePartitionsRequest, CreatePartitionsResult};
pub use create_topics::{CreateTopicOutcome, CreateTopicRequest, CreateTopics, CreatedTopic};
pub use delete_topics::{DeleteTopicResult, DeleteTopics, TopicRef};
pub use elect_leaders::{ElectLeaders, ElectionResult, ElectionType};
use events::EventLog;
pub use events::Events;
pub use offline_dirs::OfflineDir;
pub use op::{absorb_each, ControllerOp, ControllerResult, EarlyAnswer, OpContext};
pub use pipeline::{Appended, Pipeline};
pub use reassign::{
    AlterReassignments, ReassignmentRequest, ReassignmentResult, NO_REASSIGNMENT_IN_PROGRESS,
};
pub use scram::{
    alter_user_scram_credentials, AlterUserScramCredentials, ScramAlterResult, ScramDeletion,
    ScramUpsertion,
};
pub use sessions::{BrokerHeartbeat, BrokerSessions, HeartbeatOutcome};
pub use update_features::UpdateFeatureLevels;

/// Most partitions one CreateTopics or CreatePartitions request may create in total (Kafka's
/// `ReplicationControlManager.MAX_PARTITIONS_PER_BATCH`): more is POLICY_VIOLATION (44)
/// "Excessively large number of partitions per request." for the whole request. Without a
/// bound one request could make the controller place and commit millions of partitions while
/// every other controller request waits.
pub const MAX_PARTITIONS_PER_REQUEST: i32 = 10_000;

/// The controller's static settings (Kafka broker properties).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerConfig {
    /// `num.partitions`: used when CreateTopics says -1.
    pub num_partitions: i32,
    /// `default.replication.factor`: used when CreateTopics says -1.
    pub default_replication_factor: i16,
    /// `delete.topic.enable`.
    pub delete_topic_enable: bool,
    pub placement: PlacementPolicy,
    /// The broker properties topic configs fall back to (for echoed configs and elections).
    pub defaults: BrokerDefaults,
    /// Size of the state-change event ring.
    pub max_events: usize,
}

impl Default for ControllerConfig {
    /// Kafka's defaults (spec Appendix 1).
    fn default() -> Self {
        Self {
            num_partitions: 1,
            default_replication_factor: 1,
            delete_topic_enable: true,
            placement: PlacementPolicy::Kafka,
            defaults: BrokerDefaults::default(),
            max_events: 10_000,
        }
    }
}

/// What the controller tracks about one partition (Kafka's `ControllerContext`).
#[derive(Debug, Clone)]
struct TrackedPartition {
    state: PartitionState,
    /// The assigned replicas (first = preferred leader).
    assignment: Vec<i32>,
    replicas: BTreeMap<i32, ReplicaState>,
    /// Set when this controller emitted a leader/ISR change that the image does not show yet:
    /// the partition epoch the image will have once it is committed. Nothing else is decided
    /// for the partition until then, so calling `on_commit` twice never duplicates a change.
    pending_epoch: Option<i32>,
    /// The last failed transition's reason, so repeated failures are logged once.
    last_failure: Option<String>,
}

#[derive(Debug, Clone)]
struct TrackedTopic {
    name: String,
    partitions: BTreeMap<i32, TrackedPartition>,
}

/// The pure controller. One instance per active controller; run it on one task.
#[derive(Debug)]
pub struct Controller {
    config: ControllerConfig,
    rng: StdRng,
    topics: BTreeMap<Uuid, TrackedTopic>,
    events: EventLog,
    /// Producer ids handed out but possibly not committed yet.
    next_producer_id: i64,
    /// Broker epochs handed out but possibly not committed yet.
    last_broker_epoch: i64,
}

/// Kafka's `Uuid.METADATA_TOPIC_ID` (0, 1): reserved, never a user topic's id.
const METADATA_TOPIC_ID: Uuid = Uuid::from_u128(1);

impl Controller {
    pub fn new(config: ControllerConfig, controller_epoch: i32, seed: u64) -> Self {
        let events = EventLog::new(config.max_events, controller_epoch);
        Self {
            config,
            rng: StdRng::seed_from_u64(seed),
            topics: BTreeMap::new(),
            events,
            next_producer_id: 0,
            last_broker_epoch: -1,
        }
    }

    pub fn config(&self) -> &ControllerConfig {
        &self.config
    }

    /// The controller epoch stamped on state-change events (bumped on controller failover).
    pub fn set_epoch(&mut self, epoch: i32) {
        self.events.epoch = epoch;
    }

    pub fn epoch(&self) -> i32 {
        self.events.epoch
    }

    /// The partition's state; `None` if the controller does not track it (never seen, or
    /// deleted, i.e. `NonExistentPartition`).
    pub fn partition_state(&self, topic_id: &Uuid, partition: i32) -> Option<PartitionState> {
        self.topics
            .get(topic_id)?
            .partitions
            .get(&partition)
            .map(|p| p.state)
    }

    /// The replica's state; `None` if not tracked (`NonExistentReplica`).
    pub fn replica_state(
        &self,
        topic_id: &Uuid,
        partition: i32,
        replica: i32,
    ) -> Option<ReplicaState> {
        self.topics
            .get(topic_id)?
            .partitions
            .get(&partition)?
            .replicas
            .get(&replica)
            .copied()
    }

    /// State-change events numbered from `since` on (for `runnel metadata --events --follow`),
    /// with the number the next event will get.
    pub fn events_since(&self, since: u64) -> (Vec<(u64, StateChangeEvent)>, u64) {
        self.events.since(since)
    }

    /// The state-change log, oldest first (a ring of `max_events`).
    pub fn events(&self) -> impl Iterator<Item = &StateChangeEvent> {
        self.events.iter()
    }

    /// A fresh topic id: uuid v4 from the seeded RNG, never nil, never Kafka's reserved
    /// metadata topic id, never one whose base64 form starts with '-' (Kafka's
    /// `Uuid.randomUuid` rule, so ids are safe on command lines), never in use.
    fn new_topic_id(&mut self, image: &MetadataImage, taken: &HashSet<Uuid>) -> Uuid {
        loop {
            let bytes: [u8; 16] = self.rng.gen();
            let id = uuid::Builder::from_random_bytes(bytes).into_uuid();
            let dash_first = id.as_bytes()[0] >> 2 == 62;
            if !id.is_nil()
                && id != METADATA_TOPIC_ID
                && !dash_first
                && !image.topic_ids.contains_key(&id)
                && !taken.contains(&id)
            {
                return id;
            }
        }
    }

    /// The echoed configs of a topic with `overrides` (cluster dynamic defaults included).
    fn describe(
        &self,
        image: &MetadataImage,
        overrides: &BTreeMap<String, String>,
    ) -> Vec<ConfigEntry> {
        crate::topic_config::describe_topic_configs(
            overrides,
            &self.config.defaults.with_dynamic(image, None),
        )
    }
}

/// Brokers that may receive new replicas: registered, unfenced, not shutting down; by id.
fn usable_brokers(image: &MetadataImage) -> Vec<(i32, Option<String>)> {
    image
        .brokers
        .values()
        .filter(|b| b.is_active())
        .map(|b| (b.id, b.rack.clone()))
        .collect()
}

/// Ids of brokers that may lead: registered, unfenced, not shutting down.
fn active_broker_ids(image: &MetadataImage) -> BTreeSet<i32> {
    image
        .brokers
        .values()
        .filter(|b| b.is_active())
        .map(|b| b.id)
        .collect()
}

/// KRaft's error when replicas must be placed but no broker is usable.
fn no_usable_brokers(image: &MetadataImage, rf: i32) -> Option<ApiError> {
    if usable_brokers(image).is_empty() && !image.brokers.is_empty() {
        return Some(ApiError::invalid_replication_factor(format!(
            "Unable to replicate the partition {rf} time(s): All brokers are currently fenced."
        )));
    }
    None
}
