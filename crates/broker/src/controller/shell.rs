//! The controller's imperative shell: one task, one bounded queue, every decision in order.
//!
//! The pure [`Controller`] decides; this task never waits for a commit (KRaft's pipelined
//! `QuorumController`). Each decision is made against the *speculative* image (the committed
//! image plus every batch appended and not committed yet, [`Pipeline`]); its records are
//! applied there first (so an inconsistent record is never made durable) and appended to the
//! Raft quorum (one voter on a single node) through the appender task without waiting; the
//! state machines react (`on_commit`) on the
//! speculative image too. The answer waits in the pipeline until the records up to the last
//! one it led to have committed (the commit listener: the published image), so heartbeats and
//! AlterPartition are decided and appended while a large CreateTopics is still committing.
//! A failed append or lost leadership reverts to the committed image: every operation still in
//! flight is answered NOT_CONTROLLER, and the next one starts a fresh pure controller and
//! sessions from the committed image. In a cluster only the quorum leader decides: every other
//! node answers NOT_CONTROLLER and the caller retries at the leader.
//!
//! Every operation is a typed value ([`ControllerOp`]) run through one path: the handle checks
//! and stamps it and queues it type-erased; the task decides it (pure), appends its records,
//! lets it react to the speculative image, settles, and parks its answer (`run_op`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use runnel_metadata::controller::{
    ControllerOp, ControllerResult, CreateTopics, OpContext, Pipeline,
};
use runnel_metadata::{
    ApiError, BrokerSessions, Controller, ControllerConfig, MetadataImage, MetadataRecord,
    StateChangeEvent,
};
use tokio::sync::{mpsc, oneshot, watch};

use crate::clock::now_ms;
use crate::controller::quorum::{spawn_appender, AppendJob, AppendOutcome, ControllerQuorum};

/// Queue bound: callers wait (backpressure) rather than the controller buffering without limit.
const QUEUE_CAPACITY: usize = 1024;
/// Most batches in flight (appended, not committed): beyond it the task takes no new
/// operation until commits catch up, so a stalled quorum cannot grow the pipeline unbounded.
const MAX_IN_FLIGHT: usize = 1024;

pub use runnel_metadata::controller::AlterPartition as AlterIsr;
pub use runnel_metadata::controller::{CreatePartitionsResult, DeleteTopicResult};
/// State-change events with their sequence numbers, and the next sequence number.
pub type EventsSince = (Vec<(u64, StateChangeEvent)>, u64);

type Reply<T> = oneshot::Sender<Result<T, ApiError>>;

/// One queued operation, whatever its type: the shell runs it or fails it.
trait Job: Send {
    fn name(&self) -> &'static str;
    /// Answers the operation with `e` without running it.
    fn fail(self: Box<Self>, e: ApiError);
    fn run(self: Box<Self>, shell: &mut ControllerShell);
}

/// A decided answer waiting in the pipeline for its records to commit.
trait Waiter: Send {
    /// The records committed: the decided answer goes out.
    fn release(self: Box<Self>);
    /// They did not (or their outcome is unknown): the answer absorbs `e`.
    fn fail(self: Box<Self>, e: ApiError);
}

struct Answer<O: ControllerOp> {
    response: O::Response,
    reply: Option<Reply<O::Response>>,
}

impl<O: ControllerOp> Waiter for Answer<O> {
    fn release(self: Box<Self>) {
        if let Some(reply) = self.reply {
            let _ = reply.send(Ok(self.response));
        }
    }

    fn fail(self: Box<Self>, e: ApiError) {
        let result = O::absorb(self.response, e);
        match self.reply {
            Some(reply) => drop(reply.send(result)),
            None => {
                if let Err(e) = result {
                    tracing::warn!(op = O::NAME, error = %e.message, "queued controller operation failed");
                }
            }
        }
    }
}

