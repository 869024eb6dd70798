//! The metadata log: where the controller's records are made durable before anyone applies them.
//!
//! The trait is the seam for the next step (an openraft-replicated log). `FileMetadataLog` is the
//! single-node implementation: one line per record, `<crc32c hex> <json>`, fsynced on every
//! append. A torn or corrupt tail (crash mid-write) is truncated on open; anything before it was
//! acknowledged only after its fsync, so nothing acknowledged is lost.

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use runnel_metadata::MetadataRecord;

/// A durable, ordered log of metadata records.
pub trait MetadataLog: Send {
    /// Appends the records durably; returns the offset of the first one.
    fn append(&mut self, records: &[MetadataRecord]) -> std::io::Result<i64>;
    /// Every committed record with its offset, in order.
    fn replay(&self) -> std::io::Result<Vec<(i64, MetadataRecord)>>;
    /// The offset the next record will get.
    fn next_offset(&self) -> i64;
}

/// Single-node metadata log in `<data-dir>/__cluster_metadata-0/metadata.log`.
pub struct FileMetadataLog {
    path: PathBuf,
    file: File,
    next_offset: i64,
}

impl FileMetadataLog {
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join("metadata.log");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .append(true)
            .open(&path)?;
        let (records, valid_len) = read_valid_prefix(&path)?;
        if valid_len < file.metadata()?.len() {
            tracing::warn!(
                path = %path.display(),
                valid_len,
                "truncating torn tail of the metadata log"
            );
            file.set_len(valid_len)?;
            file.sync_all()?;
        }
        Ok(FileMetadataLog {
            path,
            file,
            next_offset: records.len() as i64,
        })
    }
}

impl MetadataLog for FileMetadataLog {
    fn append(&mut self, records: &[MetadataRecord]) -> std::io::Result<i64> {
        let first = self.next_offset;
        let mut buf = Vec::new();
        for record in records {
            let json = serde_json::to_string(record).map_err(std::io::Error::other)?;
            let crc = crc32c::crc32c(json.as_bytes());
            buf.extend_from_slice(format!("{crc:08x} {json}\n").as_bytes());
        }
        self.file.seek(SeekFrom::End(0))?;
        self.file.write_all(&buf)?;
        self.file.sync_data()?;
        self.next_offset += records.len() as i64;
        Ok(first)
    }

    fn replay(&self) -> std::io::Result<Vec<(i64, MetadataRecord)>> {
        let (records, _) = read_valid_prefix(&self.path)?;
        Ok(records
            .into_iter()
            .enumerate()
            .map(|(i, r)| (i as i64, r))
            .collect())
    }

    fn next_offset(&self) -> i64 {
        self.next_offset
    }
}

/// Reads complete lines (ending in '\n') until the first one that fails its checksum.
fn read_valid_prefix(path: &Path) -> std::io::Result<(Vec<MetadataRecord>, u64)> {
    let bytes = std::fs::read(path)?;
    let mut records = Vec::new();
    let mut valid_len = 0usize;
    while let Some(end) = bytes[valid_len..].iter().position(|&b| b == b'\n') {
        let Some(record) = parse_line(&bytes[valid_len..valid_len + end]) else {
            break;
        };
        records.push(record);
        valid_len += end + 1;
    }
    Ok((records, valid_len as u64))
}

fn parse_line(line: &[u8]) -> Option<MetadataRecord> {
    let text = std::str::from_utf8(line).ok()?;
    let (crc_hex, json) = text.split_once(' ')?;
    let crc = u32::from_str_radix(crc_hex, 16).ok()?;
    if crc32c::crc32c(json.as_bytes()) != crc {
        return None;
    }
    serde_json::from_str(json).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn topic(name: &str) -> MetadataRecord {
        MetadataRecord::Topic {
            name: name.into(),
            topic_id: Uuid::new_v4(),
        }
    }

    #[test]
    fn appends_survive_reopen_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = FileMetadataLog::open(dir.path()).unwrap();
        assert_eq!(log.append(&[topic("a"), topic("b")]).unwrap(), 0);
        assert_eq!(log.append(&[topic("c")]).unwrap(), 2);
        drop(log);
        let log = FileMetadataLog::open(dir.path()).unwrap();
        let names: Vec<_> = log
            .replay()
            .unwrap()
            .into_iter()
            .map(|(o, r)| match r {
                MetadataRecord::Topic { name, .. } => (o, name),
                _ => panic!("unexpected record"),
            })
            .collect();
        assert_eq!(
            names,
            vec![(0, "a".into()), (1, "b".into()), (2, "c".into())]
        );
        assert_eq!(log.next_offset(), 3);
    }

    #[test]
    fn torn_and_corrupt_tails_are_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = FileMetadataLog::open(dir.path()).unwrap();
        log.append(&[topic("a"), topic("b")]).unwrap();
        drop(log);
        let path = dir.path().join("metadata.log");
        let mut bytes = std::fs::read(&path).unwrap();
        let full = bytes.len();
        bytes.extend_from_slice(b"0000beef {\"Topic\":");
        std::fs::write(&path, &bytes).unwrap();
        let mut log = FileMetadataLog::open(dir.path()).unwrap();
        assert_eq!(log.replay().unwrap().len(), 2);
        assert_eq!(std::fs::metadata(&path).unwrap().len() as usize, full);
        assert_eq!(log.append(&[topic("c")]).unwrap(), 2);
        drop(log);
        // Flip one byte inside the second record: it and everything after it go.
        let mut bytes = std::fs::read(&path).unwrap();
        let second = bytes.iter().position(|&b| b == b'\n').unwrap() + 15;
        bytes[second] ^= 0x01;
        std::fs::write(&path, &bytes).unwrap();
        let log = FileMetadataLog::open(dir.path()).unwrap();
        assert_eq!(log.replay().unwrap().len(), 1);
    }

    #[test]
    fn last_line_without_newline_is_torn() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = FileMetadataLog::open(dir.path()).unwrap();
        log.append(&[topic("a"), topic("b")]).unwrap();
        drop(log);
        let path = dir.path().join("metadata.log");
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        let log = FileMetadataLog::open(dir.path()).unwrap();
        assert_eq!(log.replay().unwrap().len(), 1);
    }
}
