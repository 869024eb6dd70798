//! Record batch v2 headers (spec J.2): parsing, validation of a Produce request's records,
//! and patching of the two fields the broker owns.
//!
//! Only the fixed 61-byte header is ever parsed; the records themselves (possibly compressed)
//! stay opaque bytes, so a batch is stored exactly as the producer encoded it. The CRC covers
//! `attributes..end`, which is why `baseOffset` and `partitionLeaderEpoch` can be rewritten in
//! place without recomputing it.

use runnel_codes as codes;

/// Size of the v2 batch header, from `baseOffset` up to and including `recordCount`.
pub const RECORD_BATCH_OVERHEAD: usize = 61;
/// `baseOffset` + `batchLength`: the part of the header not counted in `batchLength`.
pub const LOG_OVERHEAD: usize = 12;
/// The smallest legal `batchLength` (a header with no records).
pub const MIN_BATCH_LENGTH: i32 = (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD) as i32;
/// Bytes `0..PATCHED_PREFIX` (baseOffset, batchLength, partitionLeaderEpoch) are outside the
/// CRC; the leader rewrites offset and epoch there.
pub const PATCHED_PREFIX: usize = 16;
/// Start of the CRC-covered area (`attributes`).
const CRC_START: usize = 21;

const COMPRESSION_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_BIT: i16 = 1 << 3;
const TRANSACTIONAL_BIT: i16 = 1 << 4;
const CONTROL_BIT: i16 = 1 << 5;

/// Why a blob is not a sequence of valid v2 record batches.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    #[error("record batch truncated: need {needed} bytes, have {available}")]
    Truncated { needed: usize, available: usize },
    #[error("unsupported record batch magic {0} (only v2 is accepted)")]
    BadMagic(i8),
    #[error("record batch CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("invalid record batch length {0}")]
    BadLength(i32),
    #[error("inconsistent record count {record_count} for last offset delta {last_offset_delta}")]
    BadRecordCount {
        record_count: i32,
        last_offset_delta: i32,
    },
    #[error("record batch of {size} bytes exceeds the maximum of {max}")]
    TooLarge { size: usize, max: usize },
    #[error("no record batch in the records")]
    Empty,
    #[error("clients may not write control batches")]
    ControlBatch,
    /// A record inside the batch is malformed (see [`crate::validate`]).
    #[error("invalid record: {0}")]
    InvalidRecord(String),
    /// Records refused for their content, each with its index in the batch (KIP-467); the
    /// batch is refused as a whole, as Kafka's `RecordValidationException`.
    #[error("{}", record_errors_message(.0))]
    RecordErrors(Vec<crate::validate::RecordError>),
    /// The compressed records could not be decompressed, or inflate beyond the limit.
    #[error(transparent)]
    Decompress(#[from] crate::compression::DecompressError),
}

impl BatchError {
    /// The Kafka error code for a Produce response.
    pub fn kafka_error_code(&self) -> i16 {
        match self {
            BatchError::Truncated { .. }
            | BatchError::CrcMismatch { .. }
            | BatchError::BadLength(_) => codes::CORRUPT_MESSAGE,
            BatchError::BadMagic(_)
            | BatchError::BadRecordCount { .. }
            | BatchError::Empty
            | BatchError::ControlBatch
            | BatchError::InvalidRecord(_) => codes::INVALID_RECORD,
            BatchError::TooLarge { .. } => codes::MESSAGE_TOO_LARGE,
            BatchError::Decompress(e) => e.kafka_error_code(),
            // Any timestamp error makes the whole batch INVALID_TIMESTAMP (Kafka's
            // `processRecordErrors`).
            BatchError::RecordErrors(errors) if errors.iter().any(|e| e.timestamp) => {
                codes::INVALID_TIMESTAMP
            }
            BatchError::RecordErrors(_) => codes::INVALID_RECORD,
        }
    }

    /// The per-record errors (empty for a batch-level error).
    pub fn record_errors(&self) -> &[crate::validate::RecordError] {
        match self {
            BatchError::RecordErrors(errors) => errors,
            _ => &[],
        }
    }
}

/// The batch-level message Kafka gives with per-record errors.
fn record_errors_message(errors: &[crate::validate::RecordError]) -> String {
    if errors.iter().any(|e| e.timestamp) {
        return "One or more records have been rejected due to invalid timestamp".into();
    }
    let shown: Vec<String> = errors.iter().take(3).map(|e| e.to_string()).collect();
    format!(
        "One or more records have been rejected due to {} record errors in total, and only showing the first three errors at most: [{}]",
        errors.len(),
        shown.join(", ")
    )
}

