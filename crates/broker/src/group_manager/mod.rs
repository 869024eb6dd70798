//! The group coordinator's imperative shell.
//!
//! One task owns a pure [`GroupCoordinator`] per `__consumer_offsets` partition this broker
//! leads. Requests arrive through a bounded queue; JoinGroup/SyncGroup answers that the pure
//! code parks are completed later (by another request or by the 100 ms tick). Records the
//! coordinator emits are appended to the group's partition *before* any answer produced in the
//! same step is sent, so a client never sees an acknowledgement that is not in the log. When
//! leadership of a partition arrives the partition is loaded (replaying its records); when it
//! leaves, its groups are dropped and parked requests get NOT_COORDINATOR.
//!
//! The task never waits for replication: an append returns at once and the answers that
//! depend on it are parked in a [`Purgatory`] keyed by the offset the records end at; the task
//! completes them when the partition's high watermark passes it (it wakes on the progress of
//! the partitions with parked writes only), or fails them after `offsets.commit.timeout.ms` or when
//! leadership leaves. A write that cannot replicate delays only the answers that depend on it.
//!
//! This file holds the task (commands, leadership, load, tick); `handle` its typed entry
//! points, `classic` the classic group requests, `consumer` the KIP-848 groups (with classic members inside them and the online
//! migration between the protocols), `offsets` the offset commits, fetches and deletes, `admin`
//! ListGroups, DescribeGroups and DeleteGroups, `persist` the writes and the answers parked on them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use runnel_group::{
    partition_for_group, ConsumerGroupConfig, ConsumerGroupDescription, ConsumerGroups,
    ConsumerHeartbeat, ConsumerHeartbeatResponse, FetchedOffset, GroupConfig, GroupCoordinator,
    GroupDescription, GroupTimeouts, HeartbeatRequest, JoinRequest, JoinResponse, LoadRecord,
    OffsetCommitRequest, RequestId, SyncRequest, SyncResponse, TopicsView, TxnOffsetCommitRequest,
};
use runnel_metadata::{BrokerDefaults, MetadataImage};
use tokio::sync::{mpsc, oneshot, watch};

use crate::clock::now_ms;
use crate::consumer_group_settings::group_timeouts;
pub use crate::errors::code::{
    COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, INVALID_GROUP_ID, NOT_COORDINATOR,
};
use crate::errors::code::{INVALID_PRODUCER_EPOCH, STALE_MEMBER_EPOCH};
use crate::group_purgatory::Purgatory;
use crate::replica::manager::ReplicaManager;
use crate::replica::partition::Progress;

pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
const QUEUE_CAPACITY: usize = 4096;
const TICK: Duration = Duration::from_millis(100);
/// How long a group write may wait for the in-sync replicas before it is reported as failed
/// (Kafka's `offsets.commit.timeout.ms` default).
const PERSIST_TIMEOUT_MS: i64 = 5_000;

type FetchResult = (i16, Vec<FetchedOffset>);

/// OffsetFetch v9+'s member id (nullable) and member epoch, checked for KIP-848 groups.
pub type FetchMember = (Option<String>, i32);

/// ListGroups' filters: states (v4+) and group types (v5+); empty = all, both compared
/// case-insensitively as Kafka does.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub states: Vec<String>,
    pub types: Vec<String>,
}

/// One ListGroups entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    pub state: String,
    /// Kafka's group type: "classic" or "consumer".
    pub group_type: String,
}
type PartitionCodes = Vec<(String, i32, i16)>;

enum Command {
    Join(JoinRequest, oneshot::Sender<JoinResponse>),
    Sync(SyncRequest, oneshot::Sender<SyncResponse>),
    Heartbeat(HeartbeatRequest, oneshot::Sender<i16>),
    Leave(
        String,
        Vec<(String, Option<String>)>,
        oneshot::Sender<(i16, Vec<i16>)>,
    ),
    Commit(OffsetCommitRequest, oneshot::Sender<(i16, PartitionCodes)>),
    Fetch(
        String,
        Option<Vec<(String, Vec<i32>)>>,
        bool,
        Option<FetchMember>,
        oneshot::Sender<FetchResult>,
    ),
    TxnCommit(TxnOffsetCommitRequest, oneshot::Sender<PartitionCodes>),
    /// A transaction marker replicated on this `__consumer_offsets` partition: (partition,
    /// producer id, commit).
    TxnCompleted(i32, i64, bool, oneshot::Sender<usize>),
    List(ListFilter, oneshot::Sender<Vec<ListedGroup>>),
    Describe(Vec<String>, oneshot::Sender<Vec<GroupDescription>>),
    Delete(Vec<String>, oneshot::Sender<Vec<(String, i16)>>),
    DeleteOffsets(
        String,
        Vec<(String, Vec<i32>)>,
        oneshot::Sender<(i16, PartitionCodes)>,
    ),
    ConsumerHeartbeat(
        ConsumerHeartbeat,
        String,
        String,
        oneshot::Sender<ConsumerHeartbeatResponse>,
    ),
    ConsumerDescribe(Vec<String>, oneshot::Sender<Vec<ConsumerGroupDescription>>),
}

