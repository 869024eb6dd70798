//! Leader-side validation of a Produce request's records, like Kafka's `LogValidator`: the
//! batch headers ([`batch::validate_batches`]) and then every record inside each batch.
//!
//! The records are *walked*, never decoded into values and never re-encoded: each record's
//! varint framing is read (length, attributes, timestamp delta, offset delta, key, value,
//! headers), and keys and values are skipped. Uncompressed records are read in place;
//! compressed ones through the bounded streaming decoder of [`crate::compression`], which
//! holds a few KiB plus the codec's window and stops at [`MAX_DECOMPRESSED_BATCH_BYTES`].
//!
//! Rules (Kafka's `DefaultRecord.readFrom` and `LogValidator.validateRecord` for client
//! batches), each an INVALID_RECORD (87) unless said otherwise:
//! * `recordCount` cannot exceed what the bytes can hold (a record takes at least 7 bytes,
//!   decompressed), so a header alone cannot claim 2^31 offsets;
//! * each record lies within its declared length and its fields fill it exactly;
//! * offset deltas are 0, 1, .., `lastOffsetDelta` (strictly increasing and dense: with
//!   `recordCount == lastOffsetDelta + 1` nothing else fits);
//! * exactly `recordCount` records, no trailing bytes;
//! * header keys are never null;
//! * a compressed stream that cannot be decoded is CORRUPT_MESSAGE (2).
//!
//! Two rules concern a record's content rather than its framing and are reported *per record*,
//! as Kafka's `LogValidator` does (KIP-467): every offending record of the batch is listed with
//! its index in the batch ([`RecordError`]) and the walk goes on to the end of the batch:
//! * on a compacted topic every record has a key (INVALID_RECORD);
//! * on a CreateTime topic a record's timestamp (unless -1) lies within
//!   `message.timestamp.before.max.ms` / `after.max.ms` of the broker's clock (INVALID_TIMESTAMP;
//!   a missing key is reported first, as Kafka's `validateKey` runs before `validateTimestamp`).

use std::io::{self, Read};

use crate::batch::{self, BatchError, BatchHeader, RECORD_BATCH_OVERHEAD};
use crate::compression::{self, DecompressError, MAX_DECOMPRESSED_BATCH_BYTES};

/// The smallest record: length 1 byte, then attributes, timestamp delta, offset delta, key
/// length, value length and header count, one byte each.
const MIN_RECORD_BYTES: usize = 7;
/// The smallest record body (what the length prefix counts).
const MIN_RECORD_BODY: i64 = 6;

/// What the topic demands of records beyond their framing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRules {
    /// `cleanup.policy` includes `compact`: a record without a key is INVALID_RECORD.
    pub require_keys: bool,
    /// Most bytes a batch's records may take decompressed.
    pub max_decompressed_bytes: usize,
    /// CreateTime topics: the inclusive window `[earliest, latest]` a record's timestamp must
    /// fall in (the broker's clock minus `message.timestamp.before.max.ms`, plus
    /// `message.timestamp.after.max.ms`); `None` checks no timestamps.
    pub timestamp_window: Option<(i64, i64)>,
}

/// One record refused for its content (Produce v8+ `record_errors`, KIP-467).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    /// The record's index within its batch (0-based).
    pub batch_index: i32,
    pub message: String,
    /// INVALID_TIMESTAMP rather than INVALID_RECORD.
    pub timestamp: bool,
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "RecordError(batchIndex={}, message='{}')",
            self.batch_index, self.message
        )
    }
}

impl RecordRules {
    pub fn new(require_keys: bool) -> Self {
        RecordRules {
            require_keys,
            max_decompressed_bytes: MAX_DECOMPRESSED_BATCH_BYTES,
            timestamp_window: None,
        }
    }

    /// Checks record timestamps against `now` (a CreateTime topic's rule, KIP-937 bounds).
    pub fn with_timestamp_bounds(
        mut self,
        now: i64,
        before_max_ms: i64,
        after_max_ms: i64,
    ) -> Self {
        self.timestamp_window = Some((
            now.saturating_sub(before_max_ms.max(0)),
            now.saturating_add(after_max_ms.max(0)),
        ));
        self
    }
}