/// The fixed header of a v2 record batch (all fields big-endian on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    i32::from_be_bytes(a)
}
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}

impl BatchHeader {
    /// Parses the 61-byte header at the start of `buf`. Checks only what is needed to trust
    /// the framing (magic 2, `batchLength` not below the header size); no CRC check.
    pub fn parse(buf: &[u8]) -> Result<BatchHeader, BatchError> {
        if buf.len() < RECORD_BATCH_OVERHEAD {
            return Err(BatchError::Truncated {
                needed: RECORD_BATCH_OVERHEAD,
                available: buf.len(),
            });
        }
        let magic = buf[16] as i8;
        if magic != 2 {
            return Err(BatchError::BadMagic(magic));
        }
        let batch_length = be_i32(buf, 8);
        if batch_length < MIN_BATCH_LENGTH {
            return Err(BatchError::BadLength(batch_length));
        }
        Ok(BatchHeader {
            base_offset: be_i64(buf, 0),
            batch_length,
            partition_leader_epoch: be_i32(buf, 12),
            magic,
            crc: be_i32(buf, 17) as u32,
            attributes: be_i16(buf, 21),
            last_offset_delta: be_i32(buf, 23),
            base_timestamp: be_i64(buf, 27),
            max_timestamp: be_i64(buf, 35),
            producer_id: be_i64(buf, 43),
            producer_epoch: be_i16(buf, 51),
            base_sequence: be_i32(buf, 53),
            record_count: be_i32(buf, 57),
        })
    }

    /// Size of the whole batch on disk: `12 + batchLength`.
    pub fn total_size(&self) -> usize {
        LOG_OVERHEAD + self.batch_length.max(0) as usize
    }
    /// Compression codec id (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
    pub fn compression(&self) -> u8 {
        (self.attributes & COMPRESSION_MASK) as u8
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }
    pub fn timestamp_type_is_log_append(&self) -> bool {
        self.attributes & TIMESTAMP_TYPE_BIT != 0
    }
    /// Offset of the batch's last record (`baseOffset + lastOffsetDelta`).
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .saturating_add(i64::from(self.last_offset_delta))
    }
    /// Number of offsets the batch occupies in the log.
    pub fn offset_count(&self) -> i64 {
        i64::from(self.last_offset_delta) + 1
    }
}

/// Frames the batch at the start of `buf`: its header plus the whole batch slice.
/// Checks length and magic, not the CRC.
pub fn frame(buf: &[u8]) -> Result<(BatchHeader, &[u8]), BatchError> {
    if buf.len() < LOG_OVERHEAD {
        return Err(BatchError::Truncated {
            needed: LOG_OVERHEAD,
            available: buf.len(),
        });
    }
    let batch_length = be_i32(buf, 8);
    if batch_length < MIN_BATCH_LENGTH {
        return Err(BatchError::BadLength(batch_length));
    }
    let total = LOG_OVERHEAD + batch_length as usize;
    if buf.len() < total {
        return Err(BatchError::Truncated {
            needed: total,
            available: buf.len(),
        });
    }
    let header = BatchHeader::parse(buf)?;
    Ok((header, &buf[..total]))
}

/// Verifies the CRC-32C of a complete batch (`attributes..end`).
pub fn verify_crc(header: &BatchHeader, batch: &[u8]) -> Result<(), BatchError> {
    let computed = crc32c::crc32c(&batch[CRC_START..]);
    if computed != header.crc {
        return Err(BatchError::CrcMismatch {
            stored: header.crc,
            computed,
        });
    }
    Ok(())
}

