//! DeleteRecords and retention (spec J.6): only whole segments, oldest first, never past the
//! high watermark; deleted files go through a `.deleted` rename.

use std::time::{Duration, Instant};

use super::PartitionLog;
use crate::error::LogError;
use crate::segment::Segment;

impl PartitionLog {
    /// DeleteRecords: moves the log start offset to `offset` (it must be <= the HW, else
    /// `OffsetOutOfRange`) and deletes the segments entirely below it. Returns the new start.
    pub fn delete_records_before(&mut self, offset: i64) -> Result<i64, LogError> {
        self.ensure_open()?;
        if offset > self.high_watermark {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start: self.log_start_offset,
                log_end: self.high_watermark,
            });
        }
        if offset > self.log_start_offset {
            self.log_start_offset = offset;
            self.recovery_point = self.recovery_point.max(offset);
            self.epochs.truncate_from_start(offset)?;
            self.delete_log_start_breached()?;
        }
        Ok(self.log_start_offset)
    }

    /// Applies retention at `now_ms`: segments below the log start, then `retention.bytes`,
    /// then `retention.ms` (a segment's largest timestamp older than it). Also removes
    /// `.deleted` files older than `file_delete_delay_ms`. Returns the segments deleted.
    pub fn enforce_retention(&mut self, now_ms: i64) -> Result<usize, LogError> {
        self.ensure_open()?;
        self.remove_pending_deletes(false);
        let mut deleted = self.delete_log_start_breached()?;
        let retention_bytes = self.config.retention_bytes;
        if retention_bytes >= 0 && self.size_bytes() > retention_bytes as u64 {
            let mut excess = self.size_bytes() as i64 - retention_bytes;
            deleted += self.delete_oldest_while(|seg| {
                if excess - seg.size() as i64 >= 0 {
                    excess -= seg.size() as i64;
                    true
                } else {
                    false
                }
            })?;
        }
        let retention_ms = self.config.retention_ms;
        if retention_ms >= 0 {
            deleted += self.delete_oldest_while(|seg| {
                now_ms.saturating_sub(seg.largest_timestamp()) > retention_ms
            })?;
        }
        Ok(deleted)
    }

    fn delete_log_start_breached(&mut self) -> Result<usize, LogError> {
        let start = self.log_start_offset;
        // Only inactive segments: their data ends where the next segment begins.
        let n = self
            .segments
            .windows(2)
            .take_while(|w| w[1].base_offset() <= start)
            .count();
        self.delete_oldest(n)?;
        Ok(n)
    }

    /// Deletes the longest prefix of segments satisfying `pred`, stopping at the first segment
    /// that ends above the HW and at an empty active segment.
    fn delete_oldest_while(
        &mut self,
        mut pred: impl FnMut(&Segment) -> bool,
    ) -> Result<usize, LogError> {
        let leo = self.log_end_offset();
        let mut n = 0;
        for (i, seg) in self.segments.iter().enumerate() {
            let next = self.segments.get(i + 1);
            let upper = next.map_or(leo, Segment::base_offset);
            let last_and_empty = next.is_none() && seg.size() == 0;
            if self.high_watermark < upper || last_and_empty || !pred(seg) {
                break;
            }
            n += 1;
        }
        self.delete_oldest(n)?;
        Ok(n)
    }

    /// Deletes the `n` oldest segments (rolling first if that includes the active one) and
    /// moves the log start to the first remaining segment if it was below.
    fn delete_oldest(&mut self, n: usize) -> Result<(), LogError> {
        if n == 0 {
            return Ok(());
        }
        if n >= self.segments.len() {
            self.roll()?;
        }
        let removed: Vec<Segment> = self.segments.drain(..n).collect();
        for seg in &removed {
            self.schedule_delete(seg)?;
        }
        self.drop_deleted_txn_entries();
        let first_base = self.segments[0].base_offset();
        if first_base > self.log_start_offset {
            self.log_start_offset = first_base;
            self.high_watermark = self.high_watermark.max(first_base);
            self.recovery_point = self.recovery_point.max(first_base);
            self.epochs.truncate_from_start(first_base)?;
        }
        Ok(())
    }

    /// Renames a removed segment's files to `.deleted`; removes them now if the delay is 0.
    pub(super) fn schedule_delete(&mut self, seg: &Segment) -> Result<(), LogError> {
        let paths = seg.rename_to_deleted()?;
        self.schedule_paths_delete(paths);
        Ok(())
    }

    /// Removes already renamed `.deleted` files now, or after `file_delete_delay_ms`.
    pub(super) fn schedule_paths_delete(&mut self, paths: Vec<std::path::PathBuf>) {
        if self.config.file_delete_delay_ms == 0 {
            for p in paths {
                let _ = std::fs::remove_file(p);
            }
        } else {
            self.pending_deletes.push((Instant::now(), paths));
        }
    }

    /// Removes `.deleted` files whose delay has passed (all of them if `all`).
    pub(super) fn remove_pending_deletes(&mut self, all: bool) {
        let delay = Duration::from_millis(self.config.file_delete_delay_ms);
        self.pending_deletes.retain(|(since, paths)| {
            if all || since.elapsed() >= delay {
                for p in paths {
                    let _ = std::fs::remove_file(p);
                }
                false
            } else {
                true
            }
        });
    }
}
