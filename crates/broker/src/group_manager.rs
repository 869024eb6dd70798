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

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use runnel_group::{
    consumer_group::ClientInfo, partition_for_group, ConsumerGroupConfig, ConsumerGroupDescription,
    ConsumerGroups, ConsumerHeartbeat, ConsumerHeartbeatResponse, FetchedOffset, GroupConfig,
    GroupCoordinator, GroupDescription, GroupTimeouts, HeartbeatRequest, JoinRequest, JoinResponse,
    LoadRecord, OffsetCommitRequest, OffsetsRecord, Output, RequestId, SyncRequest, SyncResponse,
    TopicsView, TxnOffsetCommitRequest,
};
use runnel_metadata::{BrokerDefaults, MetadataImage};
use tokio::sync::{mpsc, oneshot, watch};

use crate::clock::now_ms;
use crate::consumer_group_settings::group_timeouts;
use crate::group_purgatory::{Outcome, Purgatory};
use crate::partition::Progress;
use crate::replica_manager::ReplicaManager;

pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
const QUEUE_CAPACITY: usize = 4096;
const TICK: Duration = Duration::from_millis(100);
/// How long a group write may wait for the in-sync replicas before it is reported as failed
/// (Kafka's `offsets.commit.timeout.ms` default).
const PERSIST_TIMEOUT_MS: i64 = 5_000;

pub const NOT_COORDINATOR: i16 = 16;
pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
pub const INVALID_GROUP_ID: i16 = 24;
const INVALID_PRODUCER_EPOCH: i16 = 47;
const STALE_MEMBER_EPOCH: i16 = 113;

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

/// Cloneable access to the group task.
#[derive(Clone)]
pub struct GroupHandle {
    tx: mpsc::Sender<Command>,
}

impl GroupHandle {
    async fn call<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Command) -> Option<T> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(make(reply)).await.ok()?;
        rx.await.ok()
    }

    pub async fn join(&self, req: JoinRequest) -> JoinResponse {
        let member_id = req.member_id.clone();
        self.call(|r| Command::Join(req, r))
            .await
            .unwrap_or_else(|| join_error(COORDINATOR_NOT_AVAILABLE, member_id))
    }

    pub async fn sync(&self, req: SyncRequest) -> SyncResponse {
        self.call(|r| Command::Sync(req, r))
            .await
            .unwrap_or_else(|| sync_error(COORDINATOR_NOT_AVAILABLE))
    }

    pub async fn heartbeat(&self, req: HeartbeatRequest) -> i16 {
        self.call(|r| Command::Heartbeat(req, r))
            .await
            .unwrap_or(COORDINATOR_NOT_AVAILABLE)
    }

    pub async fn leave(
        &self,
        group_id: String,
        members: Vec<(String, Option<String>)>,
    ) -> (i16, Vec<i16>) {
        let n = members.len();
        self.call(|r| Command::Leave(group_id, members, r))
            .await
            .unwrap_or((
                COORDINATOR_NOT_AVAILABLE,
                vec![COORDINATOR_NOT_AVAILABLE; n],
            ))
    }

    pub async fn commit(&self, req: OffsetCommitRequest) -> (i16, PartitionCodes) {
        self.call(|r| Command::Commit(req, r))
            .await
            .unwrap_or((COORDINATOR_NOT_AVAILABLE, Vec::new()))
    }

    /// OffsetFetch; with `require_stable`, partitions with pending transactional offsets
    /// answer UNSTABLE_OFFSET_COMMIT.
    pub async fn fetch(
        &self,
        group_id: String,
        partitions: Option<Vec<(String, Vec<i32>)>>,
        require_stable: bool,
        member: Option<FetchMember>,
    ) -> FetchResult {
        self.call(|r| Command::Fetch(group_id, partitions, require_stable, member, r))
            .await
            .unwrap_or((COORDINATOR_NOT_AVAILABLE, Vec::new()))
    }

    /// TxnOffsetCommit: a code per requested partition, in order.
    pub async fn txn_commit(&self, req: TxnOffsetCommitRequest) -> PartitionCodes {
        let fallback: PartitionCodes = req
            .offsets
            .iter()
            .map(|o| (o.topic.clone(), o.partition, COORDINATOR_NOT_AVAILABLE))
            .collect();
        self.call(|r| Command::TxnCommit(req, r))
            .await
            .unwrap_or(fallback)
    }

    /// The marker of `producer_id`'s transaction is replicated on `__consumer_offsets`
    /// partition `partition`: its pending offsets there are committed or dropped. Returns
    /// how many offsets became committed.
    pub async fn complete_transaction(
        &self,
        partition: i32,
        producer_id: i64,
        commit: bool,
    ) -> usize {
        self.call(|r| Command::TxnCompleted(partition, producer_id, commit, r))
            .await
            .unwrap_or(0)
    }

    pub async fn list(&self, filter: ListFilter) -> Vec<ListedGroup> {
        self.call(|r| Command::List(filter, r))
            .await
            .unwrap_or_default()
    }

    pub async fn describe(&self, group_ids: Vec<String>) -> Vec<GroupDescription> {
        let ids = group_ids.clone();
        self.call(|r| Command::Describe(group_ids, r))
            .await
            .unwrap_or_else(|| {
                ids.into_iter()
                    .map(|g| describe_error(g, COORDINATOR_NOT_AVAILABLE))
                    .collect()
            })
    }

    pub async fn delete(&self, group_ids: Vec<String>) -> Vec<(String, i16)> {
        let ids = group_ids.clone();
        self.call(|r| Command::Delete(group_ids, r))
            .await
            .unwrap_or_else(|| {
                ids.into_iter()
                    .map(|g| (g, COORDINATOR_NOT_AVAILABLE))
                    .collect()
            })
    }

    /// KIP-848 ConsumerGroupHeartbeat.
    pub async fn consumer_heartbeat(
        &self,
        req: ConsumerHeartbeat,
        client_id: String,
        client_host: String,
    ) -> ConsumerHeartbeatResponse {
        self.call(|r| Command::ConsumerHeartbeat(req, client_id, client_host, r))
            .await
            .unwrap_or(ConsumerHeartbeatResponse {
                error_code: COORDINATOR_NOT_AVAILABLE,
                error_message: None,
                member_id: None,
                member_epoch: 0,
                heartbeat_interval_ms: 5000,
                assignment: None,
            })
    }

    pub async fn consumer_describe(&self, group_ids: Vec<String>) -> Vec<ConsumerGroupDescription> {
        let ids = group_ids.clone();
        self.call(|r| Command::ConsumerDescribe(group_ids, r))
            .await
            .unwrap_or_else(|| {
                ids.into_iter()
                    .map(|g| consumer_describe_error(g, COORDINATOR_NOT_AVAILABLE))
                    .collect()
            })
    }

    pub async fn delete_offsets(
        &self,
        group_id: String,
        partitions: Vec<(String, Vec<i32>)>,
    ) -> (i16, PartitionCodes) {
        self.call(|r| Command::DeleteOffsets(group_id, partitions, r))
            .await
            .unwrap_or((COORDINATOR_NOT_AVAILABLE, Vec::new()))
    }
}

