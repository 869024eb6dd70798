//! The transaction coordinator's imperative shell, modelled on `group_manager`.
//!
//! One task owns a pure [`TxnCoordinator`] per `__transaction_state` partition this broker
//! leads (loaded by replaying the partition when leadership arrives; transactions found in
//! PrepareCommit/PrepareAbort get their markers sent again). A decision's record is appended
//! with acks=all and its answer parked until the partition's high watermark covers it; only
//! then is the pure state moved (`complete_write`), so every acknowledged transition is
//! durable. A replicated Prepare* starts a marker task ([`crate::txn_markers`]); when it
//! reports every marker written the task writes Complete*. A 1 s tick writes again a Complete*
//! whose write failed, aborts timed-out transactions and expires idle transactional ids.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use runnel_group::{partition_for_group, OffsetsRecord};
use runnel_metadata::MetadataImage;
use runnel_txn::{
    Decision, EndAnswer, EndRequest, InitAnswer, InitRequest, MarkerJob, TopicPartition, TxnConfig,
    TxnCoordinator, TxnListing, TxnMetadata, TxnState, Write,
};
use tokio::sync::{mpsc, oneshot, watch};

use crate::clock::now_ms;
use crate::group_manager::{
    encode_batch, outcome_code, read_records, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
};
use crate::group_purgatory::Purgatory;
use crate::replica::manager::ReplicaManager;
use crate::replica::partition::Progress;

pub const TXN_TOPIC: &str = "__transaction_state";
const QUEUE_CAPACITY: usize = 4096;
const TICK: Duration = Duration::from_millis(1000);
/// How long a transaction-state write may wait for the in-sync replicas (Kafka's
/// `transaction.state.log` writes use the request timeout).
const PERSIST_TIMEOUT_MS: i64 = 5_000;

type Reply<T> = oneshot::Sender<T>;
pub type Described = (String, Result<TxnMetadata, i16>);

enum Command {
    Init(InitRequest, Reply<InitAnswer>),
    /// The partitions, and the client's transaction version (2: a partition leader's
    /// implicit add).
    Add(Producer, Vec<TopicPartition>, i16, Reply<i16>),
    Verify(Producer, Vec<TopicPartition>, Reply<Vec<i16>>),
    End(Producer, bool, Reply<i16>),
    EndV2(EndRequest, Reply<EndAnswer>),
    Describe(Vec<String>, Reply<Vec<Described>>),
    List(Vec<TxnState>, Vec<i64>, i64, Reply<Vec<TxnListing>>),
    MarkersDone(i32, MarkerJob),
}

/// Who asks: transactional id, producer id, epoch.
pub struct Producer {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

#[derive(Clone)]
pub struct TxnHandle {
    tx: mpsc::Sender<Command>,
}

impl TxnHandle {
    async fn call<T>(&self, make: impl FnOnce(Reply<T>) -> Command) -> Option<T> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(make(reply)).await.ok()?;
        rx.await.ok()
    }

    pub async fn init_producer_id(&self, req: InitRequest) -> InitAnswer {
        self.call(|r| Command::Init(req, r))
            .await
            .unwrap_or(InitAnswer::Failed(COORDINATOR_NOT_AVAILABLE))
    }

    /// AddPartitionsToTxn for a client of `client_txn_version` (0: the client's own v0-v3;
    /// 2: a partition leader's v4+ without `verify_only`).
    pub async fn add_partitions(
        &self,
        who: Producer,
        partitions: Vec<TopicPartition>,
        client_txn_version: i16,
    ) -> i16 {
        self.call(|r| Command::Add(who, partitions, client_txn_version, r))
            .await
            .unwrap_or(COORDINATOR_NOT_AVAILABLE)
    }

    pub async fn verify_partitions(
        &self,
        who: Producer,
        partitions: Vec<TopicPartition>,
    ) -> Vec<i16> {
        let n = partitions.len();
        self.call(|r| Command::Verify(who, partitions, r))
            .await
            .unwrap_or_else(|| vec![COORDINATOR_NOT_AVAILABLE; n])
    }

    pub async fn end_txn(&self, who: Producer, commit: bool) -> i16 {
        self.call(|r| Command::End(who, commit, r))
            .await
            .unwrap_or(COORDINATOR_NOT_AVAILABLE)
    }

    /// EndTxn v5 (transaction version 2: the epoch is bumped).
    pub async fn end_txn_v2(&self, req: EndRequest) -> EndAnswer {
        self.call(|r| Command::EndV2(req, r))
            .await
            .unwrap_or(EndAnswer::Failed(COORDINATOR_NOT_AVAILABLE))
    }

