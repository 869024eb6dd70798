//! Offline reading of a metadata-quorum directory for tools (`runnel dump-log
//! --cluster-metadata-decoder`): the frames of `raft.log` and the content of
//! `snapshot.checkpoint`, checked exactly as the node checks them (the same framing, checksum
//! and torn-tail rule), but with the metadata records left as JSON values. A record this build
//! cannot decode (a newer format version, a damaged body under a valid checksum) is then
//! reported alone instead of hiding the whole entry, as Kafka's tool prints "Error at
//! <offset>, skipping." for one record and goes on. [`place_frames`] finds the metadata log
//! offsets of the records (assigned when a batch is applied, not stored in the log).

mod offsets;

use serde::Deserialize;

pub use offsets::{place_frames, Placed};

use crate::storage::log::any_log_record;
use crate::storage::snapshot::split_snapshot_file;
use crate::storage::{parse_record, HEADER_LEN};
use crate::types::{LogId, SnapshotMeta};

/// One record of `raft.log` (the node's `LogRecord`), records undecoded.
#[derive(Debug, Deserialize)]
pub enum RawLogRecord {
    /// Everything up to and including this log id was purged (it is in the snapshot).
    Purged(LogId),
    Entry(RawEntry),
}

/// An openraft entry: its log id and payload.
#[derive(Debug, Deserialize)]
pub struct RawEntry {
    pub log_id: LogId,
    pub payload: RawPayload,
}

/// openraft's `EntryPayload`: a leader's blank entry, a batch of metadata records, or a
/// membership change (kept as its JSON).
#[derive(Debug, Deserialize)]
pub enum RawPayload {
    Blank,
    Normal(Vec<serde_json::Value>),
    Membership(serde_json::Value),
}

/// One checksummed frame of a file: where it starts, its framed size and stored crc32c.
#[derive(Debug)]
pub struct Frame<T> {
    pub position: u64,
    pub size: u64,
    pub crc: u32,
    pub body: T,
}

/// Where the valid frames of a file end, when they end before the file does.
#[derive(Debug, PartialEq, Eq)]
pub struct Invalid {
    /// Byte offset of the first frame that is torn, corrupt or undecodable.
    pub position: u64,
    /// Bytes from there to the end of the file.
    pub trailing: u64,
    /// Valid frames follow the bad one: the node refuses to open this log (damage, not a
    /// torn tail; see `storage::damage`).
    pub damaged: bool,
}

/// The frames of a `raft.log`, in file order, up to the first invalid one.
#[derive(Debug)]
pub struct LogDump {
    pub frames: Vec<Frame<RawLogRecord>>,
    pub invalid: Option<Invalid>,
}

/// Reads the frames of `raft.log`'s bytes.
pub fn read_log(bytes: &[u8]) -> LogDump {
    let mut frames = Vec::new();
    let mut pos = 0usize;
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        let parsed = parse_record(rest).and_then(|(body, used)| {
            let record = serde_json::from_slice::<RawLogRecord>(body).ok()?;
            Some((record, used))
        });
        let Some((record, used)) = parsed else {
            return LogDump {
                frames,
                invalid: Some(Invalid {
                    position: pos as u64,
                    trailing: (bytes.len() - pos) as u64,
                    damaged: any_log_record(&rest[1..]),
                }),
            };
        };
        frames.push(Frame {
            position: pos as u64,
            size: used as u64,
            crc: stored_crc(rest),
            body: record,
        });
        pos += used;
    }
    LogDump {
        frames,
        invalid: None,
    }
}

/// The crc32c in the header of the frame at the start of `frame` (already checked).
fn stored_crc(frame: &[u8]) -> u32 {
    match frame.get(4..HEADER_LEN) {
        Some(&[a, b, c, d]) => u32::from_be_bytes([a, b, c, d]),
        _ => 0,
    }
}

/// The content of a `snapshot.checkpoint`: openraft's metadata and the image as records.
#[derive(Debug)]
pub struct SnapshotDump {
    pub meta: SnapshotMeta,
    /// The offset of the last record the image includes (-1: none).
    pub last_offset: i64,
    pub records: Vec<serde_json::Value>,
    /// Framed size and crc32c of the metadata and of the data frame.
    pub frames: [(u64, u32); 2],
}