type Parked = Box<dyn Waiter>;

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

    fn run(self: Box<Self>, shell: &mut ControllerShell) {
        let Pending {
            op,
            received_ms,
            reply,
        } = *self;
        shell.run_op(op, received_ms, reply);
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
/// speculative image the active controller decides on, and the term it is active in.
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
    quorum: Option<Arc<dyn ControllerQuorum>>,
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

/// Where committed metadata goes and comes from: the shell appends to the Raft quorum (a
/// single node runs a one-voter quorum, as KRaft's combined mode does); the metadata follower
/// applies what commits and publishes the image, which is the shell's commit listener.
pub struct Backend {
    pub quorum: Arc<dyn ControllerQuorum>,
    pub image_rx: watch::Receiver<Arc<MetadataImage>>,
}

/// How long an answer waits for its records to commit before it is REQUEST_TIMED_OUT (the
/// records may still commit later), and how long a new term waits to catch up.
const COMMIT_TIMEOUT: Duration = Duration::from_secs(30);
/// How often the active controller looks for expired broker sessions (and overdue commits).
const SESSION_CHECK: Duration = Duration::from_millis(500);

/// Owns the pure controller, the metadata backend and the pipeline of images it decides on.
pub struct ControllerShell {
    controller: Controller,
    config: ControllerConfig,
    backend: Backend,
    /// Committed image, speculative image, and the answers waiting for in-flight batches.
    pipeline: Pipeline<Parked>,
    /// Bumped on every revert: outcomes of batches appended before it are ignored.
    generation: u64,
    /// Hands batches to the appender task, in offset order.
    appender: Option<mpsc::UnboundedSender<AppendJob>>,
    /// The quorum term this shell is active in (0 = not active yet); it is the controller epoch.
    active_term: u64,
    /// Broker sessions, shared with the handles that answer heartbeats.
    live: Liveness,
    session_timeout: Duration,
    /// `auto.leader.rebalance.enable`: check every interval with this imbalance percentage.
    leader_rebalance: Option<(Duration, u32)>,
    /// Test-only hook (`RUNNEL_TEST_STALL_CREATE_TOPICS_MS`): every CreateTopics batch waits
    /// this long before it is appended (later batches behind it), the way a slow quorum stalls
    /// it, so tests can prove that a stalled commit fences no healthy broker. Unset in
    /// production.
    stall_create_topics: Option<Duration>,
    /// Single-node mode (no cluster configured): this node is the only voter and the only
    /// broker, so no other process can hold its id (a new term starts with no sessions) and
    /// its registration is caught up by construction (unfenced at once).
    single_node: bool,
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
        code: crate::errors::code::KAFKA_STORAGE_ERROR,
        message: format!("metadata log write failed: {e}"),
    }
}

