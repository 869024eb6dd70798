//! The Raft log: one append-only segment file of checksummed entries, plus an in-memory copy.
//!
//! The metadata log is small (it is snapshotted every `snapshot_every` entries and purged before
//! the snapshot), so every live entry is also kept in memory and reads never touch the disk.
//! The file is the durable truth: `[len][crc32c][json]` records, each either an entry or a
//! `Purged` marker. Appends are fsynced before openraft is told they are flushed; a truncation
//! (conflicting suffix from a new leader) cuts the file; a purge rewrites the small remainder
//! into a new file that starts with the `Purged` marker, atomically. A torn tail (crash during
//! an append, which openraft never acknowledged) is cut off on open; a bad record followed by
//! valid ones refuses the open, and a failed append is rolled back (see `damage`).

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

use crate::storage::damage::{self, DamagedLog};
use crate::storage::vote::VoteStore;
use crate::storage::{frame_record, invalid_data, parse_record, write_atomic, HEADER_LEN};
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
    /// Test fault hook: the next write stops after this many bytes and fails.
    #[cfg(test)]
    fault: Option<usize>,
}

/// Why the Raft log cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Damaged(#[from] DamagedLog),
    #[error("cannot open the Raft log: {0}")]
    Io(#[from] io::Error),
}

/// What an operator can do about a damaged Raft log.
const REMEDY: &str = "If a majority of the other voters is healthy, move this node's \
    metadata-quorum directory away and restart it to re-replicate the log from the leader.";

/// The durable Raft log of one node; cheap to clone (the clone is openraft's log reader).
#[derive(Clone)]
pub struct LogStore {
    inner: Arc<Mutex<Inner>>,
}

impl LogStore {
    /// Opens (or creates) the log in `dir`, cutting off a torn tail. A corrupt record followed
    /// by valid ones is [`DamagedLog`] (see [`crate::storage::damage`]): the entries after it
    /// may have been acknowledged to the leader, so this voter must not forget them.
    pub fn open(dir: &Path) -> Result<LogStore, OpenError> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(LOG_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        let scanned = damage::scan(&bytes, parse_log_record, any_log_record)
            .map_err(|d| d.in_file(&path, "record", REMEDY))?;
        let mut entries = BTreeMap::new();
        let mut last_purged = None;
        for (pos, record) in scanned.records {
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
                    entries.insert(index, (pos, e));
                }
            }
        }
        let pos = scanned.valid_len;
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)?;
        if pos < file.metadata()?.len() {
            tracing::warn!(path = %path.display(), valid = pos, "cutting the torn tail of the Raft log");
            file.set_len(pos)?;
            file.sync_all()?;
        }
        crate::storage::sync_dir(dir)?;
        Ok(LogStore {
            inner: Arc::new(Mutex::new(Inner {
                dir: dir.to_path_buf(),
                file,
                entries,
                last_purged,
                end: pos,
                votes: VoteStore::new(dir.to_path_buf()),
                #[cfg(test)]
                fault: None,
            })),
        })
    }

    /// Checks the log in `dir` without changing anything: [`OpenError::Damaged`] where
    /// [`LogStore::open`] would refuse (a missing log is fine; a torn tail is left for `open`).
    /// The broker runs it before it opens any partition directory.
    pub fn verify(dir: &Path) -> Result<(), OpenError> {
        let path = dir.join(LOG_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        damage::scan(&bytes, parse_log_record, any_log_record)
            .map_err(|d| d.in_file(&path, "record", REMEDY))?;
        Ok(())
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

    /// Appends and fsyncs; memory is updated only once the bytes are durable. A failed write
    /// or fsync is rolled back (the file cut to its previous length and fsynced), so the file
    /// never holds a partial record that a later append would follow; if even the rollback
    /// fails the process stops ([`damage::fail_stop`]).
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
        if let Err(e) = inner.write_durably(end, &buf) {
            if let Err(rollback) = inner.file.set_len(end).and_then(|()| inner.file.sync_all()) {
                damage::fail_stop(
                    &format!(
                        "a failed Raft log append ({e}) could not be rolled back in {}",
                        inner.dir.join(LOG_FILE).display()
                    ),
                    &rollback,
                );
            }
            tracing::error!(error = %e, "Raft log append failed; rolled back");
            return Err(e);
        }
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

impl Inner {
    /// Writes `buf` at `pos` and fsyncs it.
    fn write_durably(&mut self, pos: u64, buf: &[u8]) -> io::Result<()> {
        use std::io::{Seek, SeekFrom};
        self.file.seek(SeekFrom::Start(pos))?;
        #[cfg(test)]
        if let Some(written) = self.fault.take() {
            // The test fault hook: a disk that fills up part-way through the write.
            self.file.write_all(&buf[..written.min(buf.len())])?;
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                "injected ENOSPC",
            ));
        }
        self.file.write_all(buf)?;
        self.file.sync_data()
    }
}

