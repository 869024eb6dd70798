//! The sparse offset index (`.index`) and time index (`.timeindex`) of one segment (spec J.3).
//!
//! Entries live in memory (a `Vec`) and are appended to the files in Kafka's byte format, so the
//! files always hold exactly the entries, big-endian: offset index `relativeOffset i32,
//! position i32` (8 bytes), time index `timestamp i64, relativeOffset i32` (12 bytes). There is
//! no preallocation and no mmap: the in-memory copy serves lookups, the file is for restarts
//! (and for Kafka's tools).

pub(crate) const OFFSET_ENTRY_SIZE: usize = 8;
pub(crate) const TIME_ENTRY_SIZE: usize = 12;

/// Why an index file was not trusted (it is then rebuilt from the log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IndexCorrupt(pub String);

/// Why an entry could not be added: appends check what Kafka's `OffsetIndex.append` checks
/// (instead of a `debug_assert!` that release builds skip and that let a forged batch wrap the
/// 32-bit relative offsets, issue 9 item 1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexAppendError {
    #[error("offset {offset} is not within 2^31-1 of the segment base {base}")]
    RelativeOffsetOverflow { base: i64, offset: i64 },
    #[error("index entry (offset {offset}, position {position}) does not follow the last one")]
    OutOfOrder { offset: i64, position: u64 },
}

/// `offset - base` as a 32-bit relative offset, if it is one.
pub(crate) fn relative_offset(base: i64, offset: i64) -> Result<i32, IndexAppendError> {
    offset
        .checked_sub(base)
        .and_then(|r| i32::try_from(r).ok())
        .filter(|r| *r >= 0)
        .ok_or(IndexAppendError::RelativeOffsetOverflow { base, offset })
}

/// Maps offsets to byte positions: each entry is (last offset of a batch, position of that
/// batch). Lookups return the greatest entry at or below the target, from where a forward scan
/// of batch headers finds the batch that contains the target.
#[derive(Debug)]
pub(crate) struct OffsetIndex {
    base_offset: i64,
    entries: Vec<(i32, u32)>,
    written: usize,
    max_entries: usize,
}

impl OffsetIndex {
    pub(crate) fn new(base_offset: i64, max_index_bytes: u32) -> Self {
        OffsetIndex {
            base_offset,
            entries: Vec::new(),
            written: 0,
            max_entries: (max_index_bytes as usize / OFFSET_ENTRY_SIZE).max(1),
        }
    }

    /// Loads the file's bytes, checking the invariants appends maintain (relative offsets and
    /// positions strictly increasing, positions inside the log).
    pub(crate) fn load(
        base_offset: i64,
        max_index_bytes: u32,
        bytes: &[u8],
        log_size: u64,
    ) -> Result<Self, IndexCorrupt> {
        if bytes.len() % OFFSET_ENTRY_SIZE != 0 {
            return Err(IndexCorrupt(format!("offset index size {}", bytes.len())));
        }
        let mut idx = OffsetIndex::new(base_offset, max_index_bytes);
        for chunk in bytes.chunks_exact(OFFSET_ENTRY_SIZE) {
            let rel = i32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
            let pos = i32::from_be_bytes([chunk[4], chunk[5], chunk[6], chunk[7]]);
            let ok_order = idx
                .entries
                .last()
                .is_none_or(|&(r, p)| rel > r && (pos as u32) > p);
            if rel < 0 || pos < 0 || u64::from(pos as u32) >= log_size || !ok_order {
                return Err(IndexCorrupt(format!(
                    "offset index entry ({rel}, {pos}) out of order or beyond the log"
                )));
            }
            idx.entries.push((rel, pos as u32));
        }
        idx.written = idx.entries.len();
        Ok(idx)
    }

