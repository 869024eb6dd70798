//! Kafka's text checkpoint files (spec J.1): line 1 version `0`, line 2 entry count, then one
//! entry per line. Written to `<name>.tmp`, fsynced, renamed over the old file and the directory
//! fsynced, so a crash leaves either the old or the new file, never a torn one.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

const VERSION: &str = "0";

fn invalid(path: &Path, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("checkpoint {}: {what}", path.display()),
    )
}

/// Fsyncs a directory so renames and new files in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Atomically replaces `path` with a checkpoint holding `entries` (already formatted lines).
pub(crate) fn write_entries(path: &Path, entries: &[String]) -> io::Result<()> {
    let mut text = String::with_capacity(16 + entries.len() * 24);
    text.push_str(VERSION);
    text.push('\n');
    text.push_str(&entries.len().to_string());
    text.push('\n');
    for e in entries {
        text.push_str(e);
        text.push('\n');
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    {
        let mut f = File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Reads the entry lines of a checkpoint, `None` if the file does not exist. A wrong version,
/// count or line is `InvalidData`.
pub(crate) fn read_entries(path: &Path) -> io::Result<Option<Vec<String>>> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.kind() == io::ErrorKind::InvalidData => return Err(invalid(path, "not UTF-8")),
        Err(e) => return Err(e),
    };
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some(VERSION) {
        return Err(invalid(path, "unsupported version"));
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| invalid(path, "bad entry count"))?;
    let entries: Vec<String> = lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.trim().to_string())
        .collect();
    if entries.len() != count {
        return Err(invalid(path, "entry count does not match"));
    }
    Ok(Some(entries))
}

/// `epoch offset` pairs (the leader-epoch checkpoint).
pub(crate) fn read_pairs(path: &Path) -> io::Result<Option<Vec<(i32, i64)>>> {
    let Some(lines) = read_entries(path)? else {
        return Ok(None);
    };
    lines
        .iter()
        .map(|l| {
            let mut it = l.split_whitespace();
            match (
                it.next().and_then(|e| e.parse().ok()),
                it.next().and_then(|o| o.parse().ok()),
                it.next(),
            ) {
                (Some(e), Some(o), None) => Ok((e, o)),
                _ => Err(invalid(path, "bad epoch entry")),
            }
        })
        .collect::<io::Result<Vec<_>>>()
        .map(Some)
}

pub(crate) fn write_pairs(path: &Path, pairs: &[(i32, i64)]) -> io::Result<()> {
    let lines: Vec<String> = pairs.iter().map(|(e, o)| format!("{e} {o}")).collect();
    write_entries(path, &lines)
}

/// `(topic, partition) -> offset` of a per-log-dir checkpoint.
pub type OffsetCheckpoint = BTreeMap<(String, i32), i64>;

/// Reads a `topic partition offset` checkpoint; missing file = empty.
pub fn read_offsets(path: &Path) -> io::Result<OffsetCheckpoint> {
    let Some(lines) = read_entries(path)? else {
        return Ok(BTreeMap::new());
    };
    let mut out = BTreeMap::new();
    for l in &lines {
        let parts: Vec<&str> = l.split_whitespace().collect();
        match parts.as_slice() {
            [t, p, o] => match (p.parse(), o.parse()) {
                (Ok(p), Ok(o)) => {
                    out.insert((t.to_string(), p), o);
                }
                _ => return Err(invalid(path, "bad offset entry")),
            },
            _ => return Err(invalid(path, "bad offset entry")),
        }
    }
    Ok(out)
}

/// Atomically writes a `topic partition offset` checkpoint.
pub fn write_offsets(path: &Path, offsets: &OffsetCheckpoint) -> io::Result<()> {
    let lines: Vec<String> = offsets
        .iter()
        .map(|((t, p), o)| format!("{t} {p} {o}"))
        .collect();
    write_entries(path, &lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_round_trip_in_kafka_format() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("recovery-point-offset-checkpoint");
        assert!(read_offsets(&p).unwrap().is_empty());
        let mut m = OffsetCheckpoint::new();
        m.insert(("my-topic.v2".into(), 3), 42);
        m.insert(("a".into(), 0), 0);
        write_offsets(&p, &m).unwrap();
        assert_eq!(
            fs::read_to_string(&p).unwrap(),
            "0\n2\na 0 0\nmy-topic.v2 3 42\n"
        );
        assert_eq!(read_offsets(&p).unwrap(), m);
        assert!(!d
            .path()
            .join("recovery-point-offset-checkpoint.tmp")
            .exists());
    }

    #[test]
    fn corrupt_checkpoints_are_errors_not_panics() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("cp");
        for bad in [
            "1\n0\n",
            "0\n2\na 0 1\n",
            "0\nx\n",
            "0\n1\na b c\n",
            "0\n1\na 1\n",
            "",
        ] {
            fs::write(&p, bad).unwrap();
            assert!(read_offsets(&p).is_err(), "{bad:?}");
        }
        fs::write(&p, [0xff, 0xfe]).unwrap();
        assert!(read_offsets(&p).is_err());
        fs::write(&p, "0\n1\n1 2 3\n").unwrap();
        assert!(read_pairs(&p).is_err());
    }
}