mod admin;
mod classic;
mod consumer;
mod handle;
mod load_log;
mod offsets;
mod persist;

pub use handle::{consumer_describe_error, describe_error, join_error, sync_error, GroupHandle};
pub(crate) use load_log::{read_log, read_records};
pub(crate) use persist::{encode_batch, outcome_code};
use persist::{DeleteAnswer, Waiter, Written};

/// Topic names, ids and partition counts from the image, for the server-side assignors.
/// Returns `None` when they equal `current`'s, so its version (and every group's resolved
/// regexes) stays; otherwise a view with the next version.
fn topics_view(image: &MetadataImage, current: &TopicsView) -> Option<TopicsView> {
    let topics: BTreeMap<String, (uuid::Uuid, i32)> = image
        .topics
        .values()
        .map(|t| {
            let partitions = i32::try_from(t.partitions.len()).unwrap_or(i32::MAX);
            (t.name.clone(), (t.id, partitions))
        })
        .collect();
    (topics != current.topics).then(|| TopicsView {
        version: current.version.wrapping_add(1),
        topics,
    })
}

enum Pending {
    Join(i32, oneshot::Sender<JoinResponse>),
    Sync(i32, oneshot::Sender<SyncResponse>),
}

struct GroupManager {
    node_id: i32,
    config: GroupConfig,
    replicas: Arc<ReplicaManager>,
    image: watch::Receiver<Arc<MetadataImage>>,
    coordinators: BTreeMap<i32, GroupCoordinator>,
    /// KIP-848 groups, per coordinator partition: durable like Kafka's (their records go to
    /// the partition before an answer depends on them, and are replayed on load).
    consumer_groups: BTreeMap<i32, ConsumerGroups>,
    consumer_config: ConsumerGroupConfig,
    /// The static broker properties under the groups' own configs (`group_timeouts`).
    defaults: BrokerDefaults,
    /// Groups with their own session timeout / heartbeat interval, from the image.
    group_timeouts: BTreeMap<String, GroupTimeouts>,
    pending: HashMap<RequestId, Pending>,
    next_request: RequestId,
    /// Answers waiting for their records to replicate.
    purgatory: Purgatory<Waiter>,
    /// The image's topics for the KIP-848 assignors; rebuilt (a new version) only when the
    /// topics change.
    topics: TopicsView,
}

/// Starts the group task.
pub fn spawn(
    node_id: i32,
    config: GroupConfig,
    consumer_config: ConsumerGroupConfig,
    defaults: BrokerDefaults,
    replicas: Arc<ReplicaManager>,
    image: watch::Receiver<Arc<MetadataImage>>,
) -> GroupHandle {
    let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
    // A downgrade may not make a classic group larger than `group.max.size`.
    let consumer_config = ConsumerGroupConfig {
        classic_max_size: config.max_size,
        ..consumer_config
    };
    let manager = GroupManager {
        node_id,
        config,
        replicas,
        image,
        coordinators: BTreeMap::new(),
        consumer_groups: BTreeMap::new(),
        consumer_config,
        defaults,
        group_timeouts: BTreeMap::new(),
        pending: HashMap::new(),
        next_request: 0,
        purgatory: Purgatory::default(),
        topics: TopicsView::default(),
    };
    crate::coordinator_task::spawn_loop(manager, rx, TICK);
    GroupHandle { tx }
}

impl crate::coordinator_task::CoordinatorTask for GroupManager {
    type Command = Command;

