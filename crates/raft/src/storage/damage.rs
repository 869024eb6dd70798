//! The recovery rule shared by the append-only metadata logs (the Raft log here and the
//! broker's single-node `FileMetadataLog`): only a torn *tail* is cut off.
//!
//! A crash during an append leaves an incomplete or corrupt last record, and nothing after it:
//! that append was never acknowledged (acknowledgement follows the fsync), so cutting it loses
//! nothing. A bad record with valid records *after* it is something else: a damaged disk or a
//! partial write that was not rolled back. Truncating there would silently drop acknowledged
//! records (and a broker then deletes the partition logs of every topic they created), so
//! opening refuses instead, naming the file, the byte offset and the record number.
//!
//! A failed append must not leave such a hole either: the writer rolls the file back to its
//! previous length, and if even that fails it stops the process ([`fail_stop`]) before anything
//! else can be appended after the partial record.

use std::path::{Path, PathBuf};

/// What scanning a log file found: the valid records (with the byte position of each) and the
/// length of the valid prefix. `valid_len < file length` means a torn tail to cut off.
#[derive(Debug, PartialEq)]
pub struct Scanned<R> {
    pub records: Vec<(u64, R)>,
    pub valid_len: u64,
}

/// A damaged record that valid records follow: the log cannot be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{path}: the record at byte offset {offset} ({unit} {number}) is corrupt but valid records \
     follow it, so this is damage, not a torn tail: refusing to start rather than dropping \
     acknowledged metadata. {remedy}"
)]
pub struct DamagedLog {
    pub path: PathBuf,
    /// Byte offset of the first bad record.
    pub offset: u64,
    /// 1-based number of the bad record (its line in a line-oriented log).
    pub number: u64,
    /// "line" or "record".
    pub unit: &'static str,
    /// What the operator can do about it.
    pub remedy: &'static str,
}

/// Where a bad record was found, before a file name is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Damage {
    pub offset: u64,
    pub number: u64,
}

impl Damage {
    /// The error for `path`.
    pub fn in_file(self, path: &Path, unit: &'static str, remedy: &'static str) -> DamagedLog {
        DamagedLog {
            path: path.to_path_buf(),
            offset: self.offset,
            number: self.number,
            unit,
            remedy,
        }
    }
}

/// Scans `bytes` record by record. `parse` decodes the record at the start of its argument
/// (`Some((record, length))`) or rejects it (torn, checksum mismatch, undecodable);
/// `valid_after` says whether any valid record starts anywhere in the bytes following the first
/// byte of a rejected record. The first rejected record is a torn tail if nothing valid follows
/// it, and [`Damage`] otherwise.
pub fn scan<R>(
    bytes: &[u8],
    parse: impl Fn(&[u8]) -> Option<(R, usize)>,
    valid_after: impl Fn(&[u8]) -> bool,
) -> Result<Scanned<R>, Damage> {
    let mut records = Vec::new();
    let mut pos = 0usize;
    while pos < bytes.len() {
        match parse(&bytes[pos..]) {
            Some((record, used)) if used > 0 => {
                records.push((pos as u64, record));
                pos += used;
            }
            _ => {
                if valid_after(&bytes[pos + 1..]) {
                    return Err(Damage {
                        offset: pos as u64,
                        number: records.len() as u64 + 1,
                    });
                }
                break;
            }
        }
    }
    Ok(Scanned {
        records,
        valid_len: pos as u64,
    })
}

/// Stops the process at once: a log could not be brought back to a consistent state after a
/// failed write, and continuing could append acknowledged records after a partial one (which
/// the next start would then have to refuse, or worse, drop). Kafka halts its process on a
/// metadata log fault for the same reason.
pub fn fail_stop(what: &str, error: &dyn std::fmt::Display) -> ! {
    tracing::error!(%error, "{what}; stopping the process");
    eprintln!("FATAL: {what}: {error}; stopping the process");
    std::process::exit(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records are `[len byte][payload of len bytes]`, payload all `b'x'` to be valid.
    fn parse(b: &[u8]) -> Option<(u8, usize)> {
        let len = *b.first()? as usize;
        let body = b.get(1..1 + len)?;
        body.iter()
            .all(|&c| c == b'x')
            .then_some((len as u8, 1 + len))
    }

    fn valid_after(b: &[u8]) -> bool {
        (0..b.len()).any(|i| parse(&b[i..]).is_some_and(|(l, _)| l > 0))
    }

    #[test]
    fn clean_torn_and_damaged() {
        let good = [2, b'x', b'x', 1, b'x'];
        let s = scan(&good, parse, valid_after).unwrap();
        assert_eq!(s.records, vec![(0, 2), (3, 1)]);
        assert_eq!(s.valid_len, 5);
        // Torn: the last record is short.
        let torn = [2, b'x', b'x', 3, b'x'];
        let s = scan(&torn, parse, valid_after).unwrap();
        assert_eq!(s.valid_len, 3);
        // Damaged: a bad record with a good one after it.
        let damaged = [2, b'x', b'y', 1, b'x'];
        assert_eq!(
            scan(&damaged, parse, valid_after),
            Err(Damage {
                offset: 0,
                number: 1
            })
        );
    }

    #[test]
    fn the_error_names_file_offset_and_record() {
        let e = Damage {
            offset: 120,
            number: 3,
        }
        .in_file(Path::new("/d/metadata.log"), "line", "Restore it.");
        let text = e.to_string();
        assert!(text.starts_with("/d/metadata.log: the record at byte offset 120 (line 3)"));
        assert!(text.ends_with("Restore it."));
    }
}
