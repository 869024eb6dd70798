//! Bounded, streaming decompression of a record batch's records area (attribute bits 0-2):
//! the one implementation every reader of compressed records uses (produce validation, the
//! compacted-topic key check, the cleaner, the group loader).
//!
//! A batch of a few KiB can claim gigabytes once inflated (a "decompression bomb"), so nothing
//! here inflates a whole batch on trust: [`decoder`] returns a `Read` that produces at most
//! `limit` bytes and then fails with [`DecompressError::TooLarge`]; [`decompress_bounded`]
//! collects such a stream into a buffer that never grows beyond `limit`. Formats are Kafka's:
//! gzip (concatenated members allowed, as `GZIPInputStream`), snappy in xerial-java framing
//! with the raw-block fallback of `SnappyInputStream`, the LZ4 frame format, zstd (several
//! frames allowed). The zstd window is limited to [`ZSTD_WINDOW_LOG_MAX`], so a frame cannot
//! make the decoder reserve more than 16 MiB of history either.

use runnel_codes as codes;
use std::io::{self, Read};

/// The most bytes the records of one batch may take once decompressed. The validator refuses
/// larger batches, so every other reader (cleaner, group loader) can decode anything a leader
/// stored with the same limit. 128 MiB is ~128 times the default `max.message.bytes`.
pub const MAX_DECOMPRESSED_BATCH_BYTES: usize = 128 << 20;

/// Largest zstd window accepted: 2^24 = 16 MiB. Producers at levels 1-19 use at most 2^23;
/// only the "ultra" levels 20-22 on batches larger than 16 MiB need more.
pub const ZSTD_WINDOW_LOG_MAX: u32 = 24;

/// xerial snappy-java stream header: magic, version 1, compatible version 1.
const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_LEN: usize = 16;

/// Why the records of a batch could not be decompressed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecompressError {
    #[error("unknown compression codec {0}")]
    UnknownCodec(u8),
    #[error("decompressed records exceed the limit of {limit} bytes")]
    TooLarge { limit: usize },
    #[error("invalid {codec} data: {reason}")]
    Corrupt { codec: &'static str, reason: String },
}

impl DecompressError {
    /// The Kafka error code for a Produce response: a stream that cannot be decoded is
    /// CORRUPT_MESSAGE, records too large once inflated are INVALID_RECORD.
    pub fn kafka_error_code(&self) -> i16 {
        match self {
            DecompressError::Corrupt { .. } => codes::CORRUPT_MESSAGE,
            DecompressError::UnknownCodec(_) | DecompressError::TooLarge { .. } => {
                codes::INVALID_RECORD
            }
        }
    }

    /// Maps an I/O error of a stream made by [`decoder`] back to what it means.
    pub fn from_io(codec: u8, e: &io::Error) -> DecompressError {
        if let Some(too_large) = e.get_ref().and_then(|i| i.downcast_ref::<LimitExceeded>()) {
            return DecompressError::TooLarge { limit: too_large.0 };
        }
        DecompressError::Corrupt {
            codec: codec_name(codec),
            reason: e.to_string(),
        }
    }
}

/// The marker inside the `io::Error` a limited stream fails with.
#[derive(Debug)]
struct LimitExceeded(usize);

impl std::fmt::Display for LimitExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "decompressed records exceed the limit of {} bytes",
            self.0
        )
    }
}
impl std::error::Error for LimitExceeded {}

fn codec_name(codec: u8) -> &'static str {
    match codec {
        0 => "uncompressed",
        1 => "gzip",
        2 => "snappy",
        3 => "lz4",
        4 => "zstd",
        _ => "unknown",
    }
}

/// A stream of the decompressed bytes of `data` (a records area compressed with `codec`,
/// 0 none .. 4 zstd) that fails once it would produce more than `limit` bytes.
pub fn decoder<'a>(
    codec: u8,
    data: &'a [u8],
    limit: usize,
) -> Result<Box<dyn Read + 'a>, DecompressError> {
    let corrupt = |e: io::Error| DecompressError::from_io(codec, &e);
    let inner: Box<dyn Read + 'a> = match codec {
        0 => Box::new(data),
        1 => Box::new(flate2::read::MultiGzDecoder::new(data)),
        2 => Box::new(XerialSnappy::new(data, limit)),
        3 => Box::new(lz4::Decoder::new(data).map_err(corrupt)?),
        4 => {
            let mut d = zstd::stream::read::Decoder::with_buffer(data).map_err(corrupt)?;
            d.window_log_max(ZSTD_WINDOW_LOG_MAX).map_err(corrupt)?;
            Box::new(d)
        }
        other => return Err(DecompressError::UnknownCodec(other)),
    };
    Ok(Box::new(Limited {
        inner,
        remaining: limit,
        limit,
    }))
}

