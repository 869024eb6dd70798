//! The controller's imperative shell: one task, one bounded queue, every decision in order.
//!
//! The pure [`Controller`] decides; this task applies the records to a candidate image first (so
//! an inconsistent record is never made durable), commits them through the backend (the file
//! log on a single node, the Raft quorum in a cluster), and then lets the state machines react
//! (`on_commit`) until they have nothing left to change — the seed's "persist the plan, then
//! drive partitions and replicas Online". In a cluster only the quorum leader decides: every
//! other node answers NOT_CONTROLLER and the caller retries at the leader.

use std::sync::Arc;
use std::time::{Duration, Instant};

use runnel_metadata::acl::{AclBinding, AclBindingFilter};
use runnel_metadata::{
    AlterConfigOp, ApiError, BrokerSessions, ConfigResource, Controller, ControllerConfig,
    CreatePartitionsRequest, CreateTopicOutcome, CreateTopicRequest, ElectionResult, ElectionType,
    MetadataImage, MetadataRecord, ReassignmentRequest, ReassignmentResult, StateChangeEvent,
    TopicRef,
};
use runnel_raft::{MetadataQuorum, QuorumError};
use tokio::sync::{mpsc, oneshot, watch};
use uuid::Uuid;

use crate::clock::now_ms;
use crate::metadata_log::MetadataLog;
use crate::publisher::Publisher;

/// Queue bound: callers wait (backpressure) rather than the controller buffering without limit.
const QUEUE_CAPACITY: usize = 1024;

pub type DeleteTopicResult = (TopicRef, Option<String>, Result<Uuid, ApiError>);
pub type CreatePartitionsResult = (String, Result<(), ApiError>);
/// State-change events with their sequence numbers, and the next sequence number.
pub type EventsSince = (Vec<(u64, StateChangeEvent)>, u64);

type Reply<T> = oneshot::Sender<Result<T, ApiError>>;

enum Command {
    CreateTopics {
        requests: Vec<CreateTopicRequest>,
        validate_only: bool,
        reply: Reply<Vec<CreateTopicOutcome>>,
    },
    DeleteTopics {
        topics: Vec<TopicRef>,
        api_version: i16,
        reply: Reply<Vec<DeleteTopicResult>>,
    },
    CreatePartitions {
        requests: Vec<CreatePartitionsRequest>,
        validate_only: bool,
        reply: Reply<Vec<CreatePartitionsResult>>,
    },
    AlterConfigs {
        resource: ConfigResource,
        ops: Vec<(String, AlterConfigOp, Option<String>)>,
        incremental: bool,
        validate_only: bool,
        reply: Reply<()>,
    },
    AlterUserScramCredentials {
        deletions: Vec<runnel_metadata::ScramDeletion>,
        upsertions: Vec<runnel_metadata::ScramUpsertion>,
        reply: Reply<Vec<runnel_metadata::ScramAlterResult>>,
    },
    AlterClientQuotas {
        alterations: Vec<runnel_metadata::quota::QuotaAlteration>,
        validate_only: bool,
        reply: Reply<Vec<runnel_metadata::quota::QuotaAlterResult>>,
    },
    CreateAcls {
        acls: Vec<AclBinding>,
        reply: Reply<Vec<Result<(), ApiError>>>,
    },
    DeleteAcls {
        filters: Vec<AclBindingFilter>,
        reply: Reply<Vec<Result<Vec<AclBinding>, ApiError>>>,
    },
    RegisterBroker {
        broker_id: i32,
        incarnation_id: Uuid,
        host: String,
        port: u16,
        rack: Option<String>,
        /// Answer: the broker epoch of the registration.
        reply: Reply<i64>,
    },
    /// A heartbeat that could not be answered at once (the shell was not active yet in the
    /// current term): it activates the shell first. Stamped when it was received.
    Heartbeat {
        broker_id: i32,
        broker_epoch: i64,
        metadata_offset: i64,
        received_ms: i64,
        /// Answer: whether the broker is still fenced.
        reply: Reply<bool>,
    },
    /// A heartbeat found the fenced broker caught up: commit its unfencing (nobody waits).
    Unfence { broker_id: i32, broker_epoch: i64 },
    /// One block of `PRODUCER_ID_BLOCK_SIZE` ids (the size is not the caller's to choose).
    AllocateProducerIds { broker_id: i32, reply: Reply<i64> },
    Events {
        since: u64,
        reply: Reply<EventsSince>,
    },
    ElectLeaders {
        election: ElectionType,
        partitions: Option<Vec<(String, i32)>>,
        reply: Reply<Vec<ElectionResult>>,
    },
    AlterPartition {
        request: AlterIsr,
        reply: Reply<(Vec<i32>, i32)>,
    },
    AlterReassignments {
        requests: Vec<ReassignmentRequest>,
        allow_replication_factor_change: bool,
        reply: Reply<Vec<ReassignmentResult>>,
    },
    /// Answer: how many leaderships stay with the broker (no in-sync replica to take them).
    ControlledShutdown { broker_id: i32, reply: Reply<usize> },
    /// The broker finished its controlled shutdown and stopped heartbeating: it is fenced and
    /// its session ends now, so its next process registers without waiting for the session
    /// timeout (KRaft fences a broker whose controlled shutdown completed).
    ShutdownComplete { broker_id: i32, reply: Reply<()> },
}

