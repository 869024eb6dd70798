//! Group commit: what to fsync, captured under the log's lock and synced outside it.

use std::fs::File;
use std::io;
use std::sync::Arc;

/// The files holding unflushed data of one partition log, and the offset they cover.
///
/// Obtained from [`crate::PartitionLog::flush_target`] while holding the log's lock; `sync()` is
/// then called without the lock (appends continue meanwhile), and
/// [`crate::PartitionLog::mark_flushed`] with [`FlushTarget::up_to_offset`] afterwards. One fsync
/// thus covers every append made before the target was taken.
#[derive(Debug, Clone)]
pub struct FlushTarget {
    pub(crate) files: Vec<Arc<File>>,
    pub(crate) up_to_offset: i64,
}

impl FlushTarget {
    /// Fsyncs the files (data only: sizes are part of it, other metadata is not needed).
    pub fn sync(&self) -> io::Result<()> {
        for f in &self.files {
            f.sync_data()?;
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
