//! The controller's imperative shell: one task, one bounded queue, every decision in order.
//!
//! The pure [`Controller`] decides; this task applies the records to a candidate image first (so
//! an inconsistent record is never made durable), commits them through the backend (the file
//! log on a single node, the Raft quorum in a cluster), and then lets the state machines react
//! (`on_commit`) until they have nothing left to change — the seed's "persist the plan, then
//! drive partitions and replicas Online". In a cluster only the quorum leader decides: every
//! other node answers NOT_CONTROLLER and the caller retries at the leader.
//!
//! Every operation is a typed value ([`ControllerOp`]) run through one path: the handle checks
//! and stamps it and queues it type-erased; the task decides it (pure), commits its records,
//! lets it react to the committed image, settles, and answers (`run_op`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use runnel_metadata::controller::{ControllerOp, ControllerResult, CreateTopics, OpContext};
use runnel_metadata::{
    ApiError, BrokerSessions, Controller, ControllerConfig, MetadataImage, MetadataRecord,
    StateChangeEvent,
};
use runnel_raft::{MetadataQuorum, QuorumError};
use tokio::sync::{mpsc, oneshot, watch};

use crate::clock::now_ms;
use crate::metadata_log::MetadataLog;
use crate::publisher::Publisher;

/// Queue bound: callers wait (backpressure) rather than the controller buffering without limit.
const QUEUE_CAPACITY: usize = 1024;

pub use runnel_metadata::controller::AlterPartition as AlterIsr;
pub use runnel_metadata::controller::{CreatePartitionsResult, DeleteTopicResult};
/// State-change events with their sequence numbers, and the next sequence number.
pub type EventsSince = (Vec<(u64, StateChangeEvent)>, u64);

type Reply<T> = oneshot::Sender<Result<T, ApiError>>;
type BoxFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// One queued operation, whatever its type: the shell runs it or fails it.
trait Job: Send {
    fn name(&self) -> &'static str;
    /// Answers the operation with `e` without running it.
    fn fail(self: Box<Self>, e: ApiError);
    fn run(self: Box<Self>, shell: &mut ControllerShell) -> BoxFuture<'_>;
}

/// An operation waiting in the queue, stamped with when it was received.
struct Pending<O: ControllerOp> {
    op: O,
    received_ms: i64,
    /// `None`: nobody waits for the answer (a heartbeat's unfencing).
    reply: Option<Reply<O::Response>>,
}

impl<O: ControllerOp> Job for Pending<O> {
    fn name(&self) -> &'static str {
        O::NAME
    }

    fn fail(self: Box<Self>, e: ApiError) {
        if let Some(reply) = self.reply {
            let _ = reply.send(Err(e));
        }
    }

    fn run(self: Box<Self>, shell: &mut ControllerShell) -> BoxFuture<'_> {
        Box::pin(async move {
            let Pending {
                op,
                received_ms,
                reply,
            } = *self;
            let result = shell.run_op(op, received_ms).await;
            match reply {
                Some(reply) => drop(reply.send(result)),
                None => {
                    if let Err(e) = result {
                        tracing::warn!(op = O::NAME, error = %e.message, "queued controller operation failed");
                    }
                }
            }
        })
    }
}

type Command = Box<dyn Job>;

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

    /// The operation's early answer ([`ControllerOp::answer_early`]) if this shell is the
    /// active controller of the current term; `None` if it must go through the queue.
    fn answer_early<O: ControllerOp>(
        &self,
        op: &O,
        received_ms: i64,
    ) -> Option<Result<runnel_metadata::controller::EarlyAnswer<O::Response>, ApiError>> {
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
        op.answer_early(&mut live.sessions, &image, received_ms)
    }
}

fn unavailable() -> ApiError {
    ApiError {
        code: runnel_metadata::codes::NOT_CONTROLLER,
        message: "the controller is not available".into(),
    }
}

