//! Log compaction (`cleanup.policy=compact`, spec J.7): keep at least the latest record of
//! every key, offsets unchanged.
//!
//! * `offset_map`: pass 1, key hash -> latest offset over the dirty part.
//! * `records`, `codec`, `rewrite`: pass 2 for one batch — parse the records, decompress,
//!   keep the latest per key, drop expired tombstones, rebuild or copy the batch.
//! * `plan`: a pass over a snapshot of closed segments, without the log's lock, writing
//!   `.cleaned` segments.
//! * `swap`: `.cleaned` -> `.swap` -> final names, and crash recovery of interrupted swaps.
//! * `txn_markers`: which transaction markers and `.txnindex` entries a pass removes (after
//!   their data, and `delete.retention.ms` after their first cleaning, as Kafka).
//!
//! The entry points are on [`crate::PartitionLog`] (`partition_log/compact.rs`).

mod codec;
mod offset_map;
mod plan;
pub(crate) mod records;
mod rewrite;
pub(crate) mod swap;
mod txn_markers;

pub(crate) use offset_map::DEFAULT_MAX_ENTRIES;
pub(crate) use plan::{CleanedGroup, SegmentRef};
pub use plan::{CompactionOutcome, CompactionPlan};

/// The topic settings of compaction, named after Kafka's properties.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionConfig {
    /// `min.cleanable.dirty.ratio`: clean once dirty bytes / cleanable bytes reach it.
    pub min_cleanable_dirty_ratio: f64,
    /// `delete.retention.ms`: how long a tombstone (or a transaction marker whose data is
    /// gone) stays after its batch was first cleaned.
    pub delete_retention_ms: i64,
    /// `min.compaction.lag.ms`: segments with records newer than this are not cleaned.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a log whose oldest dirty record is older is cleaned whatever
    /// its dirty ratio.
    pub max_compaction_lag_ms: i64,
}

impl Default for CompactionConfig {
    /// Kafka's defaults.
    fn default() -> Self {
        CompactionConfig {
            min_cleanable_dirty_ratio: 0.5,
            delete_retention_ms: 86_400_000,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
        }
    }
}

/// What one cleaning pass did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CleanStats {
    /// Segment files written (each replaces one or more old segments).
    pub segments_rewritten: usize,
    pub records_removed: u64,
    /// Size of the segments the pass examined, before and after.
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// The cleaner checkpoint after the pass: every record below it has been compacted
    /// against all later records below it.
    pub clean_up_to: i64,
}