#[derive(Deserialize)]
struct RawPayloadData {
    last_offset: i64,
    records: Vec<serde_json::Value>,
}

/// Reads a snapshot file's bytes; the error says what is wrong, as the node would refuse it.
pub fn read_snapshot(bytes: &[u8]) -> Result<SnapshotDump, String> {
    let (meta, data) = split_snapshot_file(bytes)
        .ok_or("the snapshot is corrupt (checksum or length mismatch, or a torn write)")?;
    let meta_len = HEADER_LEN + meta.len();
    let frames = [
        (meta_len as u64, stored_crc(bytes)),
        (
            (HEADER_LEN + data.len()) as u64,
            stored_crc(&bytes[meta_len..]),
        ),
    ];
    let meta: SnapshotMeta = serde_json::from_slice(meta)
        .map_err(|e| format!("the snapshot's metadata cannot be read: {e}"))?;
    let data: RawPayloadData = serde_json::from_slice(data)
        .map_err(|e| format!("the snapshot's records cannot be read: {e}"))?;
    Ok(SnapshotDump {
        meta,
        last_offset: data.last_offset,
        records: data.records,
        frames,
    })
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, EntryPayload};
    use runnel_metadata::MetadataRecord;

    use super::*;
    use crate::image_records::SnapshotPayload;
    use crate::storage::log::LogStore;
    use crate::storage::snapshot::{SnapshotStore, StoredSnapshot};
    use crate::types::Entry;

    fn entry(index: u64, payload: EntryPayload<crate::TypeConfig>) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(3, 1), index),
            payload,
        }
    }

    /// The raw view reads exactly what `LogStore` writes, frame by frame.
    #[test]
    fn reads_what_the_log_store_writes() {
        let dir = tempfile::tempdir().unwrap();
        let log = LogStore::open(dir.path()).unwrap();
        log.append_entries(vec![
            entry(1, EntryPayload::Blank),
            entry(
                2,
                EntryPayload::Normal(vec![MetadataRecord::NoOp, MetadataRecord::NoOp]),
            ),
        ])
        .unwrap();
        log.purge_upto(LogId::new(CommittedLeaderId::new(3, 1), 1))
            .unwrap();
        drop(log);
        let bytes = std::fs::read(dir.path().join("raft.log")).unwrap();
        let dump = read_log(&bytes);
        assert_eq!(dump.invalid, None);
        assert_eq!(dump.frames.len(), 2);
        assert!(matches!(&dump.frames[0].body, RawLogRecord::Purged(id) if id.index == 1));
        match &dump.frames[1].body {
            RawLogRecord::Entry(RawEntry {
                log_id,
                payload: RawPayload::Normal(records),
            }) => {
                assert_eq!((log_id.index, log_id.leader_id.term), (2, 3));
                let back: MetadataRecord = serde_json::from_value(records[1].clone()).unwrap();
                assert_eq!(back, MetadataRecord::NoOp);
            }
            other => panic!("{other:?}"),
        }
        let end = dump.frames[1].position + dump.frames[1].size;
        assert_eq!(end, bytes.len() as u64);
        assert_eq!(
            dump.frames[1].crc,
            stored_crc(&bytes[dump.frames[0].size as usize..])
        );
    }

    /// A torn tail ends the frames; a bad frame with valid ones after it is damage.
    #[test]
    fn torn_tails_and_damage_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let log = LogStore::open(dir.path()).unwrap();
        log.append_entries((1..=3).map(|i| entry(i, EntryPayload::Blank)).collect())
            .unwrap();
        drop(log);
        let bytes = std::fs::read(dir.path().join("raft.log")).unwrap();
        let torn = read_log(&bytes[..bytes.len() - 2]);
        assert_eq!(torn.frames.len(), 2);
        let at = torn.frames[1].position + torn.frames[1].size;
        assert_eq!(
            torn.invalid,
            Some(Invalid {
                position: at,
                trailing: bytes.len() as u64 - 2 - at,
                damaged: false
            })
        );
        let mut flipped = bytes.clone();
        let second = torn.frames[1].position as usize;
        flipped[second + 12] ^= 1;
        let damaged = read_log(&flipped);
        assert_eq!(damaged.frames.len(), 1);
        assert!(damaged.invalid.unwrap().damaged);
        // Garbage alone never panics and yields no frame.
        for garbage in [&b""[..], b"\xff\xff\xff\xff", b"\0\0\0\x02\0\0\0\0{}"] {
            let d = read_log(garbage);
            assert!(d.frames.is_empty());
        }
    }

    #[test]
    fn reads_what_the_snapshot_store_writes() {
        let dir = tempfile::tempdir().unwrap();
        let store = SnapshotStore::open(dir.path().to_path_buf()).unwrap();
        let payload = SnapshotPayload {
            last_offset: 41,
            records: vec![MetadataRecord::NoOp],
        };
        store
            .save(StoredSnapshot {
                meta: SnapshotMeta {
                    last_log_id: Some(LogId::new(CommittedLeaderId::new(2, 1), 57)),
                    last_membership: Default::default(),
                    snapshot_id: "s".into(),
                },
                data: serde_json::to_vec(&payload).unwrap(),
            })
            .unwrap();
        let bytes = std::fs::read(dir.path().join("snapshot.checkpoint")).unwrap();
        let dump = read_snapshot(&bytes).unwrap();
        assert_eq!(dump.last_offset, 41);
        assert_eq!(dump.records.len(), 1);
        assert_eq!(dump.meta.last_log_id.map(|l| l.index), Some(57));
        assert_eq!(dump.frames[0].0 + dump.frames[1].0, bytes.len() as u64);
        assert!(read_snapshot(&bytes[..bytes.len() - 1]).is_err());
    }

    /// Writes `tests/data/dump-log/snapshot.checkpoint` (the fixture of `runnel dump-log
    /// --cluster-metadata-decoder`'s golden test): the image of the golden v1 Raft log, at its
    /// last entry, stored by `SnapshotStore` as a node stores its snapshots. Run by hand
    /// (`cargo test -p runnel-raft write_snapshot_fixture -- --ignored`); never needed again
    /// unless the fixture is deliberately replaced.
    #[test]
    #[ignore]
    fn write_snapshot_fixture() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data");
        let bytes = std::fs::read(root.join("golden-metadata/v1/raft/raft.log")).unwrap();
        let log = read_log(&bytes);
        assert_eq!(log.invalid, None);
        let mut image = runnel_metadata::MetadataImage::empty(String::new());
        let mut last = None;
        let mut membership = crate::types::StoredMembership::default();
        for frame in log.frames {
            let RawLogRecord::Entry(e) = frame.body else {
                continue;
            };
            last = Some(e.log_id);
            match e.payload {
                RawPayload::Normal(records) => {
                    let numbered: Vec<(i64, MetadataRecord)> = records
                        .into_iter()
                        .enumerate()
                        .map(|(i, r)| {
                            (
                                image.offset + 1 + i as i64,
                                serde_json::from_value(r).unwrap(),
                            )
                        })
                        .collect();
                    image = image.apply(&numbered).unwrap();
                }
                RawPayload::Membership(m) => {
                    membership = crate::types::StoredMembership::new(
                        Some(e.log_id),
                        serde_json::from_value(m).unwrap(),
                    );
                }
                RawPayload::Blank => {}
            }
        }
        let payload = SnapshotPayload {
            last_offset: image.offset,
            records: crate::image_records::image_to_records(&image),
        };
        let out = root.join("dump-log");
        std::fs::create_dir_all(&out).unwrap();
        let store = SnapshotStore::open(out.clone()).unwrap();
        store
            .save(StoredSnapshot {
                meta: SnapshotMeta {
                    last_log_id: last,
                    last_membership: membership,
                    snapshot_id: "golden-v1".into(),
                },
                data: serde_json::to_vec(&payload).unwrap(),
            })
            .unwrap();
    }
}