/// A leader's ISR change request (Kafka's AlterPartition, spec I.3 item 6).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct AlterIsr {
    pub topic_id: Uuid,
    pub partition: i32,
    pub broker_id: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub new_isr: Vec<i32>,
}

impl Command {
    fn name(&self) -> &'static str {
        match self {
            Command::CreateTopics { .. } => "CreateTopics",
            Command::DeleteTopics { .. } => "DeleteTopics",
            Command::CreatePartitions { .. } => "CreatePartitions",
            Command::AlterConfigs { .. } => "AlterConfigs",
            Command::AlterUserScramCredentials { .. } => "AlterUserScramCredentials",
            Command::AlterClientQuotas { .. } => "AlterClientQuotas",
            Command::CreateAcls { .. } => "CreateAcls",
            Command::DeleteAcls { .. } => "DeleteAcls",
            Command::RegisterBroker { .. } => "RegisterBroker",
            Command::Heartbeat { .. } => "Heartbeat",
            Command::Unfence { .. } => "Unfence",
            Command::AllocateProducerIds { .. } => "AllocateProducerIds",
            Command::Events { .. } => "Events",
            Command::ElectLeaders { .. } => "ElectLeaders",
            Command::AlterPartition { .. } => "AlterPartition",
            Command::AlterReassignments { .. } => "AlterPartitionReassignments",
            Command::ControlledShutdown { .. } => "ControlledShutdown",
            Command::ShutdownComplete { .. } => "ShutdownComplete",
        }
    }

    /// Answers the command with `e` without running it.
    fn fail(self, e: ApiError) {
        match self {
            Command::CreateTopics { reply, .. } => drop(reply.send(Err(e))),
            Command::DeleteTopics { reply, .. } => drop(reply.send(Err(e))),
            Command::CreatePartitions { reply, .. } => drop(reply.send(Err(e))),
            Command::AlterConfigs { reply, .. } => drop(reply.send(Err(e))),
            Command::AlterUserScramCredentials { reply, .. } => drop(reply.send(Err(e))),
            Command::AlterClientQuotas { reply, .. } => drop(reply.send(Err(e))),
            Command::CreateAcls { reply, .. } => drop(reply.send(Err(e))),
            Command::DeleteAcls { reply, .. } => drop(reply.send(Err(e))),
            Command::RegisterBroker { reply, .. } => drop(reply.send(Err(e))),
            Command::Heartbeat { reply, .. } => drop(reply.send(Err(e))),
            Command::Unfence { .. } => {}
            Command::AllocateProducerIds { reply, .. } => drop(reply.send(Err(e))),
            Command::Events { reply, .. } => drop(reply.send(Err(e))),
            Command::ElectLeaders { reply, .. } => drop(reply.send(Err(e))),
            Command::AlterPartition { reply, .. } => drop(reply.send(Err(e))),
            Command::AlterReassignments { reply, .. } => drop(reply.send(Err(e))),
            Command::ControlledShutdown { reply, .. } => drop(reply.send(Err(e))),
            Command::ShutdownComplete { reply, .. } => drop(reply.send(Err(e))),
        }
    }
}

/// Per-partition results whose records were committed in one batch: if the commit failed,
/// every success becomes that failure (the partitions that failed validation keep their own).
fn with_commit_outcome(
    mut results: Vec<(String, i32, Result<(), ApiError>)>,
    committed: Result<(), ApiError>,
) -> Vec<(String, i32, Result<(), ApiError>)> {
    if let Err(e) = committed {
        for r in results.iter_mut().filter(|r| r.2.is_ok()) {
            r.2 = Err(e.clone());
        }
    }
    results
}

/// Cheap, cloneable access to the controller task.
#[derive(Clone)]
pub struct ControllerHandle {
    tx: mpsc::Sender<Command>,
    live: Liveness,
}

/// What heartbeats are answered from without waiting in the command queue (KRaft handles a
/// heartbeat as its own event that never waits behind a commit): the broker sessions, the
/// image the active controller decided on last, and the term it is active in.
struct LivenessState {
    sessions: BrokerSessions,
    image: Arc<MetadataImage>,
    /// The quorum term the shell is active in (0 = not active).
    term: u64,
}

