//! The group coordinator's imperative shell.
//!
//! One task owns a pure [`GroupCoordinator`] per `__consumer_offsets` partition this broker
//! leads. Requests arrive through a bounded queue; JoinGroup/SyncGroup answers that the pure
//! code parks are completed later (by another request or by the 100 ms tick). Records the
//! coordinator emits are appended to the group's partition *before* any answer produced in the
//! same step is sent, so a client never sees an acknowledgement that is not in the log. When
//! leadership of a partition arrives the partition is loaded (replaying its records); when it
//! leaves, its groups are dropped and parked requests get NOT_COORDINATOR.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use runnel_group::{
    consumer_group::ClientInfo, partition_for_group, CommittedOffset, ConsumerGroupConfig,
    ConsumerGroupDescription, ConsumerGroups, ConsumerHeartbeat, ConsumerHeartbeatResponse,
    GroupConfig, GroupCoordinator, GroupDescription, HeartbeatRequest, JoinRequest, JoinResponse,
    OffsetCommitRequest, OffsetsRecord, Output, RequestId, SyncRequest, SyncResponse, TopicsView,
};
use runnel_metadata::MetadataImage;
use tokio::sync::{mpsc, oneshot, watch};

use crate::clock::now_ms;
use crate::replica_manager::ReplicaManager;

pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
const QUEUE_CAPACITY: usize = 4096;
const TICK: Duration = Duration::from_millis(100);
/// How long a group write may wait for the in-sync replicas before it is reported as failed.
const PERSIST_TIMEOUT: Duration = Duration::from_secs(5);

pub const NOT_COORDINATOR: i16 = 16;
pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
pub const INVALID_GROUP_ID: i16 = 24;

