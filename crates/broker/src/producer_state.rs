//! Idempotent-producer sequence checks (Kafka's `ProducerStateManager`, simplified to what a
//! non-transactional idempotent producer needs).
//!
//! Per producer id we keep the epoch and the last five batches' sequence ranges with their
//! offsets: a retry of one of them is acknowledged with the original offset instead of being
//! appended twice, and a gap is rejected so the client can tell records went missing.
//!
//! Transactions (KIP-98): a transactional batch opens its producer's transaction (its first
//! offset holds the partition's LSO back, `runnel_log::txn::OngoingTxns`) until the
//! coordinator's COMMIT / ABORT marker ends it. A marker is refused with
//! INVALID_PRODUCER_EPOCH when its producer epoch is older than the producer's (a fenced
//! producer's coordinator cannot end the new one's transaction), and with
//! TRANSACTION_COORDINATOR_FENCED when its coordinator epoch is older than the last marker's
//! (a deposed coordinator); a newer epoch is taken, as Kafka's `ProducerAppendInfo`.
//!
//! Entries expire like Kafka's: a producer whose last batch's timestamp is
//! `producer.id.expiration.ms` (24 h) old is forgotten by [`ProducerStateTable::remove_expired`],
//! which the shell runs every `producer.id.expiration.check.interval.ms` (10 min), so the table
//! holds the producers of the last day, not every id ever seen. What one request can add is
//! bounded by Kafka's one-batch-per-partition rule for Produce v3+.

use std::collections::{HashMap, VecDeque};

pub use crate::errors::code::{
    INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER, TRANSACTION_COORDINATOR_FENCED,
};
use runnel_log::control::Marker;
use runnel_log::producer_snapshot::SnapshotEntry;
use runnel_log::txn::{AbortedTxn, OngoingTxns};

/// How many recent batches per producer are remembered for duplicate detection (Kafka: 5).
const CACHED_BATCHES: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BatchMeta {
    first_seq: i32,
    last_seq: i32,
    first_offset: i64,
}

#[derive(Debug)]
struct ProducerEntry {
    epoch: i16,
    batches: VecDeque<BatchMeta>,
    /// The largest timestamp of its last batch (Kafka's `lastTimestamp`): expiry counts from it.
    last_timestamp: i64,
    /// The coordinator epoch of its last marker (Kafka starts at -1; coordinator epochs at 0).
    coordinator_epoch: i32,
}

impl Default for ProducerEntry {
    fn default() -> Self {
        ProducerEntry {
            epoch: 0,
            batches: VecDeque::new(),
            last_timestamp: 0,
            // Kafka's `RecordBatch.NO_PARTITION_LEADER_EPOCH`: no marker seen yet. Snapshots
            // carry it, so `kafka-dump-log.sh`-style readers see Kafka's value.
            coordinator_epoch: -1,
        }
    }
}

/// What to do with an incoming idempotent batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    Append,
    /// Already in the log: answer with this base offset, write nothing.
    Duplicate {
        first_offset: i64,
    },
    Reject {
        error_code: i16,
    },
}

#[derive(Debug, Default)]
pub struct ProducerStateTable {
    producers: HashMap<i64, ProducerEntry>,
    ongoing: OngoingTxns,
}

fn next_seq(seq: i32) -> i32 {
    if seq == i32::MAX {
        0
    } else {
        seq + 1
    }
}

/// Last sequence of a batch of `count` records starting at `first_seq` (sequences wrap at i32::MAX).
pub fn last_seq(first_seq: i32, count: i32) -> i32 {
    let last = first_seq as i64 + count.max(1) as i64 - 1;
    (last % (i32::MAX as i64 + 1)) as i32
}

/// One producer's state as DescribeProducers (API 61) reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerView {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The last sequence of its last batch (-1: none since its epoch began).
    pub last_sequence: i32,
    pub last_timestamp: i64,
    /// The coordinator epoch of its last marker (-1: none).
    pub coordinator_epoch: i32,
    /// The first offset of its open transaction (-1: none).
    pub current_txn_start_offset: i64,
}

