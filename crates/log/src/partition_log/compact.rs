//! Compaction entry points on [`PartitionLog`] (spec J.7): choosing what is cleanable, the
//! dirty ratio, and swapping cleaned segments in.
//!
//! Two ways to run a pass:
//! * [`PartitionLog::compact`] does everything under the caller's lock (simple, tests);
//! * the broker's cleaner thread should instead call [`PartitionLog::prepare_compaction`]
//!   under the lock, [`crate::CompactionPlan::run`] without it (all the reading, decoding and
//!   writing), and [`PartitionLog::finish_compaction`] under the lock again (renames only).
//!
//! At most one pass per log may be in flight (the `.cleaned` names are per base offset); the
//! broker runs one cleaner thread. A pass that raced with truncation or retention is discarded
//! in `finish_compaction` (nothing is committed), because it is checked against the live
//! segments by file identity.

use std::sync::Arc;

use super::PartitionLog;
use crate::checkpoint::sync_dir;
use crate::cleaner::{
    swap, CleanStats, CleanedGroup, CompactionConfig, CompactionOutcome, CompactionPlan,
    SegmentRef, DEFAULT_MAX_ENTRIES,
};
use crate::error::LogError;
use crate::segment::Segment;

/// Segment-level split of the cleanable part of the log.
struct Cleanable {
    /// Segments `[..count]` may be cleaned.
    count: usize,
    /// Base of the first uncleanable segment.
    end: i64,
    clean_bytes: u64,
    dirty_bytes: u64,
}

impl PartitionLog {
    /// The cleaner checkpoint: offsets below it were compacted (read from
    /// `cleaner-offset-checkpoint`, advanced by each pass).
    pub fn cleaner_checkpoint(&self) -> i64 {
        self.cleaner_checkpoint
    }

    /// Sets the cleaner checkpoint (the manager does so on open), clamped to `[0, LEO]`.
    pub fn set_cleaner_checkpoint(&mut self, offset: i64) {
        self.cleaner_checkpoint = offset.clamp(0, self.log_end_offset());
    }

    /// The broker's producer state: the first offset of the earliest open transaction. The
    /// cleaner only cleans below it (Kafka's first uncleanable offset includes the LSO): a
    /// record of an open transaction must not supersede a committed one it may never replace.
    pub fn set_first_unstable_offset(&mut self, offset: Option<i64>) {
        self.first_unstable_offset = offset;
    }

    /// Where the dirty part starts: the checkpoint, but never below the log start.
    fn first_dirty_offset(&self) -> i64 {
        self.cleaner_checkpoint.max(self.log_start_offset)
    }

    /// The cleanable prefix of segments: closed (never the active one), ending at or below the
    /// HW and the first open transaction, and (with `now_ms`) whose largest timestamp is at
    /// least `min_lag_ms` old.
    fn cleanable(&self, now_ms: Option<i64>, min_lag_ms: i64) -> Cleanable {
        let last = self.segments.len() - 1;
        let first_dirty = self.first_dirty_offset();
        let stable_end = self
            .first_unstable_offset
            .map_or(self.high_watermark, |f| f.min(self.high_watermark));
        let mut c = Cleanable {
            count: 0,
            end: self.segments[0].base_offset(),
            clean_bytes: 0,
            dirty_bytes: 0,
        };
        for seg in &self.segments[..last] {
            let too_new = match now_ms {
                Some(now) if min_lag_ms > 0 => {
                    seg.largest_timestamp() > now.saturating_sub(min_lag_ms)
                }
                _ => false,
            };
            if seg.next_offset() > stable_end || too_new {
                break;
            }
            if seg.next_offset() <= first_dirty {
                c.clean_bytes += seg.size();
            } else {
                c.dirty_bytes += seg.size();
            }
            c.count += 1;
        }
        c.end = self.segments[c.count].base_offset();
        c
    }

    fn ratio(c: &Cleanable) -> f64 {
        let total = c.clean_bytes + c.dirty_bytes;
        if total == 0 {
            0.0
        } else {
            c.dirty_bytes as f64 / total as f64
        }
    }