/// Shared between the shell and its handles; the lock is never held across an await.
#[derive(Clone)]
struct Liveness {
    state: Arc<std::sync::Mutex<LivenessState>>,
    /// The monotonic clock's origin: session times are milliseconds since it.
    origin: Instant,
    quorum: Option<Arc<MetadataQuorum>>,
}

impl Liveness {
    fn now_ms(&self) -> i64 {
        i64::try_from(self.origin.elapsed().as_millis()).unwrap_or(i64::MAX)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LivenessState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The heartbeat rule applied now, if this shell is the active controller of the
    /// current term; `None` if the shell must activate first (through the queue).
    fn heartbeat_now(
        &self,
        broker_id: i32,
        broker_epoch: i64,
        metadata_offset: i64,
        received_ms: i64,
    ) -> Option<Result<runnel_metadata::controller::HeartbeatOutcome, ApiError>> {
        let mut live = self.lock();
        let active = live.term != 0
            && self
                .quorum
                .as_ref()
                .is_none_or(|q| q.is_leader() && q.term() == live.term);
        if !active {
            return None;
        }
        let image = live.image.clone();
        Some(live.sessions.heartbeat(
            &image,
            broker_id,
            broker_epoch,
            metadata_offset,
            received_ms,
        ))
    }
}

fn unavailable() -> ApiError {
    ApiError {
        code: runnel_metadata::codes::NOT_CONTROLLER,
        message: "the controller is not available".into(),
    }
}

impl ControllerHandle {
    async fn call<T>(&self, make: impl FnOnce(Reply<T>) -> Command) -> Result<T, ApiError> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(make(reply)).await.map_err(|_| unavailable())?;
        rx.await.map_err(|_| unavailable())?
    }

    pub async fn create_topics(
        &self,
        requests: Vec<CreateTopicRequest>,
        validate_only: bool,
    ) -> Result<Vec<CreateTopicOutcome>, ApiError> {
        self.call(|reply| Command::CreateTopics {
            requests,
            validate_only,
            reply,
        })
        .await
    }

    pub async fn delete_topics(
        &self,
        topics: Vec<TopicRef>,
        api_version: i16,
    ) -> Result<Vec<DeleteTopicResult>, ApiError> {
        self.call(|reply| Command::DeleteTopics {
            topics,
            api_version,
            reply,
        })
        .await
    }

    pub async fn create_partitions(
        &self,
        requests: Vec<CreatePartitionsRequest>,
        validate_only: bool,
    ) -> Result<Vec<CreatePartitionsResult>, ApiError> {
        self.call(|reply| Command::CreatePartitions {
            requests,
            validate_only,
            reply,
        })
        .await
    }

    pub async fn alter_client_quotas(
        &self,
        alterations: Vec<runnel_metadata::quota::QuotaAlteration>,
        validate_only: bool,
    ) -> Result<Vec<runnel_metadata::quota::QuotaAlterResult>, ApiError> {
        self.call(|reply| Command::AlterClientQuotas {
            alterations,
            validate_only,
            reply,
        })
        .await
    }

    pub async fn alter_user_scram_credentials(
        &self,
        deletions: Vec<runnel_metadata::ScramDeletion>,
        upsertions: Vec<runnel_metadata::ScramUpsertion>,
    ) -> Result<Vec<runnel_metadata::ScramAlterResult>, ApiError> {
        self.call(|reply| Command::AlterUserScramCredentials {
            deletions,
            upsertions,
            reply,
        })
        .await
    }

    pub async fn alter_configs(
        &self,
        resource: ConfigResource,
        ops: Vec<(String, AlterConfigOp, Option<String>)>,
        incremental: bool,
        validate_only: bool,
    ) -> Result<(), ApiError> {
        self.call(|reply| Command::AlterConfigs {
            resource,
            ops,
            incremental,
            validate_only,
            reply,
        })
        .await
    }

    pub async fn create_acls(
        &self,
        acls: Vec<AclBinding>,
    ) -> Result<Vec<Result<(), ApiError>>, ApiError> {
        self.call(|reply| Command::CreateAcls { acls, reply }).await
    }

    pub async fn delete_acls(
        &self,
        filters: Vec<AclBindingFilter>,
    ) -> Result<Vec<Result<Vec<AclBinding>, ApiError>>, ApiError> {
        self.call(|reply| Command::DeleteAcls { filters, reply })
            .await
    }

    /// Returns the broker epoch of the registration.
    pub async fn register_broker(
        &self,
        broker_id: i32,
        incarnation_id: Uuid,
        host: String,
        port: u16,
        rack: Option<String>,
    ) -> Result<i64, ApiError> {
        self.call(|reply| Command::RegisterBroker {
            broker_id,
            incarnation_id,
            host,
            port,
            rack,
            reply,
        })
        .await
    }