    pub async fn describe(&self, ids: Vec<String>) -> Vec<Described> {
        let copy = ids.clone();
        self.call(|r| Command::Describe(ids, r))
            .await
            .unwrap_or_else(|| {
                copy.into_iter()
                    .map(|id| (id, Err(COORDINATOR_NOT_AVAILABLE)))
                    .collect()
            })
    }

    pub async fn list(
        &self,
        states: Vec<TxnState>,
        pids: Vec<i64>,
        min_ms: i64,
    ) -> Vec<TxnListing> {
        self.call(|r| Command::List(states, pids, min_ms, r))
            .await
            .unwrap_or_default()
    }
}

/// A parked write: whose transition it is, and the answer that waits for it.
struct Waiter {
    partition: i32,
    transactional_id: String,
    answer: Box<dyn FnOnce(i16) + Send>,
}

struct Led {
    coordinator: TxnCoordinator,
    /// Set when leadership leaves: the partition's marker tasks stop.
    cancelled: Arc<AtomicBool>,
    coordinator_epoch: i32,
}

struct TxnManager {
    node_id: i32,
    config: TxnConfig,
    replicas: Arc<ReplicaManager>,
    image: watch::Receiver<Arc<MetadataImage>>,
    led: BTreeMap<i32, Led>,
    purgatory: Purgatory<Waiter>,
    tx: mpsc::Sender<Command>,
}

pub fn spawn(
    node_id: i32,
    config: TxnConfig,
    replicas: Arc<ReplicaManager>,
    image: watch::Receiver<Arc<MetadataImage>>,
) -> TxnHandle {
    let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
    let manager = TxnManager {
        node_id,
        config,
        replicas,
        image,
        led: BTreeMap::new(),
        purgatory: Purgatory::default(),
        tx: tx.clone(),
    };
    crate::coordinator_task::spawn_loop(manager, rx, TICK);
    TxnHandle { tx }
}

impl crate::coordinator_task::CoordinatorTask for TxnManager {
    type Command = Command;

    fn follow_leadership(&mut self) {
        TxnManager::follow_leadership(self)
    }
    fn handle(&mut self, command: Command) {
        TxnManager::handle(self, command)
    }
    fn tick(&mut self) {
        TxnManager::tick(self)
    }
    fn watch_parked(&self) -> Vec<watch::Receiver<Progress>> {
        TxnManager::watch_parked(self)
    }
    fn complete_replicated(&mut self) -> bool {
        TxnManager::complete_replicated(self);
        !self.purgatory.is_empty()
    }
    fn image(&mut self) -> &mut watch::Receiver<Arc<MetadataImage>> {
        &mut self.image
    }
}

impl TxnManager {
    fn follow_leadership(&mut self) {
        let image = self.image.borrow_and_update().clone();
        let led: Vec<(i32, i32)> = image
            .topic(TXN_TOPIC)
            .map(|t| {
                t.partitions
                    .values()
                    .filter(|p| p.leader == self.node_id)
                    .map(|p| (p.partition, p.leader_epoch))
                    .collect()
            })
            .unwrap_or_default();
        let lost: Vec<i32> = self
            .led
            .keys()
            .copied()
            .filter(|p| !led.iter().any(|(q, _)| q == p))
            .collect();
        for p in lost {
            tracing::info!(
                partition = p,
                "no longer transaction coordinator for this partition"
            );
            if let Some(l) = self.led.remove(&p) {
                l.cancelled.store(true, Ordering::Relaxed);
            }
            for (waiter, outcome) in self.purgatory.abandon(p) {
                (waiter.answer)(outcome_code(outcome));
            }
        }
        for (p, epoch) in led {
            if !self.led.contains_key(&p) {
                self.load(p, epoch);
            }
        }
    }

    /// Replays a partition that became ours and resumes its pending markers.
    fn load(&mut self, partition: i32, coordinator_epoch: i32) {
        let records = read_records(&self.replicas, TXN_TOPIC, partition);
        let mut coordinator = TxnCoordinator::new(self.config.clone());
        let (jobs, skipped) =
            coordinator.load(records.iter().map(|r| (&r.key[..], r.value.as_deref())));
        tracing::info!(
            partition,
            records = records.len(),
            skipped,
            resumed = jobs.len(),
            "loaded transaction coordinator partition"
        );
        self.led.insert(
            partition,
            Led {
                coordinator,
                cancelled: Arc::new(AtomicBool::new(false)),
                coordinator_epoch,
            },
        );
        for job in jobs {
            self.start_markers(partition, job);
        }
    }

    fn start_markers(&self, partition: i32, job: MarkerJob) {
        let Some(led) = self.led.get(&partition) else {
            return;
        };
        let tx = self.tx.clone();
        crate::txn_markers::spawn(
            job,
            led.coordinator_epoch,
            self.image.clone(),
            led.cancelled.clone(),
            move |job| {
                // Never dropped on a full queue: the transaction would stay in Prepare*.
                tokio::spawn(async move {
                    let _ = tx.send(Command::MarkersDone(partition, job)).await;
                });
            },
        );
    }

