//! Leader and follower appends, and rolling (spec J.4).

use super::{AppendInfo, PartitionLog};
use crate::batch::{self, BatchError, BatchHeader};
use crate::checkpoint::sync_dir;
use crate::error::LogError;
use crate::segment::{now_ms, Segment};

impl PartitionLog {
    /// Leader append: `records` is a blob already checked by [`batch::validate_batches`], whose
    /// headers are passed in. Offsets are assigned from the LEO, each batch's base offset and
    /// leader epoch are patched on the way to disk (the payload is written straight from
    /// `records`, once), segments roll as needed, a new leader epoch is recorded.
    ///
    /// An I/O error (a full disk, EIO) fails the log for good ([`Self::fail_on_io_error`]).
    pub fn append(
        &mut self,
        records: &[u8],
        headers: &[BatchHeader],
        leader_epoch: i32,
    ) -> Result<AppendInfo, LogError> {
        let appended = self.append_unguarded(records, headers, leader_epoch);
        self.fail_on_io_error(appended)
    }

    fn append_unguarded(
        &mut self,
        records: &[u8],
        headers: &[BatchHeader],
        leader_epoch: i32,
    ) -> Result<AppendInfo, LogError> {
        self.ensure_open()?;
        let described: usize = headers.iter().map(BatchHeader::total_size).sum();
        if headers.is_empty() {
            return Err(BatchError::Empty.into());
        }
        if described != records.len() || headers.iter().any(|h| h.last_offset_delta < 0) {
            return Err(LogError::Corrupt(format!(
                "headers describe {described} bytes, records have {}",
                records.len()
            )));
        }
        let first_offset = self.log_end_offset();
        let mut next = first_offset;
        let (mut max_timestamp, mut offset_of_max_timestamp) = (i64::MIN, -1);
        for h in headers {
            let last = next + i64::from(h.last_offset_delta);
            if h.max_timestamp > max_timestamp {
                max_timestamp = h.max_timestamp;
                offset_of_max_timestamp = last;
            }
            next = last + 1;
        }
        let last_offset = next - 1;
        self.maybe_roll(
            records.len() as u64,
            max_timestamp,
            first_offset,
            last_offset,
        )?;
        if leader_epoch >= 0 {
            self.epochs.assign(leader_epoch, first_offset)?;
        }
        let interval = self.config.index_interval_bytes;
        let written = self.active_mut().append(
            records,
            headers,
            Some((first_offset, leader_epoch)),
            interval,
        );
        self.after_segment_append(written)?;
        Ok(AppendInfo {
            first_offset,
            last_offset,
            max_timestamp,
            offset_of_max_timestamp,
            log_start_offset: self.log_start_offset,
        })
    }

    /// Follower append (replication): batches keep their offsets and epochs and must start at
    /// or after the LEO, offsets increasing (gaps allowed: the leader's log may be compacted). CRCs are verified; a trailing partial batch (a fetch cut by
    /// size) is ignored. `Ok(None)` if there was no complete batch.
    /// An I/O error fails the log for good, as on the leader.
    pub fn append_as_follower(&mut self, records: &[u8]) -> Result<Option<AppendInfo>, LogError> {
        let appended = self.append_as_follower_unguarded(records);
        self.fail_on_io_error(appended)
    }

