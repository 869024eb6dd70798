//! The metadata log: where the controller's records are made durable before anyone applies them.
//!
//! The trait is the seam between the controller and its storage (this file log on a single
//! node, the Raft quorum in a cluster). `FileMetadataLog` is the single-node implementation:
//! one line per appended batch, `<crc32c hex> <json array of records>`, fsynced on every append
//! (files written before batches were one line per record, `<crc32c hex> <json record>`; both
//! are read). A batch is one checksummed line, so a crash mid-append loses the whole batch,
//! never half of it.
//!
//! Damage follows the rule of `runnel_raft::storage::damage`: only a torn *tail* (an incomplete
//! or corrupt last line with nothing valid after it, an append that was never acknowledged) is
//! truncated on open; a bad line followed by valid ones refuses the open with the file, byte
//! offset and line. A failed append is rolled back to the previous length (fsynced), or the
//! process stops if even that fails, so the file never holds a partial line followed by good
//! ones.

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use runnel_metadata::MetadataRecord;
use runnel_raft::storage::damage::{self, DamagedLog};
use serde::Deserialize;

/// A durable, ordered log of metadata records.
pub trait MetadataLog: Send {
    /// Appends the records durably; returns the offset of the first one.
    fn append(&mut self, records: &[MetadataRecord]) -> std::io::Result<i64>;
    /// Every committed record with its offset, in order.
    fn replay(&self) -> std::io::Result<Vec<(i64, MetadataRecord)>>;
    /// The offset the next record will get.
    fn next_offset(&self) -> i64;
}

/// Why the metadata log cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum MetadataLogError {
    #[error(transparent)]
    Damaged(#[from] DamagedLog),
    #[error("cannot open the metadata log: {0}")]
    Io(#[from] std::io::Error),
}

/// What an operator can do about a damaged single-node metadata log.
const REMEDY: &str = "Restore metadata.log from a backup, or repair the damaged line by hand; \
    nothing was truncated and no partition directory was touched.";

/// Single-node metadata log in `<data-dir>/metadata/metadata.log`.
pub struct FileMetadataLog {
    path: PathBuf,
    file: File,
    /// The file's length: every byte of it belongs to a valid line.
    len: u64,
    next_offset: i64,
    /// Test fault hook: the next write stops after this many bytes and fails.
    #[cfg(test)]
    fault: Option<usize>,
}

impl FileMetadataLog {
    pub fn open(dir: &Path) -> Result<Self, MetadataLogError> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join("metadata.log");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .append(true)
            .open(&path)?;
        let bytes = std::fs::read(&path)?;
        let scanned = scan(&bytes).map_err(|d| d.in_file(&path, "line", REMEDY))?;
        if scanned.valid_len < bytes.len() as u64 {
            tracing::warn!(
                path = %path.display(),
                valid_len = scanned.valid_len,
                "truncating the torn tail of the metadata log"
            );
            file.set_len(scanned.valid_len)?;
            file.sync_all()?;
        }
        let records: usize = scanned.records.iter().map(|(_, r)| r.len()).sum();
        Ok(FileMetadataLog {
            path,
            file,
            len: scanned.valid_len,
            next_offset: i64::try_from(records).unwrap_or(i64::MAX),
            #[cfg(test)]
            fault: None,
        })
    }

    /// Appends `line` at the end and fsyncs it.
    fn write_durably(&mut self, line: &[u8]) -> std::io::Result<()> {
        self.file.seek(SeekFrom::End(0))?;
        #[cfg(test)]
        if let Some(written) = self.fault.take() {
            // The test fault hook: a disk that fills up part-way through the write.
            self.file.write_all(&line[..written.min(line.len())])?;
            return Err(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                "injected ENOSPC",
            ));
        }
        self.file.write_all(line)?;
        self.file.sync_data()
    }
}

impl MetadataLog for FileMetadataLog {
    fn append(&mut self, records: &[MetadataRecord]) -> std::io::Result<i64> {
        let first = self.next_offset;
        if records.is_empty() {
            return Ok(first);
        }
        let json = serde_json::to_string(records).map_err(std::io::Error::other)?;
        let crc = crc32c::crc32c(json.as_bytes());
        let line = format!("{crc:08x} {json}\n");
        if let Err(e) = self.write_durably(line.as_bytes()) {
            let len = self.len;
            if let Err(rollback) = self.file.set_len(len).and_then(|()| self.file.sync_all()) {
                damage::fail_stop(
                    &format!(
                        "a failed metadata log append ({e}) could not be rolled back in {}",
                        self.path.display()
                    ),
                    &rollback,
                );
            }
            tracing::error!(path = %self.path.display(), error = %e, "metadata log append failed; rolled back");
            return Err(e);
        }
        self.len += line.len() as u64;
        self.next_offset += records.len() as i64;
        Ok(first)
    }