impl ProducerStateTable {
    /// Every producer's state, by producer id (Kafka's `activeProducers`).
    pub fn describe(&self) -> Vec<ProducerView> {
        let mut out: Vec<ProducerView> = self
            .producers
            .iter()
            .map(|(&producer_id, e)| ProducerView {
                producer_id,
                producer_epoch: e.epoch,
                last_sequence: e.batches.back().map_or(-1, |b| b.last_seq),
                last_timestamp: e.last_timestamp,
                coordinator_epoch: e.coordinator_epoch,
                current_txn_start_offset: self.ongoing.first_offset_of(producer_id).unwrap_or(-1),
            })
            .collect();
        out.sort_by_key(|v| v.producer_id);
        out
    }

    pub fn check(
        &self,
        producer_id: i64,
        epoch: i16,
        first_seq: i32,
        last_seq: i32,
    ) -> SequenceCheck {
        let Some(entry) = self.producers.get(&producer_id) else {
            // Unknown producer (new, or its state expired): Kafka accepts any sequence.
            return SequenceCheck::Append;
        };
        if epoch < entry.epoch {
            return SequenceCheck::Reject {
                error_code: INVALID_PRODUCER_EPOCH,
            };
        }
        if epoch > entry.epoch {
            return if first_seq == 0 {
                SequenceCheck::Append
            } else {
                SequenceCheck::Reject {
                    error_code: OUT_OF_ORDER_SEQUENCE_NUMBER,
                }
            };
        }
        if let Some(dup) = entry
            .batches
            .iter()
            .find(|b| b.first_seq == first_seq && b.last_seq == last_seq)
        {
            return SequenceCheck::Duplicate {
                first_offset: dup.first_offset,
            };
        }
        match entry.batches.back() {
            Some(last) if next_seq(last.last_seq) != first_seq => SequenceCheck::Reject {
                error_code: OUT_OF_ORDER_SEQUENCE_NUMBER,
            },
            _ => SequenceCheck::Append,
        }
    }

    /// The epoch check alone, for a coordinator's own batches (no sequences to check).
    pub fn check_epoch(&self, producer_id: i64, epoch: i16) -> SequenceCheck {
        match self.producers.get(&producer_id) {
            Some(entry) if epoch < entry.epoch => SequenceCheck::Reject {
                error_code: INVALID_PRODUCER_EPOCH,
            },
            _ => SequenceCheck::Append,
        }
    }

    /// Records an appended batch whose largest timestamp is `max_timestamp` (a transactional
    /// one opens its producer's transaction at `first_offset`); call only after `check`
    /// returned `Append`.
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &mut self,
        producer_id: i64,
        epoch: i16,
        first_seq: i32,
        last_seq: i32,
        first_offset: i64,
        max_timestamp: i64,
        transactional: bool,
    ) {
        if transactional {
            self.ongoing.on_data(producer_id, first_offset);
        }
        let entry = self.producers.entry(producer_id).or_default();
        entry.last_timestamp = max_timestamp;
        if epoch != entry.epoch {
            entry.epoch = epoch;
            entry.batches.clear();
        }
        if entry.batches.len() == CACHED_BATCHES {
            entry.batches.pop_front();
        }
        entry.batches.push_back(BatchMeta {
            first_seq,
            last_seq,
            first_offset,
        });
    }
}

impl ProducerStateTable {
    /// Whether the coordinator's `marker` may end its producer's transaction here: not with
    /// an older producer epoch, nor from an older coordinator epoch. An error code if not.
    pub fn check_marker(&self, marker: &Marker) -> Result<(), i16> {
        let Some(entry) = self.producers.get(&marker.producer_id) else {
            return Ok(());
        };
        if marker.producer_epoch < entry.epoch {
            return Err(INVALID_PRODUCER_EPOCH);
        }
        if marker.coordinator_epoch < entry.coordinator_epoch {
            return Err(TRANSACTION_COORDINATOR_FENCED);
        }
        Ok(())
    }

