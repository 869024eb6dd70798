//! Reading batches back from a segment's `.log` file: single headers (for lookups) and a
//! buffered batch-by-batch scan that verifies framing and CRC (for recovery and index rebuild).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use crate::batch::{self, BatchError, BatchHeader, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD};

/// Reads and parses the batch header at `position`. `Ok(Err(_))` means the bytes there are not a
/// batch header (the caller decides whether that is corruption); `Ok(Ok(_))` also guarantees the
/// whole batch lies within `file_size`.
pub(crate) fn read_header_at(
    file: &File,
    position: u64,
    file_size: u64,
) -> io::Result<Result<BatchHeader, BatchError>> {
    let available = file_size.saturating_sub(position);
    if available < RECORD_BATCH_OVERHEAD as u64 {
        return Ok(Err(BatchError::Truncated {
            needed: RECORD_BATCH_OVERHEAD,
            available: available as usize,
        }));
    }
    let mut buf = [0u8; RECORD_BATCH_OVERHEAD];
    file.read_exact_at(&mut buf, position)?;
    let header = match BatchHeader::parse(&buf) {
        Ok(h) => h,
        Err(e) => return Ok(Err(e)),
    };
    if header.total_size() as u64 > available {
        return Ok(Err(BatchError::Truncated {
            needed: header.total_size(),
            available: available as usize,
        }));
    }
    Ok(Ok(header))
}

/// One step of a [`Scanner`].
#[derive(Debug)]
pub(crate) enum Scanned {
    Batch {
        position: u64,
        header: BatchHeader,
    },
    /// Clean end of the file.
    End,
    /// The bytes at `position` are not a complete valid batch: truncate here.
    Invalid {
        position: u64,
        reason: String,
    },
}

const CHUNK: usize = 1 << 20;

/// Walks a `.log` file batch by batch through a 1 MiB read buffer.
pub(crate) struct Scanner<'a> {
    file: &'a File,
    pos: u64,
    end: u64,
    buf: Vec<u8>,
    buf_pos: u64,
}

impl<'a> Scanner<'a> {
    pub(crate) fn new(file: &'a File, start: u64, end: u64) -> Self {
        Scanner {
            file,
            pos: start,
            end,
            buf: Vec::new(),
            buf_pos: start,
        }
    }

    /// Makes `buf` cover `[pos, pos + need)`; `need` must fit before `end`.
    fn fill(&mut self, need: usize) -> io::Result<&[u8]> {
        let covered = self.pos >= self.buf_pos
            && self.pos + need as u64 <= self.buf_pos + self.buf.len() as u64;
        if !covered {
            let len = (need.max(CHUNK) as u64).min(self.end - self.pos) as usize;
            self.buf.resize(len, 0);
            self.file.read_exact_at(&mut self.buf, self.pos)?;
            self.buf_pos = self.pos;
        }
        let off = (self.pos - self.buf_pos) as usize;
        Ok(&self.buf[off..off + need])
    }

    /// The bytes of the batch [`Self::next_batch`] just returned (at `position`, `len` bytes):
    /// still in the read buffer, so no second read.
    pub(crate) fn batch_bytes(&self, position: u64, len: usize) -> Option<&[u8]> {
        let off = usize::try_from(position.checked_sub(self.buf_pos)?).ok()?;
        self.buf.get(off..off.checked_add(len)?)
    }

    /// The next batch, verifying its CRC if asked.
    pub(crate) fn next_batch(&mut self, verify_crc: bool) -> io::Result<Scanned> {
        let position = self.pos;
        let remaining = self.end.saturating_sub(position);
        if remaining == 0 {
            return Ok(Scanned::End);
        }
        let invalid = |reason: String| Ok(Scanned::Invalid { position, reason });
        if remaining < LOG_OVERHEAD as u64 {
            return invalid(format!("{remaining} trailing bytes"));
        }
        let head = self.fill(LOG_OVERHEAD)?;
        let length = i32::from_be_bytes([head[8], head[9], head[10], head[11]]);
        if length < batch::MIN_BATCH_LENGTH {
            return invalid(format!("batch length {length}"));
        }
        let total = LOG_OVERHEAD + length as usize;
        if total as u64 > remaining {
            return invalid(format!("batch of {total} bytes truncated at {remaining}"));
        }
        let bytes = self.fill(total)?;
        let header = match BatchHeader::parse(bytes) {
            Ok(h) => h,
            Err(e) => return invalid(e.to_string()),
        };
        if verify_crc {
            if let Err(e) = batch::verify_crc(&header, bytes) {
                return invalid(e.to_string());
            }
        }
        self.pos += total as u64;
        Ok(Scanned::Batch { position, header })
    }
}
