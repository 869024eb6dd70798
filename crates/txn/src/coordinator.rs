//! The transaction coordinator of one `__transaction_state` partition (Kafka's
//! `TransactionCoordinator` over its `TransactionStateManager` cache), pure: every decision
//! takes the state, the request and `now_ms` and returns the record to write and the answer.
//!
//! A decision that changes state does not change it yet: it sets the id's *pending*
//! transition and returns a [`Write`]. The shell appends the record (acks=all) and calls
//! [`TxnCoordinator::complete_write`] once it is replicated (or failed); only then does the
//! state move, and only then may the answer be sent. While a transition is pending every
//! other request of that id gets CONCURRENT_TRANSACTIONS, so the log holds the transitions in
//! the order they were applied.

use std::collections::BTreeMap;

use crate::codec;
use crate::errors::*;
use crate::metadata::{TopicPartition, TxnMetadata, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TV_2};
use crate::state::TxnState;
use bytes::Bytes;

mod end_v2;
pub use end_v2::{EndAnswer, EndRequest};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnConfig {
    /// `transaction.max.timeout.ms`.
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`.
    pub id_expiration_ms: i64,
}

impl Default for TxnConfig {
    fn default() -> Self {
        TxnConfig {
            max_timeout_ms: 900_000,
            id_expiration_ms: 604_800_000,
        }
    }
}

/// One `__transaction_state` record to append: the id's new metadata, or a tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    pub transactional_id: String,
    pub value: Option<TxnMetadata>,
}

impl Write {
    /// The record's key and value bytes, the value in layout `value_version`
    /// ([`codec::value_version`] of the cluster's `transaction.version`).
    pub fn record(&self, value_version: i16) -> (Bytes, Option<Bytes>) {
        (
            codec::encode_key(&self.transactional_id),
            self.value
                .as_ref()
                .map(|m| codec::encode_value(m, value_version)),
        )
    }
}

/// A decision: answer now, or write first and answer once the write is replicated (a failed
/// write answers the shell's error code instead).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision<T> {
    Answer(T),
    Write(Write, T),
}

/// Markers the shell must write (WriteTxnMarkers to every partition's leader) before
/// [`TxnCoordinator::markers_written`] completes the transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerJob {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    pub partitions: Vec<TopicPartition>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitRequest {
    pub transactional_id: String,
    pub timeout_ms: i32,
    /// The producer's current id and epoch (KIP-360), `(-1, -1)` for a new producer.
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// A producer id the shell allocated, when a previous decision asked for one.
    pub fresh_producer_id: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitAnswer {
    /// Allocate a producer id and decide again with it in `fresh_producer_id`.
    NeedProducerId,
    Failed(i16),
    Granted {
        producer_id: i64,
        producer_epoch: i16,
    },
}

/// One row of ListTransactions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnListing {
    pub transactional_id: String,
    pub producer_id: i64,
    pub state: TxnState,
    pub start_ms: i64,
}

#[derive(Debug, Clone)]
struct Entry {
    meta: TxnMetadata,
    /// The transition being written (its target), if any.
    pending: Option<TxnMetadata>,
    /// Whether the metadata has been written at least once (a fresh id's first
    /// InitProducerId failing to replicate leaves nothing behind).
    persisted: bool,
    /// Every marker of the Prepare* transaction is written but its Complete* is not yet:
    /// `tick` writes it again after a failed write (Kafka's `TransactionMarkerChannelManager`
    /// retries that append), or the id would stay in Prepare* for good.
    completion_owed: bool,
}

#[derive(Debug, Clone, Default)]
pub struct TxnCoordinator {
    config: TxnConfig,
    txns: BTreeMap<String, Entry>,
    /// The cluster's finalized `transaction.version`: the version of the aborts the
    /// coordinator starts itself (timeouts, fencing), as Kafka's `transactionVersionLevel`.
    transaction_version: i16,
}

impl TxnCoordinator {
    pub fn new(config: TxnConfig) -> Self {
        TxnCoordinator {
            config,
            txns: BTreeMap::new(),
            transaction_version: 0,
        }
    }

    /// The cluster's finalized `transaction.version` (the shell sets it from the metadata
    /// image before each decision; it may change with UpdateFeatures).
    pub fn set_transaction_version(&mut self, level: i16) {
        self.transaction_version = level;
    }

    /// Replays a partition's records (key, value; `None` is a tombstone) in log order.
    /// Returns the transactions whose markers were still pending (PrepareCommit/PrepareAbort):
    /// the new coordinator finishes them. Undecodable records are skipped and counted.
    pub fn load<'a>(
        &mut self,
        records: impl IntoIterator<Item = (&'a [u8], Option<&'a [u8]>)>,
    ) -> (Vec<MarkerJob>, usize) {
        let mut skipped = 0;
        for (key, value) in records {
            let Ok(id) = codec::decode_key(key) else {
                skipped += 1;
                continue;
            };
            match value.map(|v| codec::decode_value(&id, v)) {
                None => {
                    self.txns.remove(&id);
                }
                Some(Ok(meta)) => {
                    self.txns.insert(
                        id,
                        Entry {
                            meta,
                            pending: None,
                            persisted: true,
                            completion_owed: false,
                        },
                    );
                }
                Some(Err(_)) => skipped += 1,
            }
        }
        let jobs = self
            .txns
            .values()
            .filter(|e| e.meta.state.is_preparing())
            .map(|e| marker_job(&e.meta))
            .collect();
        (jobs, skipped)
    }

    pub fn get(&self, transactional_id: &str) -> Option<&TxnMetadata> {
        self.txns.get(transactional_id).map(|e| &e.meta)
    }

    /// The ids in a state, for DescribeTransactions (TRANSACTIONAL_ID_NOT_FOUND otherwise).
    pub fn describe(&self, transactional_id: &str) -> Result<&TxnMetadata, i16> {
        self.txns
            .get(transactional_id)
            .filter(|e| e.persisted)
            .map(|e| &e.meta)
            .ok_or(TRANSACTIONAL_ID_NOT_FOUND)
    }

    /// ListTransactions: states (empty: all), producer ids (empty: all), and a minimum
    /// running time of open transactions (`duration_ms` < 0: no filter, KIP-994).
    pub fn list(
        &self,
        states: &[TxnState],
        producer_ids: &[i64],
        duration_ms: i64,
        now_ms: i64,
    ) -> Vec<TxnListing> {
        self.txns
            .values()
            .filter(|e| e.persisted)
            .map(|e| &e.meta)
            .filter(|m| states.is_empty() || states.contains(&m.state))
            .filter(|m| producer_ids.is_empty() || producer_ids.contains(&m.producer_id))
            .filter(|m| {
                duration_ms < 0
                    || (m.start_ms >= 0 && now_ms.saturating_sub(m.start_ms) >= duration_ms)
            })
            .map(|m| TxnListing {
                transactional_id: m.transactional_id.clone(),
                producer_id: m.producer_id,
                state: m.state,
                start_ms: m.start_ms,
            })
            .collect()
    }

    /// InitProducerId with a transactional id (Kafka's `handleInitProducerId`).
    pub fn init_producer_id(&mut self, now_ms: i64, req: &InitRequest) -> Decision<InitAnswer> {
        use InitAnswer::*;
        let tv = self.transaction_version;
        if req.transactional_id.is_empty() {
            return Decision::Answer(Failed(INVALID_REQUEST));
        }
        if req.timeout_ms <= 0 || req.timeout_ms > self.config.max_timeout_ms {
            return Decision::Answer(Failed(INVALID_TRANSACTION_TIMEOUT));
        }
        if !self.txns.contains_key(&req.transactional_id) {
            let Some(pid) = req.fresh_producer_id else {
                return Decision::Answer(NeedProducerId);
            };
            let meta = TxnMetadata::fresh(&req.transactional_id, pid, req.timeout_ms, now_ms);
            let entry = Entry {
                meta,
                pending: None,
                persisted: false,
                completion_owed: false,
            };
            self.txns.insert(req.transactional_id.clone(), entry);
        }
        let Some(entry) = self.txns.get_mut(&req.transactional_id) else {
            return Decision::Answer(Failed(COORDINATOR_NOT_AVAILABLE));
        };
        if entry.pending.is_some() {
            return Decision::Answer(Failed(CONCURRENT_TRANSACTIONS));
        }
        let m = &entry.meta;
        let expected = (req.producer_id >= 0).then_some((req.producer_id, req.producer_epoch));
        if let Some((pid, epoch)) = expected {
            // Kafka's `isValidProducerId`: a fresh id, the current producer id, or a retry of
            // a rotation the producer never heard about.
            let valid = m.producer_epoch == NO_PRODUCER_EPOCH
                || pid == m.producer_id
                || (pid == m.previous_producer_id && TxnMetadata::is_epoch_exhausted(epoch));
            if !valid {
                return Decision::Answer(Failed(PRODUCER_FENCED));
            }
        }
        match m.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence => {
                Decision::Answer(Failed(CONCURRENT_TRANSACTIONS))
            }
            TxnState::Dead => Decision::Answer(Failed(CONCURRENT_TRANSACTIONS)),
            TxnState::Ongoing => {
                // The old producer's transaction is aborted with a bumped epoch (fencing it);
                // the new producer retries (CONCURRENT_TRANSACTIONS) until the abort is done.
                let target = fence_and_abort(m, now_ms, tv);
                let write = pend(entry, target);
                Decision::Write(write, Failed(CONCURRENT_TRANSACTIONS))
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                match bump_epoch(m, expected, req, now_ms) {
                    Err(answer) => Decision::Answer(answer),
                    Ok(target) => {
                        let answer = Granted {
                            producer_id: target.producer_id,
                            producer_epoch: target.producer_epoch,
                        };
                        Decision::Write(pend(entry, target), answer)
                    }
                }
            }
        }
    }

    /// AddPartitionsToTxn from a client (Kafka's `handleAddPartitionsToTransaction`); one
    /// code for all the partitions.
    pub fn add_partitions(
        &mut self,
        now_ms: i64,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[TopicPartition],
    ) -> Decision<i16> {
        let who = (transactional_id, producer_id, producer_epoch);
        self.add_partitions_as(now_ms, who, partitions, 0)
    }

    /// AddPartitionsToTxn on behalf of a client of `transaction.version`
    /// `client_txn_version` (Kafka's `transactionVersionForAddPartitionsToTxn`: 2 for the v4+
    /// requests of partition leaders, which add implicitly for Produce v12 and TxnOffsetCommit
    /// v5; 0 for a client's own v0-v3). The version is recorded with the Ongoing state.
    pub fn add_partitions_as(
        &mut self,
        now_ms: i64,
        (transactional_id, producer_id, producer_epoch): (&str, i64, i16),
        partitions: &[TopicPartition],
        client_txn_version: i16,
    ) -> Decision<i16> {
        let entry = match self.producer_entry(transactional_id, producer_id, producer_epoch) {
            Ok(entry) => entry,
            Err(code) => return Decision::Answer(code),
        };
        let m = &entry.meta;
        match m.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence => {
                Decision::Answer(CONCURRENT_TRANSACTIONS)
            }
            TxnState::Dead => Decision::Answer(INVALID_TXN_STATE),
            TxnState::Ongoing if partitions.iter().all(|p| m.partitions.contains(p)) => {
                Decision::Answer(NONE)
            }
            TxnState::Ongoing
            | TxnState::Empty
            | TxnState::CompleteCommit
            | TxnState::CompleteAbort => {
                let mut target = m.clone();
                if m.state != TxnState::Ongoing {
                    target.partitions.clear();
                    target.start_ms = now_ms;
                }
                target.state = TxnState::Ongoing;
                target.partitions.extend(partitions.iter().cloned());
                target.last_update_ms = now_ms;
                target.client_txn_version = client_txn_version;
                Decision::Write(pend(entry, target), NONE)
            }
        }
    }

    /// AddPartitionsToTxn v4+ with `verify_only` (KIP-890 part 1): the partition leader asks
    /// whether the transaction is ongoing and holds the partitions before it accepts a
    /// transactional batch. Writes nothing. Per partition: NONE or INVALID_TXN_STATE; every
    /// partition gets the same error when the producer itself is wrong.
    pub fn verify_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[TopicPartition],
    ) -> Vec<i16> {
        let all = |code| vec![code; partitions.len()];
        let Some(entry) = self.txns.get(transactional_id) else {
            return all(INVALID_PRODUCER_ID_MAPPING);
        };
        let m = &entry.meta;
        if m.producer_id != producer_id {
            return all(INVALID_PRODUCER_ID_MAPPING);
        }
        if m.producer_epoch != producer_epoch {
            return all(PRODUCER_FENCED);
        }
        if entry.pending.is_some() {
            return all(CONCURRENT_TRANSACTIONS);
        }
        partitions
            .iter()
            .map(|p| {
                if m.state == TxnState::Ongoing && m.partitions.contains(p) {
                    NONE
                } else {
                    INVALID_TXN_STATE
                }
            })
            .collect()
    }

    /// EndTxn v0-v4 (Kafka's `endTransactionWithTV1`: the epoch stays, whatever the cluster
    /// finalized). On success the Prepare* write is returned; once it is replicated
    /// [`Self::complete_write`] hands out the marker job. EndTxn v5 is
    /// [`Self::end_txn_v2`].
    pub fn end_txn(
        &mut self,
        now_ms: i64,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
    ) -> Decision<i16> {
        let entry = match self.producer_entry(transactional_id, producer_id, producer_epoch) {
            Ok(entry) => entry,
            Err(code) => return Decision::Answer(code),
        };
        let m = &entry.meta;
        let code = match (m.state, commit) {
            (TxnState::Ongoing, _) => {
                let mut target = m.clone();
                target.state = if commit {
                    TxnState::PrepareCommit
                } else {
                    TxnState::PrepareAbort
                };
                target.last_update_ms = now_ms;
                target.next_producer_id = NO_PRODUCER_ID;
                target.client_txn_version = 0;
                return Decision::Write(pend(entry, target), NONE);
            }
            // A retry of an EndTxn that already finished.
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => NONE,
            // A retry of an EndTxn whose markers are still being written.
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                CONCURRENT_TRANSACTIONS
            }
            (TxnState::PrepareEpochFence, _) => CONCURRENT_TRANSACTIONS,
            _ => INVALID_TXN_STATE,
        };
        Decision::Answer(code)
    }

    /// Every marker of the transaction is written: Complete*, with no partitions. `None` when
    /// the id has moved on (a stale job) or a write is pending (if that write is this
    /// completion and fails, `tick` writes it again).
    pub fn markers_written(&mut self, now_ms: i64, job: &MarkerJob) -> Option<Write> {
        let entry = self.txns.get_mut(&job.transactional_id)?;
        let m = &entry.meta;
        let expected = if job.commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        if entry.pending.is_some()
            || m.state != expected
            || m.producer_id != job.producer_id
            || m.producer_epoch != job.producer_epoch
        {
            return None;
        }
        let target = completion(m, now_ms);
        entry.completion_owed = true;
        Some(pend(entry, target))
    }

    /// The write of `transactional_id`'s pending transition finished. On success the state
    /// moves (a Dead target removes the id); a Prepare* state returns its marker job. On
    /// failure the transition is dropped (as Kafka's `pendingState` is cleared).
    pub fn complete_write(
        &mut self,
        transactional_id: &str,
        replicated: bool,
    ) -> Option<MarkerJob> {
        let entry = self.txns.get_mut(transactional_id)?;
        let target = entry.pending.take()?;
        if !replicated {
            if !entry.persisted {
                self.txns.remove(transactional_id);
            }
            return None;
        }
        entry.completion_owed = false;
        if target.state == TxnState::Dead {
            self.txns.remove(transactional_id);
            return None;
        }
        entry.meta = target;
        entry.persisted = true;
        entry
            .meta
            .state
            .is_preparing()
            .then(|| marker_job(&entry.meta))
    }

    /// The background step: a completion whose write failed is written again; open
    /// transactions past their timeout are aborted with a bumped epoch (the producer is
    /// fenced, as Kafka's `abortTimedOutTransactions`), and idle ids unused for
    /// `transactional.id.expiration.ms` are removed (a tombstone).
    pub fn tick(&mut self, now_ms: i64) -> Vec<Write> {
        let expiration = self.config.id_expiration_ms;
        let tv = self.transaction_version;
        let mut writes = Vec::new();
        for entry in self.txns.values_mut() {
            if entry.pending.is_some() || !entry.persisted {
                continue;
            }
            let m = &entry.meta;
            if entry.completion_owed && m.state.is_preparing() {
                let target = completion(m, now_ms);
                writes.push(pend(entry, target));
            } else if m.has_timed_out(now_ms) {
                let target = fence_and_abort(m, now_ms, tv);
                writes.push(pend(entry, target));
            } else if m.state.is_idle() && m.last_update_ms.saturating_add(expiration) <= now_ms {
                let mut target = m.clone();
                target.state = TxnState::Dead;
                entry.pending = Some(target);
                writes.push(Write {
                    transactional_id: m.transactional_id.clone(),
                    value: None,
                });
            }
        }
        writes
    }

    /// The id's entry if `producer_id`/`producer_epoch` are its current producer and no write
    /// is pending.
    fn producer_entry(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Result<&mut Entry, i16> {
        let entry = self
            .txns
            .get_mut(transactional_id)
            .ok_or(INVALID_PRODUCER_ID_MAPPING)?;
        if entry.meta.producer_id != producer_id {
            return Err(INVALID_PRODUCER_ID_MAPPING);
        }
        if entry.meta.producer_epoch != producer_epoch {
            return Err(PRODUCER_FENCED);
        }
        if entry.pending.is_some() {
            return Err(CONCURRENT_TRANSACTIONS);
        }
        Ok(entry)
    }
}

/// Sets `target` as the entry's pending transition and returns its record. Every pending
/// transition is a legal one (checked in debug builds and by the property test).
fn pend(entry: &mut Entry, target: TxnMetadata) -> Write {
    debug_assert!(
        entry.meta.state.can_transition_to(target.state),
        "{:?} -> {:?}",
        entry.meta.state,
        target.state
    );
    let write = Write {
        transactional_id: target.transactional_id.clone(),
        value: Some(target.clone()),
    };
    entry.pending = Some(target);
    write
}

/// Ongoing -> PrepareEpochFence (epoch + 1, unless exhausted) -> PrepareAbort: the state
/// written when a transaction is aborted by the coordinator, not by its producer. On a
/// cluster finalized at transaction version 2 (`tv`, Kafka passes the server's level) the
/// abort bumps the epoch once more, as every version 2 transaction end does (never past
/// `i16::MAX`; no producer id is allocated for a fence, as Kafka's `!isEpochFence`).
fn fence_and_abort(m: &TxnMetadata, now_ms: i64, tv: i16) -> TxnMetadata {
    let mut target = m.clone();
    if !TxnMetadata::is_epoch_exhausted(m.producer_epoch) {
        target.producer_epoch = m.producer_epoch + 1;
    }
    target.last_producer_epoch = NO_PRODUCER_EPOCH;
    target.client_txn_version = 0;
    if tv >= TV_2 {
        target.last_producer_epoch = target.producer_epoch;
        target.producer_epoch = target.producer_epoch.saturating_add(1);
        target.client_txn_version = TV_2;
    }
    target.next_producer_id = NO_PRODUCER_ID;
    target.state = TxnState::PrepareAbort;
    target.last_update_ms = now_ms;
    target
}

/// Kafka's `prepareIncrementProducerEpoch` / `prepareProducerIdRotation`: the Empty state
/// InitProducerId writes.
fn bump_epoch(
    m: &TxnMetadata,
    expected: Option<(i64, i16)>,
    req: &InitRequest,
    now_ms: i64,
) -> Result<TxnMetadata, InitAnswer> {
    let mut target = m.clone();
    target.state = TxnState::Empty;
    target.partitions.clear();
    target.start_ms = -1;
    target.timeout_ms = req.timeout_ms;
    target.last_update_ms = now_ms;
    target.next_producer_id = NO_PRODUCER_ID;
    target.client_txn_version = 0;
    if TxnMetadata::is_epoch_exhausted(m.producer_epoch) {
        let Some(pid) = req.fresh_producer_id.filter(|p| *p != m.producer_id) else {
            return Err(InitAnswer::NeedProducerId);
        };
        target.previous_producer_id = m.producer_id;
        target.producer_id = pid;
        target.producer_epoch = 0;
        target.last_producer_epoch = NO_PRODUCER_EPOCH;
        return Ok(target);
    }
    match expected {
        None => {
            target.producer_epoch = m.producer_epoch + 1;
            target.last_producer_epoch = NO_PRODUCER_EPOCH;
        }
        Some((_, epoch)) if epoch == NO_PRODUCER_EPOCH || epoch == m.producer_epoch => {
            target.producer_epoch = m.producer_epoch + 1;
            target.last_producer_epoch = m.producer_epoch;
        }
        // A retry whose answer was lost: the same epoch again, nothing new to write.
        Some((_, epoch)) if epoch == m.last_producer_epoch => {}
        Some(_) => return Err(InitAnswer::Failed(PRODUCER_FENCED)),
    }
    Ok(target)
}

/// PrepareCommit -> CompleteCommit, PrepareAbort -> CompleteAbort, with no partitions
/// (Kafka's `prepareComplete`). A version 2 transaction whose epoch bump exhausted the epochs
/// moves to the producer id its EndTxn allocated, at epoch 0; the last epoch stays the one
/// the client last held.
fn completion(m: &TxnMetadata, now_ms: i64) -> TxnMetadata {
    let mut target = m.clone();
    target.state = if m.state == TxnState::PrepareCommit {
        TxnState::CompleteCommit
    } else {
        TxnState::CompleteAbort
    };
    if m.bumps_epoch() && m.next_producer_id != NO_PRODUCER_ID {
        target.previous_producer_id = m.producer_id;
        target.producer_id = m.next_producer_id;
        target.producer_epoch = 0;
    }
    target.next_producer_id = NO_PRODUCER_ID;
    target.partitions.clear();
    target.last_update_ms = now_ms;
    target
}

fn marker_job(m: &TxnMetadata) -> MarkerJob {
    MarkerJob {
        transactional_id: m.transactional_id.clone(),
        producer_id: m.producer_id,
        producer_epoch: m.producer_epoch,
        commit: m.state == TxnState::PrepareCommit,
        partitions: m.partitions.iter().cloned().collect(),
    }
}
