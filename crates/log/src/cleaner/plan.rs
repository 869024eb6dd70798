//! One cleaning pass over a snapshot of closed segments, run without the log's lock.
//!
//! [`CompactionPlan`] is taken under the lock (cheap: file handles and sizes of the segments
//! that may be cleaned). [`CompactionPlan::run`] reads those files and writes `.cleaned`
//! segments; appends, reads and flushes go on meanwhile, because closed segments never change
//! except by truncation or deletion, which [`crate::PartitionLog::finish_compaction`] detects
//! before it commits anything.

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

use crate::batch::BatchHeader;
use crate::error::LogError;
use crate::scan::{Scanned, Scanner};
use crate::segment::Segment;

use super::offset_map::OffsetMap;
use super::records::parse_records;
use super::rewrite::{batch_records, filter_batch, filter_marker, FilterRules, Verdict};
use super::swap;
use super::txn_markers::TxnTracker;
use super::CompactionConfig;

/// Whether `h` is a data batch of an aborted transaction.
pub(crate) fn aborted(batches: &crate::txn::AbortedBatches, h: &BatchHeader) -> bool {
    h.is_transactional() && !h.is_control() && batches.contains(h.producer_id, h.base_offset)
}

/// Output is appended in chunks of about this size (one `writev` each).
const WRITE_CHUNK: usize = 1 << 20;

/// A closed segment as the plan saw it. The `Arc<File>` identifies it: a segment deleted and
/// re-created with the same base offset has another handle.
#[derive(Debug, Clone)]
pub(crate) struct SegmentRef {
    pub(crate) base: i64,
    pub(crate) next_offset: i64,
    pub(crate) size: u64,
    pub(crate) log: Arc<File>,
}

/// A snapshot of what one cleaning pass may touch; see [`crate::PartitionLog::prepare_compaction`].
#[derive(Debug)]
pub struct CompactionPlan {
    pub(crate) dir: PathBuf,
    pub(crate) now_ms: i64,
    pub(crate) config: CompactionConfig,
    /// `segment.bytes`: groups of adjacent segments are merged while their input fits.
    pub(crate) segment_bytes: u64,
    pub(crate) index_interval_bytes: u32,
    pub(crate) max_index_bytes: u32,
    /// Records at or above this were not yet in any offset map (cleaner checkpoint).
    pub(crate) first_dirty: i64,
    /// The first uncleanable offset: the base of the first segment not in `segments`.
    pub(crate) end: i64,
    /// Every cleanable segment, oldest first: closed, below the HW, older than the min lag.
    pub(crate) segments: Vec<SegmentRef>,
    pub(crate) max_map_entries: usize,
    /// The aborted transactions below `end`: their batches never enter the map and are dropped.
    pub(crate) aborted: crate::txn::AbortedBatches,
    /// The same, as their `.txnindex` entries (which markers and entries may go).
    pub(crate) aborted_txns: Vec<crate::txn::AbortedTxn>,
}

/// One rewritten group: replaces `members` (contiguous, `[base, end)`) by `{base}.*.cleaned`.
#[derive(Debug)]
pub(crate) struct CleanedGroup {
    pub(crate) base: i64,
    pub(crate) end: i64,
    pub(crate) members: Vec<SegmentRef>,
    /// The `.txnindex` entries of the new segment (markers in `[base, end)` it keeps).
    pub(crate) txn_entries: Vec<crate::txn::AbortedTxn>,
}

/// What [`CompactionPlan::run`] produced, to hand to
/// [`crate::PartitionLog::finish_compaction`]. Dropping it unfinished removes its files.
#[derive(Debug)]
pub struct CompactionOutcome {
    pub(crate) dir: PathBuf,
    pub(crate) groups: Vec<CleanedGroup>,
    /// The new cleaner checkpoint: every record below it went through an offset map.
    pub(crate) clean_up_to: i64,
    pub(crate) records_removed: u64,
    pub(crate) bytes_before: u64,
    pub(crate) bytes_after: u64,
    /// Earliest delete horizon of a batch still holding tombstones in the cleaned range.
    pub(crate) min_tombstone_horizon: Option<i64>,
}

impl Drop for CompactionOutcome {
    fn drop(&mut self) {
        for g in self.groups.drain(..) {
            swap::discard_cleaned(&self.dir, g.base);
        }
    }
}

/// Appends output batches to a `.cleaned` segment through the normal segment code (so the
/// indexes follow the same rules as live appends).
struct GroupWriter {
    seg: Segment,
    buf: Vec<u8>,
    headers: Vec<BatchHeader>,
    interval: u32,
}