    /// A marker written at `offset` (stamped `timestamp`): ends the producer's transaction
    /// and takes the marker's epochs. Returns the aborted transaction to index, if it aborted
    /// an open one. Replicas and the log replay apply markers without `check_marker`, as
    /// Kafka's replication origin does.
    pub fn apply_marker(
        &mut self,
        marker: &Marker,
        offset: i64,
        timestamp: i64,
    ) -> Option<AbortedTxn> {
        let entry = self.producers.entry(marker.producer_id).or_default();
        if marker.producer_epoch != entry.epoch {
            // A new epoch restarts the sequences (the coordinator bumped it to fence).
            entry.epoch = marker.producer_epoch;
            entry.batches.clear();
        }
        entry.coordinator_epoch = marker.coordinator_epoch;
        entry.last_timestamp = timestamp;
        self.ongoing
            .on_marker(marker.producer_id, offset, marker.commit)
    }

    /// The first offset of the earliest open transaction (the LSO before the HW cap).
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.ongoing.first_unstable_offset()
    }

    /// Whether `producer_id` has an open transaction on this partition.
    pub fn in_transaction(&self, producer_id: i64) -> bool {
        self.ongoing.first_offset_of(producer_id).is_some()
    }

    /// Whether `producer_id` has an open transaction on this partition begun at
    /// `producer_epoch` (Kafka 4's `UnifiedLog.hasOngoingTransaction(producerId, epoch)`): with
    /// transaction version 2 the next transaction runs at a bumped epoch and may be produced
    /// before the previous one's marker reached this partition, so an open transaction of
    /// another epoch is not this one.
    pub fn in_transaction_at(&self, producer_id: i64, producer_epoch: i16) -> bool {
        self.in_transaction(producer_id)
            && self
                .producers
                .get(&producer_id)
                .is_some_and(|e| e.epoch == producer_epoch)
    }

    /// Kafka's `removeExpiredProducers`: forgets every producer whose last batch is at least
    /// `expiration_ms` older than `now_ms`. Returns how many were removed.
    pub fn remove_expired(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        // A producer with an open transaction never expires here (Kafka's
        // `isProducerExpired`): the coordinator's timeout aborts it.
        let ongoing = &self.ongoing;
        self.producers.retain(|pid, e| {
            ongoing.first_offset_of(*pid).is_some()
                || now_ms.saturating_sub(e.last_timestamp) < expiration_ms
        });
        before - self.producers.len()
    }

    /// How many producers are remembered.
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }
}

/// Producer-state snapshots (`runnel_log::producer_snapshot`, Kafka's layout): one entry per
/// producer with its last batch only, as Kafka keeps; after a restart a retry of an older one
/// of its last five batches is answered OUT_OF_ORDER_SEQUENCE_NUMBER instead of as a duplicate,
/// as Kafka does.
impl ProducerStateTable {
    pub fn snapshot_entries(&self) -> Vec<SnapshotEntry> {
        self.producers
            .iter()
            .map(|(&producer_id, e)| {
                let (last_sequence, last_offset, offset_delta) = match e.batches.back() {
                    Some(b) => {
                        let delta = seq_span(b.first_seq, b.last_seq);
                        (
                            b.last_seq,
                            b.first_offset.saturating_add(i64::from(delta)),
                            delta,
                        )
                    }
                    None => (-1, -1, 0),
                };
                SnapshotEntry {
                    producer_id,
                    epoch: e.epoch,
                    last_sequence,
                    last_offset,
                    offset_delta,
                    timestamp: e.last_timestamp,
                    coordinator_epoch: e.coordinator_epoch,
                    current_txn_first_offset: self
                        .ongoing
                        .first_offset_of(producer_id)
                        .unwrap_or(-1),
                }
            })
            .collect()
    }

    /// The table a snapshot describes (entries as `runnel_log::producer_snapshot::decode`
    /// checked them: no negative first offset or sequence).
    pub fn from_snapshot(entries: &[SnapshotEntry]) -> Self {
        let mut table = ProducerStateTable::default();
        for e in entries {
            let mut entry = ProducerEntry {
                epoch: e.epoch,
                last_timestamp: e.timestamp,
                coordinator_epoch: e.coordinator_epoch,
                ..ProducerEntry::default()
            };
            if e.last_offset >= 0 {
                entry.batches.push_back(BatchMeta {
                    first_seq: seq_before(e.last_sequence, e.offset_delta),
                    last_seq: e.last_sequence,
                    first_offset: e.last_offset.saturating_sub(i64::from(e.offset_delta)),
                });
            }
            if e.current_txn_first_offset >= 0 {
                table
                    .ongoing
                    .on_data(e.producer_id, e.current_txn_first_offset);
            }
            table.producers.insert(e.producer_id, entry);
        }
        table
    }
}