    fn follow_leadership(&mut self) {
        GroupManager::follow_leadership(self)
    }
    fn handle(&mut self, command: Command) {
        GroupManager::handle(self, command)
    }
    fn tick(&mut self) {
        GroupManager::tick(self)
    }
    fn watch_parked(&self) -> Vec<watch::Receiver<Progress>> {
        GroupManager::watch_parked(self)
    }
    fn complete_replicated(&mut self) -> bool {
        GroupManager::complete_replicated(self);
        !self.purgatory.is_empty()
    }
    fn image(&mut self) -> &mut watch::Receiver<Arc<MetadataImage>> {
        &mut self.image
    }
}

impl GroupManager {
    fn offsets_partitions(&self) -> Option<i32> {
        let image = self.image.borrow();
        image
            .topic(OFFSETS_TOPIC)
            .and_then(|t| i32::try_from(t.partitions.len()).ok())
    }

    /// Loads partitions that became ours and drops those that are not ours anymore.
    fn follow_leadership(&mut self) {
        let image = self.image.borrow_and_update().clone();
        if let Some(view) = topics_view(&image, &self.topics) {
            self.topics = view;
        }
        let defaults = self.defaults.with_dynamic(&image, Some(self.node_id));
        let timeouts = group_timeouts(&image, &defaults);
        if timeouts != self.group_timeouts {
            for groups in self.consumer_groups.values_mut() {
                groups.set_group_timeouts(timeouts.clone());
            }
            self.group_timeouts = timeouts;
        }
        let led: Vec<i32> = image
            .topic(OFFSETS_TOPIC)
            .map(|t| {
                t.partitions
                    .values()
                    .filter(|p| p.leader == self.node_id)
                    .map(|p| p.partition)
                    .collect()
            })
            .unwrap_or_default();
        let lost: Vec<i32> = self
            .coordinators
            .keys()
            .copied()
            .filter(|p| !led.contains(p))
            .collect();
        for p in lost {
            tracing::info!(
                partition = p,
                "no longer group coordinator for this partition"
            );
            self.coordinators.remove(&p);
            self.consumer_groups.remove(&p);
            self.fail_pending(p, NOT_COORDINATOR);
            for (waiter, outcome) in self.purgatory.abandon(p) {
                self.finish(waiter, outcome_code(outcome));
            }
        }
        for p in led {
            if !self.coordinators.contains_key(&p) {
                let (coordinator, consumer) = self.load(p);
                self.coordinators.insert(p, coordinator);
                self.consumer_groups.insert(p, consumer);
            }
        }
    }

    /// A coordinator's KIP-848 groups with the broker's settings, empty.
    fn new_consumer_groups(&self) -> ConsumerGroups {
        fresh_consumer_groups(&self.consumer_config, &self.group_timeouts)
    }

    /// Replays the partition's records (and transaction markers) into a fresh classic
    /// coordinator and a fresh set of KIP-848 groups.
    fn load(&self, partition: i32) -> (GroupCoordinator, ConsumerGroups) {
        let now = now_ms();
        let mut coordinator = GroupCoordinator::new(self.config.clone());
        let mut consumer = self.new_consumer_groups();
        let records = read_log(&self.replicas, OFFSETS_TOPIC, partition);
        let n = records.len();
        // KIP-848 records are never transactional.
        consumer.load(
            now,
            records.iter().filter_map(|r| match r {
                LoadRecord::Record {
                    producer_id: None,
                    record,
                } => Some(record),
                _ => None,
            }),
            &self.topics,
        );
        coordinator.load_log(now, records);
        tracing::info!(partition, records = n, "loaded group coordinator partition");
        (coordinator, consumer)
    }