pub fn join_error(code: i16, member_id: String) -> JoinResponse {
    JoinResponse {
        error_code: code,
        generation_id: -1,
        protocol_type: None,
        protocol_name: None,
        leader: String::new(),
        member_id,
        members: Vec::new(),
        skip_assignment: false,
    }
}

pub fn sync_error(code: i16) -> SyncResponse {
    SyncResponse {
        error_code: code,
        protocol_type: None,
        protocol_name: None,
        assignment: Bytes::new(),
    }
}

pub fn describe_error(group_id: String, code: i16) -> GroupDescription {
    GroupDescription {
        error_code: code,
        group_id,
        state: String::new(),
        protocol_type: String::new(),
        protocol: String::new(),
        members: Vec::new(),
    }
}

pub fn consumer_describe_error(group_id: String, code: i16) -> ConsumerGroupDescription {
    ConsumerGroupDescription {
        group_id,
        error_code: code,
        error_message: None,
        state: String::new(),
        group_epoch: -1,
        assignment_epoch: -1,
        assignor_name: String::new(),
        members: Vec::new(),
    }
}

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

/// What a parked group write answers once it finishes: the error code for the answers that
/// depended on it (0 once replicated).
type Answer = Box<dyn FnOnce(i16) + Send>;

/// A parked group write: its answer, and for an offset commit the coordinator partition and
/// commit token whose offsets become visible to OffsetFetch only once the write replicated.
struct Waiter {
    commit: Option<(i32, u64)>,
    answer: Answer,
}

/// The state of the records one request (or tick) appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Written {
    /// Nothing to wait for: nothing appended, or already replicated.
    Done,
    /// The append failed, or the write did not replicate: answer with this code.
    Failed(i16),
    /// Appended; replicated once the HW reaches this offset.
    Pending(i64),
}

impl Written {
    /// Both writes (of one partition, `other` later): a failure wins, else the later offset.
    fn and(self, other: Written) -> Written {
        match (self, other) {
            (Written::Failed(c), _) | (_, Written::Failed(c)) => Written::Failed(c),
            (Written::Pending(a), Written::Pending(b)) => Written::Pending(a.max(b)),
            (Written::Pending(a), Written::Done) | (Written::Done, Written::Pending(a)) => {
                Written::Pending(a)
            }
            (Written::Done, Written::Done) => Written::Done,
        }
    }
}

/// A DeleteGroups answer waiting for the writes of its groups (one per group).
struct DeleteAnswer {
    results: Vec<(String, i16)>,
    waiting: usize,
    reply: Option<oneshot::Sender<Vec<(String, i16)>>>,
}

