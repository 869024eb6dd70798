//! Tests of the record walk: batches from kafka-protocol's encoder (what Kafka clients send)
//! in every codec are accepted; forged and mutated ones are refused without a panic.

use super::*;
use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

fn record(i: usize, key: Option<Vec<u8>>, value: Option<Vec<u8>>, headers: usize) -> Record {
    let mut h = IndexMap::new();
    for j in 0..headers {
        h.insert(
            StrBytes::from_string(format!("h{j}")),
            (j % 2 == 0).then(|| Bytes::from(vec![b'v'; j])),
        );
    }
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: i as i64,
        sequence: i as i32 - 1,
        timestamp: 1_000 + i as i64,
        key: key.map(Bytes::from),
        value: value.map(Bytes::from),
        headers: h,
    }
}

fn encode(records: &[Record], compression: Compression) -> Vec<u8> {
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .unwrap();
    buf.to_vec()
}

fn simple(n: usize, compression: Compression) -> Vec<u8> {
    let records: Vec<Record> = (0..n)
        .map(|i| {
            record(
                i,
                Some(format!("k{i}").into_bytes()),
                Some(vec![b'x'; i % 40]),
                i % 3,
            )
        })
        .collect();
    encode(&records, compression)
}

fn check(buf: &[u8], require_keys: bool) -> Result<Vec<BatchHeader>, BatchError> {
    validate_produce(buf, usize::MAX, RecordRules::new(require_keys))
}

