//! Putting cleaned segments in place so that a crash at any point leaves either the old or the
//! new segment set (spec J.1, J.5 step 1).
//!
//! A cleaned group replaces the old segments with base offsets in `[base, end)` by one segment
//! at `base`. Its files are written as `{base}.log.cleaned`, `.index.cleaned`,
//! `.timeindex.cleaned` plus `{base}.replaces.cleaned` (the text `end`: Kafka derives the range
//! from the new segment's last offset, which undercounts when compaction emptied the group's
//! tail, so it is recorded explicitly), all fsynced, and `{base}.txnindex.cleaned` when the new
//! segment keeps aborted-transaction entries (optional at every step). Then:
//!
//! 1. **commit**: rename the index, time index and marker `.cleaned` -> `.swap`, then the log
//!    file last; fsync the directory. `{base}.log.swap` existing is the commit point.
//! 2. old segments renamed `.deleted` (or removed), and
//! 3. **install**: `.swap` -> final names (indexes first, log last), marker removed.
//!
//! On open, [`recover`] finishes every committed group (deletes the old segments in the
//! recorded range, installs the `.swap` files); anything `.cleaned`, and `.swap` files without
//! a committed log, are leftovers the normal cleanup removes (the old segments are intact). A
//! marker whose end is no segment's base (damaged) is treated as missing.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::checkpoint::sync_dir;
use crate::partition_log::TXN_INDEX_SUFFIX;
use crate::segment::{
    parse_log_file_name, segment_path, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX,
};

pub(crate) const CLEANED: &str = ".cleaned";
pub(crate) const SWAP: &str = ".swap";
/// The marker recording the end of the replaced offset range.
const REPLACES: &str = "replaces";
/// Kinds in commit/install order: the log file always moves last. The `.txnindex` is
/// optional (only a segment with aborted-transaction entries has one).
const KINDS: [&str; 5] = [
    INDEX_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    REPLACES,
    LOG_SUFFIX,
];

/// `{base:020}.{kind}{stage}`.
fn staged(dir: &Path, base: i64, kind: &str, stage: &str) -> PathBuf {
    segment_path(dir, base, &format!("{kind}{stage}"))
}

fn remove_if_exists(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn rename_if_exists(from: &Path, to: &Path) -> io::Result<()> {
    match fs::rename(from, to) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Writes and fsyncs `{base}.replaces.cleaned` holding `end`.
pub(crate) fn write_marker(dir: &Path, base: i64, end: i64) -> io::Result<()> {
    let path = staged(dir, base, REPLACES, CLEANED);
    let f = fs::File::create(&path)?;
    io::Write::write_all(&mut &f, format!("{end}\n").as_bytes())?;
    f.sync_all()
}

/// Writes and fsyncs `{base}.txnindex.cleaned` with `entries` (nothing when there are none).
pub(crate) fn write_txn_index(
    dir: &Path,
    base: i64,
    entries: &[crate::txn::AbortedTxn],
) -> io::Result<()> {
    if entries.is_empty() {
        return Ok(());
    }
    let path = staged(dir, base, TXN_INDEX_SUFFIX, CLEANED);
    let f = fs::File::create(&path)?;
    let bytes: Vec<u8> = entries.iter().flat_map(|e| e.encode()).collect();
    io::Write::write_all(&mut &f, &bytes)?;
    f.sync_all()
}

/// Removes the `.cleaned` files of the group at `base` (an abandoned cleaning).
pub(crate) fn discard_cleaned(dir: &Path, base: i64) {
    for kind in KINDS {
        let path = staged(dir, base, kind, CLEANED);
        if let Err(e) = remove_if_exists(&path) {
            tracing::warn!(path = %path.display(), error = %e, "could not remove cleaned file");
        }
    }
}

/// Step 1: `.cleaned` -> `.swap`, log file last, then the directory is fsynced.
pub(crate) fn commit(dir: &Path, base: i64) -> io::Result<()> {
    for kind in KINDS {
        let (from, to) = (
            staged(dir, base, kind, CLEANED),
            staged(dir, base, kind, SWAP),
        );
        if kind == TXN_INDEX_SUFFIX {
            rename_if_exists(&from, &to)?;
        } else {
            fs::rename(from, to)?;
        }
    }
    sync_dir(dir)
}

/// Step 3: `.swap` -> final names (log last), marker removed. The old segment at `base` must
/// be gone already (same name). The caller fsyncs the directory.
pub(crate) fn install(dir: &Path, base: i64) -> io::Result<()> {
    for kind in [
        INDEX_SUFFIX,
        TIME_INDEX_SUFFIX,
        TXN_INDEX_SUFFIX,
        LOG_SUFFIX,
    ] {
        rename_if_exists(
            &staged(dir, base, kind, SWAP),
            &segment_path(dir, base, kind),
        )?;
    }
    remove_if_exists(&staged(dir, base, REPLACES, SWAP))
}

/// Reads the end offset of a committed group, `None` if the marker is missing or garbled.
fn read_marker(dir: &Path, base: i64) -> Option<i64> {
    let text = fs::read_to_string(staged(dir, base, REPLACES, SWAP)).ok()?;
    text.trim().parse().ok().filter(|&end| end > base)
}

/// Completes the swaps a crash interrupted (call before any other leftover cleanup).
/// Returns the base offsets of the groups it installed.
pub(crate) fn recover(dir: &Path) -> io::Result<Vec<i64>> {
    let mut swaps = Vec::new();
    let mut live = Vec::new();
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(stem) = name.strip_suffix(SWAP) {
            if let Some(base) = parse_log_file_name(stem) {
                swaps.push(base);
            }
        } else if let Some(base) = parse_log_file_name(name) {
            live.push(base);
        }
    }
    swaps.sort_unstable();
    let mut installed = Vec::new();
    for &base in &swaps {
        let Some(end) = read_marker(dir, base) else {
            // Not committed by this protocol: the old segments are authoritative.
            tracing::warn!(dir = %dir.display(), base, "ignoring a .swap segment without its range marker");
            continue;
        };
        // The group ends where the next segment begins: a live one, or a later group's swap.
        // Any other end is a damaged marker, and trusting it would delete live segments
        // outside the group (the active one too).
        if !live.contains(&end) && !swaps.contains(&end) {
            tracing::warn!(dir = %dir.display(), base, end, "ignoring a .swap segment whose range marker ends at no segment");
            continue;
        }
        tracing::info!(dir = %dir.display(), base, end, "completing an interrupted compaction swap");
        for &old in live.iter().filter(|&&b| b >= base && b < end) {
            for kind in [
                LOG_SUFFIX,
                INDEX_SUFFIX,
                TIME_INDEX_SUFFIX,
                TXN_INDEX_SUFFIX,
            ] {
                remove_if_exists(&segment_path(dir, old, kind))?;
            }
        }
        install(dir, base)?;
        installed.push(base);
    }
    if !installed.is_empty() {
        sync_dir(dir)?;
    }
    Ok(installed)
}
