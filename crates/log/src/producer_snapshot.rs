//! Producer-state snapshots (`<offset>.snapshot`), in Kafka's `ProducerSnapshot` v1 layout, so
//! a restart loads the idempotent / transactional producer table as of `offset` and replays
//! only the batches after it instead of rescanning the log (Kafka's `ProducerStateManager`).
//!
//! Layout (big-endian, no tagged fields): `version: i16` (1), `crc: u32` (CRC-32C of every byte
//! after it), `count: i32`, then `count` entries of 46 bytes each: producer id `i64`, epoch
//! `i16`, last sequence `i32`, last offset `i64`, offset delta `i32`, timestamp `i64`,
//! coordinator epoch `i32`, current transaction's first offset `i64` (-1: none).
//!
//! A snapshot named `offset` describes exactly the batches below `offset`. The file is what the
//! disk hands back, so [`decode`] checks everything (version, CRC, lengths, field ranges) and
//! answers an error, never a panic or an allocation the file's size does not back; the caller
//! then falls back to an older snapshot or to replaying the log.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::checkpoint::sync_dir;

/// File name suffix, as Kafka's `LogFileUtils.PRODUCER_SNAPSHOT_FILE_SUFFIX`.
pub const SNAPSHOT_SUFFIX: &str = ".snapshot";
const VERSION: i16 = 1;
const HEADER_SIZE: usize = 2 + 4 + 4;
const ENTRY_SIZE: usize = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8;

/// One producer's state in a snapshot: its last batch (if it wrote one) and its open
/// transaction's first offset (if any).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotEntry {
    pub producer_id: i64,
    pub epoch: i16,
    /// Last sequence of its last batch (-1 when it only has markers).
    pub last_sequence: i32,
    /// Last offset of its last batch (-1 when it only has markers).
    pub last_offset: i64,
    /// `last_offset - first offset` of that batch (= its record count - 1).
    pub offset_delta: i32,
    /// Largest timestamp of its last batch or marker (expiry counts from it).
    pub timestamp: i64,
    pub coordinator_epoch: i32,
    /// First offset of its open transaction, -1 if none.
    pub current_txn_first_offset: i64,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SnapshotError {
    #[error("snapshot is truncated ({0} bytes)")]
    Truncated(usize),
    #[error("snapshot has unknown version {0}")]
    UnknownVersion(i16),
    #[error("snapshot is corrupt: stored crc {stored:#010x}, computed {computed:#010x}")]
    Crc { stored: u32, computed: u32 },
    #[error("snapshot claims {count} entries but holds {bytes} bytes of them")]
    Length { count: i32, bytes: usize },
    #[error("snapshot entry for producer {0} is out of range")]
    Entry(i64),
    #[error("{0} producers do not fit a snapshot")]
    TooMany(usize),
}

/// Serializes `entries` (any order; written as given).
pub fn encode(entries: &[SnapshotEntry]) -> Result<Vec<u8>, SnapshotError> {
    let count = i32::try_from(entries.len()).map_err(|_| SnapshotError::TooMany(entries.len()))?;
    let mut buf = Vec::with_capacity(HEADER_SIZE + entries.len() * ENTRY_SIZE);
    buf.extend_from_slice(&VERSION.to_be_bytes());
    buf.extend_from_slice(&[0; 4]);
    buf.extend_from_slice(&count.to_be_bytes());
    for e in entries {
        buf.extend_from_slice(&e.producer_id.to_be_bytes());
        buf.extend_from_slice(&e.epoch.to_be_bytes());
        buf.extend_from_slice(&e.last_sequence.to_be_bytes());
        buf.extend_from_slice(&e.last_offset.to_be_bytes());
        buf.extend_from_slice(&e.offset_delta.to_be_bytes());
        buf.extend_from_slice(&e.timestamp.to_be_bytes());
        buf.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
        buf.extend_from_slice(&e.current_txn_first_offset.to_be_bytes());
    }
    let crc = crc32c::crc32c(&buf[6..]);
    buf[2..6].copy_from_slice(&crc.to_be_bytes());
    Ok(buf)
}

