//! Shared helpers: real Kafka record batches built with kafka-protocol's encoder.
#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use runnel_log::batch::{validate_batches, BatchHeader};
use runnel_log::{AppendInfo, LogConfig, PartitionLog, RecoveryHint};
use std::path::Path;

/// One v2 batch of `n` records with `value_len`-byte values, timestamps `ts, ts+1, ...`.
pub fn batch_with(n: usize, value_len: usize, ts: i64, compression: Compression) -> Vec<u8> {
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: i as i32 - 1,
            timestamp: ts + i as i64,
            key: Some(Bytes::from(format!("key-{i}"))),
            value: Some(Bytes::from(vec![b'a' + (i % 26) as u8; value_len])),
            headers: IndexMap::new(),
        })
        .collect();
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

pub fn batch(n: usize, value_len: usize, ts: i64) -> Vec<u8> {
    batch_with(n, value_len, ts, Compression::None)
}

pub fn headers(b: &[u8]) -> Vec<BatchHeader> {
    validate_batches(b, usize::MAX).unwrap()
}

/// Validates and appends as leader.
pub fn append(log: &mut PartitionLog, b: &[u8], epoch: i32) -> AppendInfo {
    let h = headers(b);
    log.append(b, &h, epoch).unwrap()
}

pub fn small_config(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes: 256,
        file_delete_delay_ms: 0,
        ..LogConfig::default()
    }
}

pub fn open(dir: &Path, config: LogConfig) -> PartitionLog {
    PartitionLog::open(dir.to_path_buf(), config, RecoveryHint::new_log()).unwrap()
}

pub fn clean_hint(log_start: i64, hw: i64, rp: i64) -> RecoveryHint {
    RecoveryHint {
        recovery_point: rp,
        log_start_offset: log_start,
        high_watermark: hw,
        clean_shutdown: true,
    }
}

pub fn unclean_hint(rp: i64) -> RecoveryHint {
    RecoveryHint {
        recovery_point: rp,
        log_start_offset: 0,
        high_watermark: i64::MAX,
        clean_shutdown: false,
    }
}

/// Splits a blob into its batch headers (no validation of count rules; CRC checked).
pub fn batches_of(mut b: &[u8]) -> Vec<BatchHeader> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let (h, bytes) = runnel_log::batch::frame(b).unwrap();
        runnel_log::batch::verify_crc(&h, bytes).unwrap();
        out.push(h);
        b = &b[bytes.len()..];
    }
    out
}

/// Decodes records with kafka-protocol: (offset, timestamp, value length) per record.
pub fn decode(b: &[u8]) -> Vec<(i64, i64, usize)> {
    let mut buf = Bytes::copy_from_slice(b);
    let sets = RecordBatchDecoder::decode_all(&mut buf).unwrap();
    sets.into_iter()
        .flat_map(|s| s.records)
        .map(|r| (r.offset, r.timestamp, r.value.map_or(0, |v| v.len())))
        .collect()
}

/// Appends `count` batches of `per_batch` records (values `value_len` bytes, timestamps
/// increasing by 10 per batch from `ts0`); returns the append infos.
pub fn fill(
    log: &mut PartitionLog,
    count: usize,
    per_batch: usize,
    value_len: usize,
    ts0: i64,
) -> Vec<AppendInfo> {
    (0..count)
        .map(|i| append(log, &batch(per_batch, value_len, ts0 + 10 * i as i64), 0))
        .collect()
}
