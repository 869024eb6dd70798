//! The Raft log: one append-only segment file of checksummed entries, plus an in-memory copy.
//!
//! The metadata log is small (it is snapshotted every `snapshot_every` entries and purged before
//! the snapshot), so every live entry is also kept in memory and reads never touch the disk.
//! The file is the durable truth: `[len][crc32c][json]` records, each either an entry or a
//! `Purged` marker. Appends are fsynced before openraft is told they are flushed; a truncation
//! (conflicting suffix from a new leader) cuts the file; a purge rewrites the small remainder
//! into a new file that starts with the `Purged` marker, atomically. A torn tail (crash during
//! an append, which openraft never acknowledged) is cut off on open.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{LogState, OptionalSend, RaftLogReader, StorageIOError};
use serde::{Deserialize, Serialize};

use crate::storage::vote::VoteStore;
use crate::storage::{frame_record, invalid_data, parse_record, write_atomic};
use crate::types::{Entry, LogId, StorageError, TypeConfig, Vote};

const LOG_FILE: &str = "raft.log";

/// One record of the segment file.
#[derive(Serialize, Deserialize)]
enum LogRecord {
    /// Everything up to and including this log id was purged (it is in the snapshot).
    Purged(LogId),
    Entry(Entry),
}

struct Inner {
    dir: PathBuf,
    file: File,
    /// Live entries by index, with the file position where each one starts.
    entries: BTreeMap<u64, (u64, Entry)>,
    last_purged: Option<LogId>,
    /// Length of the valid part of the file.
    end: u64,
    votes: VoteStore,
}

/// The durable Raft log of one node; cheap to clone (the clone is openraft's log reader).
#[derive(Clone)]
pub struct LogStore {
    inner: Arc<Mutex<Inner>>,
}

