//! Moving a log to another directory in place (a replica move's swap, Kafka's
//! `UnifiedLog.renameDir` with reinitialisation): the log is reopened from a byte-for-byte,
//! fsynced copy, keeping what only lives in memory.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use super::{PartitionLog, RecoveryHint};
use crate::error::LogError;

impl PartitionLog {
    /// Replaces this log with the one in `dir`, a complete fsynced copy of this log's files
    /// (so it opens as after a clean shutdown: no recovery, recovery point = LEO), which
    /// shares `dir_failed` with its new log dir. The old log is abandoned: its open handles
    /// (a read or flush in flight) stay valid, nothing more is written through it.
    pub fn reopen_at(
        &mut self,
        dir: PathBuf,
        dir_failed: Arc<OnceLock<String>>,
    ) -> Result<(), LogError> {
        self.ensure_open()?;
        let hint = RecoveryHint {
            recovery_point: self.log_end_offset(),
            log_start_offset: self.log_start_offset,
            high_watermark: self.high_watermark,
            clean_shutdown: true,
        };
        let mut moved = PartitionLog::open(dir, self.config.clone(), hint)?;
        moved.cleaner_checkpoint = self.cleaner_checkpoint;
        moved.earliest_tombstone_horizon = self.earliest_tombstone_horizon;
        moved.first_unstable_offset = self.first_unstable_offset;
        moved.rolled_since_snapshot = self.rolled_since_snapshot;
        moved.share_dir_failure(dir_failed);
        if moved.log_end_offset() != self.log_end_offset() {
            return Err(LogError::Corrupt(format!(
                "the copy in {} ends at {}, the log at {}",
                moved.dir.display(),
                moved.log_end_offset(),
                self.log_end_offset()
            )));
        }
        let mut old = std::mem::replace(self, moved);
        old.abandon();
        Ok(())
    }
}
