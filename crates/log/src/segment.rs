//! One segment: `{base:020}.log` plus its `.index` and `.timeindex` (spec J.1, J.3).
//!
//! The `.log` file is opened in append mode: writes always land at the end (even after a
//! truncation), reads are positional (`pread`), so readers never move a shared cursor. Index
//! entries are kept in memory and appended to their files after every append, so the files hold
//! exactly the entries and need no trimming on close.

use std::fs::{self, File, OpenOptions};
use std::io::{self, IoSlice, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::batch::{self, BatchHeader};
use crate::error::LogError;
use crate::fault::{self, Fault};
use crate::index::{relative_offset, OffsetIndex, TimeIndex, OFFSET_ENTRY_SIZE, TIME_ENTRY_SIZE};
use crate::scan::{read_header_at, Scanned, Scanner};

pub(crate) const LOG_SUFFIX: &str = "log";
pub(crate) const INDEX_SUFFIX: &str = "index";
pub(crate) const TIME_INDEX_SUFFIX: &str = "timeindex";
pub(crate) const DELETED_SUFFIX: &str = ".deleted";
/// Linux's IOV_MAX: the most slices one `writev` accepts.
const MAX_IOVECS: usize = 1024;

/// A byte range of one segment's `.log` file, read with `pread` by whoever holds it: the
/// file stays open (and readable after a deletion) as long as the slice lives.
#[derive(Debug, Clone)]
pub(crate) struct FileSlice {
    file: Arc<File>,
    pos: u64,
    len: usize,
}

impl FileSlice {
    /// Reads the range; a file cut shorter meanwhile (a follower truncation) gives fewer
    /// bytes, never an error.
    pub(crate) fn read(&self) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; self.len];
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], self.pos + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        buf.truncate(done);
        Ok(buf)
    }
}

/// `{dir}/{base:020}.{suffix}`.
pub(crate) fn segment_path(dir: &Path, base_offset: i64, suffix: &str) -> PathBuf {
    dir.join(format!("{base_offset:020}.{suffix}"))
}

/// Parses a file name `{20 digits}.log` into its base offset.
pub(crate) fn parse_log_file_name(name: &str) -> Option<i64> {
    let digits = name.strip_suffix(".log")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The open index files of a segment that is active or not yet fsynced.
#[derive(Debug, Clone)]
pub(crate) struct IndexFiles {
    pub(crate) offset: Arc<File>,
    pub(crate) time: Arc<File>,
}

/// What a scan of batches found (recovery, index rebuild).
#[derive(Debug, Default)]
pub(crate) struct ScanOutcome {
    /// The file was cut at the first invalid batch.
    pub(crate) truncated: bool,
    /// `(epoch, first offset)` each time the batches' leader epoch changed, for the epoch cache.
    pub(crate) epoch_starts: Vec<(i32, i64)>,
}

/// A segment's state before an append, to undo it if a write fails.
#[derive(Debug, Clone, Copy)]
struct SavedState {
    size: u64,
    next_offset: i64,
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
    first_batch_timestamp: Option<i64>,
    bytes_since_last_index: u64,
    offset_entries: usize,
    offset_written: usize,
    time_entries: usize,
    time_written: usize,
}

#[derive(Debug)]
pub(crate) struct Segment {
    base_offset: i64,
    dir: PathBuf,
    log: Arc<File>,
    size: u64,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    index_files: Option<IndexFiles>,
    bytes_since_last_index: u64,
    /// One past the last offset stored here (`base_offset` while empty).
    next_offset: i64,
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
    /// Max timestamp of the first batch: `segment.ms` is measured from it.
    first_batch_timestamp: Option<i64>,
    created_ms: i64,
    /// Appended to every file name: `""` for live segments, `".cleaned"` for the cleaner's
    /// output before it is swapped in.
    name_suffix: &'static str,
}

/// Opens a file for positional reads and appends. `fresh` replaces any existing file (a
/// leftover with the same name would otherwise leak stale bytes into a new segment).
fn open_append(path: &Path, fresh: bool) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true).append(true);
    if fresh {
        match fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        o.create_new(true);
    } else {
        o.create(true);
    }
    o.open(path)
}