    /// Returns whether the broker is still fenced. The heartbeat is stamped now, when it is
    /// received, and answered without waiting behind queued commits; only an unfencing it
    /// leads to is queued (and not waited for: the next heartbeat sees it).
    pub async fn heartbeat(
        &self,
        broker_id: i32,
        broker_epoch: i64,
        metadata_offset: i64,
    ) -> Result<bool, ApiError> {
        let received_ms = self.live.now_ms();
        match self
            .live
            .heartbeat_now(broker_id, broker_epoch, metadata_offset, received_ms)
        {
            Some(Ok(outcome)) => {
                if outcome.unfence {
                    // A full queue drops it: the next heartbeat asks again.
                    let _ = self.tx.try_send(Command::Unfence {
                        broker_id,
                        broker_epoch,
                    });
                }
                Ok(outcome.fenced)
            }
            Some(Err(e)) => Err(e),
            None => {
                self.call(|reply| Command::Heartbeat {
                    broker_id,
                    broker_epoch,
                    metadata_offset,
                    received_ms,
                    reply,
                })
                .await
            }
        }
    }

    pub async fn allocate_producer_ids(&self, broker_id: i32) -> Result<i64, ApiError> {
        self.call(|reply| Command::AllocateProducerIds { broker_id, reply })
            .await
    }

    pub async fn events(&self, since: u64) -> Result<EventsSince, ApiError> {
        self.call(|reply| Command::Events { since, reply }).await
    }

    pub async fn controlled_shutdown(&self, broker_id: i32) -> Result<usize, ApiError> {
        self.call(|reply| Command::ControlledShutdown { broker_id, reply })
            .await
    }

    pub async fn shutdown_complete(&self, broker_id: i32) -> Result<(), ApiError> {
        self.call(|reply| Command::ShutdownComplete { broker_id, reply })
            .await
    }

    pub async fn alter_partition(&self, request: AlterIsr) -> Result<(Vec<i32>, i32), ApiError> {
        self.call(|reply| Command::AlterPartition { request, reply })
            .await
    }

    pub async fn elect_leaders(
        &self,
        election: ElectionType,
        partitions: Option<Vec<(String, i32)>>,
    ) -> Result<Vec<ElectionResult>, ApiError> {
        self.call(|reply| Command::ElectLeaders {
            election,
            partitions,
            reply,
        })
        .await
    }

    pub async fn alter_reassignments(
        &self,
        requests: Vec<ReassignmentRequest>,
        allow_replication_factor_change: bool,
    ) -> Result<Vec<ReassignmentResult>, ApiError> {
        self.call(|reply| Command::AlterReassignments {
            requests,
            allow_replication_factor_change,
            reply,
        })
        .await
    }
}

/// Where committed metadata goes and comes from.
pub enum Backend {
    /// Single node: the shell appends to the file log and publishes the image itself.
    Local {
        log: Box<dyn MetadataLog>,
        publisher: Publisher,
    },
    /// Cluster: the shell proposes to the Raft quorum; the metadata follower applies what
    /// commits and publishes the image, which the shell reads back.
    Quorum {
        quorum: Arc<MetadataQuorum>,
        image_rx: watch::Receiver<Arc<MetadataImage>>,
    },
}

/// How long the active controller waits for the quorum before answering with an error.
const COMMIT_TIMEOUT: Duration = Duration::from_secs(30);
/// How often the active controller looks for expired broker sessions.
const SESSION_CHECK: Duration = Duration::from_millis(500);

/// Owns the pure controller, the metadata backend and the image it decides on.
pub struct ControllerShell {
    controller: Controller,
    config: ControllerConfig,
    backend: Backend,
    image: Arc<MetadataImage>,
    /// The quorum term this shell is active in (0 = not active yet); it is the controller epoch.
    active_term: u64,
    /// Broker sessions, shared with the handles that answer heartbeats.
    live: Liveness,
    session_timeout: Duration,
    /// `auto.leader.rebalance.enable`: check every interval with this imbalance percentage.
    leader_rebalance: Option<(Duration, u32)>,
    /// Test-only hook (`RUNNEL_TEST_STALL_CREATE_TOPICS_MS`): every CreateTopics commit waits
    /// this long first, the way a slow quorum stalls it, so tests can prove that a stalled
    /// commit fences no healthy broker. Unset in production.
    stall_create_topics: Option<Duration>,
}

/// Reads the test-only stall hook from the environment.
fn stall_hook() -> Option<Duration> {
    let ms: u64 = std::env::var("RUNNEL_TEST_STALL_CREATE_TOPICS_MS")
        .ok()?
        .parse()
        .ok()?;
    Some(Duration::from_millis(ms))
}

fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn storage_error(e: impl std::fmt::Display) -> ApiError {
    ApiError {
        code: 56, // KAFKA_STORAGE_ERROR
        message: format!("metadata log write failed: {e}"),
    }
}

fn not_controller(leader: Option<i32>) -> ApiError {
    ApiError {
        code: runnel_metadata::codes::NOT_CONTROLLER,
        message: match leader {
            Some(id) => format!("this node is not the active controller; node {id} is"),
            None => "no active controller right now (election in progress)".into(),
        },
    }
}

impl ControllerShell {
    pub fn new(
        config: ControllerConfig,
        backend: Backend,
        image: Arc<MetadataImage>,
        session_timeout: Duration,
    ) -> Self {
        let controller = Controller::new(config.clone(), 1, rand::random());
        let quorum = match &backend {
            Backend::Quorum { quorum, .. } => Some(quorum.clone()),
            Backend::Local { .. } => None,
        };
        let live = Liveness {
            state: Arc::new(std::sync::Mutex::new(LivenessState {
                sessions: BrokerSessions::new(duration_ms(session_timeout)),
                image: image.clone(),
                term: 0,
            })),
            origin: Instant::now(),
            quorum,
        };
        ControllerShell {
            controller,
            config,
            backend,
            image,
            active_term: 0,
            live,
            session_timeout,
            leader_rebalance: None,
            stall_create_topics: stall_hook(),
        }
    }

    /// Enables the periodic preferred-leader rebalance (spec F).
    pub fn with_leader_rebalance(mut self, every: Duration, percentage: u32) -> Self {
        self.leader_rebalance = Some((every, percentage));
        self
    }

