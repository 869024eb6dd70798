//! [`PartitionLog`]: one partition's log directory — an ordered list of segments, the leader
//! epoch cache, and the offsets that frame them (log start, high watermark, recovery point).
//!
//! Split by concern: `open` (loading and recovery, J.5), `append`, `read` (fetch and offset
//! lookups), `retention` (DeleteRecords, retention, J.6), `truncate` (follower truncation),
//! `flush` (group commit and close), `compact` (log compaction, J.7).

mod append;
mod compact;
mod flush;
mod open;
mod producer_snapshots;
mod read;
mod relocate;
mod retention;
mod truncate;
mod txn_index;
pub(crate) use txn_index::TXN_INDEX_SUFFIX;

#[cfg(test)]
pub(crate) mod fault_tests;
pub use read::ReadPlan;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use crate::config::LogConfig;
use crate::epoch_cache::EpochFile;
use crate::error::LogError;
use crate::segment::Segment;

/// Result of an append: the offsets assigned and the batch timestamps seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub first_offset: i64,
    pub last_offset: i64,
    /// Largest `maxTimestamp` among the appended batches.
    pub max_timestamp: i64,
    /// Last offset of the (first) batch carrying `max_timestamp`.
    pub offset_of_max_timestamp: i64,
    pub log_start_offset: i64,
}

/// Result of a read: whole batches only, plus the offsets a Fetch response reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResult {
    pub records: bytes::Bytes,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    pub high_watermark: i64,
}

/// What the log directory's checkpoints say about a partition, handed to [`PartitionLog::open`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryHint {
    /// Everything below was fsynced: segments entirely below are trusted after a crash.
    pub recovery_point: i64,
    pub log_start_offset: i64,
    pub high_watermark: i64,
    /// `.kafka_cleanshutdown` was present: no batch-by-batch recovery needed.
    pub clean_shutdown: bool,
}

impl RecoveryHint {
    /// A brand-new (or unknown) partition: recover everything, start at 0.
    pub fn new_log() -> Self {
        RecoveryHint {
            recovery_point: 0,
            log_start_offset: 0,
            high_watermark: 0,
            clean_shutdown: false,
        }
    }
}

/// One partition's log. Not internally synchronised: the broker wraps it in a mutex
/// ([`crate::SharedLog`]).
///
/// Invariants: `segments` is non-empty and sorted by base offset; offsets are dense and
/// strictly increasing across segments; the last segment is the active one (the only one
/// appended to); `segments[0].base <= log_start <= high_watermark <= LEO` and
/// `recovery_point <= LEO`.
#[derive(Debug)]
pub struct PartitionLog {
    dir: PathBuf,
    config: LogConfig,
    segments: Vec<Segment>,
    log_start_offset: i64,
    high_watermark: i64,
    recovery_point: i64,
    epochs: EpochFile,
    /// Cleaner checkpoint: offsets below it were compacted (`cleaner-offset-checkpoint`).
    cleaner_checkpoint: i64,
    /// Earliest delete horizon of a cleaned batch that still holds tombstones, as far as this
    /// process knows: once it passes, the log needs a pass even without dirty data.
    earliest_tombstone_horizon: Option<i64>,
    /// Aborted transactions of the `.txnindex` files, sorted by marker offset.
    aborted: Vec<crate::txn::AbortedTxn>,
    /// A corrupt `.txnindex` was dropped on open: the next producer-state replay must start at
    /// the log start, not at a snapshot past the segment it described.
    txn_index_lost: bool,
    /// `.deleted` files waiting for `file_delete_delay_ms`.
    pending_deletes: Vec<(Instant, Vec<PathBuf>)>,
    closed: bool,
    /// Where the first open transaction starts, as the broker last said (its producer state):
    /// the cleaner stays below it, since those records may still be aborted.
    first_unstable_offset: Option<i64>,
    /// A segment was rolled since the last producer snapshot (the broker then writes one).
    rolled_since_snapshot: bool,
    /// Set once an fsync failed or a failed write could not be undone; shared with every
    /// [`crate::FlushTarget`] taken, so no file of this log is fsynced again (fsyncgate).
    failed: Arc<OnceLock<String>>,
    /// Set once any log of the same log directory failed (shared by the [`crate::LogManager`]):
    /// Kafka takes the whole directory offline on the first I/O error in it, so every partition
    /// in it refuses at once instead of accepting writes until the broker has stopped.
    dir_failed: Arc<OnceLock<String>>,
}