    pub(crate) fn is_full(&self) -> bool {
        self.entries.len() >= self.max_entries
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Adds (offset, position) unless the index is full. Both must be beyond the last entry,
    /// the offset within 2^31-1 of the base and the position a non-negative `i32`.
    pub(crate) fn append(&mut self, offset: i64, position: u64) -> Result<(), IndexAppendError> {
        let rel = relative_offset(self.base_offset, offset)?;
        let out_of_order = IndexAppendError::OutOfOrder { offset, position };
        let pos = u32::try_from(position)
            .ok()
            .filter(|p| *p <= i32::MAX as u32)
            .ok_or(out_of_order.clone())?;
        if self
            .entries
            .last()
            .is_some_and(|&(r, p)| r >= rel || p >= pos)
        {
            return Err(out_of_order);
        }
        if !self.is_full() {
            self.entries.push((rel, pos));
        }
        Ok(())
    }

    /// Entries held (written or not), to roll back to with [`Self::rollback`].
    pub(crate) fn entry_count(&self) -> usize {
        self.entries.len()
    }

    /// Entries already in the file.
    pub(crate) fn written_count(&self) -> usize {
        self.written
    }

    /// Forgets entries beyond the first `entries` (a failed append); `written` follows.
    pub(crate) fn rollback(&mut self, entries: usize) {
        self.entries.truncate(entries);
        self.written = self.written.min(entries);
    }

    /// The file was cut back to `written` entries.
    pub(crate) fn rollback_written(&mut self, written: usize) {
        self.written = written.min(self.entries.len());
    }

    /// Greatest entry with offset <= `offset`, as (absolute offset, position).
    pub(crate) fn lookup(&self, offset: i64) -> Option<(i64, u32)> {
        let rel = offset - self.base_offset;
        let n = self.entries.partition_point(|&(r, _)| i64::from(r) <= rel);
        n.checked_sub(1).map(|i| {
            let (r, p) = self.entries[i];
            (self.base_offset + i64::from(r), p)
        })
    }

    pub(crate) fn last(&self) -> Option<(i64, u32)> {
        self.entries
            .last()
            .map(|&(r, p)| (self.base_offset + i64::from(r), p))
    }

    /// Drops entries at or after byte `position` (log truncation); returns the new entry count.
    pub(crate) fn truncate_to_position(&mut self, position: u32) -> usize {
        let keep = self.entries.partition_point(|&(_, p)| p < position);
        self.entries.truncate(keep);
        self.written = self.written.min(keep);
        keep
    }

    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.written = 0;
    }

    /// Bytes of the entries not yet in the file; call [`Self::mark_written`] after writing them.
    pub(crate) fn pending_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity((self.entries.len() - self.written) * OFFSET_ENTRY_SIZE);
        for &(r, p) in &self.entries[self.written..] {
            out.extend_from_slice(&r.to_be_bytes());
            out.extend_from_slice(&(p as i32).to_be_bytes());
        }
        out
    }

    pub(crate) fn mark_written(&mut self) {
        self.written = self.entries.len();
    }

    /// Forgets that entries were written (the file was emptied to be rewritten).
    pub(crate) fn mark_unwritten(&mut self) {
        self.written = 0;
    }
}

/// Maps timestamps to offsets: entry (T, O) says the largest timestamp among the batches up to
/// and including the one with last offset O is T, first reached at O. Timestamps strictly
/// increase, so lookups binary-search for the greatest entry <= the target.
#[derive(Debug)]
pub(crate) struct TimeIndex {
    base_offset: i64,
    entries: Vec<(i64, i32)>,
    written: usize,
    max_entries: usize,
}

impl TimeIndex {
    pub(crate) fn new(base_offset: i64, max_index_bytes: u32) -> Self {
        TimeIndex {
            base_offset,
            entries: Vec::new(),
            written: 0,
            max_entries: (max_index_bytes as usize / TIME_ENTRY_SIZE).max(1),
        }
    }

