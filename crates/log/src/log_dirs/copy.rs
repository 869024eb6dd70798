//! Copying a partition directory into its future directory while the log keeps changing:
//! passes that copy what changed since the previous pass, the last of them under the log's
//! lock (nothing changes then), so the future copy ends byte for byte the current one.
//!
//! What changes between passes, and how a pass sees it: a segment's `.log` and index files
//! only grow, except when a truncation cuts them (a follower) or retention / DeleteRecords
//! removes whole segments; compaction is paused during a move (`LogDirs` refuses to clean a
//! moving log), so a sealed segment never changes in place. A file whose (inode, length,
//! mtime) did not change is skipped; a `.log` that only grew gets its new tail appended after
//! its last copied 64 KiB are found unchanged (batches carry their offsets, epochs and CRCs,
//! so a cut and re-append never reproduces them); anything else is copied whole. The small
//! files (checkpoints, `partition.metadata`, producer snapshots) are replaced by rename when
//! written, so a new inode marks them, and the last pass copies them again anyway.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::SystemTime;

/// Files that exist only mid-operation (retention's `.deleted`, compaction's `.cleaned` /
/// `.swap`, a checkpoint's `.tmp`): never copied; their final forms are.
const SKIPPED_SUFFIXES: [&str; 4] = [".deleted", ".cleaned", ".swap", ".tmp"];

/// How much of a grown `.log` is compared before only its tail is appended.
const TAIL_CHECK_BYTES: u64 = 64 * 1024;

/// Copy chunk: the throttle is consulted once per chunk.
const CHUNK: usize = 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    ino: u64,
    len: u64,
    modified: Option<SystemTime>,
}

fn stamp(meta: &fs::Metadata) -> Stamp {
    #[cfg(unix)]
    let ino = std::os::unix::fs::MetadataExt::ino(meta);
    #[cfg(not(unix))]
    let ino = 0;
    Stamp {
        ino,
        len: meta.len(),
        modified: meta.modified().ok(),
    }
}

/// What the previous passes copied: per file name, the source's stamp then and the bytes the
/// copy holds.
#[derive(Debug, Default)]
pub struct CopyState {
    copied: BTreeMap<String, (Stamp, u64)>,
}

impl CopyState {
    /// Bytes the future copy holds.
    pub fn copied_bytes(&self) -> u64 {
        self.copied.values().map(|(_, n)| n).sum()
    }
}

fn is_small_metadata_file(name: &str) -> bool {
    !(name.ends_with(".log")
        || name.ends_with(".index")
        || name.ends_with(".timeindex")
        || name.ends_with(".txnindex"))
}

