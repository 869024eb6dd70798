//! The `leader-epoch-checkpoint` file of a partition (spec E.5): the leader-epoch cache of
//! `runnel_replication` (its arithmetic: assign, truncation at either end, OffsetForLeaderEpoch)
//! kept on disk. Every change is persisted before the caller goes on, so the cache survives
//! restarts and follows the log through truncation at either end.

use std::io;
use std::path::{Path, PathBuf};

use runnel_replication::{EpochEntry, LeaderEpochCache};

use crate::checkpoint;

pub(crate) const EPOCH_FILE: &str = "leader-epoch-checkpoint";

#[derive(Debug)]
pub(crate) struct EpochFile {
    path: PathBuf,
    cache: LeaderEpochCache,
    /// The file was missing or unreadable at load: the cache must be rebuilt from the batches.
    lost: bool,
}

impl EpochFile {
    /// Loads the checkpoint; a missing or unreadable file gives an empty cache marked
    /// [`Self::lost`] (the log's open rebuilds it from every batch). Entries breaking
    /// monotonicity are dropped as Kafka's `assign` would.
    pub(crate) fn load(dir: &Path) -> Self {
        let path = dir.join(EPOCH_FILE);
        let (pairs, lost) = match checkpoint::read_pairs(&path) {
            Ok(Some(pairs)) => (pairs, false),
            Ok(None) => (Vec::new(), true),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "unreadable leader-epoch checkpoint, rebuilding it from the batches");
                (Vec::new(), true)
            }
        };
        let cache =
            LeaderEpochCache::from_entries(pairs.into_iter().map(|(epoch, start_offset)| {
                EpochEntry {
                    epoch,
                    start_offset,
                }
            }));
        EpochFile { path, cache, lost }
    }

    /// The highest log start offset this history allows. The log start only moves up through
    /// DeleteRecords and retention, and both move the first epoch's start with it (persisted
    /// before going on), so the log start checkpoint (written later, periodically) can never
    /// legitimately name an offset past the first epoch's start. A larger value is a damaged
    /// checkpoint, and taking it would hide, then delete (retention, and every follower
    /// following the leader's log start), acknowledged records. Kafka trusts the file; this
    /// bound costs nothing. No bound without an intact history.
    pub(crate) fn log_start_bound(&self) -> i64 {
        match self.cache.entries().first() {
            Some(first) if !self.lost => first.start_offset,
            _ => i64::MAX,
        }
    }

    /// The file was missing or unreadable when loaded and has not been rebuilt yet.
    pub(crate) fn lost(&self) -> bool {
        self.lost
    }

    /// Replaces the cache with the `(epoch, first offset)` changes of the batches, in log order
    /// (what [`Self::lost`] asks for), persisted once.
    pub(crate) fn rebuild(
        &mut self,
        starts: impl IntoIterator<Item = (i32, i64)>,
    ) -> io::Result<()> {
        let mut cache = LeaderEpochCache::new();
        for (epoch, start_offset) in starts {
            cache.assign(epoch, start_offset);
        }
        // A damaged file is replaced even when the history it held is empty.
        let rewrite = cache.entries() != self.cache.entries() || self.path.exists();
        self.cache = cache;
        self.lost = false;
        self.persist_if(rewrite)
    }

    pub(crate) fn cache(&self) -> &LeaderEpochCache {
        &self.cache
    }

    pub(crate) fn latest_epoch(&self) -> Option<i32> {
        self.cache.latest_epoch()
    }

    /// [`LeaderEpochCache::assign`], persisted if anything changed.
    pub(crate) fn assign(&mut self, epoch: i32, start_offset: i64) -> io::Result<()> {
        let changed = self.cache.assign(epoch, start_offset);
        self.persist_if(changed)
    }

    /// [`LeaderEpochCache::truncate_from_end`], persisted if anything changed.
    pub(crate) fn truncate_from_end(&mut self, end_offset: i64) -> io::Result<()> {
        let changed = self.cache.truncate_from_end(end_offset);
        self.persist_if(changed)
    }

    /// [`LeaderEpochCache::truncate_from_start`], persisted if anything changed.
    pub(crate) fn truncate_from_start(&mut self, start_offset: i64) -> io::Result<()> {
        let changed = self.cache.truncate_from_start(start_offset);
        self.persist_if(changed)
    }

    fn persist_if(&self, changed: bool) -> io::Result<()> {
        if !changed {
            return Ok(());
        }
        let pairs: Vec<(i32, i64)> = self
            .cache
            .entries()
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect();
        checkpoint::write_pairs(&self.path, &pairs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(entries: &[(i32, i64)]) -> (tempfile::TempDir, EpochFile) {
        let dir = tempfile::tempdir().unwrap();
        let mut f = EpochFile::load(dir.path());
        for &(e, s) in entries {
            f.assign(e, s).unwrap();
        }
        (dir, f)
    }

    fn pairs(f: &EpochFile) -> Vec<(i32, i64)> {
        f.cache()
            .entries()
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect()
    }

    #[test]
    fn changes_are_persisted_in_kafkas_format() {
        let (d, mut f) = file(&[(0, 0), (1, 100), (2, 150)]);
        f.assign(2, 160).unwrap(); // same epoch, later offset: no change
        f.assign(3, 120).unwrap(); // conflicts with (2, 150)
        assert_eq!(pairs(&f), [(0, 0), (1, 100), (3, 120)]);
        let text = std::fs::read_to_string(d.path().join(EPOCH_FILE)).unwrap();
        assert_eq!(text, "0\n3\n0 0\n1 100\n3 120\n");
        assert_eq!(pairs(&EpochFile::load(d.path())), pairs(&f));
    }

    #[test]
    fn truncation_at_both_ends_survives_a_reload() {
        let (d, mut f) = file(&[(0, 0), (1, 100), (2, 150)]);
        f.truncate_from_end(150).unwrap();
        f.truncate_from_start(120).unwrap();
        assert_eq!(pairs(&f), [(1, 120)]);
        assert_eq!(pairs(&EpochFile::load(d.path())), [(1, 120)]);
    }

    #[test]
    fn an_unchanged_cache_writes_no_file() {
        let (d, mut f) = file(&[]);
        f.truncate_from_end(10).unwrap();
        f.truncate_from_start(10).unwrap();
        f.assign(-1, 5).unwrap();
        assert!(!d.path().join(EPOCH_FILE).exists());
    }

    #[test]
    fn a_non_monotonic_checkpoint_loads_as_kafka_assigns_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(EPOCH_FILE), "0\n3\n0 0\n2 50\n1 80\n").unwrap();
        assert_eq!(pairs(&EpochFile::load(dir.path())), [(0, 0), (1, 80)]);
    }
}