/// Parses a snapshot file's bytes; every inconsistency is an error.
pub fn decode(bytes: &[u8]) -> Result<Vec<SnapshotEntry>, SnapshotError> {
    if bytes.len() < HEADER_SIZE {
        return Err(SnapshotError::Truncated(bytes.len()));
    }
    let mut r = Reader(bytes);
    let version = r.i16();
    if version != VERSION {
        return Err(SnapshotError::UnknownVersion(version));
    }
    let stored = r.u32();
    let computed = crc32c::crc32c(&bytes[6..]);
    if stored != computed {
        return Err(SnapshotError::Crc { stored, computed });
    }
    let count = r.i32();
    let body = bytes.len() - HEADER_SIZE;
    let fits = usize::try_from(count)
        .ok()
        .and_then(|c| c.checked_mul(ENTRY_SIZE))
        .is_some_and(|need| need == body);
    if !fits {
        return Err(SnapshotError::Length { count, bytes: body });
    }
    (0..count)
        .map(|_| {
            let e = SnapshotEntry {
                producer_id: r.i64(),
                epoch: r.i16(),
                last_sequence: r.i32(),
                last_offset: r.i64(),
                offset_delta: r.i32(),
                timestamp: r.i64(),
                coordinator_epoch: r.i32(),
                current_txn_first_offset: r.i64(),
            };
            entry_in_range(&e)
                .then_some(e)
                .ok_or(SnapshotError::Entry(e.producer_id))
        })
        .collect()
}

/// What the table rebuilt from an entry relies on: a real producer id, a batch whose first
/// offset and sequences are not negative, an open transaction at a real offset.
fn entry_in_range(e: &SnapshotEntry) -> bool {
    let batch_ok = if e.last_offset < 0 {
        e.last_offset == -1
    } else {
        e.offset_delta >= 0 && i64::from(e.offset_delta) <= e.last_offset && e.last_sequence >= 0
    };
    e.producer_id >= 0 && e.epoch >= 0 && batch_ok && e.current_txn_first_offset >= -1
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let (head, rest) = self.0.split_at(N);
        self.0 = rest;
        head.try_into().expect("split_at gave N bytes")
    }
    fn i16(&mut self) -> i16 {
        i16::from_be_bytes(self.take())
    }
    fn i32(&mut self) -> i32 {
        i32::from_be_bytes(self.take())
    }
    fn u32(&mut self) -> u32 {
        u32::from_be_bytes(self.take())
    }
    fn i64(&mut self) -> i64 {
        i64::from_be_bytes(self.take())
    }
}

pub fn snapshot_path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(format!("{offset:020}{SNAPSHOT_SUFFIX}"))
}

/// Offsets of the snapshot files in `dir`, ascending (other files are ignored).
pub fn list(dir: &Path) -> io::Result<Vec<i64>> {
    let mut offsets = Vec::new();
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(SNAPSHOT_SUFFIX)) else {
            continue;
        };
        if stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()) {
            if let Ok(offset) = stem.parse::<i64>() {
                offsets.push(offset);
            }
        }
    }
    offsets.sort_unstable();
    Ok(offsets)
}

