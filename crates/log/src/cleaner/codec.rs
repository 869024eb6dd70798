//! The compression codecs of record batches (attribute bits 0-2), for the cleaner only.
//!
//! Compaction must decompress, because it drops records from inside a compressed block; that
//! goes through the bounded decoder of [`crate::compression`]. Compression uses kafka-protocol's
//! encoders (gzip, xerial-framed snappy, LZ4 frame, zstd), so what the cleaner writes is what
//! Kafka clients read.

use bytes::{BufMut, BytesMut};
use kafka_protocol::compression::{Compressor, Gzip, Lz4, Snappy, Zstd};

use crate::compression::{decompress_bounded, MAX_DECOMPRESSED_BATCH_BYTES};

/// Codec output, or why the bytes could not be (de)compressed (kafka-protocol's `anyhow`
/// errors are flattened to text so they stay out of this crate's API).
type CodecResult = Result<Vec<u8>, String>;

/// Decompresses the records area of a batch compressed with `codec` (1 gzip .. 4 zstd), never
/// holding more than [`MAX_DECOMPRESSED_BATCH_BYTES`] (the limit the leader validated with):
/// a larger batch is an error, and the cleaner keeps it verbatim.
pub(crate) fn decompress(codec: u8, data: &[u8]) -> Result<Vec<u8>, String> {
    decompress_bounded(codec, data, MAX_DECOMPRESSED_BATCH_BYTES).map_err(|e| e.to_string())
}

/// Compresses `data` (encoded records) with `codec`, as one block like a producer does.
pub(crate) fn compress(codec: u8, data: &[u8]) -> Result<Vec<u8>, String> {
    fn run<C: Compressor<BytesMut, BufMut = BytesMut>>(data: &[u8]) -> CodecResult {
        let mut out = BytesMut::new();
        C::compress(&mut out, |tmp: &mut BytesMut| {
            tmp.put_slice(data);
            Ok(())
        })
        .map_err(|e| format!("{e:#}"))?;
        Ok(out.to_vec())
    }
    match codec {
        0 => Ok(data.to_vec()),
        1 => run::<Gzip>(data),
        2 => run::<Snappy>(data),
        3 => run::<Lz4>(data),
        4 => run::<Zstd>(data),
        other => Err(format!("unknown compression codec {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_codec_round_trips_and_garbage_is_an_error() {
        let data: Vec<u8> = (0..10_000u32)
            .flat_map(|i| (i % 251).to_be_bytes())
            .collect();
        for codec in 0..=4u8 {
            let c = compress(codec, &data).unwrap();
            assert_eq!(decompress(codec, &c).unwrap(), data, "codec {codec}");
        }
        for codec in 1..=4u8 {
            assert!(
                decompress(codec, b"\x00\x01garbage").is_err(),
                "codec {codec}"
            );
        }
        assert!(decompress(7, b"").is_err());
    }

    /// Caught (issue 9 item 2): the cleaner inflated a batch fully, whatever it claimed. A
    /// batch inflating beyond the limit is now an error (the cleaner then keeps it verbatim).
    #[test]
    fn the_cleaner_refuses_to_inflate_beyond_the_limit() {
        use std::io::Write;
        let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..(MAX_DECOMPRESSED_BATCH_BYTES >> 20) + 1 {
            enc.write_all(&zeros).unwrap();
        }
        let bomb = enc.finish().unwrap();
        let e = decompress(4, &bomb).unwrap_err();
        assert!(e.contains("exceed"), "{e}");
    }
}