impl ControllerHandle {
    /// A handle whose controller task is gone: every operation that passes its checks is
    /// answered NOT_CONTROLLER (for tests of what is refused before the queue).
    #[cfg(test)]
    pub(crate) fn detached() -> Self {
        let (tx, _) = mpsc::channel(1);
        ControllerHandle {
            tx,
            live: Liveness {
                state: Arc::new(std::sync::Mutex::new(LivenessState {
                    sessions: BrokerSessions::new(1),
                    image: Arc::new(MetadataImage::empty("test".into())),
                    term: 0,
                })),
                origin: Instant::now(),
                quorum: None,
            },
        }
    }

    /// Runs one operation on the controller task and returns its answer: the one local call
    /// path of every operation. The request's fields are range-checked first, and it is
    /// stamped when it is received (before it waits behind queued commits). An operation
    /// with an early answer (a heartbeat) gets it without waiting in the queue; only the
    /// records it leads to are queued (not waited for: a full queue drops them, and the next
    /// heartbeat asks again).
    pub async fn run<O: ControllerOp>(&self, op: O) -> Result<O::Response, ApiError> {
        op.validate()?;
        let received_ms = self.live.now_ms();
        match self.live.answer_early(&op, received_ms) {
            Some(Ok(early)) => {
                if early.then_queue {
                    let _ = self.tx.try_send(Box::new(Pending {
                        op,
                        received_ms,
                        reply: None,
                    }));
                }
                return Ok(early.response);
            }
            Some(Err(e)) => return Err(e),
            None => {}
        }
        let (reply, rx) = oneshot::channel();
        let pending: Command = Box::new(Pending {
            op,
            received_ms,
            reply: Some(reply),
        });
        self.tx.send(pending).await.map_err(|_| unavailable())?;
        rx.await.map_err(|_| unavailable())?
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
        command.run(self).await;
    }

    /// The one path of every operation on the active controller: decide on the current image,
    /// commit the records (if any), let the operation react to the committed image, settle
    /// the state machines, answer. A failed commit reaches the answer through
    /// [`ControllerOp::absorb`].
    async fn run_op<O: ControllerOp>(
        &mut self,
        op: O,
        received_ms: i64,
    ) -> Result<O::Response, ApiError> {
        let ControllerResult { records, response } =
            self.with_context(received_ms, |ctx| op.decide(ctx))?;
        if records.is_empty() {
            return Ok(response);
        }
        if let (Some(stall), CreateTopics::NAME) = (self.stall_create_topics, O::NAME) {
            tracing::warn!(?stall, "test hook: stalling a CreateTopics commit");
            tokio::time::sleep(stall).await;
        }
        match self.commit_op(&op, &response, records).await {
            Ok(()) => Ok(response),
            Err(e) => O::absorb(response, e),
        }
    }

    async fn commit_op<O: ControllerOp>(
        &mut self,
        op: &O,
        response: &O::Response,
        records: Vec<MetadataRecord>,
    ) -> Result<(), ApiError> {
        self.commit_once(records).await?;
        let now = self.live.now_ms();
        let follow_up = self.with_context(now, |ctx| op.committed(ctx, response));
        self.commit_once(follow_up).await?;
        self.settle().await
    }

    /// Runs `f` on what a decision sees: the pure controller, the sessions (locked, never
    /// across an await) and the image, with the clocks.
    fn with_context<R>(&mut self, received_ms: i64, f: impl FnOnce(&mut OpContext<'_>) -> R) -> R {
        let session_ms = self.live.now_ms();
        let single_node = matches!(self.backend, Backend::Local { .. });
        let mut live = self.live.lock();
        let mut ctx = OpContext {
            controller: &mut self.controller,
            sessions: &mut live.sessions,
            image: &self.image,
            now_ms: now_ms(),
            session_ms,
            received_ms,
            single_node,
        };
        f(&mut ctx)
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