/// Decompresses all of `data` into memory, failing (without ever holding more than `limit`
/// bytes) if it inflates beyond `limit`.
pub fn decompress_bounded(
    codec: u8,
    data: &[u8],
    limit: usize,
) -> Result<Vec<u8>, DecompressError> {
    let mut stream = decoder(codec, data, limit)?;
    let mut out: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 16 << 10];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return Ok(out),
            Ok(n) => {
                if out.capacity() - out.len() < n {
                    // Grow geometrically, but never past the limit.
                    let want = out.len().saturating_mul(2).min(limit).max(out.len() + n);
                    out.reserve_exact(want - out.len());
                }
                out.extend_from_slice(&chunk[..n]);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(DecompressError::from_io(codec, &e)),
        }
    }
}

/// Decodes the batch at the front of `buf` with kafka-protocol's decoder (advancing `buf`), its
/// decompression bounded by [`MAX_DECOMPRESSED_BATCH_BYTES`]. The records are walked first
/// ([`crate::validate::validate_records`]), so a forged `recordCount` cannot make the decoder
/// reserve memory for records that are not there.
pub fn decode_batch_bounded(
    buf: &mut bytes::Bytes,
) -> Result<kafka_protocol::records::RecordSet, String> {
    use kafka_protocol::records::{Compression, RecordBatchDecoder};
    let (header, batch) = crate::batch::frame(buf).map_err(|e| e.to_string())?;
    crate::validate::validate_records(&header, batch, crate::validate::RecordRules::new(false))
        .map_err(|e| e.to_string())?;
    let bounded = |data: &mut bytes::Bytes, c: Compression| {
        Ok(bytes::Bytes::from(decompress_bounded(
            c as u8,
            data,
            MAX_DECOMPRESSED_BATCH_BYTES,
        )?))
    };
    RecordBatchDecoder::decode_with_custom_compression(buf, Some(bounded))
        .map_err(|e| format!("{e:#}"))
}

/// Passes at most `limit` bytes through; asking for more once the limit is reached fails
/// with [`LimitExceeded`] if the inner stream has more.
struct Limited<'a> {
    inner: Box<dyn Read + 'a>,
    remaining: usize,
    limit: usize,
}

impl Read for Limited<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.remaining == 0 {
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe)? {
                0 => Ok(0),
                _ => Err(io::Error::other(LimitExceeded(self.limit))),
            };
        }
        let n = buf.len().min(self.remaining);
        let got = self.inner.read(&mut buf[..n])?;
        self.remaining -= got;
        Ok(got)
    }
}

/// Snappy as Kafka's Java clients write it (snappy-java's `SnappyOutputStream`: a 16-byte
/// header, then blocks of `[compressed length u32 BE][raw snappy block]`), or one raw snappy
/// block if the header is absent (`SnappyInputStream`'s fallback). One block is inflated at a
/// time, and only after its declared size was checked against the limit.
struct XerialSnappy<'a> {
    rest: &'a [u8],
    /// The raw fallback: `rest` is a single block.
    raw: bool,
    block: Vec<u8>,
    pos: usize,
    limit: usize,
}

impl<'a> XerialSnappy<'a> {
    fn new(data: &'a [u8], limit: usize) -> Self {
        let framed = data.len() >= XERIAL_HEADER_LEN && data.starts_with(XERIAL_MAGIC);
        XerialSnappy {
            rest: if framed {
                &data[XERIAL_HEADER_LEN..]
            } else {
                data
            },
            raw: !framed,
            block: Vec::new(),
            pos: 0,
            limit,
        }
    }

