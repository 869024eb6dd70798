//! Fetch reads and offset lookups (ListOffsets by timestamp, max timestamp).

use bytes::Bytes;

use super::{PartitionLog, ReadResult};
use crate::batch;
use crate::error::LogError;
use crate::record_scan;
use crate::segment::FileSlice;

impl PartitionLog {
    /// Reads whole batches starting with the batch containing `offset`, up to `max_bytes`
    /// total, never returning a batch whose last offset is >= `max_offset` (the HW for
    /// consumers, the LEO for followers). With `min_one_batch` the first batch is returned even
    /// if larger than `max_bytes` (KIP-74). Like Kafka, one read stays within one segment.
    /// `offset == LEO` (or >= `max_offset`) gives empty records; `offset < log start` or
    /// `> LEO` is [`LogError::OffsetOutOfRange`].
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<ReadResult, LogError> {
        self.plan_read(offset, max_bytes, max_offset, min_one_batch)?
            .execute()
    }

    /// The part of [`Self::read`] that needs the log: finds where the batches lie (index and
    /// batch headers). The bytes themselves are read by [`ReadPlan::execute`], which needs no
    /// lock, so a large fetch never holds the partition's lock over its I/O.
    pub fn plan_read(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<ReadPlan, LogError> {
        self.ensure_not_failed()?;
        let leo = self.log_end_offset();
        if offset < self.log_start_offset || offset > leo {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start: self.log_start_offset,
                log_end: leo,
            });
        }
        let mut plan = ReadPlan {
            slice: None,
            max_offset,
            segment: 0,
            log_start_offset: self.log_start_offset,
            log_end_offset: leo,
            high_watermark: self.high_watermark,
        };
        if offset == leo || offset >= max_offset {
            return Ok(plan);
        }
        for seg in &self.segments[self.segment_index_for(offset)..] {
            let Some((pos, first)) = seg.find_batch(offset)? else {
                continue;
            };
            if first.last_offset() >= max_offset {
                return Ok(plan);
            }
            plan.segment = seg.base_offset();
            if first.total_size() > max_bytes {
                if min_one_batch {
                    plan.slice = Some(seg.slice(pos, first.total_size()));
                }
                return Ok(plan);
            }
            plan.slice = Some(seg.slice(pos, max_bytes));
            return Ok(plan);
        }
        Ok(plan)
    }

    /// ListOffsets by timestamp (spec J.3): the first record at or after the log start whose
    /// timestamp is >= `ts`, as `(offset, timestamp, leader epoch)`; `None` if there is none.
    /// The batch is found through the time index (first batch with max timestamp >= `ts`);
    /// inside an uncompressed CreateTime batch the exact record is found by walking the record
    /// headers, for a compressed one the batch's first offset and max timestamp are returned.
    pub fn offset_for_timestamp(&self, ts: i64) -> Result<Option<(i64, i64, i32)>, LogError> {
        self.ensure_not_failed()?;
        let start = self.log_start_offset;
        for seg in &self.segments {
            if seg.next_offset() <= start || seg.max_timestamp().0 < ts {
                continue;
            }
            let Some((pos, h)) = seg.find_by_timestamp(ts, start)? else {
                continue;
            };
            let exact = if h.compression() == 0 && !h.timestamp_type_is_log_append() {
                let bytes = seg.read_bytes(pos, h.total_size())?;
                record_scan::first_record_at_or_after(&h, &bytes, ts, start)
            } else {
                None
            };
            let (offset, timestamp) = exact.unwrap_or((h.base_offset.max(start), h.max_timestamp));
            return Ok(Some((offset, timestamp, h.partition_leader_epoch)));
        }
        Ok(None)
    }

    /// The largest timestamp in the log and the offset of its record, `(timestamp, offset)`
    /// (ListOffsets `-3` MAX_TIMESTAMP); `None` for an empty log. The offset is exact for
    /// uncompressed batches, the batch's last offset otherwise (Kafka's shallow offset).
    pub fn max_timestamp(&self) -> Option<(i64, i64)> {
        let seg = self
            .segments
            .iter()
            .filter(|s| s.size() > 0 && s.max_timestamp().1 >= 0)
            .max_by_key(|s| s.max_timestamp().0)?;
        let (ts, shallow) = seg.max_timestamp();
        let exact = (|| {
            let (pos, h) = seg.find_batch(shallow).ok()??;
            if h.compression() != 0 || h.timestamp_type_is_log_append() {
                return None;
            }
            let bytes = seg.read_bytes(pos, h.total_size()).ok()?;
            record_scan::first_record_at_or_after(&h, &bytes, ts, h.base_offset)
                .filter(|&(_, t)| t == ts)
                .map(|(o, _)| o)
        })();
        Some((ts, exact.unwrap_or(shallow)))
    }
}

/// A read located under the log's lock and done without it ([`PartitionLog::plan_read`]).
#[derive(Debug, Clone)]
pub struct ReadPlan {
    slice: Option<FileSlice>,
    max_offset: i64,
    /// Base offset of the segment read (for error messages).
    segment: i64,
    log_start_offset: i64,
    log_end_offset: i64,
    high_watermark: i64,
}

impl ReadPlan {
    /// Reads the bytes and keeps the whole batches below the plan's `max_offset`. A segment
    /// cut shorter since the plan was made (a follower truncation) yields fewer batches.
    pub fn execute(self) -> Result<ReadResult, LogError> {
        let mut buf = match &self.slice {
            Some(slice) => slice.read()?,
            None => Vec::new(),
        };
        let mut used = 0usize;
        while used < buf.len() {
            match batch::frame(&buf[used..]) {
                Ok((h, bytes)) if h.last_offset() < self.max_offset => used += bytes.len(),
                Ok(_) | Err(batch::BatchError::Truncated { .. }) => break,
                Err(e) if used == 0 => {
                    return Err(LogError::Corrupt(format!("segment {}: {e}", self.segment)))
                }
                Err(_) => break,
            }
        }
        buf.truncate(used);
        Ok(ReadResult {
            records: Bytes::from(buf),
            log_start_offset: self.log_start_offset,
            log_end_offset: self.log_end_offset,
            high_watermark: self.high_watermark,
        })
    }
}