impl LogStore {
    /// Opens (or creates) the log in `dir`, cutting off a torn tail.
    pub fn open(dir: &Path) -> io::Result<LogStore> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(LOG_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        let mut entries = BTreeMap::new();
        let mut last_purged = None;
        let mut pos = 0usize;
        while let Some((body, used)) = parse_record(&bytes[pos..]) {
            let Ok(record) = serde_json::from_slice::<LogRecord>(body) else {
                break;
            };
            match record {
                LogRecord::Purged(id) => {
                    entries.retain(|i, _| *i > id.index);
                    last_purged = Some(id);
                }
                LogRecord::Entry(e) => {
                    // An entry at an index we already hold means a truncation was not
                    // completed in the file; the later record wins, like in the live log.
                    let index = e.log_id.index;
                    entries.retain(|i, _| *i < index);
                    entries.insert(index, (pos as u64, e));
                }
            }
            pos += used;
        }
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)?;
        if (pos as u64) < file.metadata()?.len() {
            tracing::warn!(path = %path.display(), valid = pos, "cutting the torn tail of the Raft log");
            file.set_len(pos as u64)?;
            file.sync_all()?;
        }
        crate::storage::sync_dir(dir)?;
        Ok(LogStore {
            inner: Arc::new(Mutex::new(Inner {
                dir: dir.to_path_buf(),
                file,
                entries,
                last_purged,
                end: pos as u64,
                votes: VoteStore::new(dir.to_path_buf()),
            })),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the in-memory copy ahead of the file
        // (memory is updated after the write), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The last log id and the last purged one.
    pub fn state(&self) -> LogState<TypeConfig> {
        let inner = self.lock();
        let last = inner.entries.values().next_back().map(|(_, e)| e.log_id);
        LogState {
            last_purged_log_id: inner.last_purged,
            last_log_id: last.or(inner.last_purged),
        }
    }

    /// Copies of the live entries in `range`.
    pub fn entries<RB: RangeBounds<u64>>(&self, range: RB) -> Vec<Entry> {
        self.lock()
            .entries
            .range(range)
            .map(|(_, (_, e))| e.clone())
            .collect()
    }

    /// Appends and fsyncs; memory is updated only once the bytes are durable.
    pub fn append_entries(&self, entries: Vec<Entry>) -> io::Result<()> {
        let mut inner = self.lock();
        let mut buf = Vec::new();
        let mut positions = Vec::with_capacity(entries.len());
        for e in &entries {
            positions.push(inner.end + buf.len() as u64);
            let body = serde_json::to_vec(&LogRecord::Entry(e.clone())).map_err(invalid_data)?;
            frame_record(&body, &mut buf)?;
        }
        let end = inner.end;
        write_at(&mut inner.file, end, &buf)?;
        inner.file.sync_data()?;
        inner.end += buf.len() as u64;
        for (pos, e) in positions.into_iter().zip(entries) {
            inner.entries.insert(e.log_id.index, (pos, e));
        }
        Ok(())
    }

    /// Deletes the entries from `log_id.index` on (a new leader's log conflicts with them).
    pub fn truncate_from(&self, index: u64) -> io::Result<()> {
        let mut inner = self.lock();
        let Some((pos, _)) = inner.entries.get(&index).map(|(p, e)| (*p, e.log_id)) else {
            return Ok(());
        };
        inner.file.set_len(pos)?;
        inner.file.sync_data()?;
        inner.end = pos;
        inner.entries.retain(|i, _| *i < index);
        Ok(())
    }

    /// Deletes the entries up to and including `log_id` (they are covered by a snapshot) by
    /// rewriting the remainder into a fresh file.
    pub fn purge_upto(&self, log_id: LogId) -> io::Result<()> {
        let mut inner = self.lock();
        if inner.last_purged.is_some_and(|p| p.index >= log_id.index) {
            return Ok(());
        }
        let mut buf = Vec::new();
        let body = serde_json::to_vec(&LogRecord::Purged(log_id)).map_err(invalid_data)?;
        frame_record(&body, &mut buf)?;
        let mut kept = BTreeMap::new();
        for (i, (_, e)) in inner.entries.range(log_id.index + 1..) {
            let pos = buf.len() as u64;
            let body = serde_json::to_vec(&LogRecord::Entry(e.clone())).map_err(invalid_data)?;
            frame_record(&body, &mut buf)?;
            kept.insert(*i, (pos, e.clone()));
        }
        let dir = inner.dir.clone();
        write_atomic(&dir, LOG_FILE, &buf, true)?;
        inner.file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(dir.join(LOG_FILE))?;
        inner.end = buf.len() as u64;
        inner.entries = kept;
        inner.last_purged = Some(log_id);
        Ok(())
    }

    pub fn save_vote(&self, vote: &Vote) -> io::Result<()> {
        self.lock().votes.save_vote(vote)
    }

    pub fn read_vote(&self) -> io::Result<Option<Vote>> {
        self.lock().votes.read_vote()
    }
}

fn write_at(file: &mut File, pos: u64, buf: &[u8]) -> io::Result<()> {
    use std::io::{Seek, SeekFrom};
    file.seek(SeekFrom::Start(pos))?;
    file.write_all(buf)
}

fn io_err(e: io::Error) -> StorageError {
    StorageIOError::write_logs(&e).into()
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        Ok(self.entries(range))
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        Ok(self.state())
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        LogStore::save_vote(self, vote).map_err(|e| StorageIOError::write_vote(&e).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        LogStore::read_vote(self).map_err(|e| StorageIOError::read_vote(&e).into())
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        // Only a hint (see `vote.rs`): failing to write it must not stop the node.
        if let Err(e) = self.lock().votes.save_committed(committed.as_ref()) {
            tracing::warn!(error = %e, "could not save the committed hint");
        }
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        let inner = self.lock();
        let hint = inner.votes.read_committed();
        // Never claim more than the log holds (e.g. a hint newer than a cut torn tail).
        let last = inner
            .entries
            .values()
            .next_back()
            .map(|(_, e)| e.log_id)
            .or(inner.last_purged);
        Ok(match (hint, last) {
            (Some(h), Some(l)) if h.index <= l.index => Some(h),
            _ => None,
        })
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        match self.append_entries(entries) {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                callback.log_io_completed(Err(io::Error::new(e.kind(), e.to_string())));
                Err(io_err(e))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.truncate_from(log_id.index).map_err(io_err)
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.purge_upto(log_id).map_err(io_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, EntryPayload};
    use runnel_metadata::MetadataRecord;

    fn entry(term: u64, index: u64) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
            payload: EntryPayload::Normal(vec![MetadataRecord::NoOp]),
        }
    }

    fn indexes(log: &LogStore) -> Vec<(u64, u64)> {
        log.entries(..)
            .iter()
            .map(|e| (e.log_id.leader_id.term, e.log_id.index))
            .collect()
    }

    #[test]
    fn append_truncate_purge_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let log = LogStore::open(dir.path()).unwrap();
        log.append_entries((1..=5).map(|i| entry(1, i)).collect())
            .unwrap();
        log.truncate_from(4).unwrap();
        log.append_entries(vec![entry(2, 4)]).unwrap();
        drop(log);
        let log = LogStore::open(dir.path()).unwrap();
        assert_eq!(indexes(&log), vec![(1, 1), (1, 2), (1, 3), (2, 4)]);
        log.purge_upto(LogId::new(CommittedLeaderId::new(1, 1), 2))
            .unwrap();
        log.append_entries(vec![entry(2, 5)]).unwrap();
        drop(log);
        let log = LogStore::open(dir.path()).unwrap();
        assert_eq!(indexes(&log), vec![(1, 3), (2, 4), (2, 5)]);
        let state = log.state();
        assert_eq!(state.last_purged_log_id.map(|l| l.index), Some(2));
        assert_eq!(state.last_log_id.map(|l| l.index), Some(5));
        // Purging everything leaves the purged id as the last log id.
        log.purge_upto(LogId::new(CommittedLeaderId::new(2, 1), 5))
            .unwrap();
        drop(log);
        let log = LogStore::open(dir.path()).unwrap();
        assert!(log.entries(..).is_empty());
        assert_eq!(log.state().last_log_id.map(|l| l.index), Some(5));
    }

    #[test]
    fn torn_and_corrupt_tails_are_cut() {
        let dir = tempfile::tempdir().unwrap();
        let log = LogStore::open(dir.path()).unwrap();
        log.append_entries((1..=3).map(|i| entry(1, i)).collect())
            .unwrap();
        drop(log);
        let path = dir.path().join(LOG_FILE);
        let full = std::fs::read(&path).unwrap();
        // A torn last record.
        std::fs::write(&path, &full[..full.len() - 3]).unwrap();
        let log = LogStore::open(dir.path()).unwrap();
        assert_eq!(indexes(&log), vec![(1, 1), (1, 2)]);
        log.append_entries(vec![entry(1, 3)]).unwrap();
        drop(log);
        assert_eq!(std::fs::read(&path).unwrap(), full);
        // A flipped bit in the second record drops it and everything after it.
        let mut bytes = full.clone();
        let second = parse_record(&bytes).unwrap().1 + 12;
        bytes[second] ^= 0x01;
        std::fs::write(&path, &bytes).unwrap();
        let log = LogStore::open(dir.path()).unwrap();
        assert_eq!(indexes(&log), vec![(1, 1)]);
    }
}