    /// Loads the file's bytes; timestamps must strictly increase, offsets must not decrease.
    pub(crate) fn load(
        base_offset: i64,
        max_index_bytes: u32,
        bytes: &[u8],
    ) -> Result<Self, IndexCorrupt> {
        if bytes.len() % TIME_ENTRY_SIZE != 0 {
            return Err(IndexCorrupt(format!("time index size {}", bytes.len())));
        }
        let mut idx = TimeIndex::new(base_offset, max_index_bytes);
        for c in bytes.chunks_exact(TIME_ENTRY_SIZE) {
            let ts = i64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            let rel = i32::from_be_bytes([c[8], c[9], c[10], c[11]]);
            let ok_order = idx.entries.last().is_none_or(|&(t, r)| ts > t && rel >= r);
            if rel < 0 || !ok_order {
                return Err(IndexCorrupt(format!(
                    "time index entry ({ts}, {rel}) out of order"
                )));
            }
            idx.entries.push((ts, rel));
        }
        idx.written = idx.entries.len();
        Ok(idx)
    }

    pub(crate) fn is_full(&self) -> bool {
        self.entries.len() >= self.max_entries
    }

    /// Appends (timestamp, offset) if the timestamp is larger than the last entry's. `force`
    /// ignores the size limit: the final entry of a rolled segment must always be recorded.
    pub(crate) fn maybe_append(
        &mut self,
        timestamp: i64,
        offset: i64,
        force: bool,
    ) -> Result<(), IndexAppendError> {
        if self.entries.last().is_some_and(|&(t, _)| timestamp <= t) {
            return Ok(());
        }
        if self.is_full() && !force {
            return Ok(());
        }
        let rel = relative_offset(self.base_offset, offset)?;
        if self.entries.last().is_some_and(|&(_, r)| rel < r) {
            return Err(IndexAppendError::OutOfOrder {
                offset,
                position: 0,
            });
        }
        self.entries.push((timestamp, rel));
        Ok(())
    }

    /// Entries held (written or not), to roll back to with [`Self::rollback`].
    pub(crate) fn entry_count(&self) -> usize {
        self.entries.len()
    }

    /// Entries already in the file.
    pub(crate) fn written_count(&self) -> usize {
        self.written
    }

    /// Forgets entries beyond the first `entries` (a failed append); `written` follows.
    pub(crate) fn rollback(&mut self, entries: usize) {
        self.entries.truncate(entries);
        self.written = self.written.min(entries);
    }

    /// The file was cut back to `written` entries.
    pub(crate) fn rollback_written(&mut self, written: usize) {
        self.written = written.min(self.entries.len());
    }

    /// Greatest entry with timestamp <= `ts`, as (timestamp, absolute offset).
    pub(crate) fn lookup(&self, ts: i64) -> Option<(i64, i64)> {
        let n = self.entries.partition_point(|&(t, _)| t <= ts);
        n.checked_sub(1).map(|i| {
            let (t, r) = self.entries[i];
            (t, self.base_offset + i64::from(r))
        })
    }

    pub(crate) fn last(&self) -> Option<(i64, i64)> {
        self.entries
            .last()
            .map(|&(t, r)| (t, self.base_offset + i64::from(r)))
    }