    /// The partition coordinating `transactional_id` if it is ours, else the error code.
    fn route(&mut self, transactional_id: &str) -> Result<i32, i16> {
        let n = self
            .image
            .borrow()
            .topic(TXN_TOPIC)
            .map_or(0, |t| i32::try_from(t.partitions.len()).unwrap_or(0));
        if n == 0 {
            return Err(COORDINATOR_NOT_AVAILABLE);
        }
        let p = partition_for_group(transactional_id, n);
        if !self.led.contains_key(&p) {
            self.follow_leadership();
        }
        if self.led.contains_key(&p) {
            Ok(p)
        } else {
            Err(NOT_COORDINATOR)
        }
    }

    /// The partition's coordinator, told the cluster's current `transaction.version` (the
    /// version of the aborts it starts itself).
    fn coordinator(&mut self, partition: i32) -> Option<&mut TxnCoordinator> {
        let level = self.transaction_version();
        let led = self.led.get_mut(&partition)?;
        led.coordinator.set_transaction_version(level);
        Some(&mut led.coordinator)
    }

    /// The finalized `transaction.version` of the current image.
    fn transaction_version(&self) -> i16 {
        runnel_metadata::features::transaction_version(&self.image.borrow().features)
    }

    fn handle(&mut self, command: Command) {
        let now = now_ms();
        match command {
            Command::Init(req, reply) => {
                let id = req.transactional_id.clone();
                self.decide(&id, reply, InitAnswer::Failed, |c| {
                    c.init_producer_id(now, &req)
                });
            }
            Command::Add(who, partitions, client_txn_version, reply) => {
                self.decide(
                    &who.transactional_id.clone(),
                    reply,
                    |c| c,
                    |c| {
                        let id = (
                            who.transactional_id.as_str(),
                            who.producer_id,
                            who.producer_epoch,
                        );
                        c.add_partitions_as(now, id, &partitions, client_txn_version)
                    },
                );
            }
            Command::EndV2(req, reply) => {
                let id = req.transactional_id.clone();
                self.decide(&id, reply, EndAnswer::Failed, |c| c.end_txn_v2(now, &req));
            }
            Command::End(who, commit, reply) => {
                self.decide(
                    &who.transactional_id.clone(),
                    reply,
                    |c| c,
                    |c| {
                        c.end_txn(
                            now,
                            &who.transactional_id,
                            who.producer_id,
                            who.producer_epoch,
                            commit,
                        )
                    },
                );
            }
            Command::Verify(who, partitions, reply) => {
                let _ = reply.send(self.verify(&who, &partitions));
            }
            Command::Describe(ids, reply) => {
                let _ = reply.send(self.describe(ids));
            }
            Command::List(states, pids, min_ms, reply) => {
                let _ = reply.send(self.list(&states, &pids, min_ms, now));
            }
            Command::MarkersDone(partition, job) => {
                let write = self
                    .coordinator(partition)
                    .and_then(|c| c.markers_written(now, &job));
                if let Some(write) = write {
                    self.write(partition, write, Box::new(|_| {}));
                }
            }
        }
    }

    /// KIP-890's verification: whether `who`'s ongoing transaction holds each partition.
    fn verify(&mut self, who: &Producer, partitions: &[TopicPartition]) -> Vec<i16> {
        match self.route(&who.transactional_id) {
            Ok(p) => self.coordinator(p).map_or_else(
                || vec![NOT_COORDINATOR; partitions.len()],
                |c| {
                    c.verify_partitions(
                        &who.transactional_id,
                        who.producer_id,
                        who.producer_epoch,
                        partitions,
                    )
                },
            ),
            Err(code) => vec![code; partitions.len()],
        }
    }

    /// DescribeTransactions: each id's state, or the error of its routing.
    fn describe(&mut self, ids: Vec<String>) -> Vec<Described> {
        ids.into_iter()
            .map(|id| {
                let described = self.route(&id).and_then(|p| {
                    self.coordinator(p)
                        .ok_or(NOT_COORDINATOR)
                        .and_then(|c| c.describe(&id).cloned())
                });
                (id, described)
            })
            .collect()
    }

    /// ListTransactions over every partition led here.
    fn list(
        &mut self,
        states: &[TxnState],
        pids: &[i64],
        min_ms: i64,
        now: i64,
    ) -> Vec<TxnListing> {
        self.follow_leadership();
        self.led
            .values()
            .flat_map(|l| l.coordinator.list(states, pids, min_ms, now))
            .collect()
    }