    /// Inflates the next block into `self.block`; false at the end of the stream.
    fn next_block(&mut self) -> io::Result<bool> {
        if self.rest.is_empty() {
            return Ok(false);
        }
        let compressed = if self.raw {
            std::mem::take(&mut self.rest)
        } else {
            let Some((len, tail)) = self.rest.split_first_chunk::<4>() else {
                return Err(invalid("truncated snappy block length"));
            };
            let len = u32::from_be_bytes(*len) as usize;
            if len > tail.len() {
                return Err(invalid("snappy block longer than the data"));
            }
            let (block, tail) = tail.split_at(len);
            self.rest = tail;
            block
        };
        let size = snap::raw::decompress_len(compressed).map_err(|e| invalid(&e.to_string()))?;
        if size > self.limit {
            return Err(io::Error::other(LimitExceeded(self.limit)));
        }
        self.block.clear();
        self.block.resize(size, 0);
        snap::raw::Decoder::new()
            .decompress(compressed, &mut self.block)
            .map_err(|e| invalid(&e.to_string()))?;
        self.pos = 0;
        Ok(true)
    }
}

fn invalid(reason: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, reason.to_string())
}

impl Read for XerialSnappy<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.block.len() {
            if !self.next_block()? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.block.len() - self.pos);
        buf[..n].copy_from_slice(&self.block[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, BytesMut};
    use kafka_protocol::compression::{Compressor, Gzip, Lz4, Snappy, Zstd};

    /// Kafka-protocol's encoders, i.e. what Kafka clients produce.
    fn compress(codec: u8, data: &[u8]) -> Vec<u8> {
        fn run<C: Compressor<BytesMut, BufMut = BytesMut>>(data: &[u8]) -> Vec<u8> {
            let mut out = BytesMut::new();
            C::compress(&mut out, |tmp: &mut BytesMut| {
                tmp.put_slice(data);
                Ok(())
            })
            .unwrap();
            out.to_vec()
        }
        match codec {
            0 => data.to_vec(),
            1 => run::<Gzip>(data),
            2 => run::<Snappy>(data),
            3 => run::<Lz4>(data),
            4 => run::<Zstd>(data),
            _ => unreachable!(),
        }
    }

    #[test]
    fn every_codec_round_trips_within_the_limit() {
        let data: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_be_bytes())
            .collect();
        for codec in 0..=4u8 {
            let c = compress(codec, &data);
            assert_eq!(
                decompress_bounded(codec, &c, data.len()).unwrap(),
                data,
                "codec {codec}"
            );
        }
        // Raw snappy (no xerial header) is accepted like snappy-java does.
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(decompress_bounded(2, &raw, data.len()).unwrap(), data);
    }

    /// A bomb: 64 MiB of zeros in a few KiB. Every codec stops at the limit with TooLarge,
    /// and the output buffer never exceeds it.
    #[test]
    fn every_codec_stops_at_the_limit() {
        let data = vec![0u8; 64 << 20];
        for codec in 0..=4u8 {
            let c = compress(codec, &data);
            let e = decompress_bounded(codec, &c, 1 << 20).unwrap_err();
            assert_eq!(
                e,
                DecompressError::TooLarge { limit: 1 << 20 },
                "codec {codec}"
            );
            assert_eq!(e.kafka_error_code(), 87);
        }
    }

    #[test]
    fn garbage_is_corrupt_not_a_panic() {
        for codec in 1..=4u8 {
            let e = decompress_bounded(codec, b"\x00\x01garbage", 1 << 20).unwrap_err();
            assert!(
                matches!(e, DecompressError::Corrupt { .. }),
                "codec {codec}: {e:?}"
            );
            assert_eq!(e.kafka_error_code(), 2);
        }
        assert_eq!(
            decompress_bounded(7, b"", 10).unwrap_err(),
            DecompressError::UnknownCodec(7)
        );
        // A xerial block claiming more than the limit is refused before it is inflated.
        let mut framed = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01".to_vec();
        let block = snap::raw::Encoder::new()
            .compress_vec(&[0u8; 4096])
            .unwrap();
        framed.extend_from_slice(&(block.len() as u32).to_be_bytes());
        framed.extend_from_slice(&block);
        assert!(matches!(
            decompress_bounded(2, &framed, 100).unwrap_err(),
            DecompressError::TooLarge { limit: 100 }
        ));
    }

    mod prop {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn random_bytes_never_panic(codec in 0u8..6, bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
                if let Ok(out) = decompress_bounded(codec, &bytes, 1 << 16) {
                    prop_assert!(out.len() <= 1 << 16);
                }
            }
        }
    }
}