/// One pass from `src` into `dst`; returns the bytes written. `last` (under the log's lock):
/// small files are copied again whatever their stamp, and every file of `dst` is fsynced, then
/// `dst` itself. `throttle` is called with each chunk's size before it is written.
pub fn copy_pass(
    src: &Path,
    dst: &Path,
    state: &mut CopyState,
    last: bool,
    throttle: &mut dyn FnMut(u64),
) -> io::Result<u64> {
    let mut written = 0;
    let mut present = Vec::new();
    for entry in fs::read_dir(src)? {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if SKIPPED_SUFFIXES.iter().any(|s| name.ends_with(s)) {
            continue;
        }
        let meta = match entry.metadata() {
            Ok(m) if m.is_file() => m,
            Ok(_) => continue,
            // Removed since the listing (retention): dropped from the copy below.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let now = stamp(&meta);
        let before = state.copied.get(&name).copied();
        let force = last && is_small_metadata_file(&name);
        if before.is_some_and(|(s, _)| s == now) && !force {
            present.push(name);
            continue;
        }
        match copy_file(&src.join(&name), &dst.join(&name), &name, before, throttle) {
            Ok((n, total)) => {
                written += n;
                state.copied.insert(name.clone(), (now, total));
                present.push(name);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    let gone: Vec<String> = state
        .copied
        .keys()
        .filter(|k| !present.contains(k))
        .cloned()
        .collect();
    for name in gone {
        state.copied.remove(&name);
        match fs::remove_file(dst.join(&name)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    if last {
        for name in state.copied.keys() {
            File::open(dst.join(name))?.sync_all()?;
        }
        crate::checkpoint::sync_dir(dst)?;
    }
    Ok(written)
}

/// Copies `src` to `dst`: only the tail when `dst` holds an unchanged prefix of a grown `.log`,
/// else whole. Returns (bytes written, bytes `dst` holds).
fn copy_file(
    src: &Path,
    dst: &Path,
    name: &str,
    before: Option<(Stamp, u64)>,
    throttle: &mut dyn FnMut(u64),
) -> io::Result<(u64, u64)> {
    let mut from = File::open(src)?;
    if let Some((_, held)) = before.filter(|_| name.ends_with(".log")) {
        if prefix_unchanged(&mut from, dst, held)? {
            from.seek(SeekFrom::Start(held))?;
            let mut to = OpenOptions::new().append(true).open(dst)?;
            let n = pump(&mut from, &mut to, throttle)?;
            return Ok((n, held + n));
        }
    }
    // The prefix check may have moved the read position.
    from.seek(SeekFrom::Start(0))?;
    let mut to = File::create(dst)?;
    let n = pump(&mut from, &mut to, throttle)?;
    Ok((n, n))
}

/// Whether `dst` (of `held` bytes) still ends as `src` does at that length.
fn prefix_unchanged(src: &mut File, dst: &Path, held: u64) -> io::Result<bool> {
    let src_len = src.metadata()?.len();
    let Ok(mut dst) = File::open(dst) else {
        return Ok(false);
    };
    if src_len < held || dst.metadata()?.len() != held {
        return Ok(false);
    }
    let window = held.min(TAIL_CHECK_BYTES);
    let start = held - window;
    let size = usize::try_from(window).map_err(io::Error::other)?;
    let (mut a, mut b) = (vec![0u8; size], vec![0u8; size]);
    src.seek(SeekFrom::Start(start))?;
    src.read_exact(&mut a)?;
    dst.seek(SeekFrom::Start(start))?;
    dst.read_exact(&mut b)?;
    Ok(a == b)
}

fn pump(from: &mut File, to: &mut File, throttle: &mut dyn FnMut(u64)) -> io::Result<u64> {
    let mut buf = vec![0u8; CHUNK];
    let mut total = 0u64;
    loop {
        let n = from.read(&mut buf)?;
        if n == 0 {
            return Ok(total);
        }
        let len = u64::try_from(n).map_err(io::Error::other)?;
        throttle(len);
        to.write_all(&buf[..n])?;
        total += len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(dir: &Path) -> BTreeMap<String, Vec<u8>> {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    fs::read(e.path()).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn passes_follow_appends_truncations_and_removals() {
        let src = tempfile::tempdir().unwrap();
        let dst = tempfile::tempdir().unwrap();
        let mut state = CopyState::default();
        let log = src.path().join("00000000000000000000.log");
        fs::write(&log, vec![1u8; 100_000]).unwrap();
        fs::write(src.path().join("partition.metadata"), b"id").unwrap();
        fs::write(src.path().join("x.tmp"), b"skip").unwrap();
        let mut none = |_| {};
        assert_eq!(
            copy_pass(src.path(), dst.path(), &mut state, false, &mut none).unwrap(),
            100_002
        );
        // Growth: only the tail is written.
        OpenOptions::new()
            .append(true)
            .open(&log)
            .unwrap()
            .write_all(&[2u8; 10])
            .unwrap();
        assert_eq!(
            copy_pass(src.path(), dst.path(), &mut state, false, &mut none).unwrap(),
            10
        );
        // A cut and a different re-append to a greater length: copied whole.
        let mut bytes = vec![1u8; 99_000];
        bytes.extend_from_slice(&[3u8; 2_000]);
        fs::write(&log, &bytes).unwrap();
        fs::write(src.path().join("00000000000000000101.log"), b"next").unwrap();
        copy_pass(src.path(), dst.path(), &mut state, false, &mut none).unwrap();
        fs::remove_file(src.path().join("00000000000000000101.log")).unwrap();
        fs::remove_file(src.path().join("x.tmp")).unwrap();
        copy_pass(src.path(), dst.path(), &mut state, true, &mut none).unwrap();
        assert!(
            read_all(src.path()) == read_all(dst.path()),
            "the copy differs"
        );
        assert_eq!(state.copied_bytes(), 101_002);
    }

    #[test]
    fn the_throttle_sees_every_byte() {
        let src = tempfile::tempdir().unwrap();
        let dst = tempfile::tempdir().unwrap();
        fs::write(
            src.path().join("00000000000000000000.log"),
            vec![0u8; 3 * CHUNK + 5],
        )
        .unwrap();
        let mut seen = 0u64;
        let mut count = |n| seen += n;
        copy_pass(
            src.path(),
            dst.path(),
            &mut CopyState::default(),
            true,
            &mut count,
        )
        .unwrap();
        assert_eq!(seen, 3 * CHUNK as u64 + 5);
    }
}