/// Validates a Produce request's records blob: one or more complete v2 batches, magic 2, sane
/// lengths, CRC-32C over `attributes..end`, `recordCount == lastOffsetDelta + 1 > 0` (Kafka's
/// `LogValidator` rule for client batches), no control batches, no trailing garbage.
/// `max_batch_bytes` is the topic's `max.message.bytes`: a larger batch is
/// [`BatchError::TooLarge`].
pub fn validate_batches(
    buf: &[u8],
    max_batch_bytes: usize,
) -> Result<Vec<BatchHeader>, BatchError> {
    if buf.is_empty() {
        return Err(BatchError::Empty);
    }
    let mut headers = Vec::with_capacity(1);
    let mut rest = buf;
    while !rest.is_empty() {
        if rest.len() >= LOG_OVERHEAD {
            let total = LOG_OVERHEAD.saturating_add(be_i32(rest, 8).max(0) as usize);
            if total > max_batch_bytes {
                return Err(BatchError::TooLarge {
                    size: total,
                    max: max_batch_bytes,
                });
            }
        }
        let (header, batch) = frame(rest)?;
        verify_crc(&header, batch)?;
        if header.record_count <= 0
            || header.last_offset_delta < 0
            || i64::from(header.record_count) != header.offset_count()
        {
            return Err(BatchError::BadRecordCount {
                record_count: header.record_count,
                last_offset_delta: header.last_offset_delta,
            });
        }
        if header.is_control() {
            return Err(BatchError::ControlBatch);
        }
        headers.push(header);
        rest = &rest[batch.len()..];
    }
    Ok(headers)
}

/// The patched 16-byte prefix of a batch: new base offset, the original `batchLength`, the
/// leader epoch. Written in front of `batch[16..]` so the payload is never copied.
pub fn patched_prefix(batch: &[u8], base_offset: i64, leader_epoch: i32) -> [u8; PATCHED_PREFIX] {
    let mut prefix = [0u8; PATCHED_PREFIX];
    prefix[0..8].copy_from_slice(&base_offset.to_be_bytes());
    prefix[8..12].copy_from_slice(&batch[8..12]);
    prefix[12..16].copy_from_slice(&leader_epoch.to_be_bytes());
    prefix
}

/// Patches `baseOffset` and `partitionLeaderEpoch` in place (both outside the CRC, so the CRC
/// stays valid). `batch` must hold at least the 16-byte prefix.
pub fn patch_header(batch: &mut [u8], base_offset: i64, leader_epoch: i32) {
    assert!(
        batch.len() >= PATCHED_PREFIX,
        "batch shorter than its prefix"
    );
    batch[0..8].copy_from_slice(&base_offset.to_be_bytes());
    batch[12..16].copy_from_slice(&leader_epoch.to_be_bytes());
}