/// The sequence `span` after `first` (Kafka's `DefaultRecordBatch.incrementSequence`:
/// sequences wrap past i32::MAX to 0).
pub fn seq_after(first: i32, span: i64) -> i32 {
    let next = (i64::from(first).saturating_add(span)).rem_euclid(i64::from(i32::MAX) + 1);
    i32::try_from(next).unwrap_or(0)
}

/// The sequence `span` before `last` (Kafka's `decrementSequence`: wraps below 0 to i32::MAX).
pub fn seq_before(last: i32, span: i32) -> i32 {
    let first = (i64::from(last) - i64::from(span)).rem_euclid(i64::from(i32::MAX) + 1);
    i32::try_from(first).unwrap_or(0)
}

/// How many sequences after `first` a batch ending at `last` spans (sequences wrap at
/// i32::MAX): its record count - 1, which is also its offset delta.
fn seq_span(first: i32, last: i32) -> i32 {
    let span = (i64::from(last) - i64::from(first)).rem_euclid(i64::from(i32::MAX) + 1);
    i32::try_from(span).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_batches_append_and_retries_are_duplicates() {
        let mut t = ProducerStateTable::default();
        assert_eq!(t.check(7, 0, 0, 9), SequenceCheck::Append);
        t.record(7, 0, 0, 9, 100, 0, false);
        assert_eq!(t.check(7, 0, 10, 19), SequenceCheck::Append);
        t.record(7, 0, 10, 19, 110, 0, false);
        assert_eq!(
            t.check(7, 0, 0, 9),
            SequenceCheck::Duplicate { first_offset: 100 }
        );
        assert_eq!(
            t.check(7, 0, 10, 19),
            SequenceCheck::Duplicate { first_offset: 110 }
        );
    }

    #[test]
    fn gaps_and_old_epochs_are_rejected() {
        let mut t = ProducerStateTable::default();
        t.record(7, 1, 0, 4, 0, 0, false);
        assert_eq!(
            t.check(7, 1, 6, 9),
            SequenceCheck::Reject {
                error_code: OUT_OF_ORDER_SEQUENCE_NUMBER
            }
        );
        assert_eq!(
            t.check(7, 0, 5, 9),
            SequenceCheck::Reject {
                error_code: INVALID_PRODUCER_EPOCH
            }
        );
        // A new epoch must restart at 0.
        assert_eq!(
            t.check(7, 2, 3, 4),
            SequenceCheck::Reject {
                error_code: OUT_OF_ORDER_SEQUENCE_NUMBER
            }
        );
        assert_eq!(t.check(7, 2, 0, 4), SequenceCheck::Append);
    }

    #[test]
    fn only_the_last_five_batches_are_remembered() {
        let mut t = ProducerStateTable::default();
        for i in 0..6 {
            t.record(1, 0, i * 10, i * 10 + 9, i as i64 * 10, 0, false);
        }
        assert_eq!(
            t.check(1, 0, 0, 9),
            SequenceCheck::Reject {
                error_code: OUT_OF_ORDER_SEQUENCE_NUMBER
            }
        );
        assert_eq!(
            t.check(1, 0, 10, 19),
            SequenceCheck::Duplicate { first_offset: 10 }
        );
    }

    #[test]
    fn sequences_wrap() {
        assert_eq!(last_seq(i32::MAX, 2), 0);
        let mut t = ProducerStateTable::default();
        t.record(1, 0, i32::MAX - 1, i32::MAX, 0, 0, false);
        assert_eq!(t.check(1, 0, 0, 3), SequenceCheck::Append);
    }

    /// Caught: producer state never expired, so every producer id ever seen stayed in memory
    /// for good; now an entry goes once its last batch is `producer.id.expiration.ms` old,
    /// and a producer that wrote since keeps its state.
    #[test]
    fn producers_expire_after_the_expiration_since_their_last_batch() {
        const DAY: i64 = 86_400_000;
        let mut t = ProducerStateTable::default();
        t.record(1, 0, 0, 9, 0, 1_000, false);
        t.record(2, 0, 0, 9, 10, 1_000, false);
        t.record(2, 0, 10, 19, 20, 1_000 + DAY, false);
        assert_eq!(t.remove_expired(1_000 + DAY - 1, DAY), 0);
        assert_eq!(t.remove_expired(1_000 + DAY, DAY), 1);
        assert_eq!(t.len(), 1);
        // Forgotten: Kafka accepts it again at any sequence, as a new producer.
        assert_eq!(t.check(1, 0, 50, 59), SequenceCheck::Append);
        assert_eq!(
            t.check(2, 0, 10, 19),
            SequenceCheck::Duplicate { first_offset: 20 }
        );
        assert_eq!(t.remove_expired(1_000 + 2 * DAY, DAY), 1);
        assert!(t.is_empty());
    }

    /// A producer with an open transaction is not forgotten (it holds the LSO until the
    /// coordinator's marker); once a marker ended it, it expires as any other.
    #[test]
    fn an_open_transaction_keeps_its_producer_until_the_marker() {
        const DAY: i64 = 86_400_000;
        let mut t = ProducerStateTable::default();
        t.record(1, 0, 0, 0, 7, 0, true);
        assert_eq!(t.first_unstable_offset(), Some(7));
        assert_eq!(t.remove_expired(2 * DAY, DAY), 0);
        let m = Marker {
            producer_id: 1,
            producer_epoch: 0,
            commit: false,
            coordinator_epoch: 0,
        };
        assert_eq!(t.check_marker(&m), Ok(()));
        let aborted = t.apply_marker(&m, 8, 0).unwrap();
        assert_eq!((aborted.first_offset, aborted.last_offset), (7, 8));
        assert_eq!(t.first_unstable_offset(), None);
        assert_eq!(t.remove_expired(2 * DAY, DAY), 1);
    }

    /// A snapshot keeps what a restart needs: the last batch (its retry is a duplicate with
    /// its offset), the epochs, and the open transaction that holds the LSO.
    #[test]
    fn a_snapshot_round_trip_keeps_the_last_batch_epochs_and_open_transaction() {
        let mut t = ProducerStateTable::default();
        t.record(1, 2, 0, 9, 100, 5, false);
        t.record(1, 2, 10, 19, 110, 6, false);
        t.record(3, 0, i32::MAX - 1, 1, 200, 7, true);
        let m = Marker {
            producer_id: 4,
            producer_epoch: 1,
            commit: true,
            coordinator_epoch: 9,
        };
        t.apply_marker(&m, 300, 8);
        let entries = t.snapshot_entries();
        let bytes = runnel_log::producer_snapshot::encode(&entries).unwrap();
        let back = ProducerStateTable::from_snapshot(
            &runnel_log::producer_snapshot::decode(&bytes).unwrap(),
        );
        assert_eq!(
            back.check(1, 2, 10, 19),
            SequenceCheck::Duplicate { first_offset: 110 }
        );
        assert_eq!(back.check(1, 2, 20, 29), SequenceCheck::Append);
        assert_eq!(
            back.check(1, 1, 20, 29),
            SequenceCheck::Reject {
                error_code: INVALID_PRODUCER_EPOCH
            }
        );
        assert_eq!(
            back.check(3, 0, i32::MAX - 1, 1),
            SequenceCheck::Duplicate { first_offset: 200 }
        );
        assert_eq!(back.first_unstable_offset(), Some(200));
        assert!(back.in_transaction(3));
        let stale = Marker {
            coordinator_epoch: 8,
            ..m
        };
        assert_eq!(
            back.check_marker(&stale),
            Err(TRANSACTION_COORDINATOR_FENCED)
        );
        assert_eq!(back.len(), 3);
    }
}
