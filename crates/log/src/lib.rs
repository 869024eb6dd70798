//! # runnel-log: partition logs on disk, in Kafka's own layout
//!
//! One directory per partition, `<log.dir>/<topic>-<partition>/` (spec J.1), holding segments
//! named by their 20-digit base offset:
//!
//! * `{base:020}.log` — record batches (v2, spec J.2) exactly as producers encoded them; only
//!   `baseOffset` and `partitionLeaderEpoch` (outside the CRC) are patched by the leader.
//! * `{base:020}.index` — sparse offset index, 8-byte entries (relative offset, position): one
//!   per `index.interval.bytes` appended, mapping a batch's last offset to its position.
//! * `{base:020}.timeindex` — sparse time index, 12-byte entries (timestamp, relative offset),
//!   timestamps strictly increasing; the final entry of a rolled/closed segment is its max.
//! * `leader-epoch-checkpoint` (epoch -> start offset, spec E.5) and `partition.metadata`
//!   (topic id).
//!
//! Per log dir ([`LogManager`]): `recovery-point-offset-checkpoint`,
//! `log-start-offset-checkpoint`, `replication-offset-checkpoint`, `cleaner-offset-checkpoint`
//! (text, tmp + fsync + rename) and `.kafka_cleanshutdown`, written last on a clean shutdown
//! and removed on open.
//!
//! ## Invariants
//!
//! * Bytes are written once: an append is one vectored write of each batch's patched 16-byte
//!   prefix plus the rest of the producer's slice; appends never decode or re-encode batches.
//!   Only compaction ([`CompactionPlan`]) rebuilds a batch, and only one that
//!   lost records or gained a tombstone delete horizon; fully kept batches are copied as is.
//! * Offsets are strictly increasing, dense except for the gaps compaction leaves (offsets
//!   never change); LEO = the active (last) segment's end.
//!   `first segment base <= log start <= HW <= LEO`, `recovery point <= LEO`.
//! * Everything below the recovery point was fsynced. After an unclean shutdown every segment
//!   reaching the recovery point or beyond is re-verified batch by batch (length, CRC-32C,
//!   offsets) and cut at the first bad batch, so a torn write is never served. Index files are
//!   rebuilt whenever they are missing or inconsistent.
//! * Reads return whole batches only, never beyond the caller's `max_offset` (HW or LEO).
//! * Nothing read from disk or received from a client can panic: malformed data gives
//!   [`LogError`] / [`batch::BatchError`], or is truncated/rebuilt on recovery.
//! * Index entries live in memory (Vec) and are appended to their files after each append; there
//!   is no mmap and no preallocation, so the files always hold exactly their entries.
//!
//! Compaction (spec J.7, `cleaner/*`, `partition_log/compact.rs`): `prepare_compaction` under
//! the lock, `CompactionPlan::run` without it, `finish_compaction` under it (renames only);
//! `.cleaned` -> `.swap` -> final names, completed or rolled back on open.
//!
//! Concurrency: [`PartitionLog`] is single-threaded; the manager shares each as
//! [`SharedLog`] (`Arc<Mutex<_>>`). Group commit: take a [`FlushTarget`] under the lock,
//! `sync()` it outside, then `mark_flushed`.

pub mod batch;
pub mod checkpoint;
mod cleaner;
pub mod compression;
mod config;
pub mod control;
pub mod dir_name;
mod epoch_cache;
mod error;
#[cfg(not(feature = "fault-injection"))]
mod fault;
/// Fault injection for tests in other crates (the `fault-injection` feature; never in a release).
#[cfg(feature = "fault-injection")]
pub mod fault;
mod flush;
mod index;
pub mod log_dirs;
mod manager;
mod partition_log;
pub mod partition_metadata;
pub mod producer_snapshot;
mod record_scan;
mod scan;
mod segment;
pub mod txn;
pub mod validate;

pub use cleaner::{CleanStats, CompactionConfig, CompactionOutcome, CompactionPlan};
pub use config::LogConfig;
pub use error::LogError;
pub use flush::FlushTarget;
pub use log_dirs::LogDirs;
pub use manager::{
    LogManager, SharedLog, CLEANER_CHECKPOINT, CLEAN_SHUTDOWN_FILE, HIGH_WATERMARK_CHECKPOINT,
    LOG_START_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
};
pub use partition_log::{AppendInfo, PartitionLog, ReadPlan, ReadResult, RecoveryHint};
