//! The aborted-transaction index (`{base:020}.txnindex`, spec J.8): one file per segment,
//! holding the aborted transactions whose ABORT marker lies in that segment, in Kafka's
//! 34-byte entry format ([`crate::txn::AbortedTxn::encode`]).
//!
//! All entries are also kept in memory (sorted by marker offset): a read_committed fetch asks
//! for the ones overlapping its range. The files are written on the marker's append and not
//! fsynced on their own: an entry lost with an unclean shutdown is re-added by the broker's
//! replay of the log tail (it offers every abort it finds; duplicates are ignored), and a torn
//! file is dropped on open for the same replay, then started at the log start, to rebuild.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use super::PartitionLog;
use crate::error::LogError;
use crate::segment::segment_path;
use crate::txn::{aborted_in_range, decode_txn_index, AbortedTxn};

pub(crate) const TXN_INDEX_SUFFIX: &str = "txnindex";

/// The entries of the segments based at `bases`, read from their files, and whether a torn or
/// foreign file was removed (the log replay from the log start rebuilds its entries:
/// [`PartitionLog::take_txn_index_loss`]).
pub(super) fn load(dir: &Path, bases: &[i64]) -> (Vec<AbortedTxn>, bool) {
    let mut entries = Vec::new();
    let mut lost = false;
    for &base in bases {
        let path = segment_path(dir, base, TXN_INDEX_SUFFIX);
        let Ok(bytes) = fs::read(&path) else { continue };
        match decode_txn_index(&bytes) {
            Some(found) => entries.extend(found),
            None => {
                tracing::warn!(path = %path.display(), "dropping a corrupt transaction index; it is rebuilt from the log");
                let _ = fs::remove_file(&path);
                lost = true;
            }
        }
    }
    entries.sort_by_key(|t| t.last_offset);
    (entries, lost)
}

fn append_entry(dir: &Path, base: i64, entry: &AbortedTxn) -> io::Result<()> {
    let mut file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(segment_path(dir, base, TXN_INDEX_SUFFIX))?;
    file.write_all(&entry.encode())
}

impl PartitionLog {
    /// Whether a corrupt `.txnindex` was dropped on open and not rebuilt yet (cleared by the
    /// call). The broker's producer-state replay then starts at the log start instead of the
    /// newest snapshot: the snapshot lies past the segment whose aborted transactions must be
    /// found again (Kafka recovers that segment, rebuilding its indexes).
    pub fn take_txn_index_loss(&mut self) -> bool {
        std::mem::take(&mut self.txn_index_lost)
    }

    /// The aborted transactions a read of `from..upper` overlaps (read_committed fetches).
    pub fn aborted_txns(&self, from: i64, upper: i64) -> Vec<AbortedTxn> {
        aborted_in_range(&self.aborted, from, upper)
    }

    /// Records an aborted transaction whose ABORT marker is at `entry.last_offset` (in this
    /// log) in its segment's index. An entry already known (same producer and marker) is
    /// ignored, so replaying the log is harmless.
    pub fn index_aborted_txn(&mut self, entry: AbortedTxn) -> Result<(), LogError> {
        let known = self
            .aborted
            .iter()
            .any(|t| t.producer_id == entry.producer_id && t.last_offset == entry.last_offset);
        if known || entry.last_offset < self.segments[0].base_offset() {
            return Ok(());
        }
        let base = self.segments[self.segment_index_for(entry.last_offset)].base_offset();
        append_entry(&self.dir, base, &entry)?;
        let at = self
            .aborted
            .partition_point(|t| t.last_offset <= entry.last_offset);
        self.aborted.insert(at, entry);
        Ok(())
    }

    /// After the log lost its tail (truncation): entries of removed markers go, and the index
    /// of the segment the log now ends in is rewritten without them. The files of removed
    /// segments went with those segments.
    pub(super) fn truncate_txn_index(&mut self) -> Result<(), LogError> {
        let leo = self.log_end_offset();
        if self.aborted.last().is_none_or(|t| t.last_offset < leo) {
            return Ok(());
        }
        self.aborted.retain(|t| t.last_offset < leo);
        let active = self.active().base_offset();
        let path = segment_path(&self.dir, active, TXN_INDEX_SUFFIX);
        let kept: Vec<u8> = self
            .aborted
            .iter()
            .filter(|t| t.last_offset >= active)
            .flat_map(|t| t.encode())
            .collect();
        fs::write(path, kept)?;
        Ok(())
    }

    /// After the oldest segments were deleted: their entries go with their files.
    pub(super) fn drop_deleted_txn_entries(&mut self) {
        let first_base = self.segments[0].base_offset();
        self.aborted.retain(|t| t.last_offset >= first_base);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LogConfig;
    use crate::partition_log::RecoveryHint;

    fn entry(pid: i64, first: i64, last: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id: pid,
            first_offset: first,
            last_offset: last,
            last_stable_offset: last + 1,
        }
    }

    #[test]
    fn entries_survive_a_reopen_and_a_torn_file_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        let mut log =
            PartitionLog::open(path.clone(), LogConfig::default(), RecoveryHint::new_log())
                .unwrap();
        let b = crate::control::marker_batch(
            &crate::control::Marker {
                producer_id: 1,
                producer_epoch: 0,
                commit: false,
                coordinator_epoch: 0,
            },
            0,
        );
        let h = crate::batch::BatchHeader::parse(&b).unwrap();
        log.append(&b, &[h], 0).unwrap();
        log.index_aborted_txn(entry(1, 0, 0)).unwrap();
        log.index_aborted_txn(entry(1, 0, 0)).unwrap();
        assert_eq!(log.aborted_txns(0, 1), vec![entry(1, 0, 0)]);
        log.close().unwrap();
        let file = segment_path(&path, 0, TXN_INDEX_SUFFIX);
        assert_eq!(fs::read(&file).unwrap().len(), 34);
        let log = PartitionLog::open(path.clone(), LogConfig::default(), RecoveryHint::new_log())
            .unwrap();
        assert_eq!(log.aborted_txns(0, 1), vec![entry(1, 0, 0)]);
        log.close().unwrap();
        let mut torn = fs::read(&file).unwrap();
        torn.truncate(20);
        fs::write(&file, torn).unwrap();
        let log = PartitionLog::open(path, LogConfig::default(), RecoveryHint::new_log()).unwrap();
        assert!(log.aborted_txns(0, 1).is_empty());
        assert!(!file.exists());
    }

    #[test]
    fn truncation_drops_the_entries_of_removed_markers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0");
        let mut log =
            PartitionLog::open(path.clone(), LogConfig::default(), RecoveryHint::new_log())
                .unwrap();
        for _ in 0..3 {
            let b = crate::control::marker_batch(
                &crate::control::Marker {
                    producer_id: 1,
                    producer_epoch: 0,
                    commit: false,
                    coordinator_epoch: 0,
                },
                0,
            );
            let h = crate::batch::BatchHeader::parse(&b).unwrap();
            log.append(&b, &[h], 0).unwrap();
        }
        for o in 0..3 {
            log.index_aborted_txn(entry(1, o, o)).unwrap();
        }
        log.truncate_to(1).unwrap();
        assert_eq!(log.aborted_txns(0, 10), vec![entry(1, 0, 0)]);
        log.close().unwrap();
        let log = PartitionLog::open(path, LogConfig::default(), RecoveryHint::new_log()).unwrap();
        assert_eq!(log.aborted_txns(0, 10), vec![entry(1, 0, 0)]);
    }
}