/// One record of the file at the start of `bytes`, with its framed length.
fn parse_log_record(bytes: &[u8]) -> Option<(LogRecord, usize)> {
    let (body, used) = parse_record(bytes)?;
    let record = serde_json::from_slice::<LogRecord>(body).ok()?;
    Some((record, used))
}

/// Whether a valid record starts at any byte of `bytes` (after a bad record, whose length
/// field cannot be trusted). Bodies are JSON objects, which rules out most offsets before the
/// checksum is computed.
pub(crate) fn any_log_record(bytes: &[u8]) -> bool {
    (0..bytes.len()).any(|i| {
        let rest = &bytes[i..];
        rest.get(HEADER_LEN) == Some(&b'{') && parse_log_record(rest).is_some()
    })
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
            // openraft stops its core on a storage error, which would leave this process
            // serving a frozen metadata image while it looks alive. The file was rolled back, so
            // stopping here (as Kafka halts on a metadata log fault) loses nothing: the next
            // start replays the log and rejoins the quorum.
            Err(e) => damage::fail_stop(
                &format!(
                    "a Raft log append failed and was rolled back in {}",
                    self.lock().dir.join(LOG_FILE).display()
                ),
                &e,
            ),
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

    /// A torn last record (crash during an append that was never acknowledged) is cut off.
    #[test]
    fn torn_tail_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let log = LogStore::open(dir.path()).unwrap();
        log.append_entries((1..=3).map(|i| entry(1, i)).collect())
            .unwrap();
        drop(log);
        let path = dir.path().join(LOG_FILE);
        let full = std::fs::read(&path).unwrap();
        std::fs::write(&path, &full[..full.len() - 3]).unwrap();
        let log = LogStore::open(dir.path()).unwrap();
        assert_eq!(indexes(&log), vec![(1, 1), (1, 2)]);
        log.append_entries(vec![entry(1, 3)]).unwrap();
        drop(log);
        assert_eq!(std::fs::read(&path).unwrap(), full);
        // A corrupt (not short) last record is a torn tail too.
        let mut bytes = full.clone();
        let last = bytes.len() - 5;
        bytes[last] ^= 0x01;
        std::fs::write(&path, &bytes).unwrap();
        let log = LogStore::open(dir.path()).unwrap();
        assert_eq!(indexes(&log), vec![(1, 1), (1, 2)]);
    }

    /// Caught (issue 9, item 5): a flipped bit in the middle of the log used to cut it there,
    /// so a voter silently forgot the entries after it, which it may have acknowledged. Now
    /// the open refuses, naming the file and the byte offset, and leaves the file as it was.
    #[test]
    fn corruption_followed_by_valid_records_refuses_to_open() {
        let dir = tempfile::tempdir().unwrap();
        let log = LogStore::open(dir.path()).unwrap();
        log.append_entries((1..=3).map(|i| entry(1, i)).collect())
            .unwrap();
        drop(log);
        let path = dir.path().join(LOG_FILE);
        let bytes = std::fs::read(&path).unwrap();
        let second = parse_record(&bytes).unwrap().1;
        for (at, what) in [(second + 12, "body"), (second + 1, "length")] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x01;
            std::fs::write(&path, &damaged).unwrap();
            let err = LogStore::open(dir.path()).err().expect(what).to_string();
            assert!(err.contains(&path.display().to_string()), "{what}: {err}");
            assert!(
                err.contains(&format!("byte offset {second} (record 2)")),
                "{what}: {err}"
            );
            assert_eq!(std::fs::read(&path).unwrap(), damaged, "{what}");
        }
    }

    /// Caught (issue 9, item 5): an append that failed part-way (ENOSPC) used to leave the
    /// partial record in the file, and the next successful append wrote valid entries after
    /// it. Now the file is rolled back to its previous length: later appends and a reopen see
    /// exactly the acknowledged entries.
    #[test]
    fn failed_append_is_rolled_back() {
        let dir = tempfile::tempdir().unwrap();
        let log = LogStore::open(dir.path()).unwrap();
        log.append_entries((1..=2).map(|i| entry(1, i)).collect())
            .unwrap();
        let path = dir.path().join(LOG_FILE);
        let before = std::fs::read(&path).unwrap();
        log.lock().fault = Some(20);
        let err = log.append_entries(vec![entry(1, 3)]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::StorageFull);
        assert_eq!(std::fs::read(&path).unwrap(), before);
        assert_eq!(indexes(&log), vec![(1, 1), (1, 2)]);
        log.append_entries(vec![entry(1, 3), entry(1, 4)]).unwrap();
        drop(log);
        let log = LogStore::open(dir.path()).unwrap();
        assert_eq!(indexes(&log), vec![(1, 1), (1, 2), (1, 3), (1, 4)]);
    }
}
