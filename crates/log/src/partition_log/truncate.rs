//! Follower truncation: removing the tail of the log.

use super::PartitionLog;
use crate::checkpoint::sync_dir;
use crate::error::LogError;
use crate::segment::Segment;

impl PartitionLog {
    /// Removes everything at and above `offset`. Whole batches only: if `offset` falls inside a
    /// batch, that batch goes too and the LEO becomes its base offset (offsets stay dense and
    /// the follower refetches from there). Below the first segment the log is emptied and
    /// restarts at `offset`. HW, recovery point and the epoch cache follow.
    /// An I/O error fails the log for good (the cut may be half done).
    pub fn truncate_to(&mut self, offset: i64) -> Result<(), LogError> {
        let truncated = self.truncate_to_unguarded(offset);
        self.fail_on_io_error(truncated)
    }

    fn truncate_to_unguarded(&mut self, offset: i64) -> Result<(), LogError> {
        self.ensure_open()?;
        // Before anything is cut: a snapshot of the removed tail must not outlive it.
        self.remove_snapshots_above(offset)?;
        if offset >= self.log_end_offset() {
            // No records to cut, but an epoch that starts here and holds nothing yet (a leader
            // deposed before its first append) must go: the leader's log does not have it.
            self.epochs.truncate_from_end(offset)?;
            return Ok(());
        }
        if offset < self.segments[0].base_offset() {
            let base = offset.max(0);
            let fresh = Segment::create(&self.dir, base, self.config.max_index_bytes)?;
            let removed: Vec<Segment> = std::mem::replace(&mut self.segments, vec![fresh]);
            for seg in &removed {
                self.schedule_delete(seg)?;
            }
            sync_dir(&self.dir)?;
            self.log_start_offset = base;
        } else {
            let keep = self.segment_index_for(offset) + 1;
            let removed: Vec<Segment> = self.segments.drain(keep..).collect();
            for seg in &removed {
                self.schedule_delete(seg)?;
            }
            let interval = self.config.index_interval_bytes;
            self.active_mut().truncate_to(offset, interval)?;
        }
        let leo = self.log_end_offset();
        self.remove_snapshots_above(leo)?;
        self.log_start_offset = self.log_start_offset.min(leo);
        self.high_watermark = self.high_watermark.clamp(self.log_start_offset, leo);
        self.recovery_point = self.recovery_point.min(leo);
        self.cleaner_checkpoint = self.cleaner_checkpoint.min(leo);
        self.epochs.truncate_from_end(leo)?;
        self.truncate_txn_index()
    }

    /// Empties the log and restarts it at `offset` (Kafka's `truncateFullyAndStartAt`): for a
    /// follower whose end is below the leader's log start (a new replica of a partition whose
    /// first segments retention already deleted, or one that was down for longer than the
    /// retention), so it can replicate from where the leader's log begins.
    /// Only moves forward: an `offset` at or below the LEO changes nothing (the follower can
    /// fetch from its own end then).
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), LogError> {
        let restarted = self.truncate_fully_unguarded(offset);
        self.fail_on_io_error(restarted)
    }

    fn truncate_fully_unguarded(&mut self, offset: i64) -> Result<(), LogError> {
        self.ensure_open()?;
        let base = offset.max(0);
        if base <= self.log_end_offset() {
            return Ok(());
        }
        self.remove_snapshots_above(-1)?;
        let fresh = Segment::create(&self.dir, base, self.config.max_index_bytes)?;
        let removed: Vec<Segment> = std::mem::replace(&mut self.segments, vec![fresh]);
        for seg in &removed {
            self.schedule_delete(seg)?;
        }
        sync_dir(&self.dir)?;
        self.log_start_offset = base;
        self.high_watermark = base;
        self.recovery_point = base;
        self.cleaner_checkpoint = base;
        self.epochs.truncate_from_end(0)?;
        self.aborted.clear();
        Ok(())
    }
}