/// Marks a whole batch as LogAppendTime with `now_ms` as its max timestamp (topic config
/// `message.timestamp.type=LogAppendTime`). These fields are inside the CRC, so it is
/// recomputed: the one case where the broker must touch covered bytes. `batch` must be one
/// complete, validated batch.
pub fn set_log_append_time(batch: &mut [u8], now_ms: i64) {
    assert!(
        batch.len() >= RECORD_BATCH_OVERHEAD,
        "batch shorter than its header"
    );
    let attributes = i16::from_be_bytes([batch[21], batch[22]]) | TIMESTAMP_TYPE_BIT;
    batch[21..23].copy_from_slice(&attributes.to_be_bytes());
    batch[35..43].copy_from_slice(&now_ms.to_be_bytes());
    let crc = crc32c::crc32c(&batch[CRC_START..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-built uncompressed batch with `n` empty records' worth of count (the record
    /// bytes are opaque to this module, so any payload works).
    pub(crate) fn raw_batch(n: i32, payload: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&0i64.to_be_bytes());
        b.extend_from_slice(&0i32.to_be_bytes()); // length, fixed below
        b.extend_from_slice(&(-1i32).to_be_bytes());
        b.push(2);
        b.extend_from_slice(&0u32.to_be_bytes()); // crc, fixed below
        b.extend_from_slice(&0i16.to_be_bytes());
        b.extend_from_slice(&(n - 1).to_be_bytes());
        b.extend_from_slice(&1000i64.to_be_bytes());
        b.extend_from_slice(&2000i64.to_be_bytes());
        b.extend_from_slice(&(-1i64).to_be_bytes());
        b.extend_from_slice(&(-1i16).to_be_bytes());
        b.extend_from_slice(&(-1i32).to_be_bytes());
        b.extend_from_slice(&n.to_be_bytes());
        b.extend_from_slice(payload);
        let len = (b.len() - 12) as i32;
        b[8..12].copy_from_slice(&len.to_be_bytes());
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        b
    }

    #[test]
    fn log_append_time_keeps_the_batch_valid() {
        let mut b = raw_batch(3, b"payload");
        set_log_append_time(&mut b, 1234);
        let h = BatchHeader::parse(&b).unwrap();
        assert!(h.timestamp_type_is_log_append());
        assert_eq!(h.max_timestamp, 1234);
        verify_crc(&h, &b).unwrap();
    }

    #[test]
    fn parses_and_validates_a_batch() {
        let b = raw_batch(3, b"abc");
        let hs = validate_batches(&b, 1 << 20).unwrap();
        assert_eq!(hs.len(), 1);
        let h = hs[0];
        assert_eq!(h.total_size(), b.len());
        assert_eq!(h.record_count, 3);
        assert_eq!(h.last_offset(), 2);
        assert_eq!(h.max_timestamp, 2000);
        assert_eq!(h.compression(), 0);
        assert!(!h.is_control() && !h.is_transactional() && !h.timestamp_type_is_log_append());
    }

    #[test]
    fn several_batches_and_trailing_garbage() {
        let mut b = raw_batch(1, b"x");
        b.extend(raw_batch(2, b"yy"));
        assert_eq!(validate_batches(&b, 1 << 20).unwrap().len(), 2);
        b.push(0);
        let e = validate_batches(&b, 1 << 20).unwrap_err();
        assert!(matches!(e, BatchError::Truncated { .. }));
        assert_eq!(e.kafka_error_code(), 2);
    }

    #[test]
    fn crc_flip_is_detected_everywhere_in_the_covered_area() {
        let b = raw_batch(2, b"hello world");
        for i in CRC_START..b.len() {
            let mut c = b.clone();
            c[i] ^= 0x40;
            let e = validate_batches(&c, 1 << 20).unwrap_err();
            assert!(
                matches!(e, BatchError::CrcMismatch { .. }),
                "byte {i}: {e:?}"
            );
            assert_eq!(e.kafka_error_code(), 2);
        }
    }

    #[test]
    fn bad_magic_count_size_and_control() {
        let mut b = raw_batch(2, b"x");
        b[16] = 1;
        assert_eq!(
            validate_batches(&b, 1 << 20)
                .unwrap_err()
                .kafka_error_code(),
            87
        );

        let b = raw_batch(2, b"x");
        let e = validate_batches(&b, 20).unwrap_err();
        assert!(matches!(e, BatchError::TooLarge { max: 20, .. }));
        assert_eq!(e.kafka_error_code(), 10);

        let mut b = raw_batch(2, b"x");
        b[57..61].copy_from_slice(&5i32.to_be_bytes());
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        let e = validate_batches(&b, 1 << 20).unwrap_err();
        assert!(matches!(e, BatchError::BadRecordCount { .. }));
        assert_eq!(e.kafka_error_code(), 87);

        let mut b = raw_batch(1, b"x");
        b[22] |= CONTROL_BIT as u8;
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(
            validate_batches(&b, 1 << 20).unwrap_err(),
            BatchError::ControlBatch
        );

        assert_eq!(validate_batches(&[], 10).unwrap_err(), BatchError::Empty);
        let mut b = raw_batch(1, b"");
        b[8..12].copy_from_slice(&3i32.to_be_bytes());
        assert_eq!(
            validate_batches(&b, 1 << 20).unwrap_err(),
            BatchError::BadLength(3)
        );
    }

    #[test]
    fn patching_keeps_the_crc_valid() {
        let mut b = raw_batch(4, b"payload");
        patch_header(&mut b, 1234, 7);
        let h = validate_batches(&b, 1 << 20).unwrap()[0];
        assert_eq!(h.base_offset, 1234);
        assert_eq!(h.partition_leader_epoch, 7);
        assert_eq!(h.last_offset(), 1237);
        let prefix = patched_prefix(&b, 99, 3);
        let mut c = prefix.to_vec();
        c.extend_from_slice(&b[PATCHED_PREFIX..]);
        let h = validate_batches(&c, 1 << 20).unwrap()[0];
        assert_eq!((h.base_offset, h.partition_leader_epoch), (99, 3));
    }

    mod prop {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
                let _ = BatchHeader::parse(&bytes);
                let _ = validate_batches(&bytes, 1 << 20);
                let _ = frame(&bytes);
            }

            #[test]
            fn mutated_batches_never_panic(idx in 0usize..80, val in any::<u8>()) {
                let mut b = super::raw_batch(2, b"some payload bytes");
                let i = idx % b.len();
                b[i] = val;
                let _ = validate_batches(&b, 1 << 20);
            }
        }
    }
}