    /// Routes, decides, writes (if the decision says so) and answers after the write.
    fn decide<T: Send + 'static>(
        &mut self,
        transactional_id: &str,
        reply: Reply<T>,
        failed: impl Fn(i16) -> T + Send + 'static,
        decide: impl FnOnce(&mut TxnCoordinator) -> Decision<T>,
    ) {
        let p = match self.route(transactional_id) {
            Ok(p) => p,
            Err(code) => {
                let _ = reply.send(failed(code));
                return;
            }
        };
        let Some(coordinator) = self.coordinator(p) else {
            let _ = reply.send(failed(NOT_COORDINATOR));
            return;
        };
        match decide(coordinator) {
            Decision::Answer(answer) => {
                let _ = reply.send(answer);
            }
            Decision::Write(write, answer) => {
                self.write(
                    p,
                    write,
                    Box::new(move |code| {
                        let _ = reply.send(if code == 0 { answer } else { failed(code) });
                    }),
                );
            }
        }
    }

    fn tick(&mut self) {
        let now = now_ms();
        let partitions: Vec<i32> = self.led.keys().copied().collect();
        for p in partitions {
            let writes = self.coordinator(p).map(|c| c.tick(now)).unwrap_or_default();
            for write in writes {
                let state = write.value.as_ref().map(|m| m.state);
                if matches!(
                    state,
                    Some(TxnState::CompleteCommit | TxnState::CompleteAbort)
                ) {
                    // Its last write failed (not replicated in time): Kafka's marker channel
                    // retries that append too, else the id would stay in Prepare* for good.
                    tracing::info!(txn = %write.transactional_id, "writing the transaction's completion again");
                } else {
                    tracing::info!(txn = %write.transactional_id, aborting = write.value.is_some(), "transaction timed out or id expired");
                }
                self.write(p, write, Box::new(|_| {}));
            }
        }
        for (waiter, outcome) in self.purgatory.expire(now) {
            tracing::warn!("transaction state not replicated in time");
            self.finish(waiter, outcome_code(outcome));
        }
    }

    fn watch_parked(&self) -> Vec<watch::Receiver<Progress>> {
        self.purgatory
            .partitions()
            .filter_map(|p| self.replicas.get(TXN_TOPIC, p))
            .map(|p| p.subscribe())
            .collect()
    }

    fn complete_replicated(&mut self) {
        let partitions: Vec<i32> = self.purgatory.partitions().collect();
        for p in partitions {
            let done = match self.replicas.get(TXN_TOPIC, p) {
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

    /// The write finished: the pure state moves (or drops the transition), a replicated
    /// Prepare* starts its markers, then the answer goes out.
    fn finish(&mut self, waiter: Waiter, code: i16) {
        let job = self
            .coordinator(waiter.partition)
            .and_then(|c| c.complete_write(&waiter.transactional_id, code == 0));
        if let Some(job) = job {
            self.start_markers(waiter.partition, job);
        }
        (waiter.answer)(code);
    }

    /// Appends the record with acks=all and parks the answer until it is replicated.
    fn write(&mut self, partition: i32, write: Write, answer: Box<dyn FnOnce(i16) + Send>) {
        let waiter = Waiter {
            partition,
            transactional_id: write.transactional_id.clone(),
            answer,
        };
        match self.append(partition, &write) {
            Ok(needed) => {
                let deadline = now_ms().saturating_add(PERSIST_TIMEOUT_MS);
                self.purgatory.park(partition, needed, deadline, waiter);
                // Already replicated (a single replica): answered on the next loop turn.
            }
            Err(code) => self.finish(waiter, code),
        }
    }

    /// Appends one record; the offset the HW must reach for it to be replicated.
    fn append(&self, partition: i32, write: &Write) -> Result<i64, i16> {
        let Some(p) = self.replicas.get(TXN_TOPIC, partition) else {
            return Err(NOT_COORDINATOR);
        };
        let (key, value) =
            write.record(runnel_txn::codec::value_version(self.transaction_version()));
        let batch = encode_batch(vec![OffsetsRecord { key, value }]).map_err(|e| {
            tracing::error!(partition, error = %e, "cannot encode transaction state");
            COORDINATOR_NOT_AVAILABLE
        })?;
        match p.append_as_leader(&batch, self.node_id, -1) {
            Ok(appended) => Ok(appended.last_offset + 1),
            Err(e) => {
                tracing::warn!(partition, code = e.code, message = %e.message, "cannot write transaction state");
                // NOT_ENOUGH_REPLICAS and the like: the client retries.
                Err(if e.code == crate::errors::code::NOT_LEADER_OR_FOLLOWER {
                    NOT_COORDINATOR
                } else {
                    COORDINATOR_NOT_AVAILABLE
                })
            }
        }
    }
}
