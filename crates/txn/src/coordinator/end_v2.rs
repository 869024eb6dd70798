//! EndTxn v5: transaction version 2 (KIP-890 part 2), Kafka's `TransactionCoordinator.
//! endTransaction` for a client whose EndTxn version is above 4
//! (`TransactionVersion.transactionVersionForEndTxn`; the cluster's finalized level plays no
//! part, so a v5 EndTxn is served this way on a cluster finalized below 2 too, as Kafka).
//!
//! Every transaction end bumps the producer epoch: the Prepare* state is written with
//! epoch + 1 (the markers carry it, so a late write of the old epoch is fenced by every
//! partition's producer state) and the answer names the producer id and epoch the client
//! continues with. When the bump would exhaust the epochs, a fresh producer id is taken
//! (`next_producer_id`) and the completion moves to it at epoch 0.
//!
//! Because the epoch moves, "same state, same epoch" no longer means a retry. Kafka's table
//! for the idle states (Retry: the request's epoch is the state's minus one; Current: equal):
//!
//! | state          | abort retry | abort current | commit retry | commit current |
//! |----------------|-------------|---------------|--------------|----------------|
//! | Empty          | FENCED      | bump          | FENCED       | INVALID_TXN    |
//! | CompleteAbort  | NONE        | bump          | INVALID_TXN  | INVALID_TXN    |
//! | CompleteCommit | INVALID_TXN | bump          | NONE         | INVALID_TXN    |
//!
//! "bump" aborts a transaction that added no partition (the client could not know whether
//! its implicit adds happened): PrepareAbort with no partitions, started now. Ongoing needs
//! the current epoch; Prepare* answers CONCURRENT_TRANSACTIONS to a retry of the same result.

use super::{pend, Decision, TxnCoordinator};
use crate::errors::*;
use crate::metadata::{TxnMetadata, NO_PRODUCER_ID, TV_2};
use crate::state::TxnState;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndRequest {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    /// A producer id the shell allocated, when a previous decision asked for one.
    pub fresh_producer_id: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndAnswer {
    /// The epoch bump exhausts the epochs: allocate a producer id and decide again with it
    /// in `fresh_producer_id`.
    NeedProducerId,
    Failed(i16),
    /// NONE, with the producer id and epoch the client goes on with.
    Ended {
        producer_id: i64,
        producer_epoch: i16,
    },
}

/// What the request is relative to the state's epoch.
struct Epochs {
    current: bool,
    /// The client retries an EndTxn whose bump it never heard about.
    retry_on_bump: bool,
    /// The same, for a bump that rotated the producer id.
    retry_on_overflow: bool,
}

impl Epochs {
    fn of(m: &TxnMetadata, req: &EndRequest) -> Self {
        Epochs {
            current: req.producer_epoch == m.producer_epoch,
            retry_on_bump: i32::from(m.producer_epoch) == i32::from(req.producer_epoch) + 1,
            retry_on_overflow: m.previous_producer_id == req.producer_id
                && req.producer_epoch == i16::MAX - 1
                && m.producer_epoch == 0,
        }
    }

    fn is_retry(&self) -> bool {
        self.retry_on_bump || self.retry_on_overflow
    }

    /// Kafka's `isValidEpoch` for a version 2 client.
    fn valid_for(&self, state: TxnState) -> bool {
        match state {
            TxnState::Ongoing | TxnState::Empty | TxnState::Dead | TxnState::PrepareEpochFence => {
                self.current
            }
            TxnState::PrepareCommit | TxnState::PrepareAbort => self.retry_on_bump,
            TxnState::CompleteCommit | TxnState::CompleteAbort => self.is_retry() || self.current,
        }
    }
}

/// What to do once the producer is known to be valid.
enum Step {
    Answer(EndAnswer),
    /// A retry of the EndTxn that ended the transaction: NONE with the current identity.
    Done,
    /// Write Prepare*: commit or abort; `empty` for an abort of a transaction that added no
    /// partition.
    Prepare {
        commit: bool,
        empty: bool,
    },
}

impl TxnCoordinator {
    /// EndTxn v5 (see the module doc). On success the Prepare* write is returned with the
    /// answer; once it is replicated [`Self::complete_write`] hands out the marker job (with
    /// the bumped epoch).
    pub fn end_txn_v2(&mut self, now_ms: i64, req: &EndRequest) -> Decision<EndAnswer> {
        use EndAnswer::*;
        let Some(entry) = self.txns.get_mut(&req.transactional_id) else {
            return Decision::Answer(Failed(INVALID_PRODUCER_ID_MAPPING));
        };
        let m = &entry.meta;
        let epochs = Epochs::of(m, req);
        if m.producer_id != req.producer_id && !epochs.retry_on_overflow {
            return Decision::Answer(Failed(INVALID_PRODUCER_ID_MAPPING));
        }
        if !epochs.valid_for(m.state) {
            return Decision::Answer(Failed(PRODUCER_FENCED));
        }
        if entry.pending.is_some() {
            return Decision::Answer(Failed(CONCURRENT_TRANSACTIONS));
        }
        let (commit, empty) = match step(m.state, req.commit, &epochs) {
            Step::Done => {
                return Decision::Answer(Ended {
                    producer_id: m.producer_id,
                    producer_epoch: m.producer_epoch,
                })
            }
            Step::Answer(answer) => return Decision::Answer(answer),
            Step::Prepare { commit, empty } => (commit, empty),
        };
        let Some(bumped) = m.producer_epoch.checked_add(1) else {
            return Decision::Answer(Failed(PRODUCER_FENCED));
        };
        let mut next_producer_id = NO_PRODUCER_ID;
        if TxnMetadata::is_epoch_exhausted(m.producer_epoch) {
            match req.fresh_producer_id.filter(|p| *p != m.producer_id) {
                Some(pid) => next_producer_id = pid,
                None => return Decision::Answer(NeedProducerId),
            }
        }
        let mut target = m.clone();
        target.state = if commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        target.last_producer_epoch = m.producer_epoch;
        target.producer_epoch = bumped;
        target.next_producer_id = next_producer_id;
        target.client_txn_version = TV_2;
        target.last_update_ms = now_ms;
        if empty {
            target.partitions.clear();
            target.start_ms = now_ms;
        }
        // The client goes on with the identity the completion will have.
        let answer = if next_producer_id == NO_PRODUCER_ID {
            Ended {
                producer_id: m.producer_id,
                producer_epoch: bumped,
            }
        } else {
            Ended {
                producer_id: next_producer_id,
                producer_epoch: 0,
            }
        };
        Decision::Write(pend(entry, target), answer)
    }
}

/// The state table of the module doc, for a request whose producer and epoch are valid.
fn step(state: TxnState, commit: bool, epochs: &Epochs) -> Step {
    use EndAnswer::*;
    let invalid = Step::Answer(Failed(INVALID_TXN_STATE));
    let retry = epochs.is_retry();
    match (state, commit) {
        (TxnState::Ongoing, _) => Step::Prepare {
            commit,
            empty: false,
        },
        (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) if retry => Step::Done,
        (TxnState::CompleteCommit, false) if retry => invalid,
        (TxnState::CompleteCommit | TxnState::CompleteAbort | TxnState::Empty, false) => {
            Step::Prepare {
                commit: false,
                empty: true,
            }
        }
        (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
            Step::Answer(Failed(CONCURRENT_TRANSACTIONS))
        }
        (TxnState::Dead | TxnState::PrepareEpochFence, _) => {
            Step::Answer(Failed(CONCURRENT_TRANSACTIONS))
        }
        _ => invalid,
    }
}