fn timed_out() -> ApiError {
    ApiError {
        code: crate::errors::code::REQUEST_TIMED_OUT,
        message: "the metadata quorum did not commit in time".into(),
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

/// Answers parked waiters with `e`, oldest first.
fn fail_all(waiters: Vec<Parked>, e: &ApiError) {
    for w in waiters {
        w.fail(e.clone());
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
        let quorum = Some(backend.quorum.clone());
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
            pipeline: Pipeline::new(image),
            generation: 0,
            appender: None,
            active_term: 0,
            live,
            session_timeout,
            leader_rebalance: None,
            stall_create_topics: stall_hook(),
            single_node: false,
        }
    }

    /// Single-node mode: see [`ControllerShell::single_node`].
    pub fn single_node(mut self) -> Self {
        self.single_node = true;
        self
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
            let (jobs, mut outcomes) = spawn_appender(self.backend.quorum.clone());
            self.appender = Some(jobs);
            let mut committed_rx = self.backend.image_rx.clone();
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
                let room = self.pipeline.in_flight() < MAX_IN_FLIGHT;
                tokio::select! {
                    command = rx.recv(), if room => match command {
                        Some(command) => self.handle(command).await,
                        None => return,
                    },
                    Some(outcome) = outcomes.recv() => self.on_outcome(outcome),
                    Some(image) = next_image(&mut committed_rx) => self.on_committed(image),
                    _ = sessions.tick() => {
                        self.expire_overdue();
                        self.expire_sessions().await;
                    }
                    _ = rebalance.tick() => self.rebalance_leaders().await,
                }
            }
        });
        ControllerHandle { tx, live }
    }

    /// What the speculative image is now is also what heartbeats are checked against.
    fn share_speculative(&mut self) {
        self.live.lock().image = self.pipeline.speculative().clone();
    }

    /// The commit listener: the metadata follower published `image`. Answers whose
    /// records it holds go out in order; an image that is not what this controller appended
    /// reverts the pipeline.
    fn on_committed(&mut self, image: Arc<MetadataImage>) {
        if self.active_term == 0 {
            // Not deciding: the committed image is all there is (a new term starts from it).
            self.pipeline = Pipeline::new(image);
            return;
        }
        let appended = self.pipeline.speculative().offset;
        match self.pipeline.commit(image) {
            Ok(released) => {
                released.into_iter().for_each(|w| w.release());
                if self.pipeline.committed().offset > appended {
                    // Records this controller did not append (a previous term's, applied
                    // after the catch-up): let the state machines react to them.
                    self.settle();
                }
            }
            Err(dropped) => {
                tracing::warn!(
                    "the committed metadata is not what this controller appended: reverting"
                );
                self.revert(dropped);
            }
        }
        self.share_speculative();
    }

    /// An appended batch's outcome from the appender: a failure (or a batch that got other
    /// offsets than decided) reverts to the committed image.
    fn on_outcome(&mut self, outcome: AppendOutcome) {
        if outcome.generation != self.generation {
            return;
        }
        let error = match outcome.result {
            Ok(first) if first == outcome.first => return,
            Ok(first) => format!(
                "a metadata batch committed at offset {first}, not {} as decided",
                outcome.first
            ),
            Err(e) => e.to_string(),
        };
        tracing::warn!(%error, "metadata append failed: reverting to the committed image");
        let dropped = self.pipeline.fail();
        self.revert(dropped);
    }

    /// Drops the speculative state: `dropped` (the answers in flight) get NOT_CONTROLLER, and
    /// this node stops deciding until the next operation re-activates it on the committed
    /// image with a fresh pure controller and sessions (KRaft renounces on a failed append).
    fn revert(&mut self, dropped: Vec<Parked>) {
        self.generation += 1;
        let leader = self.backend.quorum.leader();
        fail_all(dropped, &not_controller(leader));
        self.deactivate();
        self.share_speculative();
    }

    /// Answers whose records did not commit within [`COMMIT_TIMEOUT`] are REQUEST_TIMED_OUT
    /// (their batches stay in flight: they may still commit).
    fn expire_overdue(&mut self) {
        let cutoff = self
            .live
            .now_ms()
            .saturating_sub(duration_ms(COMMIT_TIMEOUT));
        fail_all(self.pipeline.take_overdue(cutoff), &timed_out());
    }

    /// This node is no longer the active controller: whatever is in flight is answered
    /// NOT_CONTROLLER.
    fn deactivate(&mut self) {
        if self.pipeline.in_flight() > 0 {
            self.generation += 1;
            let leader = self.backend.quorum.leader();
            fail_all(self.pipeline.fail(), &not_controller(leader));
        }
        self.active_term = 0;
        self.live.lock().term = 0;
    }

    /// Makes sure this shell may decide. Becoming active in a new term (or again after a
    /// revert) waits for the committed image to catch up, then starts a fresh pure controller
    /// (its epoch is the term) on it and gives every live broker a full session before it can
    /// be fenced.
    async fn ensure_active(&mut self) -> Result<(), ApiError> {
        let (quorum, mut image_rx) = (self.backend.quorum.clone(), self.backend.image_rx.clone());
        if !quorum.is_leader() {
            self.deactivate();
            return Err(not_controller(quorum.leader()));
        }
        let term = quorum.term();
        if term == self.active_term {
            return Ok(());
        }
        self.deactivate();
        let target = quorum.last_committed_offset();
        let caught_up = matches!(
            tokio::time::timeout(COMMIT_TIMEOUT, image_rx.wait_for(|i| i.offset >= target)).await,
            Ok(Ok(_))
        );
        if !caught_up {
            return Err(not_controller(quorum.leader()));
        }
        let image = image_rx.borrow().clone();
        self.pipeline = Pipeline::new(image);
        self.generation += 1;
        self.controller = Controller::new(
            self.config.clone(),
            i32::try_from(term).unwrap_or(i32::MAX),
            rand::random(),
        );
        self.active_term = term;
        {
            let now = self.live.now_ms();
            let timeout = duration_ms(self.session_timeout);
            let image = self.pipeline.committed().clone();
            let mut live = self.live.lock();
            // A single node owns its metadata: no other process can hold its id, so its
            // sessions start empty rather than from the image (a restart re-registers at once).
            live.sessions = if self.single_node {
                BrokerSessions::new(timeout)
            } else {
                BrokerSessions::activate(&image, timeout, now)
            };
            live.image = image;
            live.term = term;
        }
        tracing::info!(term, "this node is now the active controller");
        self.settle();
        Ok(())
    }

    async fn handle(&mut self, command: Command) {
        tracing::debug!(command = command.name(), "controller command");
        if let Err(e) = self.ensure_active().await {
            command.fail(e);
            return;
        }
        command.run(self);
    }

    /// The one path of every operation on the active controller: decide on the speculative
    /// image, append the records (if any), let the operation react to the image that holds
    /// them, settle the state machines, and park the answer until all of that has committed.
    /// Nothing here waits for a commit. A failed append reaches the answer through
    /// [`ControllerOp::absorb`].
    fn run_op<O: ControllerOp>(
        &mut self,
        op: O,
        received_ms: i64,
        reply: Option<Reply<O::Response>>,
    ) {
        let decided = self.with_context(received_ms, |ctx| op.decide(ctx));
        let ControllerResult { records, response } = match decided {
            Ok(decided) => decided,
            Err(e) => {
                match reply {
                    Some(reply) => drop(reply.send(Err(e))),
                    None => {
                        tracing::warn!(op = O::NAME, error = %e.message, "queued controller operation failed")
                    }
                }
                return;
            }
        };
        let answer = Box::new(Answer::<O> { response, reply });
        if records.is_empty() {
            // Decided on the speculative image: the answer waits for what it read to commit
            // (Kafka's read-only write events wait for the highest pending offset); at once
            // only if nothing is in flight.
            if let Some(answer) = self.pipeline.wait_for_appended(answer) {
                answer.release();
            }
            return;
        }
        let stall = self
            .stall_create_topics
            .filter(|_| O::NAME == CreateTopics::NAME);
        if let Err(e) = self.append(records, stall) {
            return answer.fail(e);
        }
        let now = self.live.now_ms();
        let follow_up = self.with_context(now, |ctx| op.committed(ctx, &answer.response));
        if let Err(e) = self.append(follow_up, None) {
            tracing::error!(op = O::NAME, error = %e.message, "controller follow-up not appended");
        }
        self.settle();
        if let Some(answer) = self.pipeline.wait_for_appended(answer) {
            // Everything it led to has committed already (e.g. the operation appended nothing).
            answer.release();
        }
    }

    /// Runs `f` on what a decision sees: the pure controller, the sessions (locked, never
    /// across an await) and the speculative image, with the clocks.
    fn with_context<R>(&mut self, received_ms: i64, f: impl FnOnce(&mut OpContext<'_>) -> R) -> R {
        let session_ms = self.live.now_ms();
        let single_node = self.single_node;
        let image = self.pipeline.speculative().clone();
        let mut live = self.live.lock();
        let mut ctx = OpContext {
            controller: &mut self.controller,
            sessions: &mut live.sessions,
            image: &image,
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
        let image = self.pipeline.speculative().clone();
        let records = self.controller.rebalance_leaders(&image, percentage);
        if records.is_empty() {
            return;
        }
        tracing::info!(elections = records.len(), "preferred-leader rebalance");
        if let Err(e) = self.append(records, None) {
            tracing::warn!(error = %e.message, "preferred-leader rebalance failed");
        }
        self.settle();
    }

    /// Fences brokers whose heartbeats stopped for longer than the session timeout.
    async fn expire_sessions(&mut self) {
        if self.active_term == 0 {
            return;
        }
        if self.ensure_active().await.is_err() {
            return;
        }
        // Heartbeats are stamped when received and answered without the queue, so a batch
        // still committing never makes a live broker look expired.
        let now = self.live.now_ms();
        let image = self.pipeline.speculative().clone();
        let expired = self.live.lock().sessions.expired(&image, now);
        if expired.is_empty() {
            return;
        }
        for broker_id in expired {
            tracing::warn!(broker_id, "broker session expired: fencing it");
            let image = self.pipeline.speculative().clone();
            let records = self.controller.fence_broker(&image, broker_id);
            if let Err(e) = self.append(records, None) {
                tracing::error!(broker_id, error = %e.message, "could not fence broker");
            }
        }
        self.settle();
    }

    /// Lets the state machines react to the speculative image until they have nothing left
    /// to change, appending what they decide.
    fn settle(&mut self) {
        // Bounded: each round moves partitions forward; a controller that keeps emitting
        // records forever is a bug we want to see, not a hang.
        for _ in 0..16 {
            let image = self.pipeline.speculative().clone();
            let follow_up = self.controller.on_commit(&image, now_ms());
            if follow_up.is_empty() {
                return;
            }
            if let Err(e) = self.append(follow_up, None) {
                tracing::error!(error = %e.message, "controller state machines could not settle");
                return;
            }
        }
        tracing::error!("controller state machines did not settle after 16 rounds");
    }

    /// Puts `records` in flight on the speculative image and appends them: the quorum's
    /// appender takes them in order without this task waiting. An inconsistent batch, or an
    /// appender that stopped, is an `Err` and in flight nothing.
    fn append(
        &mut self,
        records: Vec<MetadataRecord>,
        stall: Option<Duration>,
    ) -> Result<(), ApiError> {
        let now = self.live.now_ms();
        let Some(at) = self.pipeline.append(records.clone(), now)? else {
            return Ok(());
        };
        let job = AppendJob {
            generation: self.generation,
            first: at.first,
            records,
            stall,
        };
        let sent = self.appender.as_ref().is_some_and(|a| a.send(job).is_ok());
        if !sent {
            let e = storage_error("the metadata appender stopped");
            let dropped = self.pipeline.fail();
            self.revert(dropped);
            return Err(e);
        }
        self.share_speculative();
        Ok(())
    }
}

/// The next committed image the metadata follower publishes.
async fn next_image(rx: &mut watch::Receiver<Arc<MetadataImage>>) -> Option<Arc<MetadataImage>> {
    match rx.changed().await {
        Ok(()) => Some(rx.borrow_and_update().clone()),
        Err(_) => std::future::pending().await,
    }
}

#[cfg(test)]
#[path = "shell_tests.rs"]
mod tests;