impl PartitionLog {
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn config(&self) -> &LogConfig {
        &self.config
    }
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }
    /// LEO: the offset the next appended record gets.
    pub fn log_end_offset(&self) -> i64 {
        self.active().next_offset()
    }
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }
    /// Sets the HW, clamped to `[log_start, LEO]`.
    pub fn set_high_watermark(&mut self, hw: i64) {
        self.high_watermark = hw.clamp(self.log_start_offset, self.log_end_offset());
    }
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point
    }
    pub fn update_config(&mut self, config: LogConfig) {
        self.config = config;
    }
    /// Bytes of all segment `.log` files.
    pub fn size_bytes(&self) -> u64 {
        self.segments.iter().map(Segment::size).sum()
    }
    pub fn num_segments(&self) -> usize {
        self.segments.len()
    }
    /// Base offsets of the segments, oldest first.
    pub fn segment_base_offsets(&self) -> Vec<i64> {
        self.segments.iter().map(Segment::base_offset).collect()
    }
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Leader-epoch cache lookup for OffsetForLeaderEpoch (spec E.5): `(epoch, end offset)`,
    /// `(-1, -1)` if unknown; as in Kafka, an epoch older than every entry answers
    /// `(requested, first start offset)`.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        let answer = self
            .epochs
            .cache()
            .end_offset_for(epoch, self.log_end_offset());
        (answer.epoch, answer.end_offset)
    }

    /// The leader-epoch cache, for the replication rules (`runnel_replication::truncation`).
    pub fn epoch_cache(&self) -> &runnel_replication::LeaderEpochCache {
        self.epochs.cache()
    }
    pub fn latest_epoch(&self) -> Option<i32> {
        self.epochs.latest_epoch()
    }
    /// A new leader's epoch starts at the current LEO (Kafka's `makeLeader`): recorded before
    /// anything is written in it, so OffsetForLeaderEpoch and diverging-epoch answers know where
    /// the previous epoch ended even while the new leader has appended nothing yet.
    pub fn assign_leader_epoch(&mut self, epoch: i32) -> Result<(), LogError> {
        let leo = self.log_end_offset();
        self.epochs.assign(epoch, leo)?;
        Ok(())
    }

    /// The `(epoch, start offset)` entries of the leader-epoch cache.
    pub fn epoch_entries(&self) -> Vec<(i32, i64)> {
        self.epochs
            .cache()
            .entries()
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect()
    }

    fn active(&self) -> &Segment {
        // Invariant: never empty (open creates a segment, deletions roll first).
        &self.segments[self.segments.len() - 1]
    }
    fn active_mut(&mut self) -> &mut Segment {
        let n = self.segments.len();
        &mut self.segments[n - 1]
    }
    fn ensure_not_failed(&self) -> Result<(), LogError> {
        if let Some(why) = self.failed.get() {
            return Err(LogError::Failed(why.clone()));
        }
        match self.dir_failed.get() {
            Some(why) => Err(LogError::Failed(format!("the log directory failed: {why}"))),
            None => Ok(()),
        }
    }

    /// Whether an append may be tried: `Err` (KAFKA_STORAGE_ERROR, or `Closed`) once this log
    /// or its log directory failed. The broker asks before its idempotence checks, so that a
    /// producer's next batch after a refused one learns of the failed disk rather than of a
    /// sequence gap (which makes librdkafka bump its epoch and resend possibly written
    /// batches under new sequences: known case 6 of the fault campaign, docs/faults.md).
    pub fn check_writable(&self) -> Result<(), LogError> {
        self.ensure_open()
    }

    /// Whether this log or its log directory failed: the replica is offline (Kafka's
    /// `HostedPartition.Offline`), every operation answers KAFKA_STORAGE_ERROR and a follower
    /// stops fetching for it.
    pub fn is_offline(&self) -> bool {
        self.ensure_not_failed().is_err()
    }

    /// Joins the log directory's shared failure flag (the [`crate::LogManager`] calls it for
    /// every log it opens).
    pub(crate) fn share_dir_failure(&mut self, dir_failed: Arc<OnceLock<String>>) {
        self.dir_failed = dir_failed;
    }
    fn ensure_open(&self) -> Result<(), LogError> {
        self.ensure_not_failed()?;
        if self.closed {
            Err(LogError::Closed)
        } else {
            Ok(())
        }
    }

    /// Why the log failed (a failed fsync or an append that could not be undone), if it did:
    /// every operation then answers [`LogError::Failed`] (KAFKA_STORAGE_ERROR) until a restart.
    pub fn failure(&self) -> Option<&str> {
        self.failed.get().map(String::as_str)
    }

    /// Marks the log failed for good (the first reason is kept).
    pub(crate) fn fail(&self, why: String) {
        tracing::error!(dir = %self.dir.display(), %why, "partition log failed; it accepts no more operations");
        let name = self
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        let _ = self
            .dir_failed
            .set(format!("{}: {why}", name.unwrap_or_default()));
        let _ = self.failed.set(why);
    }
    /// Kafka's `maybeHandleIOException` on the write paths (append, roll, truncation): an I/O
    /// error (ENOSPC, EIO) takes the log out of service for good, as Kafka takes its log
    /// directory offline. A log that kept its leadership while refusing writes with
    /// KAFKA_STORAGE_ERROR made idempotent producers see the next pipelined batch refused
    /// with OUT_OF_ORDER_SEQUENCE_NUMBER; librdkafka then bumps its epoch and resends its
    /// unacknowledged, possibly persisted batches under new sequences, which no broker can
    /// tell from new data (known case 3 of the fault campaign, docs/faults.md). Failed, the
    /// log's dir goes offline (`runnel_broker::log_dir_failure`: the broker stops once it was
    /// its last dir), the in-sync replicas take over its partitions and
    /// answer the producer's same-sequence retries as duplicates; the restart recovers the
    /// log from what is on disk (a failed append was already cut back).
    pub(crate) fn fail_on_io_error<T>(&self, result: Result<T, LogError>) -> Result<T, LogError> {
        if let Err(LogError::Io(e)) = &result {
            self.fail(format!("I/O error: {e}"));
        }
        result
    }

    /// Index of the segment that holds `offset` (the last with base <= offset).
    fn segment_index_for(&self, offset: i64) -> usize {
        self.segments
            .partition_point(|s| s.base_offset() <= offset)
            .saturating_sub(1)
    }
}