/// Recomputes the CRC after a test edited covered bytes (an attacker can do the same).
fn fix_crc(b: &mut [u8]) {
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// The header-only batch of issue 9 item 1: 61 bytes, valid CRC, claiming 2^31-1 records.
/// `batch::validate_batches` (today's only check) accepts it; the record walk must not.
fn forged_max_count() -> Vec<u8> {
    let mut b = vec![0u8; RECORD_BATCH_OVERHEAD];
    b[8..12].copy_from_slice(&49i32.to_be_bytes());
    b[12..16].copy_from_slice(&(-1i32).to_be_bytes());
    b[16] = 2;
    b[23..27].copy_from_slice(&(i32::MAX - 1).to_be_bytes());
    b[43..51].copy_from_slice(&(-1i64).to_be_bytes());
    b[51..53].copy_from_slice(&(-1i16).to_be_bytes());
    b[53..57].copy_from_slice(&(-1i32).to_be_bytes());
    b[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
    fix_crc(&mut b);
    b
}

#[test]
fn client_batches_in_every_codec_are_accepted() {
    for c in CODECS {
        for n in [1, 2, 17, 500] {
            let b = simple(n, c);
            let hs = check(&b, true).unwrap_or_else(|e| panic!("{c:?} n={n}: {e}"));
            assert_eq!(hs[0].record_count as usize, n);
        }
        // Null keys and values are fine on a non-compacted topic.
        let b = encode(
            &[record(0, None, None, 0), record(1, None, Some(vec![1]), 2)],
            c,
        );
        check(&b, false).unwrap();
    }
}

/// Caught: the forged header-only batch was accepted and later wrapped the 32-bit relative
/// offsets of a segment (issue 9 item 1). Fails on the code before this module.
#[test]
fn header_claiming_more_records_than_bytes_is_invalid_record() {
    let b = forged_max_count();
    assert!(
        batch::validate_batches(&b, usize::MAX).is_ok(),
        "headers alone look fine"
    );
    let mut two = b.clone();
    two.extend_from_slice(&b);
    let e = check(&two, false).unwrap_err();
    assert!(matches!(e, BatchError::InvalidRecord(_)), "{e:?}");
    assert_eq!(e.kafka_error_code(), 87);
    // Compressed: the count is bounded by the decompression limit before anything is inflated.
    let mut z = b.clone();
    z[22] |= 4; // zstd
    fix_crc(&mut z);
    assert_eq!(check(&z, false).unwrap_err().kafka_error_code(), 87);
}

#[test]
fn compacted_topics_need_keys_in_every_codec() {
    for c in CODECS {
        let b = encode(
            &[
                record(0, Some(b"k".to_vec()), None, 0),
                record(1, None, Some(b"v".to_vec()), 0),
            ],
            c,
        );
        let e = check(&b, true).unwrap_err();
        assert!(
            matches!(e, BatchError::RecordErrors(ref r) if r.len() == 1 && r[0].batch_index == 1 && r[0].message.contains("without key")),
            "{c:?}: {e:?}"
        );
        assert_eq!(e.kafka_error_code(), 87);
    }
}

/// librdkafka's 0011_produce_batch: every keyless record of a batch to a compacted topic is
/// reported with its index (KIP-467), not just the first; the batch is INVALID_RECORD.
#[test]
fn every_keyless_record_is_reported_with_its_batch_index() {
    for c in CODECS {
        let records: Vec<Record> = (0..50)
            .map(|i| {
                let key = (i % 5 != 0).then(|| format!("k{i}").into_bytes());
                record(i, key, Some(vec![1; 3]), 1)
            })
            .collect();
        let e = check(&encode(&records, c), true).unwrap_err();
        let indexes: Vec<i32> = e.record_errors().iter().map(|r| r.batch_index).collect();
        assert_eq!(indexes, (0..50).step_by(5).collect::<Vec<i32>>(), "{c:?}");
        assert_eq!(e.kafka_error_code(), 87);
        assert!(e.to_string().contains("10 record errors"), "{e}");
    }
}

/// Per-record timestamps (base + delta) against the window; any out-of-range record makes
/// the batch INVALID_TIMESTAMP, and a keyless record reports its key error instead.
#[test]
fn timestamps_out_of_the_window_are_reported_per_record() {
    // record(i) has timestamp 1000 + i.
    let records: Vec<Record> = (0..6)
        .map(|i| record(i, (i != 5).then(|| b"k".to_vec()), None, 0))
        .collect();
    let b = encode(&records, Compression::None);
    let rules = RecordRules::new(false).with_timestamp_bounds(1_002, 0, 1);
    let e = validate_produce(&b, usize::MAX, rules).unwrap_err();
    let indexes: Vec<i32> = e.record_errors().iter().map(|r| r.batch_index).collect();
    assert_eq!(indexes, vec![0, 1, 4, 5]);
    assert!(e.record_errors().iter().all(|r| r.timestamp));
    assert_eq!(e.kafka_error_code(), 32, "INVALID_TIMESTAMP");
    let keyed = RecordRules::new(true).with_timestamp_bounds(1_002, 0, 1);
    let e = validate_produce(&b, usize::MAX, keyed).unwrap_err();
    let r = e.record_errors();
    assert_eq!(r.len(), 4);
    assert!(!r[3].timestamp && r[3].batch_index == 5, "{r:?}");
    // Inside the window: accepted.
    let wide = RecordRules::new(false).with_timestamp_bounds(1_002, 10, 10);
    validate_produce(&b, usize::MAX, wide).unwrap();
}

#[test]
fn fewer_records_than_counted_trailing_bytes_and_bad_deltas() {
    let b = simple(3, Compression::None);
    // Claim 4 records (and lastOffsetDelta 3): one is missing.
    let mut c = b.clone();
    c[23..27].copy_from_slice(&3i32.to_be_bytes());
    c[57..61].copy_from_slice(&4i32.to_be_bytes());
    fix_crc(&mut c);
    assert_eq!(check(&c, false).unwrap_err().kafka_error_code(), 87);
    // Claim 2: the third record is trailing garbage.
    let mut c = b.clone();
    c[23..27].copy_from_slice(&1i32.to_be_bytes());
    c[57..61].copy_from_slice(&2i32.to_be_bytes());
    fix_crc(&mut c);
    let e = check(&c, false).unwrap_err();
    assert!(
        matches!(e, BatchError::InvalidRecord(ref m) if m.contains("trailing")),
        "{e:?}"
    );
    // Second record's offset delta 1 -> 0 (not strictly increasing). Records: len, attr, ts, off.
    let mut c = b.clone();
    let first_len = c[61] as usize / 2; // zig-zag, one byte for small records
    let second = 61 + 1 + first_len;
    let off_at = second + 1 + 1 + 1; // len(1) attr(1) tsDelta(1)
    assert_eq!(c[off_at], 2, "offset delta 1 in zig-zag");
    c[off_at] = 0;
    fix_crc(&mut c);
    let e = check(&c, false).unwrap_err();
    assert!(
        matches!(e, BatchError::InvalidRecord(ref m) if m.contains("offset delta")),
        "{e:?}"
    );
}

/// A zstd bomb: one record whose value is 160 MiB of zeros, a few KiB compressed. Refused at
/// the limit; the walk never holds the value.
#[test]
fn a_decompression_bomb_stops_at_the_limit() {
    let big = vec![0u8; 160 << 20];
    let b = encode(
        &[record(0, Some(b"k".to_vec()), Some(big), 0)],
        Compression::Zstd,
    );
    assert!(b.len() < 64 << 10, "bomb is {} bytes", b.len());
    let e = check(&b, true).unwrap_err();
    assert!(
        matches!(e, BatchError::Decompress(DecompressError::TooLarge { .. })),
        "{e:?}"
    );
    assert_eq!(e.kafka_error_code(), 87);
}

#[test]
fn corrupt_compressed_stream_is_corrupt_message() {
    let mut b = simple(10, Compression::Gzip);
    let mid = RECORD_BATCH_OVERHEAD + 12;
    b[mid] ^= 0xff;
    b[mid + 1] ^= 0xff;
    fix_crc(&mut b);
    let e = check(&b, false).unwrap_err();
    assert!(matches!(e.kafka_error_code(), 2 | 87), "{e:?}");
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn codec() -> impl Strategy<Value = Compression> {
        proptest::sample::select(CODECS.to_vec())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Every batch kafka-protocol encodes (any codec, keys, values, headers) is valid.
        #[test]
        fn encoded_batches_are_accepted(
            c in codec(),
            recs in proptest::collection::vec(
                (proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
                 proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300)),
                 0usize..4),
                1..40),
        ) {
            let records: Vec<Record> = recs
                .into_iter()
                .enumerate()
                .map(|(i, (k, v, h))| record(i, k, v, h))
                .collect();
            let b = encode(&records, c);
            prop_assert!(check(&b, false).is_ok());
            let keyed = records.iter().all(|r| r.key.is_some());
            prop_assert_eq!(check(&b, true).is_ok(), keyed);
        }

        /// Mutated batches (CRC fixed, so the walk really runs) never panic.
        #[test]
        fn mutated_batches_never_panic(c in codec(), n in 1usize..30, edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6)) {
            let mut b = simple(n, c);
            for (at, v) in edits {
                let i = RECORD_BATCH_OVERHEAD - 40 + at % (b.len() - RECORD_BATCH_OVERHEAD + 40);
                b[i] = v;
            }
            fix_crc(&mut b);
            let _ = check(&b, true);
        }

        #[test]
        fn random_record_areas_never_panic(attr in 0u8..8, count in any::<i32>(), area in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut b = forged_max_count();
            b[22] = attr;
            b[23..27].copy_from_slice(&count.wrapping_sub(1).to_be_bytes());
            b[57..61].copy_from_slice(&count.to_be_bytes());
            b.extend_from_slice(&area);
            let len = (b.len() - 12) as i32;
            b[8..12].copy_from_slice(&len.to_be_bytes());
            fix_crc(&mut b);
            let _ = check(&b, false);
        }
    }
}