    fn replay(&self) -> std::io::Result<Vec<(i64, MetadataRecord)>> {
        let bytes = std::fs::read(&self.path)?;
        let scanned = scan(&bytes)
            .map_err(|d| std::io::Error::other(d.in_file(&self.path, "line", REMEDY)))?;
        Ok(scanned
            .records
            .into_iter()
            .flat_map(|(_, batch)| batch)
            .enumerate()
            .map(|(i, r)| (i as i64, r))
            .collect())
    }

    fn next_offset(&self) -> i64 {
        self.next_offset
    }
}

/// One line's content: a batch (what `append` writes) or a single record (older files).
#[derive(Deserialize)]
#[serde(untagged)]
enum Line {
    Batch(Vec<MetadataRecord>),
    One(MetadataRecord),
}

/// The lines of the file, each a batch of records, under the torn-tail rule.
fn scan(bytes: &[u8]) -> Result<damage::Scanned<Vec<MetadataRecord>>, damage::Damage> {
    damage::scan(bytes, parse_line, any_valid_line)
}

/// The complete line at the start of `bytes` (ending in '\n') if its checksum and JSON are good.
fn parse_line(bytes: &[u8]) -> Option<(Vec<MetadataRecord>, usize)> {
    let (json, _, used) = checked_line(bytes)?;
    let records = match serde_json::from_str(json).ok()? {
        Line::Batch(records) => records,
        Line::One(record) => vec![record],
    };
    Some((records, used))
}

/// The JSON of the complete line at the start of `bytes` whose checksum matches, with the
/// checksum and the line's length (newline included).
fn checked_line(bytes: &[u8]) -> Option<(&str, u32, usize)> {
    let end = bytes.iter().position(|&b| b == b'\n')?;
    let text = std::str::from_utf8(&bytes[..end]).ok()?;
    let (crc_hex, json) = text.split_once(' ')?;
    let crc = u32::from_str_radix(crc_hex, 16).ok()?;
    (crc32c::crc32c(json.as_bytes()) == crc).then_some((json, crc, end + 1))
}

/// One line of `metadata.log` for offline tools (`runnel dump-log --cluster-metadata-decoder`),
/// checked as `open` checks it, its records left as JSON values so that one this build cannot
/// decode is reported alone.
#[derive(Debug)]
pub struct RawLine {
    pub position: u64,
    pub size: u64,
    pub crc: u32,
    pub records: Vec<serde_json::Value>,
}

/// The lines of a `metadata.log` up to the first invalid one, and where that one starts with
/// whether valid lines follow it (damage, which `open` refuses, rather than a torn tail).
pub fn read_raw_lines(bytes: &[u8]) -> (Vec<RawLine>, Option<(u64, bool)>) {
    let mut lines = Vec::new();
    let mut pos = 0usize;
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        let parsed = checked_line(rest).and_then(|(json, crc, used)| {
            let records = match serde_json::from_str(json).ok()? {
                serde_json::Value::Array(records) => records,
                one => vec![one],
            };
            Some((records, crc, used))
        });
        let Some((records, crc, used)) = parsed else {
            return (lines, Some((pos as u64, any_valid_line(rest))));
        };
        lines.push(RawLine {
            position: pos as u64,
            size: used as u64,
            crc,
            records,
        });
        pos += used;
    }
    (lines, None)
}