/// Validates a Produce request's records blob: the headers (magic, lengths, CRC, count,
/// no control batches, `max.message.bytes`) and then every record of every batch. Returns the
/// headers for the append. Nothing is copied or rewritten.
pub fn validate_produce(
    buf: &[u8],
    max_batch_bytes: usize,
    rules: RecordRules,
) -> Result<Vec<BatchHeader>, BatchError> {
    let headers = batch::validate_batches(buf, max_batch_bytes)?;
    let mut at = 0;
    for h in &headers {
        validate_records(h, &buf[at..at + h.total_size()], rules)?;
        at += h.total_size();
    }
    Ok(headers)
}

/// Walks the records of one framed batch (`batch` is the whole batch, header included).
pub fn validate_records(
    header: &BatchHeader,
    batch: &[u8],
    rules: RecordRules,
) -> Result<(), BatchError> {
    let area = batch
        .get(RECORD_BATCH_OVERHEAD..)
        .ok_or(BatchError::Truncated {
            needed: RECORD_BATCH_OVERHEAD,
            available: batch.len(),
        })?;
    let count = usize::try_from(header.record_count).map_err(|_| count_error(header))?;
    let codec = header.compression();
    let capacity = if codec == 0 {
        area.len()
    } else {
        rules.max_decompressed_bytes
    };
    if count > capacity / MIN_RECORD_BYTES {
        return Err(BatchError::InvalidRecord(format!(
            "record count {count} cannot fit in {capacity} bytes of records"
        )));
    }
    let mut errors = Vec::new();
    if codec == 0 {
        let mut src = SliceSource { data: area, pos: 0 };
        walk(&mut src, count, rules, header.base_timestamp, &mut errors)?;
        src.expect_end()?;
    } else {
        let stream = compression::decoder(codec, area, rules.max_decompressed_bytes)
            .map_err(BatchError::Decompress)?;
        let mut src = StreamSource::new(stream, codec);
        walk(&mut src, count, rules, header.base_timestamp, &mut errors)?;
        src.expect_end()?;
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(BatchError::RecordErrors(errors))
    }
}

fn count_error(h: &BatchHeader) -> BatchError {
    BatchError::BadRecordCount {
        record_count: h.record_count,
        last_offset_delta: h.last_offset_delta,
    }
}

fn invalid(msg: impl Into<String>) -> BatchError {
    BatchError::InvalidRecord(msg.into())
}

/// Bytes to walk: a slice in place, or a decompressing stream.
trait Source {
    /// The next byte; `Ok(None)` at the end of the records.
    fn next_byte(&mut self) -> Result<Option<u8>, BatchError>;
    /// Skips `n` bytes, all of which must be there.
    fn skip(&mut self, n: usize) -> Result<(), BatchError>;
    /// Bytes consumed so far.
    fn position(&self) -> u64;
    /// Fails if anything is left after the last record.
    fn expect_end(&mut self) -> Result<(), BatchError> {
        match self.next_byte()? {
            None => Ok(()),
            Some(_) => Err(invalid("trailing bytes after the last record")),
        }
    }
}

struct SliceSource<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Source for SliceSource<'_> {
    fn next_byte(&mut self) -> Result<Option<u8>, BatchError> {
        let b = self.data.get(self.pos).copied();
        self.pos += usize::from(b.is_some());
        Ok(b)
    }
    fn skip(&mut self, n: usize) -> Result<(), BatchError> {
        if n > self.data.len() - self.pos {
            return Err(invalid("record extends beyond the batch"));
        }
        self.pos += n;
        Ok(())
    }
    fn position(&self) -> u64 {
        self.pos as u64
    }
}

/// Reads a decompressing stream through an 8 KiB buffer.
struct StreamSource<'a> {
    stream: Box<dyn Read + 'a>,
    codec: u8,
    buf: Box<[u8; 8192]>,
    start: usize,
    end: usize,
    consumed: u64,
}

impl<'a> StreamSource<'a> {
    fn new(stream: Box<dyn Read + 'a>, codec: u8) -> Self {
        StreamSource {
            stream,
            codec,
            buf: Box::new([0; 8192]),
            start: 0,
            end: 0,
            consumed: 0,
        }
    }

    /// Refills the buffer; false at the end of the stream.
    fn fill(&mut self) -> Result<bool, BatchError> {
        loop {
            match self.stream.read(&mut self.buf[..]) {
                Ok(n) => {
                    self.start = 0;
                    self.end = n;
                    return Ok(n > 0);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(BatchError::Decompress(DecompressError::from_io(
                        self.codec, &e,
                    )))
                }
            }
        }
    }
}

