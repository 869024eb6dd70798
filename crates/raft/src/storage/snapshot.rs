//! The latest snapshot on disk: `snapshot.checkpoint` (KRaft's `<offset>-<epoch>.checkpoint`).
//!
//! A snapshot is the whole metadata image written as the records that rebuild it (see
//! `image_records.rs`), plus openraft's metadata (last included log id and membership). The file
//! is `[len][crc32c][meta json]` followed by `[len][crc32c][data]`, replaced atomically, so
//! there is always one complete snapshot or none. Only the newest is kept: openraft only ever
//! asks for the current one.

use std::io;
use std::path::PathBuf;
use std::sync::Mutex;

use crate::storage::{frame_record, invalid_data, parse_record, write_atomic};
use crate::types::SnapshotMeta;

const SNAPSHOT_FILE: &str = "snapshot.checkpoint";

/// A snapshot as stored: openraft's metadata and the encoded [`crate::image_records::SnapshotPayload`].
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSnapshot {
    pub meta: SnapshotMeta,
    pub data: Vec<u8>,
}

/// The snapshot file of one data directory, with the current snapshot cached in memory.
#[derive(Debug)]
pub struct SnapshotStore {
    dir: PathBuf,
    current: Mutex<Option<StoredSnapshot>>,
}

impl SnapshotStore {
    /// Opens the store, loading the current snapshot. A corrupt snapshot is an error: the log
    /// before it was purged, so pretending there is none would silently lose metadata.
    pub fn open(dir: PathBuf) -> io::Result<SnapshotStore> {
        let current = load(&dir)?;
        Ok(SnapshotStore {
            dir,
            current: Mutex::new(current),
        })
    }

    pub fn current(&self) -> Option<StoredSnapshot> {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Makes `snapshot` durable and current, unless a newer one already is.
    pub fn save(&self, snapshot: StoredSnapshot) -> io::Result<()> {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = current.as_ref() {
            if c.meta.last_log_id > snapshot.meta.last_log_id {
                return Ok(());
            }
        }
        let meta = serde_json::to_vec(&snapshot.meta).map_err(invalid_data)?;
        let mut buf = Vec::with_capacity(meta.len() + snapshot.data.len() + 16);
        frame_record(&meta, &mut buf)?;
        frame_record(&snapshot.data, &mut buf)?;
        write_atomic(&self.dir, SNAPSHOT_FILE, &buf, true)?;
        *current = Some(snapshot);
        Ok(())
    }
}

/// The two frames of a snapshot file (metadata, data), or `None` if either is torn or corrupt
/// or anything follows them.
pub(crate) fn split_snapshot_file(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let (meta, used) = parse_record(bytes)?;
    let (data, used2) = parse_record(&bytes[used..])?;
    (used + used2 == bytes.len()).then_some((meta, data))
}

fn load(dir: &std::path::Path) -> io::Result<Option<StoredSnapshot>> {
    let path = dir.join(SNAPSHOT_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let (meta, data) = split_snapshot_file(&bytes)
        .ok_or_else(|| invalid_data(format!("{} is corrupt", path.display())))?;
    let meta: SnapshotMeta = serde_json::from_slice(meta).map_err(invalid_data)?;
    Ok(Some(StoredSnapshot {
        meta,
        data: data.to_vec(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, LogId};

    fn snap(index: u64) -> StoredSnapshot {
        StoredSnapshot {
            meta: SnapshotMeta {
                last_log_id: Some(LogId::new(CommittedLeaderId::new(1, 1), index)),
                last_membership: Default::default(),
                snapshot_id: format!("s{index}"),
            },
            data: vec![index as u8; 10],
        }
    }

    #[test]
    fn newest_snapshot_survives_reopen_and_corruption_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let store = SnapshotStore::open(dir.path().to_path_buf()).unwrap();
        assert_eq!(store.current(), None);
        store.save(snap(5)).unwrap();
        store.save(snap(3)).unwrap(); // older: ignored
        let store = SnapshotStore::open(dir.path().to_path_buf()).unwrap();
        assert_eq!(store.current(), Some(snap(5)));
        let path = dir.path().join(SNAPSHOT_FILE);
        let mut b = std::fs::read(&path).unwrap();
        let last = b.len() - 1;
        b[last] ^= 1;
        std::fs::write(&path, b).unwrap();
        assert!(SnapshotStore::open(dir.path().to_path_buf()).is_err());
    }
}