    /// Starts the task; returns the handle used by request handlers.
    pub fn spawn(mut self) -> ControllerHandle {
        let (tx, mut rx) = mpsc::channel(QUEUE_CAPACITY);
        let live = self.live.clone();
        tokio::spawn(async move {
            if matches!(self.backend, Backend::Local { .. }) {
                self.active_term = 1;
                // A single node owns its metadata log: no other process can hold its id, so
                // its sessions start empty rather than from the image.
                self.live.lock().term = 1;
                // Drive any partition left half-way (e.g. by a crash between commits) first.
                if let Err(e) = self.settle().await {
                    tracing::error!(error = %e.message, "controller could not settle state machines");
                }
            }
            let mut sessions = tokio::time::interval(SESSION_CHECK);
            sessions.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let rebalance_every = self
                .leader_rebalance
                .map_or(Duration::from_secs(3600), |r| r.0);
            let mut rebalance = tokio::time::interval_at(
                tokio::time::Instant::now() + rebalance_every,
                rebalance_every,
            );
            rebalance.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    command = rx.recv() => match command {
                        Some(command) => self.handle(command).await,
                        None => return,
                    },
                    _ = sessions.tick() => self.expire_sessions().await,
                    _ = rebalance.tick() => self.rebalance_leaders().await,
                }
            }
        });
        ControllerHandle { tx, live }
    }

    /// The image this shell decides on from now on (also what heartbeats are checked against).
    fn set_image(&mut self, image: Arc<MetadataImage>) {
        self.live.lock().image = image.clone();
        self.image = image;
    }

    /// This node is no longer the active controller.
    fn deactivate(&mut self) {
        self.active_term = 0;
        self.live.lock().term = 0;
    }

    /// Makes sure this shell may decide: active, on the latest committed image. Becoming
    /// active in a new term starts a fresh pure controller (its epoch is the term) and gives
    /// every live broker a full session before it can be fenced.
    async fn ensure_active(&mut self) -> Result<(), ApiError> {
        let (quorum, mut image_rx) = match &self.backend {
            Backend::Quorum { quorum, image_rx } => (quorum.clone(), image_rx.clone()),
            Backend::Local { .. } => return Ok(()),
        };
        if !quorum.is_leader() {
            self.deactivate();
            return Err(not_controller(quorum.leader()));
        }
        let term = quorum.term();
        if term != self.active_term {
            let target = quorum.last_committed_offset();
            let caught_up = matches!(
                tokio::time::timeout(COMMIT_TIMEOUT, image_rx.wait_for(|i| i.offset >= target))
                    .await,
                Ok(Ok(_))
            );
            if !caught_up {
                return Err(not_controller(quorum.leader()));
            }
            let image = image_rx.borrow().clone();
            self.set_image(image);
            self.controller = Controller::new(
                self.config.clone(),
                term.min(i32::MAX as u64) as i32,
                rand::random(),
            );
            self.active_term = term;
            {
                let now = self.live.now_ms();
                let timeout = duration_ms(self.session_timeout);
                let mut live = self.live.lock();
                live.sessions = BrokerSessions::activate(&self.image, timeout, now);
                live.term = term;
            }
            tracing::info!(term, "this node is now the active controller");
            self.settle().await?;
        } else {
            let image = image_rx.borrow().clone();
            self.set_image(image);
        }
        Ok(())
    }

    async fn handle(&mut self, command: Command) {
        tracing::debug!(command = command.name(), "controller command");
        if let Err(e) = self.ensure_active().await {
            command.fail(e);
            return;
        }
        match command {
            Command::CreateTopics {
                requests,
                validate_only,
                reply,
            } => {
                let (mut outcomes, records) =
                    self.controller
                        .create_topics(&self.image, &requests, validate_only);
                if let (Some(stall), false) = (self.stall_create_topics, records.is_empty()) {
                    tracing::warn!(?stall, "test hook: stalling a CreateTopics commit");
                    tokio::time::sleep(stall).await;
                }
                if let Err(e) = self.commit(records).await {
                    for outcome in &mut outcomes {
                        if outcome.result.is_ok() {
                            outcome.result = Err(e.clone());
                        }
                    }
                }
                let _ = reply.send(Ok(outcomes));
            }
            Command::DeleteTopics {
                topics,
                api_version,
                reply,
            } => {
                let (mut results, records) =
                    self.controller
                        .delete_topics(&self.image, &topics, api_version);
                if let Err(e) = self.commit(records).await {
                    for r in &mut results {
                        if r.2.is_ok() {
                            r.2 = Err(e.clone());
                        }
                    }
                }
                let _ = reply.send(Ok(results));
            }
            Command::AlterReassignments {
                requests,
                allow_replication_factor_change,
                reply,
            } => {
                let (results, records) = self.controller.alter_partition_reassignments(
                    &self.image,
                    &requests,
                    allow_replication_factor_change,
                    now_ms(),
                );
                let committed = self.commit(records).await;
                let _ = reply.send(Ok(with_commit_outcome(results, committed)));
            }
            Command::CreatePartitions {
                requests,
                validate_only,
                reply,
            } => {
                let (mut results, records) =
                    self.controller
                        .create_partitions(&self.image, &requests, validate_only);
                if let Err(e) = self.commit(records).await {
                    for r in &mut results {
                        if r.1.is_ok() {
                            r.1 = Err(e.clone());
                        }
                    }
                }
                let _ = reply.send(Ok(results));
            }
            Command::AlterUserScramCredentials {
                deletions,
                upsertions,
                reply,
            } => {
                let (results, records) = runnel_metadata::alter_user_scram_credentials(
                    &self.image,
                    &deletions,
                    &upsertions,
                );
                let result = if records.is_empty() {
                    Ok(results)
                } else {
                    self.commit(records).await.map(|()| results)
                };
                let _ = reply.send(result);
            }
            Command::AlterClientQuotas {
                alterations,
                validate_only,
                reply,
            } => {
                // Kafka commits the records of every entry that passed as one atomic batch.
                let (results, records) = runnel_metadata::quota::alter_client_quotas(
                    &self.image.client_quotas,
                    &alterations,
                );
                let result = if validate_only || records.is_empty() {
                    Ok(results)
                } else {
                    self.commit(records).await.map(|()| results)
                };
                let _ = reply.send(result);
            }
            Command::AlterConfigs {
                resource,
                ops,
                incremental,
                validate_only,
                reply,
            } => {
                let (result, records) = self.controller.alter_configs(
                    &self.image,
                    &resource,
                    &ops,
                    incremental,
                    validate_only,
                );
                let result = match result {
                    Ok(()) => self.commit(records).await,
                    Err(e) => Err(e),
                };
                let _ = reply.send(result);
            }
            Command::CreateAcls { acls, reply } => {
                let (results, records) = self.controller.create_acls(&self.image, &acls);
                let _ = reply.send(self.commit(records).await.map(|()| results));
            }
            Command::DeleteAcls { filters, reply } => {
                let (results, records) = self.controller.delete_acls(&self.image, &filters);
                let _ = reply.send(self.commit(records).await.map(|()| results));
            }
            Command::RegisterBroker {
                broker_id,
                incarnation_id,
                host,
                port,
                rack,
                reply,
            } => {
                let result = self
                    .register(broker_id, incarnation_id, host, port, rack)
                    .await;
                let _ = reply.send(result);
            }
            Command::Heartbeat {
                broker_id,
                broker_epoch,
                metadata_offset,
                received_ms,
                reply,
            } => {
                let result = self
                    .heartbeat(broker_id, broker_epoch, metadata_offset, received_ms)
                    .await;
                let _ = reply.send(result);
            }
            Command::Unfence {
                broker_id,
                broker_epoch,
            } => {
                if let Err(e) = self.unfence(broker_id, broker_epoch).await {
                    tracing::warn!(broker_id, error = %e.message, "could not unfence broker");
                }
            }
            Command::AllocateProducerIds { broker_id, reply } => {
                let (first, records) = self
                    .controller
                    .allocate_producer_ids(&self.image, broker_id);
                let result = self.commit(records).await.map(|()| first);
                let _ = reply.send(result);
            }
            Command::Events { since, reply } => {
                let _ = reply.send(Ok(self.controller.events_since(since)));
            }
            Command::ControlledShutdown { broker_id, reply } => {
                let (records, remaining) =
                    self.controller.controlled_shutdown(&self.image, broker_id);
                let result = self.commit(records).await.map(|()| remaining);
                let _ = reply.send(result);
            }
            Command::ShutdownComplete { broker_id, reply } => {
                let result = self.shutdown_complete(broker_id).await;
                let _ = reply.send(result);
            }
            Command::AlterPartition { request, reply } => {
                let result = self.alter_partition(request).await;
                let _ = reply.send(result);
            }
            Command::ElectLeaders {
                election,
                partitions,
                reply,
            } => {
                let (results, records) = self.controller.elect_leaders(
                    &self.image,
                    election,
                    partitions.as_deref(),
                    now_ms(),
                );
                let committed = self.commit(records).await;
                let _ = reply.send(Ok(with_commit_outcome(results, committed)));
            }
        }
    }

    /// Validates a leader's ISR change against the image and commits it (spec I.3 item 6).
    /// Answers the ISR and partition epoch now committed (unchanged when the ISR already was
    /// the requested one), as Kafka's AlterPartition response does.
    async fn alter_partition(&mut self, request: AlterIsr) -> Result<(Vec<i32>, i32), ApiError> {
        let (decision, records) = self.controller.alter_partition(
            &self.image,
            &request.topic_id,
            request.partition,
            &runnel_metadata::replication::alter_partition::AlterPartitionRequest {
                broker_id: request.broker_id,
                leader_epoch: request.leader_epoch,
                partition_epoch: request.partition_epoch,
                new_isr: request.new_isr,
            },
        )?;
        if !records.is_empty() {
            tracing::info!(topic_id = %request.topic_id, partition = request.partition, isr = ?decision.isr, "ISR change");
            self.commit(records).await?;
        }
        Ok((decision.isr, decision.partition_epoch))
    }

    async fn register(
        &mut self,
        broker_id: i32,
        incarnation_id: Uuid,
        host: String,
        port: u16,
        rack: Option<String>,
    ) -> Result<i64, ApiError> {
        let now = self.live.now_ms();
        self.live.lock().sessions.check_registration(
            &self.image,
            broker_id,
            incarnation_id,
            now,
        )?;
        let records = self.controller.register_broker(
            &self.image,
            broker_id,
            incarnation_id,
            host,
            port,
            rack,
        )?;
        let broker_epoch = match records.first() {
            Some(MetadataRecord::RegisterBroker { broker_epoch, .. }) => *broker_epoch,
            _ => -1,
        };
        self.commit_once(records).await?;
        let registered_at = self.image.offset;
        let now = self.live.now_ms();
        self.live.lock().sessions.registered(
            broker_id,
            incarnation_id,
            broker_epoch,
            registered_at,
            now,
        );
        if matches!(self.backend, Backend::Local { .. }) {
            // A single node is caught up by construction: it is its own metadata log.
            let records = self.controller.unfence_broker(&self.image, broker_id);
            self.commit(records).await?;
        } else {
            self.settle().await?;
        }
        Ok(broker_epoch)
    }

    /// A queued heartbeat (the shell just became active): the session rule of
    /// [`BrokerSessions::heartbeat`] with the time it was received, then the unfencing of a
    /// broker that has caught up with the metadata log up to its registration (spec I.3).
    async fn heartbeat(
        &mut self,
        broker_id: i32,
        broker_epoch: i64,
        metadata_offset: i64,
        received_ms: i64,
    ) -> Result<bool, ApiError> {
        let outcome = {
            let image = self.image.clone();
            self.live.lock().sessions.heartbeat(
                &image,
                broker_id,
                broker_epoch,
                metadata_offset,
                received_ms,
            )?
        };
        if outcome.unfence {
            self.unfence(broker_id, broker_epoch).await?;
            return Ok(false);
        }
        Ok(outcome.fenced)
    }

    /// Unfences the registration a heartbeat was for, if it is still the current one and
    /// still fenced.
    async fn unfence(&mut self, broker_id: i32, broker_epoch: i64) -> Result<(), ApiError> {
        let records = self
            .controller
            .unfence_registration(&self.image, broker_id, broker_epoch);
        self.commit(records).await
    }

    /// Fences a broker that completed its controlled shutdown and forgets its session. Only a
    /// broker in controlled shutdown may ask (a live broker is never fenced this way).
    async fn shutdown_complete(&mut self, broker_id: i32) -> Result<(), ApiError> {
        let records = self.controller.shutdown_complete(&self.image, broker_id);
        if records.is_empty() {
            return Ok(());
        }
        self.commit(records).await?;
        self.live.lock().sessions.remove(broker_id);
        tracing::info!(broker_id, "controlled shutdown complete: broker fenced");
        Ok(())
    }

    /// Moves leadership back to preferred replicas when a broker's imbalance is too high.
    async fn rebalance_leaders(&mut self) {
        let Some((_, percentage)) = self.leader_rebalance else {
            return;
        };
        if self.active_term == 0 || self.ensure_active().await.is_err() {
            return;
        }
        let records = self.controller.rebalance_leaders(&self.image, percentage);
        if records.is_empty() {
            return;
        }
        tracing::info!(elections = records.len(), "preferred-leader rebalance");
        if let Err(e) = self.commit(records).await {
            tracing::warn!(error = %e.message, "preferred-leader rebalance failed");
        }
    }

    /// Fences brokers whose heartbeats stopped for longer than the session timeout.
    async fn expire_sessions(&mut self) {
        if self.active_term == 0 || matches!(self.backend, Backend::Local { .. }) {
            return;
        }
        if self.ensure_active().await.is_err() {
            return;
        }
        // Heartbeats are stamped when received, so the ones that arrived while a commit held
        // this task are already counted here.
        let now = self.live.now_ms();
        let expired = self.live.lock().sessions.expired(&self.image, now);
        for broker_id in expired {
            tracing::warn!(broker_id, "broker session expired: fencing it");
            let records = self.controller.fence_broker(&self.image, broker_id);
            if let Err(e) = self.commit(records).await {
                tracing::error!(broker_id, error = %e.message, "could not fence broker");
            }
        }
    }

    /// Makes `records` durable and visible, then lets the state machines react until stable.
    async fn commit(&mut self, records: Vec<MetadataRecord>) -> Result<(), ApiError> {
        self.commit_once(records).await?;
        self.settle().await
    }

    async fn settle(&mut self) -> Result<(), ApiError> {
        // Bounded: each round moves partitions forward; a controller that keeps emitting
        // records forever is a bug we want to see, not a hang.
        for _ in 0..16 {
            let follow_up = self.controller.on_commit(&self.image, now_ms());
            if follow_up.is_empty() {
                return Ok(());
            }
            self.commit_once(follow_up).await?;
        }
        tracing::error!("controller state machines did not settle after 16 rounds");
        Ok(())
    }

    async fn commit_once(&mut self, records: Vec<MetadataRecord>) -> Result<(), ApiError> {
        if records.is_empty() {
            return Ok(());
        }
        let first = match &self.backend {
            Backend::Local { log, .. } => log.next_offset(),
            Backend::Quorum { .. } => self.image.offset + 1,
        };
        let numbered: Vec<(i64, MetadataRecord)> = records
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, r)| (first + i as i64, r))
            .collect();
        // Apply before appending: an inconsistent record must never become durable.
        let next = self.image.apply(&numbered).map_err(|e| ApiError {
            code: runnel_metadata::codes::UNKNOWN_SERVER_ERROR,
            message: format!("controller produced an inconsistent record: {e}"),
        })?;
        match &mut self.backend {
            Backend::Local { log, publisher } => {
                let appended_at = log.append(&records).map_err(storage_error)?;
                debug_assert_eq!(appended_at, first, "metadata log offsets must be dense");
                let next = Arc::new(next);
                publisher.publish(next.clone());
                self.live.lock().image = next.clone();
                self.image = next;
            }
            Backend::Quorum { quorum, image_rx } => {
                let n = records.len() as i64;
                let proposed = tokio::time::timeout(COMMIT_TIMEOUT, quorum.propose(records)).await;
                let first = match proposed {
                    Ok(Ok(first)) => first,
                    Ok(Err(QuorumError::NotLeader { leader })) => {
                        self.active_term = 0;
                        self.live.lock().term = 0;
                        return Err(not_controller(leader));
                    }
                    Ok(Err(e)) => return Err(storage_error(e)),
                    Err(_) => {
                        return Err(ApiError {
                            code: 7, // REQUEST_TIMED_OUT
                            message: "the metadata quorum did not commit in time".into(),
                        });
                    }
                };
                let last = first + n - 1;
                let applied = matches!(
                    tokio::time::timeout(COMMIT_TIMEOUT, image_rx.wait_for(|i| i.offset >= last))
                        .await,
                    Ok(Ok(_))
                );
                if !applied {
                    return Err(ApiError {
                        code: 7,
                        message: "the committed metadata was not applied in time".into(),
                    });
                }
                let image = image_rx.borrow().clone();
                self.live.lock().image = image.clone();
                self.image = image;
            }
        }
        Ok(())
    }
}
