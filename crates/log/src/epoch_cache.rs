//! The leader-epoch cache and its `leader-epoch-checkpoint` file (spec E.5).
//!
//! Ordered `(epoch, start offset)` pairs: the first offset written in each leader epoch. It
//! answers OffsetForLeaderEpoch and drives follower truncation, so it must survive restarts and
//! follow the log through truncation at either end.

use std::io;
use std::path::{Path, PathBuf};

use crate::checkpoint;

pub(crate) const EPOCH_FILE: &str = "leader-epoch-checkpoint";

#[derive(Debug)]
pub(crate) struct LeaderEpochCache {
    path: PathBuf,
    entries: Vec<(i32, i64)>,
}

impl LeaderEpochCache {
    /// Loads the checkpoint; a missing or unreadable file gives an empty cache (recovery replays
    /// epochs from the batches it scans).
    pub(crate) fn load(dir: &Path) -> Self {
        let path = dir.join(EPOCH_FILE);
        let entries = match checkpoint::read_pairs(&path) {
            Ok(Some(pairs)) => pairs,
            Ok(None) => Vec::new(),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "ignoring unreadable leader-epoch checkpoint");
                Vec::new()
            }
        };
        let mut cache = LeaderEpochCache {
            path,
            entries: Vec::new(),
        };
        for (epoch, start) in entries {
            cache.insert(epoch, start);
        }
        cache
    }

    pub(crate) fn entries(&self) -> &[(i32, i64)] {
        &self.entries
    }

    pub(crate) fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|&(e, _)| e)
    }

    /// Kafka's `assign` without persisting: entries conflicting with the new one (epoch >= it or
    /// start >= its start) are dropped so the cache stays strictly increasing in both fields.
    fn insert(&mut self, epoch: i32, start_offset: i64) -> bool {
        if epoch < 0 || start_offset < 0 {
            return false;
        }
        if let Some(&(e, s)) = self.entries.last() {
            if e == epoch && s <= start_offset {
                return false;
            }
        }
        self.entries.retain(|&(e, s)| e < epoch && s < start_offset);
        self.entries.push((epoch, start_offset));
        true
    }

    /// Records that `epoch` starts at `start_offset` (a leader's first append in it, or a
    /// replicated batch carrying a new epoch) and persists the file if anything changed.
    pub(crate) fn assign(&mut self, epoch: i32, start_offset: i64) -> io::Result<()> {
        if self.insert(epoch, start_offset) {
            self.persist()?;
        }
        Ok(())
    }

    /// Log truncated to `end_offset`: drop epochs that start at or after it.
    pub(crate) fn truncate_from_end(&mut self, end_offset: i64) -> io::Result<()> {
        let before = self.entries.len();
        self.entries.retain(|&(_, s)| s < end_offset);
        if self.entries.len() != before {
            self.persist()?;
        }
        Ok(())
    }

    /// Log start moved to `start_offset`: epochs entirely below it go, and the epoch that spans
    /// it now starts there (Kafka's `truncateFromStart`).
    pub(crate) fn truncate_from_start(&mut self, start_offset: i64) -> io::Result<()> {
        let below = self.entries.partition_point(|&(_, s)| s < start_offset);
        if below == 0 {
            return Ok(());
        }
        let (epoch, _) = self.entries[below - 1];
        let spans = self
            .entries
            .get(below)
            .is_none_or(|&(_, s)| s > start_offset);
        self.entries.drain(..below);
        if spans {
            self.entries.insert(0, (epoch, start_offset));
        }
        self.persist()
    }

    /// OffsetForLeaderEpoch (Kafka's `endOffsetFor`): the largest known epoch <= `requested` and
    /// the start offset of the next epoch (or the LEO for the latest). `(-1, -1)` if `requested`
    /// is undefined, newer than anything known, or the cache is empty. As in Kafka, an epoch
    /// older than every entry answers `(requested, first start offset)`.
    pub(crate) fn end_offset_for(&self, requested: i32, log_end_offset: i64) -> (i32, i64) {
        const UNDEFINED: (i32, i64) = (-1, -1);
        if requested < 0 {
            return UNDEFINED;
        }
        match self.entries.last() {
            None => UNDEFINED,
            Some(&(latest, _)) if latest == requested => (requested, log_end_offset),
            Some(_) => {
                let higher = self.entries.partition_point(|&(e, _)| e <= requested);
                match self.entries.get(higher) {
                    None => UNDEFINED,
                    Some(&(_, next_start)) => match higher.checked_sub(1) {
                        None => (requested, next_start),
                        Some(i) => (self.entries[i].0, next_start),
                    },
                }
            }
        }
    }

    fn persist(&self) -> io::Result<()> {
        checkpoint::write_pairs(&self.path, &self.entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(i32, i64)]) -> (tempfile::TempDir, LeaderEpochCache) {
        let dir = tempfile::tempdir().unwrap();
        let mut c = LeaderEpochCache::load(dir.path());
        for &(e, s) in entries {
            c.assign(e, s).unwrap();
        }
        (dir, c)
    }

    #[test]
    fn spec_example_e5() {
        // Leader {0->0, 1->100, 2->150}, LEO 200; the old leader has {0->0, 1->100}, LEO 170.
        let (_d, leader) = cache(&[(0, 0), (1, 100), (2, 150)]);
        assert_eq!(leader.end_offset_for(1, 200), (1, 150));
        assert_eq!(leader.end_offset_for(2, 200), (2, 200));
        assert_eq!(leader.end_offset_for(0, 200), (0, 100));
        assert_eq!(leader.end_offset_for(3, 200), (-1, -1));
        assert_eq!(leader.end_offset_for(-1, 200), (-1, -1));
        let (_d2, follower) = cache(&[(0, 0), (1, 100)]);
        let (_, leader_end) = leader.end_offset_for(follower.latest_epoch().unwrap(), 200);
        let (_, own_end) = follower.end_offset_for(1, 170);
        assert_eq!(leader_end.min(own_end), 150);
    }

    #[test]
    fn gaps_and_old_epochs() {
        let (_d, c) = cache(&[(2, 10), (5, 40)]);
        assert_eq!(c.end_offset_for(3, 90), (2, 40));
        assert_eq!(c.end_offset_for(1, 90), (1, 10));
        let (_d, empty) = cache(&[]);
        assert_eq!(empty.end_offset_for(0, 0), (-1, -1));
    }

    #[test]
    fn assign_is_monotonic_and_persists() {
        let (d, mut c) = cache(&[(0, 0), (1, 100), (2, 150)]);
        c.assign(2, 160).unwrap(); // same epoch, later offset: no change
        assert_eq!(c.entries(), &[(0, 0), (1, 100), (2, 150)]);
        c.assign(3, 120).unwrap(); // conflicts with (2, 150)
        assert_eq!(c.entries(), &[(0, 0), (1, 100), (3, 120)]);
        let reloaded = LeaderEpochCache::load(d.path());
        assert_eq!(reloaded.entries(), c.entries());
        let text = std::fs::read_to_string(d.path().join(EPOCH_FILE)).unwrap();
        assert_eq!(text, "0\n3\n0 0\n1 100\n3 120\n");
    }

    #[test]
    fn truncation_at_both_ends() {
        let (_d, mut c) = cache(&[(0, 0), (1, 100), (2, 150)]);
        c.truncate_from_end(150).unwrap();
        assert_eq!(c.entries(), &[(0, 0), (1, 100)]);
        c.truncate_from_start(120).unwrap();
        assert_eq!(c.entries(), &[(1, 120)]);
        let (_d, mut c) = cache(&[(0, 0), (1, 100)]);
        c.truncate_from_start(100).unwrap();
        assert_eq!(c.entries(), &[(1, 100)]);
    }
}
