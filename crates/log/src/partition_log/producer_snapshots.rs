//! The partition's producer-state snapshot files (`crate::producer_snapshot`): the log owns
//! their lifetime because only it knows when its offsets move. A snapshot above the LEO would
//! describe batches that recovery or a follower truncation removed, and would be taken for the
//! truth once new batches reach its offset again, so every cut of the tail deletes them first.

use super::PartitionLog;
use crate::error::LogError;
use crate::producer_snapshot::{self, SnapshotEntry};

impl PartitionLog {
    /// Whether a segment was rolled since the last snapshot (Kafka snapshots at every roll, so
    /// a restart replays only the active segment).
    pub fn rolled_since_snapshot(&self) -> bool {
        self.rolled_since_snapshot
    }

    /// Writes the producer state `entries` as of the LEO (they must describe exactly the
    /// batches below it), fsynced when `sync` (clean shutdown); snapshots below the log start
    /// go. A failure is logged and leaves the older snapshots: the next open replays more.
    pub fn write_producer_snapshot(&mut self, entries: &[SnapshotEntry], sync: bool) {
        self.rolled_since_snapshot = false;
        if self.ensure_open().is_err() {
            return;
        }
        let offset = self.log_end_offset();
        let start = self.log_start_offset;
        let written = producer_snapshot::write(&self.dir, offset, entries, sync)
            .and_then(|()| producer_snapshot::remove_where(&self.dir, |o| o < start));
        match written {
            Ok(()) => {
                tracing::debug!(dir = %self.dir.display(), offset, producers = entries.len(), "wrote producer snapshot")
            }
            Err(e) => {
                tracing::warn!(dir = %self.dir.display(), offset, error = %e, "cannot write producer snapshot")
            }
        }
    }

    /// The newest readable snapshot between the log start and the recovery point, with its
    /// offset: the producer state of every batch below that offset. Not above the recovery
    /// point: after a crash the `.txnindex` entries of unflushed segments may be lost, and the
    /// broker's replay from the snapshot is what writes them again.
    pub fn latest_producer_snapshot(&self) -> Option<(i64, Vec<SnapshotEntry>)> {
        let to = self.log_end_offset().min(self.recovery_point);
        producer_snapshot::load_latest(&self.dir, self.log_start_offset, to)
    }

    /// Deletes the snapshots above `offset` (all of them for a negative one).
    pub(super) fn remove_snapshots_above(&self, offset: i64) -> Result<(), LogError> {
        producer_snapshot::remove_where(&self.dir, |o| o > offset)?;
        Ok(())
    }
}