impl GroupWriter {
    fn push(&mut self, bytes: &[u8]) -> Result<(), LogError> {
        let h = BatchHeader::parse(bytes)?;
        let total = self.seg.size() + (self.buf.len() + bytes.len()) as u64;
        if total > i32::MAX as u64 {
            return Err(LogError::Corrupt(format!(
                "cleaned segment {} would exceed 2 GiB",
                self.seg.base_offset()
            )));
        }
        self.buf.extend_from_slice(bytes);
        self.headers.push(h);
        if self.buf.len() >= WRITE_CHUNK {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), LogError> {
        if !self.headers.is_empty() {
            self.seg
                .append(&self.buf, &self.headers, None, self.interval)?;
            self.buf.clear();
            self.headers.clear();
        }
        Ok(())
    }

    /// Writes the rest, the final time-index entry, and fsyncs all three files.
    fn finish(mut self) -> Result<u64, LogError> {
        self.flush()?;
        self.seg.finalize()?;
        self.seg.sync_all()?;
        Ok(self.seg.size())
    }
}

/// Calls `f(position, header, bytes)` for every batch of `seg` (CRC verified) below `limit`
/// bytes; a bad batch in a closed segment is corruption, and the pass stops.
fn for_each_batch(
    seg: &SegmentRef,
    limit: u64,
    mut f: impl FnMut(u64, &BatchHeader, &[u8]) -> Result<bool, LogError>,
) -> Result<(), LogError> {
    let mut scanner = Scanner::new(&seg.log, 0, limit.min(seg.size));
    loop {
        match scanner.next_batch(true)? {
            Scanned::End => return Ok(()),
            Scanned::Invalid { position, reason } => {
                return Err(LogError::Corrupt(format!(
                    "segment {} position {position}: {reason}",
                    seg.base
                )))
            }
            Scanned::Batch { position, header } => {
                let bytes = scanner
                    .batch_bytes(position, header.total_size())
                    .ok_or_else(|| LogError::Corrupt("batch not in the scan buffer".into()))?;
                if !f(position, &header, bytes)? {
                    return Ok(());
                }
            }
        }
    }
}

/// Consecutive runs of segments whose combined input fits `max_bytes` and whose offsets fit
/// 32-bit relative offsets from the run's base (J.4), as index ranges.
fn group_by_size(segs: &[SegmentRef], max_bytes: u64) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < segs.len() {
        let mut j = i + 1;
        let mut size = segs[i].size;
        while j < segs.len()
            && size + segs[j].size <= max_bytes
            && segs[j].next_offset - 1 - segs[i].base <= i64::from(i32::MAX)
        {
            size += segs[j].size;
            j += 1;
        }
        out.push(i..j);
        i = j;
    }
    out
}

impl CompactionPlan {
    /// The offsets this pass will consider dirty: `[first_dirty, end)`.
    pub fn dirty_range(&self) -> (i64, i64) {
        (self.first_dirty, self.end)
    }

    /// Runs the pass: builds the offset map (pass 1), then rewrites every group of segments
    /// below the point the map reached into `.cleaned` files (pass 2). Groups where nothing
    /// changes are not rewritten. Takes no lock; the result goes to
    /// [`crate::PartitionLog::finish_compaction`].
    pub fn run(self) -> Result<CompactionOutcome, LogError> {
        let (map, clean_up_to) = self.build_offset_map()?;
        let mut outcome = CompactionOutcome {
            dir: self.dir.clone(),
            groups: Vec::new(),
            clean_up_to,
            records_removed: 0,
            bytes_before: 0,
            bytes_after: 0,
            min_tombstone_horizon: None,
        };
        let n = self.segments.partition_point(|s| s.base < clean_up_to);
        let mut txns = TxnTracker::new(&self.aborted_txns);
        let rules = FilterRules {
            map: &map,
            aborted: &self.aborted,
            now_ms: self.now_ms,
            delete_retention_ms: self.config.delete_retention_ms,
        };
        for range in group_by_size(
            &self.segments[..n],
            self.segment_bytes.clamp(1, i32::MAX as u64),
        ) {
            self.clean_group(
                &self.segments[range],
                rules,
                &mut txns,
                clean_up_to,
                &mut outcome,
            )?;
        }
        Ok(outcome)
    }