    /// Dirty bytes / cleanable bytes, by whole segments: dirty = closed segments below the HW
    /// that reach past the cleaner checkpoint, cleanable = those plus the clean ones before.
    /// (Without a clock, `min.compaction.lag.ms` is not applied; `needs_compaction` does.)
    pub fn dirty_ratio(&self) -> f64 {
        Self::ratio(&self.cleanable(None, 0))
    }

    /// Whether the cleaner should pick this log at `now_ms`: some cleanable bytes are dirty and
    /// either the dirty ratio reaches `min_cleanable_dirty_ratio` or the oldest dirty record is
    /// older than `max_compaction_lag_ms`; or a tombstone's delete horizon (known since the
    /// last pass in this process) has passed.
    pub fn needs_compaction(&self, now_ms: i64, config: &CompactionConfig) -> bool {
        if self.closed {
            return false;
        }
        let horizon_due = self.earliest_tombstone_horizon.is_some_and(|t| t <= now_ms);
        let c = self.cleanable(Some(now_ms), config.min_compaction_lag_ms);
        if c.dirty_bytes == 0 {
            return horizon_due;
        }
        let first_dirty = self.first_dirty_offset();
        let overdue = config.max_compaction_lag_ms < i64::MAX
            && self.segments[..c.count]
                .iter()
                .find(|s| s.next_offset() > first_dirty)
                .is_some_and(|s| {
                    now_ms.saturating_sub(s.first_batch_timestamp_or_age())
                        > config.max_compaction_lag_ms
                });
        Self::ratio(&c) >= config.min_cleanable_dirty_ratio || overdue || horizon_due
    }

    /// Takes a snapshot of the cleanable segments for a pass at `now_ms` (cheap: handles and
    /// sizes). `None` if nothing is cleanable (only the active segment, or all above the HW).
    pub fn prepare_compaction(
        &self,
        now_ms: i64,
        config: &CompactionConfig,
    ) -> Result<Option<CompactionPlan>, LogError> {
        self.prepare_compaction_bounded(now_ms, config, DEFAULT_MAX_ENTRIES)
    }

    /// [`Self::prepare_compaction`] with a bound on the keys one pass maps (Kafka's dedupe
    /// buffer): a pass maps whole batches until the bound and cleans up to there.
    pub fn prepare_compaction_bounded(
        &self,
        now_ms: i64,
        config: &CompactionConfig,
        max_map_entries: usize,
    ) -> Result<Option<CompactionPlan>, LogError> {
        self.ensure_open()?;
        let c = self.cleanable(Some(now_ms), config.min_compaction_lag_ms);
        if c.count == 0 {
            return Ok(None);
        }
        let aborted = self.aborted_txns(0, c.end);
        let segments = self.segments[..c.count]
            .iter()
            .map(|s| SegmentRef {
                base: s.base_offset(),
                next_offset: s.next_offset(),
                size: s.size(),
                log: Arc::clone(s.log_file()),
            })
            .collect();
        Ok(Some(CompactionPlan {
            dir: self.dir.clone(),
            now_ms,
            config: *config,
            segment_bytes: self.config.effective_segment_bytes(),
            index_interval_bytes: self.config.index_interval_bytes,
            max_index_bytes: self.config.max_index_bytes,
            first_dirty: self.first_dirty_offset(),
            end: c.end,
            aborted: crate::txn::AbortedBatches::new(&aborted),
            aborted_txns: aborted,
            segments,
            max_map_entries,
        }))
    }

