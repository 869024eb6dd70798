//! The file metadata log earlier builds kept a single node's metadata in
//! (`<data-dir>/metadata/metadata.log`), read once by `metadata_import` (and by `runnel
//! dump-metadata`); nothing writes it any more. One line per appended batch, `<crc32c hex>
//! <json array of records>` (files written before batches were one line per record, `<crc32c
//! hex> <json record>`; both are read).
//!
//! Damage follows the rule of `runnel_raft::storage::damage`: a torn *tail* (an incomplete or
//! corrupt last line with nothing valid after it, an append that was never acknowledged) is
//! left out; a bad line followed by valid ones refuses the open with the file, byte offset and
//! line. The file itself is never modified.

use std::path::Path;

use runnel_metadata::MetadataRecord;
use runnel_raft::storage::damage::{self, DamagedLog};
use serde::Deserialize;

/// Why the metadata log cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum MetadataLogError {
    #[error(transparent)]
    Damaged(#[from] DamagedLog),
    #[error("cannot read the metadata log: {0}")]
    Io(#[from] std::io::Error),
}

/// What an operator can do about a damaged single-node metadata log.
const REMEDY: &str = "Restore metadata.log from a backup, or repair the damaged line by hand; \
    nothing was truncated and no partition directory was touched.";

/// The records of `<dir>/metadata.log`, checked when it is opened.
pub struct FileMetadataLog {
    records: Vec<MetadataRecord>,
}

impl FileMetadataLog {
    /// Reads and checks `<dir>/metadata.log`: damage refuses, a torn tail is left out.
    pub fn open(dir: &Path) -> Result<Self, MetadataLogError> {
        let path = dir.join("metadata.log");
        let bytes = std::fs::read(&path)?;
        let scanned = scan(&bytes).map_err(|d| d.in_file(&path, "line", REMEDY))?;
        if scanned.valid_len < bytes.len() as u64 {
            tracing::warn!(
                path = %path.display(),
                valid_len = scanned.valid_len,
                "the metadata log ends in a torn line (an unacknowledged append): left out"
            );
        }
        let records = scanned.records.into_iter().flat_map(|(_, b)| b).collect();
        Ok(FileMetadataLog { records })
    }

    /// Every record, in order (a record's offset is its index).
    pub fn into_records(self) -> Vec<MetadataRecord> {
        self.records
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
    use std::path::PathBuf;
    use uuid::Uuid;

    fn topic(name: &str) -> MetadataRecord {
        MetadataRecord::Topic {
            name: name.into(),
            topic_id: Uuid::new_v4(),
        }
    }

    /// One line as earlier builds appended it: a batch, or (older still) a single record.
    fn line(json: &str) -> String {
        format!("{:08x} {json}\n", crc32c::crc32c(json.as_bytes()))
    }

    fn batch_line(names: &[&str]) -> String {
        let records: Vec<_> = names.iter().map(|n| topic(n)).collect();
        line(&serde_json::to_string(&records).unwrap())
    }

    fn write(dir: &Path, lines: &[String]) -> PathBuf {
        let path = dir.join("metadata.log");
        std::fs::write(&path, lines.concat()).unwrap();
        path
    }

    fn names(log: FileMetadataLog) -> Vec<String> {
        log.into_records()
            .into_iter()
            .map(|r| match r {
                MetadataRecord::Topic { name, .. } => name,
                _ => panic!("unexpected record"),
            })
            .collect()
    }

    #[test]
    fn batches_are_read_in_order() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &[batch_line(&["a", "b"]), batch_line(&["c"])]);
        let log = FileMetadataLog::open(dir.path()).unwrap();
        assert_eq!(names(log), ["a", "b", "c"]);
    }

    /// A torn tail (an incomplete or corrupt last line, nothing valid after it) is left out as
    /// a whole batch, and the file is not modified.
    #[test]
    fn torn_and_corrupt_tails_are_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let good = batch_line(&["a", "b"]);
        let torn = "0000beef [{\"Topic\":".to_string();
        let path = write(dir.path(), &[good.clone(), torn]);
        let before = std::fs::read(&path).unwrap();
        assert_eq!(
            names(FileMetadataLog::open(dir.path()).unwrap()),
            ["a", "b"]
        );
        assert_eq!(std::fs::read(&path).unwrap(), before, "not truncated");
        // A flipped byte in the last line (the batch c, d): the whole batch goes.
        let mut last = batch_line(&["c", "d"]).into_bytes();
        let at = last.len() - 10;
        last[at] ^= 0x01;
        let path = write(dir.path(), &[good]);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(&last);
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(
            names(FileMetadataLog::open(dir.path()).unwrap()),
            ["a", "b"]
        );
    }

    /// Caught (issue 9, item 4): a bad line in the middle used to be taken for a torn tail and
    /// every valid line after it truncated, so the replica manager then deleted the partition
    /// logs of every topic created afterwards. Now the open refuses, naming the file, the byte
    /// offset and the line, and the file is left untouched.
    #[test]
    fn corruption_followed_by_valid_lines_refuses_to_open() {
        let dir = tempfile::tempdir().unwrap();
        let lines = ["a", "b", "c", "d"].map(|n| batch_line(&[n]));
        let path = write(dir.path(), &lines);
        let bytes = std::fs::read(&path).unwrap();
        let second = lines[0].len();
        // A flipped bit in the body, and a line break destroyed.
        let newline = second + lines[1].len() - 1;
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

    /// Files written one record per line (before batches were lines) are read too.
    #[test]
    fn one_record_per_line_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let lines: Vec<_> = ["a", "b"]
            .iter()
            .map(|n| line(&serde_json::to_string(&topic(n)).unwrap()))
            .collect();
        write(
            dir.path(),
            &[lines[0].clone(), lines[1].clone(), batch_line(&["c"])],
        );
        assert_eq!(
            names(FileMetadataLog::open(dir.path()).unwrap()),
            ["a", "b", "c"]
        );
    }

    #[test]
    fn last_line_without_newline_is_torn() {
        let dir = tempfile::tempdir().unwrap();
        let mut second = batch_line(&["b"]);
        second.pop();
        write(dir.path(), &[batch_line(&["a"]), second]);
        assert_eq!(names(FileMetadataLog::open(dir.path()).unwrap()), ["a"]);
    }
}