    fn fail_pending(&mut self, partition: i32, code: i16) {
        let ids: Vec<RequestId> = self
            .pending
            .iter()
            .filter(|(_, p)| match p {
                Pending::Join(part, _) | Pending::Sync(part, _) => *part == partition,
            })
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            match self.pending.remove(&id) {
                Some(Pending::Join(_, reply)) => {
                    let _ = reply.send(join_error(code, String::new()));
                }
                Some(Pending::Sync(_, reply)) => {
                    let _ = reply.send(sync_error(code));
                }
                None => {}
            }
        }
    }

    /// The partition owning `group_id` if this broker coordinates it, else the error code.
    fn route(&mut self, group_id: &str) -> Result<i32, i16> {
        if group_id.is_empty() {
            return Err(INVALID_GROUP_ID);
        }
        let Some(n) = self.offsets_partitions().filter(|n| *n > 0) else {
            return Err(COORDINATOR_NOT_AVAILABLE);
        };
        let p = partition_for_group(group_id, n);
        if self.coordinators.contains_key(&p) {
            Ok(p)
        } else {
            // The image may have moved on since the last leadership pass.
            self.follow_leadership();
            if self.coordinators.contains_key(&p) {
                Ok(p)
            } else {
                Err(NOT_COORDINATOR)
            }
        }
    }

    fn request_id(&mut self) -> RequestId {
        self.next_request += 1;
        self.next_request
    }

    /// One command of the queue, each answered by its own step (`classic`, `consumer`,
    /// `offsets`, `admin`).
    fn handle(&mut self, command: Command) {
        let now = now_ms();
        match command {
            Command::Join(req, reply) => self.join(now, req, reply),
            Command::Sync(req, reply) => self.sync(now, req, reply),
            Command::Heartbeat(req, reply) => {
                let _ = reply.send(self.heartbeat(now, &req));
            }
            Command::Leave(group_id, members, reply) => self.leave(now, group_id, members, reply),
            Command::Commit(req, reply) => self.commit(now, req, reply),
            Command::Fetch(group_id, partitions, require_stable, member, reply) => {
                let _ =
                    reply.send(self.fetch_offsets(&group_id, partitions, require_stable, member));
            }
            Command::TxnCommit(req, reply) => self.txn_commit(now, req, reply),
            Command::TxnCompleted(partition, producer_id, commit, reply) => {
                let _ = reply.send(self.txn_completed(partition, producer_id, commit));
            }
            Command::List(filter, reply) => {
                self.follow_leadership();
                let _ = reply.send(self.list_groups(&filter));
            }
            Command::Describe(group_ids, reply) => {
                let _ = reply.send(self.describe_groups(group_ids));
            }
            Command::Delete(group_ids, reply) => self.delete_groups(group_ids, reply),
            Command::ConsumerHeartbeat(req, client_id, client_host, reply) => {
                self.consumer_heartbeat(now, req, &client_id, &client_host, reply)
            }
            Command::ConsumerDescribe(group_ids, reply) => {
                let _ = reply.send(self.consumer_describe(group_ids));
            }
            Command::DeleteOffsets(group_id, partitions, reply) => {
                self.delete_offsets(group_id, partitions, reply)
            }
        }
    }

    fn coordinator(&mut self, partition: i32) -> &mut GroupCoordinator {
        self.coordinators
            .entry(partition)
            .or_insert_with(|| GroupCoordinator::new(self.config.clone()))
    }

    fn tick(&mut self) {
        let now = now_ms();
        let partitions: Vec<i32> = self.coordinators.keys().copied().collect();
        for p in partitions {
            let outputs = self.coordinator(p).tick(now);
            self.apply_outputs(p, outputs);
        }
        self.tick_consumer_groups(now);
        for (waiter, outcome) in self.purgatory.expire(now) {
            tracing::warn!("group records not replicated in time");
            self.finish(waiter, outcome_code(outcome));
        }
    }

    /// The progress of the partitions with parked writes: only their HW moves wake the task.
    fn watch_parked(&self) -> Vec<watch::Receiver<Progress>> {
        self.purgatory
            .partitions()
            .filter_map(|p| self.replicas.get(OFFSETS_TOPIC, p))
            .map(|p| p.subscribe())
            .collect()
    }

    /// Answers the parked writes the partitions' high watermarks now cover.
    fn complete_replicated(&mut self) {
        let partitions: Vec<i32> = self.purgatory.partitions().collect();
        for p in partitions {
            let done = match self.replicas.get(OFFSETS_TOPIC, p) {
                Some(partition) => {
                    let hw = partition.high_watermark();
                    self.purgatory.complete(p, hw)
                }
                None => self.purgatory.abandon(p),
            };
            for (waiter, outcome) in done {
                self.finish(waiter, outcome_code(outcome));
            }
        }
    }
}

/// A coordinator's KIP-848 groups with the broker's settings, empty.
fn fresh_consumer_groups(
    config: &ConsumerGroupConfig,
    timeouts: &BTreeMap<String, GroupTimeouts>,
) -> ConsumerGroups {
    let mut groups = ConsumerGroups::new(config.clone());
    groups.set_group_timeouts(timeouts.clone());
    groups
}