impl DeleteAnswer {
    /// One write finished with `err` for the results in `range`; answers after the last.
    fn finish_one(&mut self, range: std::ops::Range<usize>, err: i16) {
        if err != 0 {
            for r in self.results.get_mut(range).into_iter().flatten() {
                if r.1 == 0 {
                    r.1 = err;
                }
            }
        }
        self.waiting = self.waiting.saturating_sub(1);
        if self.waiting == 0 {
            if let Some(reply) = self.reply.take() {
                let _ = reply.send(std::mem::take(&mut self.results));
            }
        }
    }
}

/// The error code a finished write gives the answers waiting for it.
pub(crate) fn outcome_code(outcome: Outcome) -> i16 {
    match outcome {
        Outcome::Replicated => 0,
        Outcome::TimedOut => COORDINATOR_NOT_AVAILABLE,
        Outcome::NotLeader => NOT_COORDINATOR,
    }
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
            .map(|t| t.partitions.len() as i32)
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

    fn handle(&mut self, command: Command) {
        let now = now_ms();
        match command {
            Command::Join(req, reply) => match self.route(&req.group_id) {
                Ok(p) => {
                    if let Err(code) = self.classic_join_allowed(p, &req.group_id) {
                        let _ = reply.send(join_error(code, req.member_id));
                        return;
                    }
                    let id = self.request_id();
                    self.pending.insert(id, Pending::Join(p, reply));
                    let outputs = self.coordinator(p).join(now, id, req);
                    self.apply_outputs(p, outputs);
                }
                Err(code) => {
                    let _ = reply.send(join_error(code, req.member_id));
                }
            },
            Command::Sync(req, reply) => match self.route(&req.group_id) {
                Ok(p) => {
                    let id = self.request_id();
                    self.pending.insert(id, Pending::Sync(p, reply));
                    let outputs = self.coordinator(p).sync(now, id, req);
                    self.apply_outputs(p, outputs);
                }
                Err(code) => {
                    let _ = reply.send(sync_error(code));
                }
            },
            Command::Heartbeat(req, reply) => {
                let code = match self.route(&req.group_id) {
                    Ok(p) => self.coordinator(p).heartbeat(now, &req),
                    Err(code) => code,
                };
                let _ = reply.send(code);
            }
            Command::Leave(group_id, members, reply) => match self.route(&group_id) {
                Ok(p) => {
                    let (code, codes, outputs) =
                        self.coordinator(p).leave(now, &group_id, &members);
                    let written = self.apply_outputs(p, outputs);
                    self.when_written(
                        p,
                        written,
                        Box::new(move |_| {
                            let _ = reply.send((code, codes));
                        }),
                    );
                }
                Err(code) => {
                    let _ = reply.send((code, vec![code; members.len()]));
                }
            },
            Command::Commit(req, reply) => self.commit(now, req, reply),
            Command::Fetch(group_id, partitions, require_stable, member, reply) => {
                let result = match self.route(&group_id) {
                    Ok(p) => {
                        let checked = member.map_or(Ok(()), |(id, epoch)| {
                            self.consumer_groups_of(p).validate_offset_fetch(
                                &group_id,
                                id.as_deref(),
                                epoch,
                            )
                        });
                        match checked {
                            Ok(()) => self.coordinator(p).fetch_offsets_stable(
                                &group_id,
                                partitions.as_deref(),
                                require_stable,
                            ),
                            Err(code) => (code, Vec::new()),
                        }
                    }
                    Err(code) => (code, Vec::new()),
                };
                let _ = reply.send(result);
            }
            Command::TxnCommit(req, reply) => self.txn_commit(now, req, reply),
            Command::TxnCompleted(partition, producer_id, commit, reply) => {
                let n = self
                    .coordinators
                    .get_mut(&partition)
                    .map_or(0, |c| c.complete_transaction(producer_id, commit));
                let _ = reply.send(n);
            }
            Command::List(filter, reply) => {
                self.follow_leadership();
                let _ = reply.send(self.list_groups(&filter));
            }
            Command::Describe(group_ids, reply) => {
                let out = group_ids
                    .into_iter()
                    .map(|g| match self.route(&g) {
                        Ok(p) => self.coordinator(p).describe_group(&g),
                        Err(code) => describe_error(g, code),
                    })
                    .collect();
                let _ = reply.send(out);
            }
            Command::Delete(group_ids, reply) => self.delete_groups(group_ids, reply),
            Command::ConsumerHeartbeat(req, client_id, client_host, reply) => {
                self.consumer_heartbeat(now, req, &client_id, &client_host, reply)
            }
            Command::ConsumerDescribe(group_ids, reply) => {
                let mut out = Vec::with_capacity(group_ids.len());
                for g in group_ids {
                    let described = match self.route(&g) {
                        Ok(p) => self
                            .consumer_groups
                            .get(&p)
                            .and_then(|c| c.describe(std::slice::from_ref(&g), &self.topics).pop())
                            .unwrap_or_else(|| consumer_describe_error(g, 69)),
                        Err(code) => consumer_describe_error(g, code),
                    };
                    out.push(described);
                }
                let _ = reply.send(out);
            }
            Command::DeleteOffsets(group_id, partitions, reply) => match self.route(&group_id) {
                Ok(p) => {
                    let (code, codes, records) =
                        self.coordinator(p).delete_offsets(&group_id, &partitions);
                    let written = self.persist(p, records);
                    self.when_written(
                        p,
                        written,
                        Box::new(move |err| {
                            let code = if err != 0 { err } else { code };
                            let _ = reply.send((code, codes));
                        }),
                    );
                }
                Err(code) => {
                    let _ = reply.send((code, Vec::new()));
                }
            },
        }
    }

    /// ListGroups over every partition this node coordinates: each id once, as a KIP-848
    /// group if it is one (its offsets live in the classic coordinator as an Empty group).
    fn list_groups(&self, filter: &ListFilter) -> Vec<ListedGroup> {
        let matches = |wanted: &[String], value: &str| {
            wanted.is_empty() || wanted.iter().any(|w| w.trim().eq_ignore_ascii_case(value))
        };
        let mut out: BTreeMap<String, ListedGroup> = BTreeMap::new();
        for c in self.coordinators.values() {
            for (group_id, protocol_type, state) in c.list_groups(&[]) {
                let listed = ListedGroup {
                    group_id: group_id.clone(),
                    protocol_type,
                    state,
                    group_type: "classic".into(),
                };
                out.insert(group_id, listed);
            }
        }
        for consumer in self.consumer_groups.values() {
            for (group_id, state) in consumer.list() {
                let listed = ListedGroup {
                    group_id: group_id.clone(),
                    protocol_type: "consumer".into(),
                    state,
                    group_type: "consumer".into(),
                };
                out.insert(group_id, listed);
            }
        }
        out.into_values()
            .filter(|g| matches(&filter.states, &g.state) && matches(&filter.types, &g.group_type))
            .collect()
    }

    /// ConsumerGroupHeartbeat: decided by the pure KIP-848 groups, whose records go to the
    /// group's partition before the answer, which waits until they (and every earlier record
    /// of the partition, as Kafka's coordinator runtime waits for its last written offset)
    /// are replicated. A failed append reverts the decision and answers its error.
    fn consumer_heartbeat(
        &mut self,
        now: i64,
        req: ConsumerHeartbeat,
        client_id: &str,
        client_host: &str,
        reply: oneshot::Sender<ConsumerHeartbeatResponse>,
    ) {
        let failed = move |code: i16, heartbeat_interval_ms: i32| ConsumerHeartbeatResponse {
            error_code: code,
            error_message: None,
            member_id: None,
            member_epoch: 0,
            heartbeat_interval_ms,
            assignment: None,
        };
        let p = match self.route(&req.group_id) {
            Ok(p) => p,
            Err(code) => {
                let interval = self.consumer_config.heartbeat_interval_ms;
                let _ = reply.send(failed(code, interval));
                return;
            }
        };
        let client = ClientInfo {
            client_id,
            client_host,
        };
        let interval = self
            .consumer_groups_of(p)
            .timeouts(&req.group_id)
            .heartbeat_interval_ms;
        if self.coordinator(p).has_members(&req.group_id) {
            // Kafka: a classic group with members is only taken over by an online upgrade
            // (`group.consumer.migration.policy`), which Runnel does not do yet.
            let _ = reply.send(ConsumerHeartbeatResponse {
                error_message: Some(format!("Group {} is not a consumer group", req.group_id)),
                ..failed(runnel_group::errors::GROUP_ID_NOT_FOUND, interval)
            });
            return;
        }
        let (config, timeouts, topics) =
            (&self.consumer_config, &self.group_timeouts, &self.topics);
        let groups = self
            .consumer_groups
            .entry(p)
            .or_insert_with(|| fresh_consumer_groups(config, timeouts));
        let response = groups.heartbeat_from(now, req, client, topics);
        let records = groups.take_records();
        let written = match self.persist(p, records) {
            Written::Failed(code) => {
                self.consumer_groups_of(p).revert_records();
                let _ = reply.send(failed(code, interval));
                return;
            }
            Written::Done => self.unreplicated_tail(p),
            pending => pending,
        };
        self.when_written(
            p,
            written,
            Box::new(move |err| {
                let _ = reply.send(if err == 0 {
                    response
                } else {
                    failed(err, interval)
                });
            }),
        );
    }

    /// Whether a classic JoinGroup may go to the classic coordinator: not while a KIP-848
    /// group with members has the id (INCONSISTENT_GROUP_PROTOCOL: Kafka serves classic
    /// members inside a consumer group only through the migration Runnel does not do yet).
    /// An empty KIP-848 group gives way, with its tombstones, as Kafka deletes it.
    fn classic_join_allowed(&mut self, partition: i32, group_id: &str) -> Result<(), i16> {
        let consumer = self.consumer_groups_of(partition);
        if !consumer.contains(group_id) {
            return Ok(());
        }
        if consumer.has_members(group_id) {
            return Err(runnel_group::errors::INCONSISTENT_GROUP_PROTOCOL);
        }
        consumer.delete(group_id);
        let records = consumer.take_records();
        match self.persist(partition, records) {
            Written::Failed(code) => {
                self.consumer_groups_of(partition).revert_records();
                Err(code)
            }
            _ => Ok(()),
        }
    }

    /// The KIP-848 groups of a partition this node coordinates.
    fn consumer_groups_of(&mut self, partition: i32) -> &mut ConsumerGroups {
        let (config, timeouts) = (&self.consumer_config, &self.group_timeouts);
        self.consumer_groups
            .entry(partition)
            .or_insert_with(|| fresh_consumer_groups(config, timeouts))
    }

    /// What an answer that wrote nothing still waits for: the records already appended to the
    /// partition and not yet replicated (an answer must not show state a failover could take
    /// back).
    fn unreplicated_tail(&self, partition: i32) -> Written {
        match self.replicas.get(OFFSETS_TOPIC, partition) {
            Some(p) if p.high_watermark() < p.log_end_offset() => {
                Written::Pending(p.log_end_offset())
            }
            _ => Written::Done,
        }
    }

    /// OffsetCommit: validated and stored by the pure coordinator (within the partition's
    /// `max.message.bytes`), answered once its records are replicated.
    fn commit(
        &mut self,
        now: i64,
        mut req: OffsetCommitRequest,
        reply: oneshot::Sender<(i16, PartitionCodes)>,
    ) {
        let all = |req: &OffsetCommitRequest, code: i16| -> (i16, PartitionCodes) {
            let codes = req
                .offsets
                .iter()
                .map(|o| (o.topic.clone(), o.partition, code))
                .collect();
            (code, codes)
        };
        let p = match self.route(&req.group_id) {
            Ok(p) => p,
            Err(code) => {
                let _ = reply.send(all(&req, code));
                return;
            }
        };
        if let Some(groups) = self
            .consumer_groups
            .get(&p)
            .filter(|g| g.contains(&req.group_id))
        {
            // A KIP-848 member commits with its member epoch; once it checks out, the offsets
            // are stored the same way as a simple commit.
            if let Err(code) =
                groups.is_member_epoch_valid(&req.group_id, &req.member_id, req.generation_id)
            {
                let _ = reply.send(all(&req, code));
                return;
            }
            req.generation_id = -1;
            req.member_id.clear();
            req.group_instance_id = None;
        }
        let Some(max_batch_bytes) = self.max_batch_bytes(p) else {
            let _ = reply.send(all(&req, NOT_COORDINATOR));
            return;
        };
        let commit = self
            .coordinator(p)
            .begin_offset_commit(now, &req, max_batch_bytes);
        let (code, codes, token) = (commit.code, commit.codes, commit.token);
        let written = self.persist(p, commit.records);
        self.when_commit_written(
            p,
            written,
            token,
            Box::new(move |err| {
                let mut codes = codes;
                if err != 0 {
                    for c in &mut codes {
                        if c.2 == 0 {
                            c.2 = err;
                        }
                    }
                }
                let _ = reply.send((code, codes));
            }),
        );
    }

    /// TxnOffsetCommit: validated by the pure coordinator, its records appended as one
    /// transactional batch of the producer, answered once replicated; the offsets stay
    /// pending until the transaction's marker ([`Command::TxnCompleted`]).
    fn txn_commit(
        &mut self,
        now: i64,
        mut req: TxnOffsetCommitRequest,
        reply: oneshot::Sender<PartitionCodes>,
    ) {
        let all = |req: &TxnOffsetCommitRequest, code: i16| -> PartitionCodes {
            req.offsets
                .iter()
                .map(|o| (o.topic.clone(), o.partition, code))
                .collect()
        };
        let p = match self.route(&req.group_id) {
            Ok(p) => p,
            Err(code) => {
                let _ = reply.send(all(&req, code));
                return;
            }
        };
        if let Some(groups) = self
            .consumer_groups
            .get(&p)
            .filter(|g| g.contains(&req.group_id))
        {
            // A KIP-848 group: a request naming a member is checked against its member epoch
            // (a stale one is ILLEGAL_GENERATION for TxnOffsetCommit, as in Kafka); then the
            // offsets are stored like a simple commit's.
            let names_member = req.generation_id >= 0 || !req.member_id.is_empty();
            if names_member {
                if let Err(code) =
                    groups.is_member_epoch_valid(&req.group_id, &req.member_id, req.generation_id)
                {
                    let code = if code == STALE_MEMBER_EPOCH {
                        runnel_group::errors::ILLEGAL_GENERATION
                    } else {
                        code
                    };
                    let _ = reply.send(all(&req, code));
                    return;
                }
            }
            req.generation_id = -1;
            req.member_id.clear();
            req.group_instance_id = None;
        }
        let Some(max_batch_bytes) = self.max_batch_bytes(p) else {
            let _ = reply.send(all(&req, NOT_COORDINATOR));
            return;
        };
        let commit = self
            .coordinator(p)
            .begin_txn_offset_commit(now, &req, max_batch_bytes);
        let (codes, token) = (commit.codes, commit.token);
        let producer = (req.producer_id, req.producer_epoch);
        let written = self.persist_as(p, commit.records, Some(producer));
        self.when_commit_written(
            p,
            written,
            token,
            Box::new(move |err| {
                let mut codes = codes;
                if err != 0 {
                    for c in &mut codes {
                        if c.2 == 0 {
                            c.2 = err;
                        }
                    }
                }
                let _ = reply.send(codes);
            }),
        );
    }

    /// The `max.message.bytes` of a `__consumer_offsets` partition hosted here.
    fn max_batch_bytes(&self, partition: i32) -> Option<usize> {
        let p = self.replicas.get(OFFSETS_TOPIC, partition)?;
        let max = p.role().config.max_message_bytes;
        Some(usize::try_from(max).unwrap_or(0))
    }

    /// DeleteGroups: each group's tombstones go to its own partition; the answer waits for
    /// all of them.
    fn delete_groups(
        &mut self,
        group_ids: Vec<String>,
        reply: oneshot::Sender<Vec<(String, i16)>>,
    ) {
        let mut out = Vec::with_capacity(group_ids.len());
        let mut writes: Vec<(i32, Written, std::ops::Range<usize>)> = Vec::new();
        for g in group_ids {
            match self.route(&g) {
                Ok(p) => {
                    // A KIP-848 group goes with its tombstones, then its offsets (held by the
                    // classic coordinator) with theirs.
                    let mut records = Vec::new();
                    let consumer = self.consumer_groups_of(p);
                    if consumer.contains(&g) {
                        let code = consumer.delete(&g);
                        if code != 0 {
                            out.push((g, code));
                            continue;
                        }
                        records = consumer.take_records();
                    }
                    let is_consumer = !records.is_empty();
                    let (mut results, classic) =
                        self.coordinator(p).delete_groups(std::slice::from_ref(&g));
                    if is_consumer {
                        for r in &mut results {
                            if r.1 == runnel_group::errors::GROUP_ID_NOT_FOUND {
                                r.1 = 0;
                            }
                        }
                    }
                    records.extend(classic);
                    let written = self.persist(p, records);
                    if let (true, Written::Failed(_)) = (is_consumer, written) {
                        self.consumer_groups_of(p).revert_records();
                    }
                    writes.push((p, written, out.len()..out.len() + results.len()));
                    out.extend(results);
                }
                Err(code) => out.push((g, code)),
            }
        }
        let gather = Arc::new(parking_lot::Mutex::new(DeleteAnswer {
            results: out,
            waiting: writes.len(),
            reply: Some(reply),
        }));
        if writes.is_empty() {
            gather.lock().finish_one(0..0, 0);
            return;
        }
        for (p, written, range) in writes {
            let gather = gather.clone();
            self.when_written(
                p,
                written,
                Box::new(move |err| gather.lock().finish_one(range, err)),
            );
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
        let partitions: Vec<i32> = self.consumer_groups.keys().copied().collect();
        for p in partitions {
            let Some(groups) = self.consumer_groups.get_mut(&p) else {
                continue;
            };
            groups.tick(now, &self.topics);
            let records = groups.take_records();
            if let Written::Failed(code) = self.persist(p, records) {
                tracing::warn!(partition = p, code, "consumer group records not appended");
                self.consumer_groups_of(p).revert_records();
            }
        }
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

    /// Runs `waiter` once `written` is replicated (now, if nothing is pending), or with the
    /// error code it failed with.
    fn when_written(&mut self, partition: i32, written: Written, answer: Answer) {
        let waiter = Waiter {
            commit: None,
            answer,
        };
        self.park_or_finish(partition, written, waiter);
    }

    /// [`Self::when_written`] for an offset commit: its offsets become visible (or are
    /// dropped, if the write failed) right before the answer.
    fn when_commit_written(
        &mut self,
        partition: i32,
        written: Written,
        token: u64,
        answer: Answer,
    ) {
        let waiter = Waiter {
            commit: Some((partition, token)),
            answer,
        };
        self.park_or_finish(partition, written, waiter);
    }

    fn park_or_finish(&mut self, partition: i32, written: Written, waiter: Waiter) {
        match written {
            Written::Done => self.finish(waiter, 0),
            Written::Failed(code) => self.finish(waiter, code),
            Written::Pending(offset) => {
                let deadline = now_ms().saturating_add(PERSIST_TIMEOUT_MS);
                self.purgatory.park(partition, offset, deadline, waiter);
            }
        }
    }

    /// Completes a write: a commit's offsets are stored (written) or forgotten (failed) by
    /// its coordinator, if this node still is it, then the answer goes out.
    fn finish(&mut self, waiter: Waiter, code: i16) {
        if let Some((partition, token)) = waiter.commit {
            if let Some(coordinator) = self.coordinators.get_mut(&partition) {
                coordinator.complete_offset_commit(token, code == 0);
            }
        }
        (waiter.answer)(code);
    }

    /// Appends the `Persist` outputs first; JoinGroup answers go out at once, SyncGroup
    /// answers once the records before them are replicated (with an error instead if they are
    /// not). Returns the state of everything appended, for answers that follow.
    fn apply_outputs(&mut self, partition: i32, outputs: Vec<Output>) -> Written {
        let mut written = Written::Done;
        for output in outputs {
            match output {
                Output::Persist(records) => {
                    written = written.and(self.persist(partition, records));
                }
                Output::Join(id, response) => {
                    if let Some(Pending::Join(_, reply)) = self.pending.remove(&id) {
                        let _ = reply.send(response);
                    }
                }
                Output::Sync(id, response) => {
                    if let Some(Pending::Sync(_, reply)) = self.pending.remove(&id) {
                        self.when_written(
                            partition,
                            written,
                            Box::new(move |err| {
                                let response = if err == 0 { response } else { sync_error(err) };
                                let _ = reply.send(response);
                            }),
                        );
                    }
                }
            }
        }
        written
    }

    /// Appends records to the group's `__consumer_offsets` partition as one batch, without
    /// waiting: like Kafka's coordinator (acks=all) the answers depending on it wait until
    /// every in-sync replica has the records, so a failover cannot lose an acknowledged commit.
    fn persist(&mut self, partition: i32, records: Vec<OffsetsRecord>) -> Written {
        self.persist_as(partition, records, None)
    }

    /// [`Self::persist`], as a transactional batch of `producer` (id, epoch) when given: a
    /// TxnOffsetCommit's records, which its transaction's marker later ends. Only the
    /// producer's epoch is checked (INVALID_PRODUCER_EPOCH once a newer one wrote here).
    fn persist_as(
        &mut self,
        partition: i32,
        records: Vec<OffsetsRecord>,
        producer: Option<(i64, i16)>,
    ) -> Written {
        if records.is_empty() {
            return Written::Done;
        }
        let Some(p) = self.replicas.get(OFFSETS_TOPIC, partition) else {
            tracing::error!(partition, "__consumer_offsets partition is not hosted here");
            return Written::Failed(NOT_COORDINATOR);
        };
        let batch = match encode_batch_of(records, producer) {
            Ok(batch) => batch,
            Err(e) => {
                tracing::error!(partition, error = %e, "cannot encode group records");
                return Written::Failed(COORDINATOR_NOT_AVAILABLE);
            }
        };
        let appended = match producer {
            None => p.append_as_leader(&batch, self.node_id, 1),
            Some(_) => p.append_as_coordinator(&batch, self.node_id),
        };
        match appended {
            Ok(appended) => {
                let needed = appended.last_offset + 1;
                if p.high_watermark() >= needed {
                    Written::Done
                } else {
                    Written::Pending(needed)
                }
            }
            Err((code, _)) if producer.is_some() && code == INVALID_PRODUCER_EPOCH => {
                Written::Failed(code)
            }
            Err((code, message)) => {
                tracing::error!(partition, code, %message, "cannot persist group records");
                Written::Failed(coordinator_write_error(code))
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

/// The error a group request gets when the append of its records fails with `code` (Kafka's
/// `CoordinatorOperationExceptionHelper`): the partition is gone from this leader or its disk
/// failed -> NOT_COORDINATOR (the client looks the coordinator up again); too few replicas or
/// a timeout -> COORDINATOR_NOT_AVAILABLE; a batch too large -> UNKNOWN_SERVER_ERROR. Any other
/// refusal is COORDINATOR_NOT_AVAILABLE, which every client retries.
fn coordinator_write_error(code: i16) -> i16 {
    const UNKNOWN_SERVER_ERROR: i16 = -1;
    match code {
        // NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR
        6 | 56 => NOT_COORDINATOR,
        // MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_FETCH_SIZE
        10 | 18 | 4 => UNKNOWN_SERVER_ERROR,
        // UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, and the rest
        _ => COORDINATOR_NOT_AVAILABLE,
    }
}

/// The keyed records of a coordinator partition hosted here (`__consumer_offsets`,
/// `__transaction_state`), in log order up to its log end: as the new leader, everything it
/// holds will be committed. Control records are skipped, and so is the transactional origin
/// of records ([`read_log`] keeps both).
pub(crate) fn read_records(
    replicas: &ReplicaManager,
    topic: &str,
    partition: i32,
) -> Vec<OffsetsRecord> {
    read_log(replicas, topic, partition)
        .into_iter()
        .filter_map(|r| match r {
            LoadRecord::Record { record, .. } => Some(record),
            LoadRecord::Marker { .. } => None,
        })
        .collect()
}

/// The control record key's type (Kafka's `ControlRecordType`): 0 ABORT, 1 COMMIT; None for
/// any other control record (or an undecodable key).
fn marker_commit(key: Option<&[u8]>) -> Option<bool> {
    let key = key?;
    let kind = i16::from_be_bytes([*key.get(2)?, *key.get(3)?]);
    match kind {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

/// [`read_records`] with transactions: records of transactional batches carry their producer
/// id and transaction markers are kept, for the group loader.
pub(crate) fn read_log(replicas: &ReplicaManager, topic: &str, partition: i32) -> Vec<LoadRecord> {
    let Some(p) = replicas.get(topic, partition) else {
        return Vec::new();
    };
    let mut records = Vec::new();
    {
        let log = p.lock_log();
        // Up to the log end: as the new leader, everything it holds will be committed.
        let end = log.log_end_offset();
        let mut offset = log.log_start_offset();
        while offset < end {
            let read = match log.read(offset, 1 << 20, end, true) {
                Ok(read) if !read.records.is_empty() => read,
                Ok(_) => break,
                Err(e) => {
                    tracing::error!(partition, error = %e, "cannot read {topic} while loading");
                    break;
                }
            };
            let mut bytes = read.records;
            let before = offset;
            while !bytes.is_empty() {
                // Bounded decompression: a forged batch cannot inflate without limit.
                match runnel_log::compression::decode_batch_bounded(&mut bytes) {
                    Ok(set) => {
                        for r in set.records {
                            offset = offset.max(r.offset + 1);
                            if r.offset < before {
                                continue;
                            }
                            if r.control {
                                if let Some(commit) = marker_commit(r.key.as_deref()) {
                                    records.push(LoadRecord::Marker {
                                        producer_id: r.producer_id,
                                        commit,
                                    });
                                }
                                continue;
                            }
                            if let Some(key) = r.key {
                                records.push(LoadRecord::Record {
                                    producer_id: r.transactional.then_some(r.producer_id),
                                    record: OffsetsRecord {
                                        key,
                                        value: r.value,
                                    },
                                });
                            }
                        }
                    }
                    Err(e) => {
                        tracing::error!(partition, error = %e, "undecodable batch in {topic}");
                        bytes.clear();
                    }
                }
            }
            if offset == before {
                break;
            }
        }
    }
    records
}

/// One uncompressed, non-idempotent batch of keyed records, as Kafka's coordinators write.
pub(crate) fn encode_batch(records: Vec<OffsetsRecord>) -> anyhow_free::Result<Bytes> {
    encode_batch_of(records, None)
}

/// [`encode_batch`], or with `producer` (id, epoch) a transactional batch of that producer
/// with base sequence 0, as Kafka's group coordinator writes a TxnOffsetCommit.
fn encode_batch_of(
    records: Vec<OffsetsRecord>,
    producer: Option<(i64, i16)>,
) -> anyhow_free::Result<Bytes> {
    let now = now_ms();
    let (producer_id, producer_epoch) = producer.unwrap_or((-1, -1));
    // The encoder derives the base sequence from `offset - sequence`: -1 (none) or 0.
    let first_sequence: i32 = if producer.is_some() { 0 } else { -1 };
    let records: Vec<Record> = records
        .into_iter()
        .enumerate()
        .map(|(i, r)| (i64::try_from(i).unwrap_or(i64::MAX), r))
        .map(|(i, r)| Record {
            transactional: producer.is_some(),
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i,
            // The encoder starts a new batch wherever `offset - sequence` changes; keeping it
            // constant (base sequence -1: not idempotent) makes the records one batch, as
            // Kafka's coordinator writes them, instead of one batch per record.
            sequence: i32::try_from(i)
                .unwrap_or(i32::MAX)
                .wrapping_add(first_sequence),
            timestamp: now,
            key: Some(r.key),
            value: r.value,
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .map_err(|e| e.to_string())?;
    Ok(buf.freeze())
}

/// kafka-protocol reports errors as `anyhow::Error`; this crate keeps them as strings.
mod anyhow_free {
    pub type Result<T> = std::result::Result<T, String>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use runnel_group::batch_size::record_batch_size;

    /// The pure coordinator sizes a commit's batch without encoding it; this is the batch the
    /// shell then writes, so the two must agree byte for byte.
    #[test]
    fn the_pure_batch_size_is_the_size_of_the_encoded_batch() {
        let records: Vec<OffsetsRecord> = (0..300)
            .map(|i| OffsetsRecord {
                key: Bytes::from(vec![b'k'; 10 + i]),
                value: (i % 7 != 0).then(|| Bytes::from(vec![b'v'; 3 * i])),
            })
            .collect();
        for n in [1, 2, 128, 300] {
            let encoded = encode_batch(records[..n].to_vec()).unwrap();
            assert_eq!(
                encoded.len(),
                record_batch_size(&records[..n]),
                "{n} records"
            );
        }
    }
}
