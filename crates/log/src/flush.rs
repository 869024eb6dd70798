//! Group commit: what to fsync, captured under the log's lock and synced outside it.

use std::fs::File;
use std::io;
use std::sync::{Arc, OnceLock};

use crate::fault::{self, Fault};

/// The files holding unflushed data of one partition log, and the offset they cover.
///
/// Obtained from [`crate::PartitionLog::flush_target`] while holding the log's lock; `sync()` is
/// then called without the lock (appends continue meanwhile), and
/// [`crate::PartitionLog::mark_flushed`] with [`FlushTarget::up_to_offset`] afterwards. One fsync
/// thus covers every append made before the target was taken.
///
/// Fail-stop (fsyncgate): after a failed fsync the kernel may have dropped the dirty pages and
/// a second fsync of the same file can report success for data that never reached the disk.
/// So the first failure marks the log failed (shared with the log and every other target of
/// it), no file of that log is fsynced again, and `mark_flushed` no longer moves the recovery
/// point.
#[derive(Debug, Clone)]
pub struct FlushTarget {
    pub(crate) files: Vec<Arc<File>>,
    pub(crate) up_to_offset: i64,
    pub(crate) failed: Arc<OnceLock<String>>,
    /// The log directory's failure flag (see `PartitionLog::check_writable`).
    pub(crate) dir_failed: Arc<OnceLock<String>>,
}

impl FlushTarget {
    /// Fsyncs the files (data only: sizes are part of it, other metadata is not needed).
    /// Fails at once, touching no file, if the log has failed.
    pub fn sync(&self) -> io::Result<()> {
        for f in &self.files {
            if let Some(why) = self.failed.get() {
                return Err(io::Error::other(format!("log failed: {why}")));
            }
            if let Err(e) = fault::check(Fault::Sync).and_then(|()| f.sync_data()) {
                let _ = self.failed.set(format!("fsync failed: {e}"));
                let _ = self.dir_failed.set(format!("an fsync failed: {e}"));
                tracing::error!(error = %e, "fsync failed; the partition log is failed and never fsynced again");
                return Err(e);
            }
        }
        Ok(())
    }

    /// Everything below this offset is durable once `sync` returned.
    pub fn up_to_offset(&self) -> i64 {
        self.up_to_offset
    }

    /// True if there is nothing to sync.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}