impl Source for StreamSource<'_> {
    fn next_byte(&mut self) -> Result<Option<u8>, BatchError> {
        if self.start == self.end && !self.fill()? {
            return Ok(None);
        }
        let b = self.buf[self.start];
        self.start += 1;
        self.consumed += 1;
        Ok(Some(b))
    }
    fn skip(&mut self, mut n: usize) -> Result<(), BatchError> {
        while n > 0 {
            if self.start == self.end && !self.fill()? {
                return Err(invalid("record extends beyond the batch"));
            }
            let step = n.min(self.end - self.start);
            self.start += step;
            self.consumed += step as u64;
            n -= step;
        }
        Ok(())
    }
    fn position(&self) -> u64 {
        self.consumed
    }
}

/// A zig-zag varint of at most `max_bytes` bytes (5 for `sint32`, 10 for `sint64`).
fn varlong(src: &mut dyn Source, max_bytes: u32) -> Result<i64, BatchError> {
    let mut raw: u64 = 0;
    for i in 0..max_bytes {
        let b = src
            .next_byte()?
            .ok_or_else(|| invalid("record extends beyond the batch"))?;
        raw |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok((raw >> 1) as i64 ^ -((raw & 1) as i64));
        }
    }
    Err(invalid("varint too long"))
}

fn varint(src: &mut dyn Source) -> Result<i32, BatchError> {
    i32::try_from(varlong(src, 5)?).map_err(|_| invalid("varint out of range"))
}

/// Walks exactly `count` records; records refused for their content are added to `errors`
/// (framing errors end the walk).
fn walk(
    src: &mut dyn Source,
    count: usize,
    rules: RecordRules,
    base_timestamp: i64,
    errors: &mut Vec<RecordError>,
) -> Result<(), BatchError> {
    for index in 0..count {
        let length = i64::from(varint(src)?);
        if length < MIN_RECORD_BODY {
            return Err(invalid(format!("record {index} has invalid size {length}")));
        }
        let start = src.position();
        let fits = |src: &dyn Source, n: i64| -> Result<usize, BatchError> {
            let used = (src.position() - start) as i64;
            if n < 0 || n > length - used {
                return Err(invalid(format!(
                    "record {index}: a field extends beyond the record"
                )));
            }
            Ok(n as usize)
        };
        src.next_byte()?
            .ok_or_else(|| invalid("record extends beyond the batch"))?; // attributes
        let timestamp_delta = varlong(src, 10)?;
        let offset_delta = varint(src)?;
        if usize::try_from(offset_delta).ok() != Some(index) {
            return Err(invalid(format!(
                "record {index} has offset delta {offset_delta}: offsets must be 0..=lastOffsetDelta, in order"
            )));
        }
        let key_length = varint(src)?;
        // `index < count <= i32::MAX` (the header's count is an i32).
        let batch_index = i32::try_from(index).unwrap_or(i32::MAX);
        if key_length >= 0 {
            let n = fits(src, i64::from(key_length))?;
            src.skip(n)?;
        } else if rules.require_keys {
            errors.push(RecordError {
                batch_index,
                message: "Compacted topic cannot accept message without key".into(),
                timestamp: false,
            });
        }
        if let Some((earliest, latest)) = rules.timestamp_window {
            let timestamp = base_timestamp.wrapping_add(timestamp_delta);
            let keyed = key_length >= 0 || !rules.require_keys;
            if keyed && timestamp != -1 && !(earliest..=latest).contains(&timestamp) {
                errors.push(RecordError {
                    batch_index,
                    message: format!(
                        "Timestamp {timestamp} of message with offset {index} is out of range. \
                         The timestamp should be within [{earliest}, {latest}]"
                    ),
                    timestamp: true,
                });
            }
        }
        let value_length = varint(src)?;
        if value_length >= 0 {
            let n = fits(src, i64::from(value_length))?;
            src.skip(n)?;
        }
        let headers = varint(src)?;
        if headers < 0 {
            return Err(invalid(format!("record {index} has {headers} headers")));
        }
        for _ in 0..headers {
            let key = varint(src)?;
            if key < 0 {
                return Err(invalid(format!("record {index}: a header key is null")));
            }
            let n = fits(src, i64::from(key))?;
            src.skip(n)?;
            let value = varint(src)?;
            if value >= 0 {
                let n = fits(src, i64::from(value))?;
                src.skip(n)?;
            }
            fits(src, 0)?;
        }
        let used = (src.position() - start) as i64;
        if used != length {
            return Err(invalid(format!(
                "record {index}: expected to read {length} bytes of record, read {used}"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
