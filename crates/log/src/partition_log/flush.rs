//! Group commit (flush targets), flush and close.

use super::PartitionLog;
use crate::error::LogError;
use crate::flush::FlushTarget;
use std::sync::Arc;

impl PartitionLog {
    /// What to fsync for everything appended so far, to be synced WITHOUT holding the log's
    /// lock; then call [`Self::mark_flushed`] with `target.up_to_offset()`. Holds the `.log`
    /// files of segments with unflushed offsets, and the index files still open (active
    /// segment and recently rolled ones).
    pub fn flush_target(&self) -> FlushTarget {
        let leo = self.log_end_offset();
        let mut files = Vec::new();
        let last = self.segments.len() - 1;
        for (i, seg) in self.segments.iter().enumerate() {
            if leo > self.recovery_point && (seg.next_offset() > self.recovery_point || i == last) {
                files.push(seg.log_file().clone());
            }
            if let Some(ix) = seg.index_files() {
                if leo > self.recovery_point || i != last {
                    files.push(ix.offset.clone());
                    files.push(ix.time.clone());
                }
            }
        }
        FlushTarget {
            files,
            up_to_offset: leo,
            failed: Arc::clone(&self.failed),
            dir_failed: Arc::clone(&self.dir_failed),
        }
    }

    /// Records that everything below `up_to_offset` is durable (after `FlushTarget::sync`).
    /// Index files of inactive segments that end strictly below it are no longer held open.
    /// Does nothing once the log has failed: the recovery point never passes unsynced data.
    pub fn mark_flushed(&mut self, up_to_offset: i64) {
        if self.failed.get().is_some() {
            return;
        }
        let leo = self.log_end_offset();
        self.recovery_point = self.recovery_point.max(up_to_offset.min(leo));
        let last = self.segments.len() - 1;
        for seg in &mut self.segments[..last] {
            if seg.next_offset() < up_to_offset {
                seg.release_index_files();
            }
        }
    }

    /// Fsyncs everything appended so far (convenience: target, sync, mark).
    pub fn flush(&mut self) -> Result<(), LogError> {
        self.ensure_not_failed()?;
        let target = self.flush_target();
        target.sync().map_err(|e| match self.failed.get() {
            Some(why) => LogError::Failed(why.clone()),
            None => LogError::Io(e),
        })?;
        self.mark_flushed(target.up_to_offset());
        Ok(())
    }

    /// Messages appended since the last flush (offsets are dense, so LEO - recovery point).
    pub fn unflushed_messages(&self) -> u64 {
        (self.log_end_offset() - self.recovery_point).max(0) as u64
    }

    /// Flushes, writes the final time-index entry of the active segment and removes pending
    /// `.deleted` files. Consumes the log.
    pub fn close(mut self) -> Result<(), LogError> {
        self.close_in_place()
    }

    /// [`Self::close`] for a log behind a shared lock: later writes fail with `Closed`.
    pub fn close_in_place(&mut self) -> Result<(), LogError> {
        if self.closed {
            return Ok(());
        }
        self.active_mut().finalize()?;
        self.flush()?;
        self.remove_pending_deletes(true);
        self.closed = true;
        Ok(())
    }

    /// Marks the log closed without flushing (its directory is being deleted).
    pub(crate) fn abandon(&mut self) {
        self.closed = true;
    }
}
