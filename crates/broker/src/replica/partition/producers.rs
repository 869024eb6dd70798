//! The idempotent-producer state of the partition: rebuilt from the newest snapshot and a
//! replay of the log, kept up to date by appends (leader and follower), snapshotted at segment
//! rolls and clean shutdown, expired, described.

use runnel_log::batch::BatchHeader;
use runnel_log::control;
use runnel_log::PartitionLog;

use super::Partition;
use crate::producer_state::{last_seq, ProducerStateTable};

impl Partition {
    /// The producers this partition knows (DescribeProducers).
    pub fn describe_producers(&self) -> Vec<crate::producer_state::ProducerView> {
        self.producers.lock().describe()
    }

    /// Clean shutdown: the producer state as of the LEO, fsynced, so the next start replays
    /// nothing (Kafka's `ProducerStateManager.takeSnapshot` on close).
    pub fn snapshot_producers(&self) {
        let mut log = self.log.lock();
        let producers = self.producers.lock();
        log.write_producer_snapshot(&producers.snapshot_entries(), true);
    }

    /// Forgets the idempotent producers whose last batch is `expiration_ms` old (Kafka's
    /// `producer.id.expiration.ms`); returns how many.
    pub fn expire_producers(&self, now_ms: i64, expiration_ms: i64) -> usize {
        self.producers.lock().remove_expired(now_ms, expiration_ms)
    }
}

/// The producer state of the log on open or after a truncation: the newest snapshot
/// (`<offset>.snapshot`, written at every segment roll and at clean shutdown) plus a replay of
/// the batches after it; without one, a replay from the log start (Kafka's
/// `ProducerStateManager.truncateAndReload` + `UnifiedLog.rebuildProducerState`). The whole
/// log counts: an open transaction that began long ago still holds the LSO after a restart.
pub(super) fn rebuild_producer_state(log: &mut PartitionLog) -> ProducerStateTable {
    // A dropped `.txnindex` is rebuilt only by replaying the segment it described, which a
    // newer snapshot would skip.
    let snapshot = if log.take_txn_index_loss() {
        None
    } else {
        log.latest_producer_snapshot()
    };
    let (mut offset, mut table) = match snapshot {
        Some((offset, entries)) => (offset, ProducerStateTable::from_snapshot(&entries)),
        None => (log.log_start_offset(), ProducerStateTable::default()),
    };
    let leo = log.log_end_offset();
    while offset < leo {
        let read = match log.read(offset, 4 << 20, leo, true) {
            Ok(read) if !read.records.is_empty() => read,
            Ok(_) => break,
            Err(e) => {
                tracing::warn!(error = %e, "cannot rebuild producer state; duplicates across the restart may be appended");
                break;
            }
        };
        let mut rest = &read.records[..];
        let before = offset;
        while let Ok(h) = BatchHeader::parse(rest) {
            if h.total_size() > rest.len() {
                break;
            }
            if h.last_offset() >= offset {
                replay_batch(&mut table, log, &h, &rest[..h.total_size()]);
            }
            offset = offset.max(h.last_offset() + 1);
            rest = &rest[h.total_size()..];
        }
        if offset == before {
            break;
        }
    }
    table
}

/// Kafka snapshots the producer state when a segment rolls, so a restart replays only the
/// active segment; `producers` must describe exactly the batches below the LEO.
pub(super) fn snapshot_on_roll(log: &mut PartitionLog, producers: &ProducerStateTable) {
    if log.rolled_since_snapshot() {
        log.write_producer_snapshot(&producers.snapshot_entries(), false);
    }
}

/// Records the idempotent batches a follower appended (each with the offsets the leader gave
/// it), up to `last_offset` (a fetch response may end with a partial batch, never appended).
pub(super) fn record_replicated_producers(
    producers: &mut ProducerStateTable,
    log: &mut PartitionLog,
    records: &[u8],
    last_offset: i64,
) {
    let mut rest = records;
    while let Ok(h) = BatchHeader::parse(rest) {
        if h.total_size() > rest.len() || h.last_offset() > last_offset {
            break;
        }
        replay_batch(producers, log, &h, &rest[..h.total_size()]);
        rest = &rest[h.total_size()..];
    }
}

/// One batch already in the log (`batch`: its bytes), as a replica or the replay on open
/// sees it: a data batch records its producer, a marker ends the transaction (an abort
/// enters the `.txnindex`, if not there already).
fn replay_batch(
    producers: &mut ProducerStateTable,
    log: &mut PartitionLog,
    h: &BatchHeader,
    batch: &[u8],
) {
    if h.producer_id < 0 {
        return;
    }
    if h.is_control() {
        if let Some(marker) = control::parse_marker(h, batch) {
            if let Some(aborted) = producers.apply_marker(&marker, h.base_offset, h.max_timestamp) {
                index_aborted(log, aborted);
            }
        }
        return;
    }
    let last = last_seq(h.base_sequence, h.record_count);
    producers.record(
        h.producer_id,
        h.producer_epoch,
        h.base_sequence,
        last,
        h.base_offset,
        h.max_timestamp,
        h.is_transactional(),
    );
}

/// A failed `.txnindex` write loses nothing the log does not hold: the replay on open re-adds it.
pub(super) fn index_aborted(log: &mut PartitionLog, aborted: runnel_log::txn::AbortedTxn) {
    if let Err(e) = log.index_aborted_txn(aborted) {
        tracing::warn!(error = %e, "cannot write the transaction index; it is rebuilt on restart");
    }
}

pub(super) fn record_producers(
    producers: &mut ProducerStateTable,
    headers: &[BatchHeader],
    first_offset: i64,
) {
    let mut offset = first_offset;
    for h in headers {
        if h.producer_id >= 0 {
            let last = last_seq(h.base_sequence, h.record_count);
            producers.record(
                h.producer_id,
                h.producer_epoch,
                h.base_sequence,
                last,
                offset,
                h.max_timestamp,
                h.is_transactional(),
            );
        }
        offset += h.last_offset_delta as i64 + 1;
    }
}