impl Segment {
    /// Creates a new empty segment (files truncated if they exist).
    pub(crate) fn create(dir: &Path, base_offset: i64, max_index_bytes: u32) -> io::Result<Self> {
        Self::create_named(dir, base_offset, max_index_bytes, "")
    }

    /// Creates a new empty segment whose files carry `name_suffix` after their usual names
    /// (`{base}.log{suffix}`, ...): the cleaner writes `.cleaned` segments with the same
    /// append and index code as live ones, then renames them into place.
    pub(crate) fn create_named(
        dir: &Path,
        base_offset: i64,
        max_index_bytes: u32,
        name_suffix: &'static str,
    ) -> io::Result<Self> {
        let path = |kind: &str| segment_path(dir, base_offset, &format!("{kind}{name_suffix}"));
        let log = open_append(&path(LOG_SUFFIX), true)?;
        let offset = open_append(&path(INDEX_SUFFIX), true)?;
        let time = open_append(&path(TIME_INDEX_SUFFIX), true)?;
        Ok(Segment {
            base_offset,
            dir: dir.to_path_buf(),
            log: Arc::new(log),
            size: 0,
            offset_index: OffsetIndex::new(base_offset, max_index_bytes),
            time_index: TimeIndex::new(base_offset, max_index_bytes),
            index_files: Some(IndexFiles {
                offset: Arc::new(offset),
                time: Arc::new(time),
            }),
            bytes_since_last_index: 0,
            next_offset: base_offset,
            max_timestamp: -1,
            offset_of_max_timestamp: -1,
            first_batch_timestamp: None,
            created_ms: now_ms(),
            name_suffix,
        })
    }