    /// Pass 1: key -> latest offset over the dirty records, in offset order. Stops before a
    /// batch that might overflow the map (but always takes at least one), so the returned
    /// clean-up-to offset is a batch boundary.
    fn build_offset_map(&self) -> Result<(OffsetMap, i64), LogError> {
        let mut map = OffsetMap::new(self.max_map_entries);
        let mut stop = None;
        for seg in self
            .segments
            .iter()
            .filter(|s| s.next_offset > self.first_dirty)
        {
            for_each_batch(seg, u64::MAX, |_, h, bytes| {
                if h.last_offset() < self.first_dirty || h.is_control() || aborted(&self.aborted, h)
                {
                    return Ok(true);
                }
                if map.len() > 0 && !map.has_room_for(h.record_count.max(0) as usize) {
                    stop = Some(h.base_offset);
                    return Ok(false);
                }
                let records = batch_records(h, bytes).and_then(|data| {
                    parse_records(&data, h.record_count, h.base_offset, h.base_timestamp).map(
                        |rs| {
                            rs.iter()
                                .filter_map(|r| Some((r.key?.to_vec(), r.offset)))
                                .collect::<Vec<_>>()
                        },
                    )
                });
                match records {
                    Ok(keys) => {
                        for (key, offset) in
                            keys.into_iter().filter(|(_, o)| *o >= self.first_dirty)
                        {
                            map.put(&key, offset);
                        }
                    }
                    Err(why) => {
                        tracing::warn!(base_offset = h.base_offset, %why, "cleaner skips an undecodable batch");
                    }
                }
                Ok(true)
            })?;
            if stop.is_some() {
                break;
            }
        }
        Ok((
            map,
            stop.unwrap_or(self.end).max(self.first_dirty.min(self.end)),
        ))
    }

    /// Pass 2 for one group: filters every batch (markers as `txns` decides); batches at or
    /// above `clean_up_to` are copied as they are. A single segment with nothing to change is
    /// left alone (no output at all).
    fn clean_group(
        &self,
        members: &[SegmentRef],
        rules: FilterRules<'_>,
        txns: &mut TxnTracker,
        clean_up_to: i64,
        outcome: &mut CompactionOutcome,
    ) -> Result<(), LogError> {
        let base = members[0].base;
        let end = members[members.len() - 1].next_offset;
        let bytes_before: u64 = members.iter().map(|s| s.size).sum();
        let mut writer: Option<GroupWriter> = None;
        let mut removed = 0u64;
        let mut horizon: Option<i64> = None;
        let open_writer = |outcome: &mut CompactionOutcome| -> Result<GroupWriter, LogError> {
            // Registered first, so an error from here on removes the files (outcome's Drop).
            outcome.groups.push(CleanedGroup {
                base,
                end,
                members: members.to_vec(),
                txn_entries: Vec::new(),
            });
            Ok(GroupWriter {
                seg: Segment::create_named(&self.dir, base, self.max_index_bytes, swap::CLEANED)?,
                buf: Vec::new(),
                headers: Vec::new(),
                interval: self.index_interval_bytes,
            })
        };
        if members.len() > 1 {
            writer = Some(open_writer(outcome)?);
        }
        for seg in members {
            for_each_batch(seg, u64::MAX, |position, h, bytes| {
                let filtered = if h.last_offset() >= clean_up_to {
                    None
                } else if h.is_control() {
                    let marker = crate::control::parse_marker(h, bytes);
                    let removable = txns.on_control(h, marker);
                    Some(filter_marker(h, bytes, removable, rules))
                } else {
                    txns.on_data(h);
                    Some(filter_batch(h, bytes, rules))
                };
                if let Some(f) = &filtered {
                    removed += f.records_removed;
                    if let Some(t) = f.tombstone_horizon {
                        horizon = Some(horizon.map_or(t, |m| m.min(t)));
                    }
                }
                let verdict = filtered.map_or(Verdict::Verbatim, |f| f.verdict);
                if writer.is_none() && !matches!(verdict, Verdict::Verbatim) {
                    // First change in a lone segment: copy the unchanged prefix, then go on.
                    let mut w = open_writer(outcome)?;
                    for_each_batch(seg, position, |_, _, prefix| w.push(prefix).map(|_| true))?;
                    writer = Some(w);
                }
                if let Some(w) = writer.as_mut() {
                    match verdict {
                        Verdict::Verbatim => w.push(bytes)?,
                        Verdict::Drop => {}
                        Verdict::Rebuilt(b) => w.push(&b)?,
                    }
                }
                Ok(true)
            })?;
        }
        outcome.records_removed += removed;
        outcome.bytes_before += bytes_before;
        if let Some(t) = horizon {
            outcome.min_tombstone_horizon =
                Some(outcome.min_tombstone_horizon.map_or(t, |m| m.min(t)));
        }
        match writer {
            None => outcome.bytes_after += bytes_before,
            Some(w) => {
                outcome.bytes_after += w.finish()?;
                let entries: Vec<crate::txn::AbortedTxn> = self
                    .aborted_txns
                    .iter()
                    .filter(|t| t.last_offset >= base && t.last_offset < end && txns.keeps_entry(t))
                    .copied()
                    .collect();
                swap::write_txn_index(&self.dir, base, &entries)?;
                if let Some(g) = outcome.groups.last_mut() {
                    g.txn_entries = entries;
                }
                swap::write_marker(&self.dir, base, end)?;
            }
        }
        Ok(())
    }
}