    fn append_as_follower_unguarded(
        &mut self,
        records: &[u8],
    ) -> Result<Option<AppendInfo>, LogError> {
        self.ensure_open()?;
        let mut headers = Vec::new();
        let mut rest = records;
        let mut expected = self.log_end_offset();
        while !rest.is_empty() {
            let (h, bytes) = match batch::frame(rest) {
                Ok(x) => x,
                Err(BatchError::Truncated { .. }) => break,
                Err(e) => return Err(e.into()),
            };
            batch::verify_crc(&h, bytes)?;
            // Gaps are legal (a compacted leader's log has them); going back is not.
            if h.base_offset < expected || h.last_offset_delta < 0 {
                return Err(LogError::UnexpectedOffset {
                    expected,
                    got: h.base_offset,
                });
            }
            expected = h.last_offset() + 1;
            headers.push(h);
            rest = &rest[bytes.len()..];
        }
        let Some(first) = headers.first() else {
            return Ok(None);
        };
        let first_offset = first.base_offset;
        let last_offset = expected - 1;
        let whole = &records[..records.len() - rest.len()];
        let (mut max_timestamp, mut offset_of_max_timestamp) = (i64::MIN, -1);
        for h in &headers {
            if h.max_timestamp > max_timestamp {
                max_timestamp = h.max_timestamp;
                offset_of_max_timestamp = h.last_offset();
            }
        }
        // Roll per batch group: a follower's fetch can exceed a small segment size, but a
        // single append must stay in one segment, so roll once up front like Kafka.
        self.maybe_roll(whole.len() as u64, max_timestamp, first_offset, last_offset)?;
        for h in &headers {
            if h.partition_leader_epoch >= 0 {
                self.epochs
                    .assign(h.partition_leader_epoch, h.base_offset)?;
            }
        }
        let interval = self.config.index_interval_bytes;
        let written = self.active_mut().append(whole, &headers, None, interval);
        self.after_segment_append(written)?;
        Ok(Some(AppendInfo {
            first_offset,
            last_offset,
            max_timestamp,
            offset_of_max_timestamp,
            log_start_offset: self.log_start_offset,
        }))
    }

    /// After a segment append: on failure the segment is as before (or the log is failed),
    /// and epoch entries recorded for batches beyond the LEO that were not stored are dropped
    /// (one starting at the LEO is what a new leader records anyway).
    fn after_segment_append(&mut self, written: Result<(), LogError>) -> Result<(), LogError> {
        let Err(e) = written else {
            return Ok(());
        };
        if let LogError::Failed(why) = &e {
            self.fail(why.clone());
        } else if let Err(undo) = self.epochs.truncate_from_end(self.log_end_offset() + 1) {
            self.fail(format!(
                "append failed ({e}), epoch cache not restored ({undo})"
            ));
        }
        Err(e)
    }

    /// Rolls before an append of `size` bytes holding `first_offset..=last_offset` if the
    /// active segment is non-empty and (a) would exceed `segment.bytes`, (b) is older than
    /// `segment.ms`, (c) has a full index, or (d) could not store the offsets relative to its
    /// base in 32 bits (Kafka rolls then too). An append that does not fit even a fresh
    /// segment (more than 2^31-1 offsets) is then refused by the segment, before any write.
    fn maybe_roll(
        &mut self,
        size: u64,
        max_timestamp: i64,
        first_offset: i64,
        last_offset: i64,
    ) -> Result<(), LogError> {
        let seg_bytes = self.config.effective_segment_bytes();
        let seg = self.active();
        if seg.size() == 0 {
            return Ok(());
        }
        let roll = seg.size().saturating_add(size) > seg_bytes
            || seg.time_to_roll(max_timestamp, now_ms(), self.config.segment_ms)
            || seg.offset_index_full()
            || !seg.fits(first_offset, last_offset, size);
        if roll {
            self.roll()?;
        }
        Ok(())
    }

    /// Starts a new active segment at the LEO (no-op if the active one is empty). The new file's
    /// directory entry is fsynced at once; the old segment's data is left to the next flush.
    pub fn roll(&mut self) -> Result<(), LogError> {
        let rolled = self.roll_unguarded();
        self.fail_on_io_error(rolled)
    }

    fn roll_unguarded(&mut self) -> Result<(), LogError> {
        self.ensure_open()?;
        if self.active().size() == 0 {
            return Ok(());
        }
        let base = self.log_end_offset();
        self.active_mut().finalize()?;
        let seg = Segment::create(&self.dir, base, self.config.max_index_bytes)?;
        sync_dir(&self.dir)?;
        tracing::debug!(dir = %self.dir.display(), base, "rolled segment");
        self.segments.push(seg);
        self.rolled_since_snapshot = true;
        Ok(())
    }
}