type FetchResult = (i16, Vec<(String, i32, Option<CommittedOffset>)>);
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
        oneshot::Sender<FetchResult>,
    ),
    List(Vec<String>, oneshot::Sender<Vec<(String, String, String)>>),
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

    pub async fn fetch(
        &self,
        group_id: String,
        partitions: Option<Vec<(String, Vec<i32>)>>,
    ) -> FetchResult {
        self.call(|r| Command::Fetch(group_id, partitions, r))
            .await
            .unwrap_or((COORDINATOR_NOT_AVAILABLE, Vec::new()))
    }

    pub async fn list(&self, states: Vec<String>) -> Vec<(String, String, String)> {
        self.call(|r| Command::List(states, r))
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
fn topics_view(image: &MetadataImage) -> TopicsView {
    TopicsView {
        topics: image
            .topics
            .values()
            .map(|t| (t.name.clone(), (t.id, t.partitions.len() as i32)))
            .collect(),
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
    /// KIP-848 groups, per coordinator partition (membership is soft state: not persisted;
    /// their offsets are stored like every other group's).
    consumer_groups: BTreeMap<i32, ConsumerGroups>,
    consumer_config: ConsumerGroupConfig,
    pending: HashMap<RequestId, Pending>,
    next_request: RequestId,
}

/// Starts the group task.
pub fn spawn(
    node_id: i32,
    config: GroupConfig,
    replicas: Arc<ReplicaManager>,
    image: watch::Receiver<Arc<MetadataImage>>,
) -> GroupHandle {
    let (tx, mut rx) = mpsc::channel(QUEUE_CAPACITY);
    let mut manager = GroupManager {
        node_id,
        config,
        replicas,
        image,
        coordinators: BTreeMap::new(),
        consumer_groups: BTreeMap::new(),
        consumer_config: ConsumerGroupConfig::default(),
        pending: HashMap::new(),
        next_request: 0,
    };
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        manager.follow_leadership();
        loop {
            tokio::select! {
                command = rx.recv() => match command {
                    Some(command) => manager.handle(command).await,
                    None => return,
                },
                _ = tick.tick() => manager.tick().await,
                changed = manager.image.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    manager.follow_leadership();
                }
            }
        }
    });
    GroupHandle { tx }
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
        }
        for p in led {
            if !self.coordinators.contains_key(&p) {
                let coordinator = self.load(p);
                self.coordinators.insert(p, coordinator);
            }
        }
    }

    /// Replays the partition's records into a fresh coordinator.
    fn load(&self, partition: i32) -> GroupCoordinator {
        let mut coordinator = GroupCoordinator::new(self.config.clone());
        let Some(p) = self.replicas.get(OFFSETS_TOPIC, partition) else {
            return coordinator;
        };
        let mut records = Vec::new();
        {
            let log = p.log.lock();
            // Up to the log end: as the new leader, everything it holds will be committed.
            let end = log.log_end_offset();
            let mut offset = log.log_start_offset();
            while offset < end {
                let read = match log.read(offset, 1 << 20, end, true) {
                    Ok(read) if !read.records.is_empty() => read,
                    Ok(_) => break,
                    Err(e) => {
                        tracing::error!(partition, error = %e, "cannot read __consumer_offsets while loading");
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
                                if r.control || r.offset < before {
                                    continue;
                                }
                                if let Some(key) = r.key {
                                    records.push(OffsetsRecord {
                                        key,
                                        value: r.value,
                                    });
                                }
                            }
                        }
                        Err(e) => {
                            tracing::error!(partition, error = %e, "undecodable batch in __consumer_offsets");
                            bytes.clear();
                        }
                    }
                }
                if offset == before {
                    break;
                }
            }
        }
        let n = records.len();
        coordinator.load(now_ms(), records);
        tracing::info!(partition, records = n, "loaded group coordinator partition");
        coordinator
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

    async fn handle(&mut self, command: Command) {
        let now = now_ms();
        match command {
            Command::Join(req, reply) => match self.route(&req.group_id) {
                Ok(p) => {
                    let id = self.request_id();
                    self.pending.insert(id, Pending::Join(p, reply));
                    let outputs = self.coordinator(p).join(now, id, req);
                    self.apply_outputs(p, outputs).await;
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
                    self.apply_outputs(p, outputs).await;
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
                    self.apply_outputs(p, outputs).await;
                    let _ = reply.send((code, codes));
                }
                Err(code) => {
                    let _ = reply.send((code, vec![code; members.len()]));
                }
            },
            Command::Commit(mut req, reply) => match self.route(&req.group_id) {
                Ok(p) => {
                    if let Some(groups) = self
                        .consumer_groups
                        .get(&p)
                        .filter(|g| g.contains(&req.group_id))
                    {
                        // A KIP-848 member commits with its member epoch; once it checks out,
                        // the offsets are stored the same way as a simple commit.
                        if let Err(code) = groups.is_member_epoch_valid(
                            &req.group_id,
                            &req.member_id,
                            req.generation_id,
                        ) {
                            let codes = req
                                .offsets
                                .iter()
                                .map(|o| (o.topic.clone(), o.partition, code))
                                .collect();
                            let _ = reply.send((code, codes));
                            return;
                        }
                        req.generation_id = -1;
                        req.member_id.clear();
                        req.group_instance_id = None;
                    }
                    let (code, mut codes, records) = self.coordinator(p).commit_offsets(now, &req);
                    if !records.is_empty() && !self.persist(p, records).await {
                        for c in &mut codes {
                            if c.2 == 0 {
                                c.2 = COORDINATOR_NOT_AVAILABLE;
                            }
                        }
                    }
                    let _ = reply.send((code, codes));
                }
                Err(code) => {
                    let codes = req
                        .offsets
                        .iter()
                        .map(|o| (o.topic.clone(), o.partition, code))
                        .collect();
                    let _ = reply.send((code, codes));
                }
            },
            Command::Fetch(group_id, partitions, reply) => {
                let result = match self.route(&group_id) {
                    Ok(p) => self
                        .coordinator(p)
                        .fetch_offsets(&group_id, partitions.as_deref()),
                    Err(code) => (code, Vec::new()),
                };
                let _ = reply.send(result);
            }
            Command::List(states, reply) => {
                self.follow_leadership();
                let mut groups: Vec<(String, String, String)> = self
                    .coordinators
                    .values()
                    .flat_map(|c| c.list_groups(&states))
                    .collect();
                for consumer in self.consumer_groups.values() {
                    for (id, state) in consumer.list() {
                        let wanted = states.is_empty()
                            || states.iter().any(|s| s.eq_ignore_ascii_case(&state));
                        if wanted {
                            groups.retain(|g| g.0 != id);
                            groups.push((id, "consumer".into(), state));
                        }
                    }
                }
                let _ = reply.send(groups);
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
            Command::Delete(group_ids, reply) => {
                let mut out = Vec::with_capacity(group_ids.len());
                for g in group_ids {
                    match self.route(&g) {
                        Ok(p) => {
                            let (mut results, records) =
                                self.coordinator(p).delete_groups(std::slice::from_ref(&g));
                            if !records.is_empty() && !self.persist(p, records).await {
                                for r in &mut results {
                                    if r.1 == 0 {
                                        r.1 = COORDINATOR_NOT_AVAILABLE;
                                    }
                                }
                            }
                            out.extend(results);
                        }
                        Err(code) => out.push((g, code)),
                    }
                }
                let _ = reply.send(out);
            }
            Command::ConsumerHeartbeat(req, client_id, client_host, reply) => {
                let response = match self.route(&req.group_id) {
                    Ok(p) => {
                        let topics = topics_view(&self.image.borrow());
                        let client = ClientInfo {
                            client_id: &client_id,
                            client_host: &client_host,
                        };
                        let config = self.consumer_config.clone();
                        let groups = self
                            .consumer_groups
                            .entry(p)
                            .or_insert_with(|| ConsumerGroups::new(config));
                        groups.heartbeat_from(now, req, client, &topics)
                    }
                    Err(code) => ConsumerHeartbeatResponse {
                        error_code: code,
                        error_message: None,
                        member_id: None,
                        member_epoch: 0,
                        heartbeat_interval_ms: self.consumer_config.heartbeat_interval_ms,
                        assignment: None,
                    },
                };
                let _ = reply.send(response);
            }
            Command::ConsumerDescribe(group_ids, reply) => {
                let topics = topics_view(&self.image.borrow());
                let mut out = Vec::with_capacity(group_ids.len());
                for g in group_ids {
                    let described = match self.route(&g) {
                        Ok(p) => self
                            .consumer_groups
                            .get(&p)
                            .and_then(|c| c.describe(std::slice::from_ref(&g), &topics).pop())
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
                    let code = if !records.is_empty() && !self.persist(p, records).await {
                        COORDINATOR_NOT_AVAILABLE
                    } else {
                        code
                    };
                    let _ = reply.send((code, codes));
                }
                Err(code) => {
                    let _ = reply.send((code, Vec::new()));
                }
            },
        }
    }

    fn coordinator(&mut self, partition: i32) -> &mut GroupCoordinator {
        self.coordinators
            .entry(partition)
            .or_insert_with(|| GroupCoordinator::new(self.config.clone()))
    }

    async fn tick(&mut self) {
        let now = now_ms();
        let partitions: Vec<i32> = self.coordinators.keys().copied().collect();
        for p in partitions {
            let outputs = self.coordinator(p).tick(now);
            self.apply_outputs(p, outputs).await;
        }
        if !self.consumer_groups.is_empty() {
            let topics = topics_view(&self.image.borrow());
            for groups in self.consumer_groups.values_mut() {
                groups.tick(now, &topics);
            }
        }
    }

    /// Persists first, then answers; answers after a failed persist carry an error instead.
    async fn apply_outputs(&mut self, partition: i32, outputs: Vec<Output>) {
        let mut persisted = true;
        for output in outputs {
            match output {
                Output::Persist(records) => {
                    persisted &= self.persist(partition, records).await;
                }
                Output::Join(id, response) => {
                    if let Some(Pending::Join(_, reply)) = self.pending.remove(&id) {
                        let _ = reply.send(response);
                    }
                }
                Output::Sync(id, response) => {
                    if let Some(Pending::Sync(_, reply)) = self.pending.remove(&id) {
                        let response = if persisted {
                            response
                        } else {
                            sync_error(COORDINATOR_NOT_AVAILABLE)
                        };
                        let _ = reply.send(response);
                    }
                }
            }
        }
    }

    /// Appends records to the group's `__consumer_offsets` partition as one batch.
    async fn persist(&mut self, partition: i32, records: Vec<OffsetsRecord>) -> bool {
        let Some(p) = self.replicas.get(OFFSETS_TOPIC, partition) else {
            tracing::error!(partition, "__consumer_offsets partition is not hosted here");
            return false;
        };
        let batch = match encode_batch(records) {
            Ok(batch) => batch,
            Err(e) => {
                tracing::error!(partition, error = %e, "cannot encode group records");
                return false;
            }
        };
        match p.append_as_leader(&batch, self.node_id, 1) {
            Ok(appended) => {
                self.replicas.appended.notify_waiters();
                // Like Kafka's coordinator (acks=all): answer only once every in-sync replica
                // has the records, so a coordinator failover cannot lose an acknowledged commit.
                let needed = appended.last_offset + 1;
                let deadline = tokio::time::Instant::now() + PERSIST_TIMEOUT;
                loop {
                    let notified = self.replicas.appended.notified();
                    tokio::pin!(notified);
                    notified.as_mut().enable();
                    if p.log.lock().high_watermark() >= needed {
                        return true;
                    }
                    tokio::select! {
                        _ = &mut notified => {}
                        _ = tokio::time::sleep_until(deadline) => {
                            let replicated = p.log.lock().high_watermark() >= needed;
                            if !replicated {
                                tracing::warn!(partition, "group records not replicated in time");
                            }
                            return replicated;
                        }
                    }
                }
            }
            Err((code, message)) => {
                tracing::error!(partition, code, %message, "cannot persist group records");
                false
            }
        }
    }
}

fn encode_batch(records: Vec<OffsetsRecord>) -> anyhow_free::Result<Bytes> {
    let now = now_ms();
    let records: Vec<Record> = records
        .into_iter()
        .enumerate()
        .map(|(i, r)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: -1,
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