    /// Drops entries whose offset is >= `offset`; returns the new entry count.
    pub(crate) fn truncate_to_offset(&mut self, offset: i64) -> usize {
        let keep = self
            .entries
            .partition_point(|&(_, r)| self.base_offset + i64::from(r) < offset);
        self.entries.truncate(keep);
        self.written = self.written.min(keep);
        keep
    }

    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.written = 0;
    }

    pub(crate) fn pending_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity((self.entries.len() - self.written) * TIME_ENTRY_SIZE);
        for &(t, r) in &self.entries[self.written..] {
            out.extend_from_slice(&t.to_be_bytes());
            out.extend_from_slice(&r.to_be_bytes());
        }
        out
    }

    pub(crate) fn mark_written(&mut self) {
        self.written = self.entries.len();
    }

    /// Forgets that entries were written (the file was emptied to be rewritten).
    pub(crate) fn mark_unwritten(&mut self) {
        self.written = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_index_lookup_and_roundtrip() {
        let mut idx = OffsetIndex::new(100, 1024);
        idx.append(104, 0).unwrap();
        idx.append(110, 5000).unwrap();
        idx.append(120, 9000).unwrap();
        assert_eq!(idx.lookup(99), None);
        assert_eq!(idx.lookup(104), Some((104, 0)));
        assert_eq!(idx.lookup(115), Some((110, 5000)));
        assert_eq!(idx.lookup(1000), Some((120, 9000)));
        let bytes = idx.pending_bytes();
        assert_eq!(bytes.len(), 24);
        assert_eq!(&bytes[0..8], &[0, 0, 0, 4, 0, 0, 0, 0]);
        let loaded = OffsetIndex::load(100, 1024, &bytes, 10_000).unwrap();
        assert_eq!(loaded.lookup(115), Some((110, 5000)));
        assert!(OffsetIndex::load(100, 1024, &bytes, 9000).is_err());
        assert!(OffsetIndex::load(100, 1024, &bytes[..7], 10_000).is_err());
        let mut swapped = bytes.clone();
        swapped[8..16].copy_from_slice(&bytes[0..8]);
        assert!(OffsetIndex::load(100, 1024, &swapped, 10_000).is_err());
        assert_eq!(idx.truncate_to_position(5000), 1);
        assert_eq!(idx.lookup(1000), Some((104, 0)));
    }

    #[test]
    fn offset_index_full() {
        let mut idx = OffsetIndex::new(0, 16);
        idx.append(1, 0).unwrap();
        assert!(!idx.is_full());
        idx.append(2, 10).unwrap();
        assert!(idx.is_full());
        idx.append(3, 20).unwrap();
        assert_eq!(idx.len(), 2);
    }

    #[test]
    fn time_index_monotonic_and_lookup() {
        let mut t = TimeIndex::new(50, 1024);
        t.maybe_append(1000, 52, false).unwrap();
        t.maybe_append(900, 55, false).unwrap(); // not larger: skipped
        t.maybe_append(2000, 60, false).unwrap();
        assert_eq!(t.lookup(999), None);
        assert_eq!(t.lookup(1500), Some((1000, 52)));
        assert_eq!(t.lookup(2000), Some((2000, 60)));
        let bytes = t.pending_bytes();
        assert_eq!(bytes.len(), 24);
        let l = TimeIndex::load(50, 1024, &bytes).unwrap();
        assert_eq!(l.last(), Some((2000, 60)));
        assert_eq!(t.truncate_to_offset(60), 1);
        let mut bad = bytes.clone();
        bad[12..20].copy_from_slice(&1i64.to_be_bytes());
        assert!(TimeIndex::load(50, 1024, &bad).is_err());
    }

    /// Caught: relative offsets beyond 2^31-1 were cast with `as i32` (wrapping) in release
    /// builds, guarded only by `debug_assert!`; they are errors now.
    #[test]
    fn appends_that_do_not_fit_are_errors() {
        let mut idx = OffsetIndex::new(100, 1024);
        let too_far = 100 + i64::from(i32::MAX) + 1;
        assert!(matches!(
            idx.append(too_far, 0),
            Err(IndexAppendError::RelativeOffsetOverflow { .. })
        ));
        assert!(idx.append(99, 0).is_err());
        idx.append(100 + i64::from(i32::MAX), 10).unwrap();
        assert!(matches!(
            idx.append(100 + i64::from(i32::MAX), 20),
            Err(IndexAppendError::OutOfOrder { .. })
        ));
        let mut idx = OffsetIndex::new(0, 1024);
        idx.append(5, 100).unwrap();
        assert!(idx.append(6, 100).is_err(), "position must increase");
        assert!(
            idx.append(7, u64::from(u32::MAX)).is_err(),
            "position beyond i32"
        );
        assert_eq!(idx.entry_count(), 1);
        let mut t = TimeIndex::new(0, 1024);
        assert!(t.maybe_append(5, i64::from(i32::MAX) + 1, true).is_err());
        assert_eq!(t.entry_count(), 0);
    }
}