    /// Commits a pass: for each cleaned group, `.cleaned` -> `.swap` (the commit point), old
    /// segments to `.deleted`, `.swap` -> final, and the new segment replaces the old ones in
    /// memory; then the cleaner checkpoint advances. If the log changed under the pass (a
    /// replaced segment was truncated or deleted, or the log was closed) nothing is committed
    /// and the stats report no rewrite.
    pub fn finish_compaction(
        &mut self,
        mut outcome: CompactionOutcome,
    ) -> Result<CleanStats, LogError> {
        let mut stats = CleanStats {
            segments_rewritten: 0,
            records_removed: outcome.records_removed,
            bytes_before: outcome.bytes_before,
            bytes_after: outcome.bytes_after,
            clean_up_to: self.cleaner_checkpoint,
        };
        let still_valid = !self.closed
            && outcome.dir == self.dir
            && outcome
                .groups
                .iter()
                .all(|g| self.position_of(&g.members).is_some());
        if !still_valid {
            tracing::info!(dir = %self.dir.display(), "log changed during compaction; pass discarded");
            stats.records_removed = 0;
            stats.bytes_after = stats.bytes_before;
            return Ok(stats); // the outcome's Drop removes the .cleaned files
        }
        let groups = std::mem::take(&mut outcome.groups);
        for (k, g) in groups.iter().enumerate() {
            // Earlier groups only replaced their own members, so this cannot fail; if it did,
            // the rest is discarded rather than committed blind.
            let committed = match self.position_of(&g.members) {
                None => Err(LogError::Corrupt(
                    "segments moved during a compaction swap".into(),
                )),
                Some(i) => swap::commit(&self.dir, g.base)
                    .map_err(LogError::from)
                    .map(|()| i),
            };
            let result = committed.map_err(|e| (e, k)).and_then(|i| {
                self.install_group(i, g.members.len(), g)
                    .map_err(|e| (e, k + 1))
            });
            if let Err((e, first_uncommitted)) = result {
                for rest in &groups[first_uncommitted..] {
                    swap::discard_cleaned(&self.dir, rest.base);
                }
                return Err(e);
            }
            stats.segments_rewritten += 1;
        }
        self.cleaner_checkpoint = self
            .cleaner_checkpoint
            .max(outcome.clean_up_to)
            .min(self.log_end_offset());
        self.earliest_tombstone_horizon = outcome.min_tombstone_horizon;
        stats.clean_up_to = self.cleaner_checkpoint;
        Ok(stats)
    }

    /// One cleaning pass under the caller's lock: prepare, run, finish.
    pub fn compact(
        &mut self,
        now_ms: i64,
        config: &CompactionConfig,
    ) -> Result<CleanStats, LogError> {
        match self.prepare_compaction(now_ms, config)? {
            None => Ok(CleanStats {
                clean_up_to: self.cleaner_checkpoint,
                ..CleanStats::default()
            }),
            Some(plan) => {
                let outcome = plan.run()?;
                self.finish_compaction(outcome)
            }
        }
    }

    /// Index of the first of `members` in the live segment list if they are still there,
    /// consecutive, unchanged (same file, same size) and not the active segment.
    fn position_of(&self, members: &[SegmentRef]) -> Option<usize> {
        let first = members.first()?;
        let i = self
            .segments
            .iter()
            .position(|s| Arc::ptr_eq(s.log_file(), &first.log))?;
        let live = self.segments.get(i..i + members.len())?;
        let same = live
            .iter()
            .zip(members)
            .all(|(s, m)| Arc::ptr_eq(s.log_file(), &m.log) && s.size() == m.size);
        (same && i + members.len() < self.segments.len()).then_some(i)
    }

    /// After the commit: old segments `[i, i + n)` to `.deleted`, the `.swap` files installed,
    /// the new segment opened and put in their place. If a step fails the old segments stay in
    /// memory (their open handles still read the same bytes) and a restart completes the swap.
    /// The in-memory `.txnindex` entries of the replaced range become the group's.
    fn install_group(&mut self, i: usize, n: usize, g: &CleanedGroup) -> Result<(), LogError> {
        let (base, end) = (g.base, g.end);
        let mut deleted = Vec::new();
        for seg in &self.segments[i..i + n] {
            deleted.extend(seg.rename_to_deleted()?);
        }
        swap::install(&self.dir, base)?;
        sync_dir(&self.dir)?;
        let (mut seg, needs_rebuild) = Segment::open(&self.dir, base, self.config.max_index_bytes)?;
        if needs_rebuild {
            seg.recover(self.config.index_interval_bytes)?;
        }
        seg.set_next_offset(end);
        self.segments.splice(i..i + n, [seg]);
        self.aborted
            .retain(|t| t.last_offset < base || t.last_offset >= end);
        self.aborted.extend_from_slice(&g.txn_entries);
        self.aborted.sort_by_key(|t| t.last_offset);
        self.schedule_paths_delete(deleted);
        Ok(())
    }
}
