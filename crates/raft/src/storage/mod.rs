//! Durable Raft state in one directory: the log (`raft.log`), the vote (`vote`), the last known
//! commit (`committed`) and the latest snapshot (`snapshot.checkpoint`).
//!
//! Everything on disk is framed as `[u32 length][u32 crc32c][body]` so that a torn write or a
//! flipped bit is detected instead of being decoded as a different, valid value.

pub mod damage;
pub mod dump;
pub mod log;
pub mod snapshot;
pub mod vote;

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

/// Bytes of the `[length][crc]` header in front of every stored body.
pub(crate) const HEADER_LEN: usize = 8;

/// Frames `body` as `[len][crc32c][body]`.
pub(crate) fn frame_record(body: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
    let len = u32::try_from(body.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "record too large"))?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&crc32c::crc32c(body).to_be_bytes());
    out.extend_from_slice(body);
    Ok(())
}

/// Parses one framed record at the start of `bytes`: `Some((body, total_len))`, or `None` if the
/// bytes end early or the checksum does not match (a torn or corrupt record).
pub(crate) fn parse_record(bytes: &[u8]) -> Option<(&[u8], usize)> {
    let header = bytes.get(..HEADER_LEN)?;
    let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let crc = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
    let body = bytes.get(HEADER_LEN..HEADER_LEN.checked_add(len)?)?;
    (crc32c::crc32c(body) == crc).then_some((body, HEADER_LEN + len))
}

/// Replaces `dir/name` with `contents` atomically: write a temporary file, fsync it, rename it
/// over the old one, fsync the directory. A crash leaves either the old or the new file, never
/// a mix. With `durable = false` the fsyncs are skipped (for hints that may be lost).
pub(crate) fn write_atomic(
    dir: &Path,
    name: &str,
    contents: &[u8],
    durable: bool,
) -> io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&tmp)?;
    f.write_all(contents)?;
    if durable {
        f.sync_all()?;
    }
    drop(f);
    std::fs::rename(&tmp, dir.join(name))?;
    if durable {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Makes a rename or file creation in `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Reads `dir/name` as one framed record; `Ok(None)` if the file does not exist.
pub(crate) fn read_framed_file(dir: &Path, name: &str) -> io::Result<Option<Vec<u8>>> {
    let bytes = match std::fs::read(dir.join(name)) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    match parse_record(&bytes) {
        Some((body, used)) if used == bytes.len() => Ok(Some(body.to_vec())),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} is corrupt (checksum or length mismatch)",
                dir.join(name).display()
            ),
        )),
    }
}

/// Writes `body` framed to `dir/name` atomically.
pub(crate) fn write_framed_file(
    dir: &Path,
    name: &str,
    body: &[u8],
    durable: bool,
) -> io::Result<()> {
    let mut out = Vec::with_capacity(body.len() + HEADER_LEN);
    frame_record(body, &mut out)?;
    write_atomic(dir, name, &out, durable)
}

fn invalid_data(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framed_records_detect_torn_and_flipped_bytes() {
        let mut buf = Vec::new();
        frame_record(b"hello", &mut buf).unwrap();
        assert_eq!(parse_record(&buf), Some((&b"hello"[..], 13)));
        assert_eq!(parse_record(&buf[..12]), None);
        let mut flipped = buf.clone();
        flipped[10] ^= 1;
        assert_eq!(parse_record(&flipped), None);
    }

    #[test]
    fn framed_files_round_trip_and_corruption_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_framed_file(dir.path(), "f").unwrap(), None);
        write_framed_file(dir.path(), "f", b"abc", true).unwrap();
        assert_eq!(
            read_framed_file(dir.path(), "f").unwrap(),
            Some(b"abc".to_vec())
        );
        let path = dir.path().join("f");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[9] ^= 1;
        std::fs::write(&path, bytes).unwrap();
        assert!(read_framed_file(dir.path(), "f").is_err());
    }
}