/// Writes the snapshot for `offset` whole or not at all: a `.tmp` file (a leftover the log's
/// open removes), fsynced when `sync`, then renamed into place.
pub fn write(dir: &Path, offset: i64, entries: &[SnapshotEntry], sync: bool) -> io::Result<()> {
    let path = snapshot_path(dir, offset);
    let tmp = path.with_extension("snapshot.tmp");
    let mut file = fs::File::create(&tmp)?;
    let bytes = encode(entries).map_err(io::Error::other)?;
    file.write_all(&bytes)?;
    if sync {
        file.sync_all()?;
    }
    drop(file);
    fs::rename(&tmp, &path)?;
    if sync {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Deletes the snapshots whose offset `drop` selects.
pub fn remove_where(dir: &Path, drop: impl Fn(i64) -> bool) -> io::Result<()> {
    for offset in list(dir)? {
        if drop(offset) {
            match fs::remove_file(snapshot_path(dir, offset)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
    }
    Ok(())
}

/// The newest readable snapshot with an offset in `[from, to]`: a damaged one is logged,
/// deleted (best effort) and skipped, so an older one or the log replay takes over.
pub fn load_latest(dir: &Path, from: i64, to: i64) -> Option<(i64, Vec<SnapshotEntry>)> {
    let offsets = match list(dir) {
        Ok(offsets) => offsets,
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot list producer snapshots");
            return None;
        }
    };
    for offset in offsets
        .into_iter()
        .rev()
        .filter(|o| (from..=to).contains(o))
    {
        let path = snapshot_path(dir, offset);
        let read = fs::read(&path).map_err(|e| e.to_string());
        match read.and_then(|b| decode(&b).map_err(|e| e.to_string())) {
            Ok(entries) => return Some((offset, entries)),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "skipping unreadable producer snapshot");
                let _ = fs::remove_file(&path);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry(pid: i64) -> SnapshotEntry {
        SnapshotEntry {
            producer_id: pid,
            epoch: 3,
            last_sequence: 41,
            last_offset: 1_000,
            offset_delta: 9,
            timestamp: 1_700_000_000_000,
            coordinator_epoch: 2,
            current_txn_first_offset: 990,
        }
    }

    #[test]
    fn round_trips_in_kafkas_layout() {
        let entries = vec![entry(7), entry(8)];
        let bytes = encode(&entries).unwrap();
        assert_eq!(bytes.len(), HEADER_SIZE + 2 * ENTRY_SIZE);
        assert_eq!(&bytes[..2], &[0, 1], "version 1");
        assert_eq!(&bytes[6..10], &[0, 0, 0, 2], "entry count");
        assert_eq!(&bytes[10..18], &7i64.to_be_bytes(), "first producer id");
        assert_eq!(decode(&bytes), Ok(entries));
        assert_eq!(decode(&encode(&[]).unwrap()), Ok(vec![]));
    }

    #[test]
    fn every_damaged_byte_is_detected() {
        let bytes = encode(&[entry(7), entry(8)]).unwrap();
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(decode(&bad).is_err(), "flipped byte {i} went unnoticed");
        }
        for len in 0..bytes.len() {
            assert!(
                decode(&bytes[..len]).is_err(),
                "cut at {len} went unnoticed"
            );
        }
    }

    #[test]
    fn a_huge_count_is_refused_without_allocating() {
        let mut bytes = encode(&[]).unwrap();
        bytes[6..10].copy_from_slice(&i32::MAX.to_be_bytes());
        let crc = crc32c::crc32c(&bytes[6..]);
        bytes[2..6].copy_from_slice(&crc.to_be_bytes());
        assert!(matches!(decode(&bytes), Err(SnapshotError::Length { .. })));
    }

    #[test]
    fn an_entry_out_of_range_is_refused_even_with_a_good_crc() {
        let bad = SnapshotEntry {
            offset_delta: 2_000,
            ..entry(7)
        };
        assert_eq!(
            decode(&encode(&[bad]).unwrap()),
            Err(SnapshotError::Entry(7))
        );
    }

    #[test]
    fn files_are_listed_loaded_and_skipped_when_damaged() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), 10, &[entry(1)], true).unwrap();
        write(dir.path(), 20, &[entry(2)], false).unwrap();
        fs::write(dir.path().join("00000000000000000005.log"), b"").unwrap();
        assert_eq!(list(dir.path()).unwrap(), vec![10, 20]);
        assert_eq!(load_latest(dir.path(), 0, 30).unwrap().0, 20);
        assert_eq!(load_latest(dir.path(), 0, 15).unwrap().0, 10);
        assert!(load_latest(dir.path(), 11, 19).is_none());
        let newest = snapshot_path(dir.path(), 20);
        let mut bytes = fs::read(&newest).unwrap();
        bytes[12] ^= 1;
        fs::write(&newest, bytes).unwrap();
        let (offset, entries) = load_latest(dir.path(), 0, 30).unwrap();
        assert_eq!((offset, entries), (10, vec![entry(1)]));
        assert!(!newest.exists(), "the damaged snapshot is deleted");
        remove_where(dir.path(), |o| o >= 10).unwrap();
        assert!(list(dir.path()).unwrap().is_empty());
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&bytes);
        }
    }
}
