//! What the coordinator knows about one transactional id (Kafka's `TransactionMetadata`).

use std::collections::BTreeSet;

use crate::state::TxnState;

/// Kafka's `RecordBatch.NO_PRODUCER_EPOCH` / `NO_PRODUCER_ID`.
pub const NO_PRODUCER_EPOCH: i16 = -1;
pub const NO_PRODUCER_ID: i64 = -1;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    pub transactional_id: String,
    pub producer_id: i64,
    /// The producer id before the last rotation (epoch exhaustion), so a retried
    /// InitProducerId of the old id is recognised (KIP-360).
    pub previous_producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch before the last bump, so a retried InitProducerId gets the same answer
    /// (not persisted, as in Kafka).
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<TopicPartition>,
    /// When the open transaction started (-1: none).
    pub start_ms: i64,
    pub last_update_ms: i64,
    /// The producer id a transaction version 2 EndTxn allocated because the epoch bump would
    /// exhaust the epochs (Kafka's `nextProducerId`): the transaction's completion moves to
    /// it at epoch 0. -1: none.
    pub next_producer_id: i64,
    /// The `transaction.version` of the transition that wrote this state (Kafka's
    /// `clientTransactionVersion`): 2 when the transaction ends with an epoch bump (EndTxn v5,
    /// or a coordinator abort on a cluster finalized at 2), 0 otherwise.
    pub client_txn_version: i16,
}

/// Kafka's `TransactionVersion` level 2 (KIP-890 part 2): every transaction end bumps the
/// producer epoch.
pub const TV_2: i16 = 2;

impl TxnMetadata {
    /// A transactional id seen for the first time: Empty, with no epoch yet.
    pub fn fresh(transactional_id: &str, producer_id: i64, timeout_ms: i32, now_ms: i64) -> Self {
        TxnMetadata {
            transactional_id: transactional_id.to_string(),
            producer_id,
            previous_producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now_ms,
            next_producer_id: NO_PRODUCER_ID,
            client_txn_version: 0,
        }
    }

    /// Kafka's `isEpochExhausted`: one more bump would reach `Short.MaxValue`, which the
    /// coordinator keeps for fencing, so the producer id is rotated instead.
    pub fn is_epoch_exhausted(epoch: i16) -> bool {
        epoch >= i16::MAX - 1
    }

    /// Whether this state's transaction ends with an epoch bump (Kafka's
    /// `clientTransactionVersion.supportsEpochBump`).
    pub fn bumps_epoch(&self) -> bool {
        self.client_txn_version >= TV_2
    }

    /// The open transaction has run longer than its timeout.
    pub fn has_timed_out(&self, now_ms: i64) -> bool {
        self.state == TxnState::Ongoing
            && self.start_ms >= 0
            && self.start_ms.saturating_add(i64::from(self.timeout_ms)) < now_ms
    }
}
