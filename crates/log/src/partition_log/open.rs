//! Opening a partition directory: leftovers cleanup, segment loading, recovery (spec J.5).

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::PathBuf;

use super::{PartitionLog, RecoveryHint};
use crate::checkpoint::sync_dir;
use crate::config::LogConfig;
use crate::epoch_cache::EpochFile;
use crate::error::LogError;
use crate::segment::{
    parse_log_file_name, segment_path, ScanOutcome, Segment, INDEX_SUFFIX, TIME_INDEX_SUFFIX,
};

/// Suffixes of files that only exist mid-operation and are garbage after a restart.
const LEFTOVER_SUFFIXES: [&str; 4] = [".deleted", ".cleaned", ".swap", ".tmp"];

fn remove_if_exists(path: &std::path::Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// A missing or unreadable epoch checkpoint is rebuilt from every batch header. Without its
/// history a follower fetches with no LastFetchedEpoch (a divergent tail goes unnoticed) and a
/// leader cannot answer OffsetForLeaderEpoch; the batches carry it, also those below the
/// recovery point that recovery did not scan.
fn rebuild_lost_epochs(epochs: &mut EpochFile, segments: &[Segment]) -> io::Result<()> {
    if !epochs.lost() {
        return Ok(());
    }
    let mut starts = Vec::new();
    for seg in segments {
        starts.extend(seg.epoch_starts()?);
    }
    epochs.rebuild(starts)
}

impl PartitionLog {
    /// Opens (creating if missing) the partition directory `dir` and recovers it:
    /// committed compaction swaps are completed, then leftovers (`.deleted`, `.cleaned`,
    /// uncommitted `.swap`, orphan indexes) are removed; after an unclean
    /// shutdown every segment holding offsets at or after the recovery point is verified batch
    /// by batch (length, CRC-32C, offsets) with its indexes rebuilt, cut at the first invalid
    /// batch, and later segments deleted. Missing or inconsistent index files are rebuilt in any
    /// case. LEO = end of the last valid batch; HW and log start come from `hint`, clamped.
    pub fn open(dir: PathBuf, config: LogConfig, hint: RecoveryHint) -> Result<Self, LogError> {
        fs::create_dir_all(&dir)?;
        // Interrupted compaction swaps first: their `.swap` files are not leftovers.
        crate::cleaner::swap::recover(&dir)?;
        let bases = Self::clean_leftovers(&dir)?;
        let mut epochs = EpochFile::load(&dir);
        let log_start_bound = epochs.log_start_bound();
        let interval = config.index_interval_bytes;
        let mut segments: Vec<Segment> = Vec::with_capacity(bases.len());
        let bases: Vec<i64> = bases.into_iter().collect();
        for (i, &base) in bases.iter().enumerate() {
            let (mut seg, needs_rebuild) = Segment::open(&dir, base, config.max_index_bytes)?;
            let next_base = bases.get(i + 1).copied();
            let unflushed =
                !hint.clean_shutdown && next_base.is_none_or(|nb| nb > hint.recovery_point);
            let outcome = if unflushed || needs_rebuild {
                if !unflushed {
                    tracing::info!(dir = %dir.display(), base, "rebuilding indexes");
                }
                seg.recover(interval)?
            } else if let Some(nb) = next_base {
                seg.set_next_offset(nb);
                ScanOutcome::default()
            } else {
                seg.load_tail(interval)?
            };
            for (epoch, start) in outcome.epoch_starts {
                // Kafka's `LogSegment.recover`: only an epoch newer than the cache's latest is
                // new history. A segment that begins mid-epoch shows that epoch first at its
                // base offset, and assigning it would move the epoch's start (and the previous
                // epoch's end) forward, hiding a follower's divergence there.
                if epochs.latest_epoch().is_none_or(|latest| epoch > latest) {
                    epochs.assign(epoch, start)?;
                }
            }
            if next_base.is_some() {
                // An inactive segment gets its final time entry back, as when it was rolled.
                seg.finalize()?;
            }
            let cut = outcome.truncated && next_base.is_some();
            segments.push(seg);
            if cut {
                for &later in &bases[i + 1..] {
                    tracing::warn!(dir = %dir.display(), base = later, "deleting segment after a truncated one");
                    for suffix in [
                        "log",
                        INDEX_SUFFIX,
                        TIME_INDEX_SUFFIX,
                        super::TXN_INDEX_SUFFIX,
                    ] {
                        remove_if_exists(&segment_path(&dir, later, suffix))?;
                    }
                }
                break;
            }
        }
        if segments.is_empty() {
            let base = hint.log_start_offset.max(0);
            segments.push(Segment::create(&dir, base, config.max_index_bytes)?);
            sync_dir(&dir)?;
        }
        let leo = segments[segments.len() - 1].next_offset();
        let log_start_offset = hint
            .log_start_offset
            .min(log_start_bound)
            .max(segments[0].base_offset())
            .min(leo);
        let recovery_point = if hint.clean_shutdown {
            leo
        } else {
            hint.recovery_point.clamp(0, leo)
        };
        rebuild_lost_epochs(&mut epochs, &segments)?;
        epochs.truncate_from_end(leo)?;
        epochs.truncate_from_start(log_start_offset)?;
        // Recovery may have cut the tail a snapshot describes.
        crate::producer_snapshot::remove_where(&dir, |o| o > leo)?;
        let kept: Vec<i64> = segments.iter().map(|s| s.base_offset()).collect();
        let (aborted, txn_index_lost) = super::txn_index::load(&dir, &kept);
        let mut log = PartitionLog {
            dir,
            config,
            segments,
            log_start_offset,
            high_watermark: hint.high_watermark.clamp(log_start_offset, leo),
            recovery_point,
            epochs,
            cleaner_checkpoint: 0,
            earliest_tombstone_horizon: None,
            aborted,
            txn_index_lost,
            pending_deletes: Vec::new(),
            closed: false,
            first_unstable_offset: None,
            rolled_since_snapshot: false,
            failed: Default::default(),
            dir_failed: Default::default(),
        };
        // Recovery may have cut markers the index still lists.
        log.truncate_txn_index()?;
        Ok(log)
    }

    /// Removes leftover and orphan files, returns the base offsets of the `.log` files.
    fn clean_leftovers(dir: &std::path::Path) -> Result<BTreeSet<i64>, LogError> {
        let mut bases = BTreeSet::new();
        let mut index_files = Vec::new();
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if LEFTOVER_SUFFIXES.iter().any(|s| name.ends_with(s)) {
                remove_if_exists(&entry.path())?;
            } else if let Some(base) = parse_log_file_name(name) {
                bases.insert(base);
            } else if name.ends_with(".index")
                || name.ends_with(".timeindex")
                || name.ends_with(".txnindex")
            {
                index_files.push((name.to_string(), entry.path()));
            }
        }
        for (name, path) in index_files {
            let stem = name.split('.').next().unwrap_or_default();
            let orphan =
                stem.len() != 20 || stem.parse::<i64>().map_or(true, |b| !bases.contains(&b));
            if orphan {
                remove_if_exists(&path)?;
            }
        }
        Ok(bases)
    }
}