/// Whether any complete valid line follows the rest of the (bad) line `bytes` starts in.
fn any_valid_line(bytes: &[u8]) -> bool {
    let Some(first) = bytes.iter().position(|&b| b == b'\n') else {
        return false;
    };
    let mut pos = first + 1;
    while let Some(end) = bytes[pos..].iter().position(|&b| b == b'\n') {
        if parse_line(&bytes[pos..]).is_some() {
            return true;
        }
        pos += end + 1;
    }
    false
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

    fn names(log: &FileMetadataLog) -> Vec<String> {
        log.replay()
            .unwrap()
            .into_iter()
            .map(|(_, r)| match r {
                MetadataRecord::Topic { name, .. } => name,
                _ => panic!("unexpected record"),
            })
            .collect()
    }

    /// A torn tail (an incomplete or corrupt last line, nothing valid after it) is truncated;
    /// a torn batch goes as a whole.
    #[test]
    fn torn_and_corrupt_tails_are_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = FileMetadataLog::open(dir.path()).unwrap();
        log.append(&[topic("a"), topic("b")]).unwrap();
        drop(log);
        let path = dir.path().join("metadata.log");
        let mut bytes = std::fs::read(&path).unwrap();
        let full = bytes.len();
        bytes.extend_from_slice(b"0000beef [{\"Topic\":");
        std::fs::write(&path, &bytes).unwrap();
        let mut log = FileMetadataLog::open(dir.path()).unwrap();
        assert_eq!(names(&log), ["a", "b"]);
        assert_eq!(std::fs::metadata(&path).unwrap().len() as usize, full);
        assert_eq!(log.append(&[topic("c"), topic("d")]).unwrap(), 2);
        drop(log);
        // A flipped byte in the last line (the batch c, d): the whole batch goes.
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 10;
        bytes[last] ^= 0x01;
        std::fs::write(&path, &bytes).unwrap();
        let log = FileMetadataLog::open(dir.path()).unwrap();
        assert_eq!(names(&log), ["a", "b"]);
        assert_eq!(log.next_offset(), 2);
    }

    /// Caught (issue 9, item 4): a bad line in the middle used to be taken for a torn tail and
    /// every valid line after it truncated, so the replica manager then deleted the partition
    /// logs of every topic created afterwards. Now the open refuses, naming the file, the byte
    /// offset and the line, and the file is left untouched.
    #[test]
    fn corruption_followed_by_valid_lines_refuses_to_open() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = FileMetadataLog::open(dir.path()).unwrap();
        for name in ["a", "b", "c", "d"] {
            log.append(&[topic(name)]).unwrap();
        }
        drop(log);
        let path = dir.path().join("metadata.log");
        let bytes = std::fs::read(&path).unwrap();
        let second = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
        // A flipped bit in the body, and a line break destroyed.
        let newline = second + bytes[second..].iter().position(|&b| b == b'\n').unwrap();
        for at in [second + 15, newline] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x01;
            std::fs::write(&path, &damaged).unwrap();
            let err = FileMetadataLog::open(dir.path()).err().expect("refused");
            let text = err.to_string();
            assert!(text.contains(&path.display().to_string()), "{text}");
            assert!(
                text.contains(&format!("byte offset {second} (line 2)")),
                "{text}"
            );
            assert_eq!(std::fs::read(&path).unwrap(), damaged);
        }
    }

    /// Caught (issue 9, item 4): an append that failed part-way (ENOSPC) left the partial line
    /// in the file, the next append wrote good lines after it, and the next open truncated
    /// them all. Now the failed append is rolled back and the file holds exactly the
    /// acknowledged batches.
    #[test]
    fn failed_append_is_rolled_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = FileMetadataLog::open(dir.path()).unwrap();
        log.append(&[topic("a")]).unwrap();
        let path = dir.path().join("metadata.log");
        let before = std::fs::read(&path).unwrap();
        log.fault = Some(12);
        let err = log.append(&[topic("b"), topic("c")]).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::StorageFull);
        assert_eq!(std::fs::read(&path).unwrap(), before);
        assert_eq!(log.next_offset(), 1);
        assert_eq!(log.append(&[topic("d")]).unwrap(), 1);
        drop(log);
        let log = FileMetadataLog::open(dir.path()).unwrap();
        assert_eq!(names(&log), ["a", "d"]);
    }

    /// Files written one record per line (before batches were lines) still replay.
    #[test]
    fn one_record_per_line_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = String::new();
        for name in ["a", "b"] {
            let json = serde_json::to_string(&topic(name)).unwrap();
            text.push_str(&format!("{:08x} {json}\n", crc32c::crc32c(json.as_bytes())));
        }
        std::fs::write(dir.path().join("metadata.log"), text).unwrap();
        let mut log = FileMetadataLog::open(dir.path()).unwrap();
        assert_eq!(log.next_offset(), 2);
        log.append(&[topic("c")]).unwrap();
        assert_eq!(names(&log), ["a", "b", "c"]);
    }

    #[test]
    fn last_line_without_newline_is_torn() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = FileMetadataLog::open(dir.path()).unwrap();
        log.append(&[topic("a")]).unwrap();
        log.append(&[topic("b")]).unwrap();
        drop(log);
        let path = dir.path().join("metadata.log");
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        let log = FileMetadataLog::open(dir.path()).unwrap();
        assert_eq!(log.replay().unwrap().len(), 1);
    }
}