    /// Opens an existing segment. Index files are loaded if sane; otherwise they are left empty
    /// and `needs_rebuild` is returned true (the caller then runs [`Self::recover`]).
    /// `next_offset` is provisional until [`Self::load_tail`] or [`Self::recover`] runs.
    pub(crate) fn open(
        dir: &Path,
        base_offset: i64,
        max_index_bytes: u32,
    ) -> io::Result<(Self, bool)> {
        let log = open_append(&segment_path(dir, base_offset, LOG_SUFFIX), false)?;
        let meta = log.metadata()?;
        let size = meta.len();
        let created_ms = meta
            .modified()
            .ok()
            .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as i64)
            .unwrap_or_else(now_ms);
        let read = |suffix| fs::read(segment_path(dir, base_offset, suffix));
        let mut needs_rebuild = false;
        let offset_index = match read(INDEX_SUFFIX).map_err(|e| e.to_string()).and_then(|b| {
            OffsetIndex::load(base_offset, max_index_bytes, &b, size).map_err(|e| e.0)
        }) {
            Ok(i) => i,
            Err(why) => {
                tracing::warn!(base_offset, %why, "offset index unusable, rebuilding");
                needs_rebuild = true;
                OffsetIndex::new(base_offset, max_index_bytes)
            }
        };
        let time_index = match read(TIME_INDEX_SUFFIX)
            .map_err(|e| e.to_string())
            .and_then(|b| TimeIndex::load(base_offset, max_index_bytes, &b).map_err(|e| e.0))
        {
            Ok(i) => i,
            Err(why) => {
                tracing::warn!(base_offset, %why, "time index unusable, rebuilding");
                needs_rebuild = true;
                TimeIndex::new(base_offset, max_index_bytes)
            }
        };
        let (max_timestamp, offset_of_max_timestamp) = time_index.last().unwrap_or((-1, -1));
        if size > 0 && time_index.last().is_none() {
            needs_rebuild = true; // a closed non-empty segment always has a final time entry
        }
        let next_offset = offset_index
            .last()
            .map(|(o, _)| o + 1)
            .unwrap_or(base_offset)
            .max(offset_of_max_timestamp + 1);
        let mut seg = Segment {
            base_offset,
            dir: dir.to_path_buf(),
            log: Arc::new(log),
            size,
            offset_index,
            time_index,
            index_files: None,
            bytes_since_last_index: 0,
            next_offset,
            max_timestamp,
            offset_of_max_timestamp,
            first_batch_timestamp: None,
            created_ms,
            name_suffix: "",
        };
        if !needs_rebuild {
            needs_rebuild = !seg.last_index_entry_is_sane()? || !seg.last_time_entry_is_sane();
        }
        if !needs_rebuild && size > 0 {
            seg.first_batch_timestamp = match read_header_at(&seg.log, 0, size)? {
                Ok(h) if h.base_offset >= base_offset => Some(h.max_timestamp),
                _ => {
                    needs_rebuild = true;
                    None
                }
            };
        }
        Ok((seg, needs_rebuild))
    }

    /// The last offset-index entry must point at a batch whose last offset is the entry's.
    fn last_index_entry_is_sane(&self) -> io::Result<bool> {
        match self.offset_index.last() {
            None => Ok(true),
            Some((offset, pos)) => Ok(matches!(
                read_header_at(&self.log, u64::from(pos), self.size)?,
                Ok(h) if h.last_offset() == offset
            )),
        }
    }

    /// The last time-index entry is the segment's largest timestamp and the last offset of the
    /// batch holding it, which time retention trusts: one damaged byte in a segment's only entry
    /// (no ordering to break) could date it to 1970 and have it deleted. The batch header,
    /// under its CRC, must say the same (Kafka's index sanity check does not look).
    fn last_time_entry_is_sane(&self) -> bool {
        let Some((timestamp, offset)) = self.time_index.last() else {
            return true;
        };
        matches!(
            self.find_batch(offset),
            Ok(Some((_, h))) if h.last_offset() == offset && h.max_timestamp == timestamp
        )
    }

    pub(crate) fn base_offset(&self) -> i64 {
        self.base_offset
    }
    pub(crate) fn size(&self) -> u64 {
        self.size
    }
    pub(crate) fn next_offset(&self) -> i64 {
        self.next_offset
    }
    /// For segments that are not the last one: their data ends where the next begins.
    pub(crate) fn set_next_offset(&mut self, next: i64) {
        self.next_offset = next;
    }
    pub(crate) fn max_timestamp(&self) -> (i64, i64) {
        (self.max_timestamp, self.offset_of_max_timestamp)
    }
    pub(crate) fn log_file(&self) -> &Arc<File> {
        &self.log
    }
    pub(crate) fn index_files(&self) -> Option<&IndexFiles> {
        self.index_files.as_ref()
    }
    /// Stops holding the index files open (the segment is inactive and fsynced).
    pub(crate) fn release_index_files(&mut self) {
        self.index_files = None;
    }

    /// Max timestamp of the first batch (`None` if unknown), else the file's age: how old the
    /// oldest data of the segment is, for `max.compaction.lag.ms`.
    pub(crate) fn first_batch_timestamp_or_age(&self) -> i64 {
        match self.first_batch_timestamp {
            Some(t) if t >= 0 => t,
            _ => self.created_ms,
        }
    }

    /// Fsyncs the `.log` file and the index files if they are open.
    pub(crate) fn sync_all(&self) -> io::Result<()> {
        self.log.sync_all()?;
        if let Some(ix) = &self.index_files {
            ix.offset.sync_all()?;
            ix.time.sync_all()?;
        }
        Ok(())
    }

    /// The largest timestamp for time retention; the file's age if no batch has a timestamp.
    pub(crate) fn largest_timestamp(&self) -> i64 {
        if self.max_timestamp >= 0 {
            self.max_timestamp
        } else {
            self.created_ms
        }
    }

    pub(crate) fn offset_index_full(&self) -> bool {
        self.offset_index.is_full() || self.time_index.is_full()
    }

    /// Whether `segment.ms` has elapsed, measured like Kafka: from the first batch's timestamp
    /// to the incoming batch's, or from creation if the timestamps are unknown.
    pub(crate) fn time_to_roll(&self, incoming_max_ts: i64, now: i64, segment_ms: i64) -> bool {
        if self.size == 0 {
            return false;
        }
        match self.first_batch_timestamp {
            Some(t) if t >= 0 => incoming_max_ts.saturating_sub(t) > segment_ms,
            _ => now.saturating_sub(self.created_ms) > segment_ms,
        }
    }

    /// Whether an append of `len` bytes holding offsets `first..=last` fits this segment:
    /// offsets within 2^31-1 of the base (the indexes store them relative, in 32 bits) and
    /// positions within `i32`.
    pub(crate) fn fits(&self, first: i64, last: i64, len: u64) -> bool {
        first >= self.base_offset
            && relative_offset(self.base_offset, last).is_ok()
            && self.size.saturating_add(len) <= i32::MAX as u64
    }

    /// Writes whole batches at the end of the file. With `assign = Some((first, epoch))` the
    /// batches get consecutive offsets from `first` and the leader epoch: only their 16-byte
    /// prefixes are rebuilt, the rest of each batch is written straight from `records`.
    ///
    /// All or nothing: an append that does not [`Self::fits`] is refused before any write, and
    /// if a write fails the `.log` and index files are cut back to their previous sizes and the
    /// in-memory state restored, so no partial batch or index entry remains. If even that
    /// fails the error is [`LogError::Failed`] and the caller must stop using the log.
    pub(crate) fn append(
        &mut self,
        records: &[u8],
        headers: &[BatchHeader],
        assign: Option<(i64, i32)>,
        index_interval_bytes: u32,
    ) -> Result<(), LogError> {
        let (Some(first_header), Some(last_header)) = (headers.first(), headers.last()) else {
            return Ok(());
        };
        let (first, last) = match assign {
            Some((first, _)) => {
                let count: i64 = headers.iter().map(BatchHeader::offset_count).sum();
                (first, first.saturating_add(count - 1))
            }
            None => (first_header.base_offset, last_header.last_offset()),
        };
        if !self.fits(first, last, records.len() as u64) {
            return Err(LogError::OffsetOverflow {
                segment_base: self.base_offset,
                first,
                last,
            });
        }
        let saved = self.save_state();
        let result = self.append_unchecked(records, headers, assign, index_interval_bytes);
        if let Err(e) = result {
            if let Err(undo) = self.restore_state(&saved) {
                return Err(LogError::Failed(format!(
                    "append to segment {} failed ({e}) and could not be undone ({undo})",
                    self.base_offset
                )));
            }
            return Err(e);
        }
        Ok(())
    }

    fn append_unchecked(
        &mut self,
        records: &[u8],
        headers: &[BatchHeader],
        assign: Option<(i64, i32)>,
        index_interval_bytes: u32,
    ) -> Result<(), LogError> {
        match assign {
            None => write_all_vectored(&self.log, &mut [IoSlice::new(records)])?,
            Some((first, epoch)) => {
                let mut prefixes = Vec::with_capacity(headers.len());
                let mut next = first;
                let mut pos = 0usize;
                for h in headers {
                    let b = &records[pos..pos + h.total_size()];
                    prefixes.push(batch::patched_prefix(b, next, epoch));
                    next += h.offset_count();
                    pos += h.total_size();
                }
                let mut slices = Vec::with_capacity(headers.len() * 2);
                let mut pos = 0usize;
                for (h, p) in headers.iter().zip(&prefixes) {
                    slices.push(IoSlice::new(p));
                    slices.push(IoSlice::new(
                        &records[pos + batch::PATCHED_PREFIX..pos + h.total_size()],
                    ));
                    pos += h.total_size();
                }
                write_all_vectored(&self.log, &mut slices)?
            }
        };
        fault::check(Fault::LogWrite)?;
        let mut next = assign.map(|(f, _)| f);
        for h in headers {
            let base = next.unwrap_or(h.base_offset);
            self.index_batch(base, h, index_interval_bytes)?;
            next = next.map(|n| n + h.offset_count());
        }
        Ok(self.write_index_entries()?)
    }

    /// What [`Self::restore_state`] needs to undo a failed append.
    fn save_state(&self) -> SavedState {
        SavedState {
            size: self.size,
            next_offset: self.next_offset,
            max_timestamp: self.max_timestamp,
            offset_of_max_timestamp: self.offset_of_max_timestamp,
            first_batch_timestamp: self.first_batch_timestamp,
            bytes_since_last_index: self.bytes_since_last_index,
            offset_entries: self.offset_index.entry_count(),
            offset_written: self.offset_index.written_count(),
            time_entries: self.time_index.entry_count(),
            time_written: self.time_index.written_count(),
        }
    }

    /// Cuts the files back to `saved` and restores the in-memory state.
    fn restore_state(&mut self, saved: &SavedState) -> io::Result<()> {
        self.log.set_len(saved.size)?;
        if let Some(files) = &self.index_files {
            files
                .offset
                .set_len((saved.offset_written * OFFSET_ENTRY_SIZE) as u64)?;
            files
                .time
                .set_len((saved.time_written * TIME_ENTRY_SIZE) as u64)?;
        }
        self.offset_index.rollback(saved.offset_entries);
        self.offset_index.rollback_written(saved.offset_written);
        self.time_index.rollback(saved.time_entries);
        self.time_index.rollback_written(saved.time_written);
        self.size = saved.size;
        self.next_offset = saved.next_offset;
        self.max_timestamp = saved.max_timestamp;
        self.offset_of_max_timestamp = saved.offset_of_max_timestamp;
        self.first_batch_timestamp = saved.first_batch_timestamp;
        self.bytes_since_last_index = saved.bytes_since_last_index;
        Ok(())
    }

    /// Accounts one batch that now sits at the end of the file (at position `self.size`), with
    /// Kafka's rule: an index entry (batch last offset -> batch position) when more than
    /// `index_interval_bytes` were appended since the previous entry, with a time entry for the
    /// max timestamp so far.
    fn index_batch(
        &mut self,
        base_offset: i64,
        h: &BatchHeader,
        index_interval_bytes: u32,
    ) -> Result<(), LogError> {
        let last_offset = base_offset + i64::from(h.last_offset_delta);
        if base_offset < self.next_offset {
            return Err(LogError::Corrupt(format!(
                "batch at offset {base_offset} does not follow {} in segment {}",
                self.next_offset, self.base_offset
            )));
        }
        if self.size == 0 {
            self.first_batch_timestamp = Some(h.max_timestamp);
        }
        if h.max_timestamp > self.max_timestamp || self.offset_of_max_timestamp < 0 {
            self.max_timestamp = h.max_timestamp;
            self.offset_of_max_timestamp = last_offset;
        }
        if self.bytes_since_last_index > u64::from(index_interval_bytes) {
            self.offset_index.append(last_offset, self.size)?;
            self.time_index.maybe_append(
                self.max_timestamp,
                self.offset_of_max_timestamp,
                false,
            )?;
            self.bytes_since_last_index = 0;
        }
        let size = h.total_size() as u64;
        self.size += size;
        self.bytes_since_last_index += size;
        self.next_offset = last_offset + 1;
        Ok(())
    }

    /// Appends the in-memory index entries not yet in the files.
    fn write_index_entries(&mut self) -> io::Result<()> {
        let off = self.offset_index.pending_bytes();
        let time = self.time_index.pending_bytes();
        if off.is_empty() && time.is_empty() {
            return Ok(());
        }
        let files = self.open_index_files()?;
        (&*files.offset).write_all(&off)?;
        fault::check(Fault::IndexWrite)?;
        (&*files.time).write_all(&time)?;
        self.offset_index.mark_written();
        self.time_index.mark_written();
        Ok(())
    }

    /// Path of this segment's file of kind `kind` (`log`, `index`, `timeindex`).
    fn path(&self, kind: &str) -> PathBuf {
        segment_path(
            &self.dir,
            self.base_offset,
            &format!("{kind}{}", self.name_suffix),
        )
    }

    fn open_index_files(&mut self) -> io::Result<IndexFiles> {
        if let Some(f) = &self.index_files {
            return Ok(f.clone());
        }
        let files = IndexFiles {
            offset: Arc::new(open_append(&self.path(INDEX_SUFFIX), false)?),
            time: Arc::new(open_append(&self.path(TIME_INDEX_SUFFIX), false)?),
        };
        self.index_files = Some(files.clone());
        Ok(files)
    }

    /// Rewrites both index files from the in-memory entries (after a rebuild or truncation).
    fn rewrite_index_files(&mut self) -> io::Result<()> {
        let files = self.open_index_files()?;
        files.offset.set_len(0)?;
        files.time.set_len(0)?;
        self.offset_index.mark_unwritten();
        self.time_index.mark_unwritten();
        self.write_index_entries()
    }

    /// Called when the segment stops being the active one (roll, close): records the final
    /// max timestamp in the time index, as Kafka does, so a reopened segment knows it.
    pub(crate) fn finalize(&mut self) -> Result<(), LogError> {
        if self.size > 0 {
            self.time_index
                .maybe_append(self.max_timestamp, self.offset_of_max_timestamp, true)?;
        }
        Ok(self.write_index_entries()?)
    }

    /// Rebuilds indexes and state by scanning batches from `from` (0 = whole segment, indexes
    /// reset; otherwise the position of the last offset-index entry, whose state is trusted).
    /// With `verify_crc`, at the first invalid or truncated batch the file is cut there.
    fn scan_from(
        &mut self,
        from: u64,
        verify_crc: bool,
        index_interval_bytes: u32,
    ) -> Result<ScanOutcome, LogError> {
        let mut outcome = ScanOutcome::default();
        if from == 0 {
            self.offset_index.clear();
            self.time_index.clear();
            self.max_timestamp = -1;
            self.offset_of_max_timestamp = -1;
            self.first_batch_timestamp = None;
            self.next_offset = self.base_offset;
        }
        let file_size = self.log.metadata()?.len();
        let log = Arc::clone(&self.log);
        let mut scanner = Scanner::new(&log, from, file_size);
        self.size = from;
        self.bytes_since_last_index = 0;
        let mut last_epoch = None;
        loop {
            match scanner.next_batch(verify_crc)? {
                Scanned::End => break,
                Scanned::Batch { position, header } => {
                    debug_assert_eq!(position, self.size);
                    let ok_offsets = header.base_offset >= self.base_offset
                        && (self.size == 0 || header.base_offset >= self.next_offset)
                        && header.last_offset_delta >= 0
                        && header.last_offset() - self.base_offset <= i64::from(i32::MAX)
                        && position + header.total_size() as u64 <= i32::MAX as u64;
                    if !ok_offsets {
                        tracing::warn!(
                            base = self.base_offset,
                            position,
                            "batch offsets or position out of range"
                        );
                        outcome.truncated = true;
                        break;
                    }
                    if header.partition_leader_epoch >= 0
                        && last_epoch != Some(header.partition_leader_epoch)
                    {
                        last_epoch = Some(header.partition_leader_epoch);
                        outcome
                            .epoch_starts
                            .push((header.partition_leader_epoch, header.base_offset));
                    }
                    self.index_batch(header.base_offset, &header, index_interval_bytes)?;
                }
                Scanned::Invalid { position, reason } => {
                    tracing::warn!(base = self.base_offset, position, %reason, "truncating segment at invalid batch");
                    outcome.truncated = true;
                    break;
                }
            }
        }
        if outcome.truncated || self.size != file_size {
            self.log.set_len(self.size)?;
            outcome.truncated = true;
        }
        self.time_index.truncate_to_offset(self.next_offset);
        self.rewrite_index_files()?;
        Ok(outcome)
    }

    /// `(epoch, first offset)` each time the batches' leader epoch changes, read from the batch
    /// headers only (for a lost epoch checkpoint). The segment was loaded or recovered, so its
    /// batches are whole; a header that does not parse ends the walk (logged) rather than the
    /// open, as the history before it is still right.
    pub(crate) fn epoch_starts(&self) -> io::Result<Vec<(i32, i64)>> {
        let mut starts: Vec<(i32, i64)> = Vec::new();
        let mut pos = 0u64;
        while pos < self.size {
            let header = match read_header_at(&self.log, pos, self.size)? {
                Ok(h) => h,
                Err(e) => {
                    tracing::warn!(base = self.base_offset, pos, error = %e, "epoch scan stopped at an unreadable batch");
                    break;
                }
            };
            let epoch = header.partition_leader_epoch;
            if epoch >= 0 && starts.last().map(|s| s.0) != Some(epoch) {
                starts.push((epoch, header.base_offset));
            }
            pos += header.total_size() as u64;
        }
        Ok(starts)
    }

    /// Full recovery: verify every batch, rebuild both indexes, cut at the first bad batch.
    pub(crate) fn recover(&mut self, index_interval_bytes: u32) -> Result<ScanOutcome, LogError> {
        self.scan_from(0, true, index_interval_bytes)
    }

    /// For the last segment of a cleanly opened log: trust the indexes, verify the batches after
    /// the last offset-index entry (that gives the log end offset), cut a bad tail.
    pub(crate) fn load_tail(&mut self, index_interval_bytes: u32) -> Result<ScanOutcome, LogError> {
        let Some((entry_offset, pos)) = self.offset_index.last() else {
            return self.scan_from(0, true, index_interval_bytes);
        };
        let from = u64::from(pos);
        let indexed = match read_header_at(&self.log, from, self.size)? {
            Ok(h) if h.last_offset() == entry_offset => h,
            _ => return self.scan_from(0, true, index_interval_bytes),
        };
        // State as of the indexed batch: time entries up to its last offset describe the
        // batches before the scan start; scanning from it re-derives everything after.
        self.time_index.truncate_to_offset(entry_offset + 1);
        let (t, o) = self.time_index.last().unwrap_or((-1, -1));
        self.max_timestamp = t;
        self.offset_of_max_timestamp = o;
        self.next_offset = indexed.base_offset;
        self.scan_from(from, true, index_interval_bytes)
    }

    /// The batch containing `offset` (the first whose last offset is >= it) and its position;
    /// `None` if the segment ends before `offset`.
    pub(crate) fn find_batch(&self, offset: i64) -> Result<Option<(u64, BatchHeader)>, LogError> {
        let mut pos = self
            .offset_index
            .lookup(offset)
            .map(|(_, p)| u64::from(p))
            .unwrap_or(0);
        while pos < self.size {
            let h = self.header_at(pos)?;
            if h.last_offset() >= offset {
                return Ok(Some((pos, h)));
            }
            pos += h.total_size() as u64;
        }
        Ok(None)
    }

    /// The first batch whose max timestamp is >= `ts` (spec J.3), with its position.
    pub(crate) fn find_by_timestamp(
        &self,
        ts: i64,
        min_offset: i64,
    ) -> Result<Option<(u64, BatchHeader)>, LogError> {
        let from_time = self
            .time_index
            .lookup(ts)
            .map(|(_, o)| o)
            .unwrap_or(self.base_offset);
        let start = from_time.max(min_offset);
        let Some((mut pos, _)) = self.find_batch(start)? else {
            return Ok(None);
        };
        while pos < self.size {
            let h = self.header_at(pos)?;
            if h.max_timestamp >= ts && h.last_offset() >= min_offset {
                return Ok(Some((pos, h)));
            }
            pos += h.total_size() as u64;
        }
        Ok(None)
    }

    /// The header at `pos`; anything but a whole batch there is corruption of trusted data.
    pub(crate) fn header_at(&self, pos: u64) -> Result<BatchHeader, LogError> {
        read_header_at(&self.log, pos, self.size)?.map_err(|e| {
            LogError::Corrupt(format!("segment {} position {pos}: {e}", self.base_offset))
        })
    }

    /// Reads `len` bytes at `pos` (bounded by the segment size).
    pub(crate) fn read_bytes(&self, pos: u64, len: usize) -> io::Result<Vec<u8>> {
        self.slice(pos, len).read()
    }

    /// `len` bytes at `pos` (bounded by the segment size), to be read later without the log's
    /// lock ([`FileSlice::read`]).
    pub(crate) fn slice(&self, pos: u64, len: usize) -> FileSlice {
        let len = (len as u64).min(self.size.saturating_sub(pos)) as usize;
        FileSlice {
            file: self.log.clone(),
            pos,
            len,
        }
    }

    /// Removes every batch that contains an offset >= `offset`. The segment then ends at the
    /// start of the first removed batch if it fell mid-batch, else at `offset`.
    pub(crate) fn truncate_to(
        &mut self,
        offset: i64,
        index_interval_bytes: u32,
    ) -> Result<(), LogError> {
        let Some((pos, h)) = self.find_batch(offset)? else {
            // Every batch is below `offset` (a compacted segment may end in a gap).
            self.next_offset = self.next_offset.min(offset);
            return Ok(());
        };
        self.log.set_len(pos)?;
        self.size = pos;
        self.offset_index.truncate_to_position(pos as u32);
        self.next_offset = h.base_offset;
        self.time_index.truncate_to_offset(h.base_offset);
        let (t, o) = self.time_index.last().unwrap_or((-1, -1));
        self.max_timestamp = t;
        self.offset_of_max_timestamp = o;
        let from = self
            .offset_index
            .last()
            .map(|(_, p)| u64::from(p))
            .unwrap_or(0);
        if from > 0 {
            // Re-derive max timestamp and interval state from the last indexed batch on.
            let entry = self.header_at(from)?;
            self.next_offset = entry.base_offset;
        }
        self.scan_from(from, false, index_interval_bytes)?;
        // With compaction gaps the first removed batch may start after `offset`: the log then
        // ends at `offset` itself, as in Kafka (never beyond what the caller asked).
        self.next_offset = self.next_offset.max(h.base_offset.min(offset));
        Ok(())
    }

    /// Renames the segment's files to `*.deleted` and returns the new paths.
    pub(crate) fn rename_to_deleted(&self) -> io::Result<Vec<PathBuf>> {
        let mut out = Vec::with_capacity(4);
        for suffix in [
            LOG_SUFFIX,
            INDEX_SUFFIX,
            TIME_INDEX_SUFFIX,
            crate::partition_log::TXN_INDEX_SUFFIX,
        ] {
            let from = self.path(suffix);
            let mut to = from.clone().into_os_string();
            to.push(DELETED_SUFFIX);
            let to = PathBuf::from(to);
            match fs::rename(&from, &to) {
                Ok(()) => out.push(to),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

/// `write_all` for a slice of `IoSlice`s, in groups of at most `MAX_IOVECS`.
fn write_all_vectored(file: &File, slices: &mut [IoSlice<'_>]) -> io::Result<()> {
    let mut w: &File = file;
    let mut rest = slices;
    while !rest.is_empty() {
        let n_group = rest.len().min(MAX_IOVECS);
        let (group, tail) = rest.split_at_mut(n_group);
        let mut group = group;
        while !group.is_empty() {
            match w.write_vectored(group) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "writev wrote 0")),
                Ok(n) => IoSlice::advance_slices(&mut group, n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        rest = tail;
    }
    Ok(())
}
