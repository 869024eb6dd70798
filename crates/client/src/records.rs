//! Record types seen by users, and the conversion to and from v2 record batches through
//! kafka-protocol's `RecordBatchEncoder` / `RecordBatchDecoder`.

use bytes::{Bytes, BytesMut};
use indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
    TimestampType, NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE,
};

use crate::error::{ClientError, Result};

/// A record header (`key` is a string, `value` optional bytes), in record order.
pub type Header = (String, Option<Bytes>);

/// A record to produce.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerRecord {
    /// Topic.
    pub topic: String,
    /// Explicit partition, or `None` to let the partitioner choose.
    pub partition: Option<i32>,
    /// Key (`None` = null key, round-robin partitioning).
    pub key: Option<Bytes>,
    /// Value (`None` = tombstone).
    pub value: Option<Bytes>,
    /// Headers.
    pub headers: Vec<Header>,
    /// Create time in ms since the epoch; `None` = now.
    pub timestamp: Option<i64>,
}

impl ProducerRecord {
    /// A keyless record with a value.
    pub fn new(topic: impl Into<String>, value: impl Into<Bytes>) -> Self {
        Self {
            topic: topic.into(),
            value: Some(value.into()),
            ..Self::default()
        }
    }

    /// Sets the key.
    pub fn with_key(mut self, key: impl Into<Bytes>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets an explicit partition.
    pub fn with_partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Approximate bytes this record adds to a batch, for batch.size / buffer accounting.
    pub fn estimated_size(&self) -> usize {
        let headers: usize = self
            .headers
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, Bytes::len) + 4)
            .sum();
        self.key.as_ref().map_or(0, Bytes::len)
            + self.value.as_ref().map_or(0, Bytes::len)
            + headers
            + 21
    }
}

/// Where a produced record landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordMetadata {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Offset (-1 with acks=0, where the broker does not answer).
    pub offset: i64,
    /// Broker's LogAppendTime when the topic uses it, else the record's create time.
    pub timestamp: i64,
}

/// Whether a record's timestamp is the producer's create time or the broker's append time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampKind {
    /// `CreateTime`.
    CreateTime,
    /// `LogAppendTime`.
    LogAppendTime,
}

impl TimestampKind {
    /// Kafka's text (`CreateTime` / `LogAppendTime`), as the console consumer prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            TimestampKind::CreateTime => "CreateTime",
            TimestampKind::LogAppendTime => "LogAppendTime",
        }
    }
}

/// A consumed record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerRecord {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
    /// Timestamp in ms.
    pub timestamp: i64,
    /// What the timestamp means.
    pub timestamp_type: TimestampKind,
    /// Key.
    pub key: Option<Bytes>,
    /// Value.
    pub value: Option<Bytes>,
    /// Headers.
    pub headers: Vec<Header>,
}

/// Producer identity stamped into a batch (idempotence); `none()` when not idempotent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerStamp {
    /// Producer id.
    pub producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
    /// Sequence of the batch's first record.
    pub base_sequence: i32,
}

impl ProducerStamp {
    /// No producer id: a non-idempotent batch.
    pub fn none() -> Self {
        Self {
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            base_sequence: NO_SEQUENCE,
        }
    }
}

/// Parses the producer's compression names (Kafka's `compression.type`).
pub fn parse_compression(name: &str) -> Result<Compression> {
    Ok(match name.to_ascii_lowercase().as_str() {
        "none" | "" => Compression::None,
        "gzip" => Compression::Gzip,
        "snappy" => Compression::Snappy,
        "lz4" => Compression::Lz4,
        "zstd" => Compression::Zstd,
        other => {
            return Err(ClientError::InvalidArgument(format!(
                "unknown compression '{other}' (use none, gzip, snappy, lz4 or zstd)"
            )))
        }
    })
}

/// One record waiting in a batch: the parts of a [`ProducerRecord`] that go on the wire.
#[derive(Debug, Clone)]
pub struct BatchRecord {
    /// Key.
    pub key: Option<Bytes>,
    /// Value.
    pub value: Option<Bytes>,
    /// Headers.
    pub headers: Vec<Header>,
    /// Create time (ms).
    pub timestamp: i64,
}

/// Encodes `records` as ONE v2 record batch (base offset 0, offsets 0..n) with `compression`.
pub fn encode_batch(
    records: &[BatchRecord],
    compression: Compression,
    stamp: ProducerStamp,
    out: &mut BytesMut,
) -> Result<()> {
    let wire: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut headers = IndexMap::with_capacity(r.headers.len());
            for (k, v) in &r.headers {
                headers.insert(StrBytes::from_string(k.clone()), v.clone());
            }
            Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
                producer_id: stamp.producer_id,
                producer_epoch: stamp.producer_epoch,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                // kafka-protocol starts a new batch whenever `offset - sequence` changes, so the
                // sequence must advance with the offset even without idempotence (the header
                // then carries base sequence -1, as Kafka expects).
                sequence: stamp.base_sequence.wrapping_add(i as i32),
                timestamp: r.timestamp,
                key: r.key.clone(),
                value: r.value.clone(),
                headers,
            }
        })
        .collect();
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    RecordBatchEncoder::encode(out, wire.iter(), &options)
        .map_err(|e| ClientError::protocol("encoding record batch", e))
}

/// Decodes every complete batch in a Fetch `records` blob into consumer records of
/// `topic`/`partition`, skipping control batches and records below `min_offset`. A trailing
/// partial batch (cut by the fetch size limit) is ignored, as Kafka clients do. Returns the
/// records and the offset just after the last complete batch (to advance past batches that
/// held only skipped records).
pub fn decode_batches(
    topic: &str,
    partition: i32,
    mut data: Bytes,
    min_offset: i64,
) -> Result<(Vec<ConsumerRecord>, Option<i64>)> {
    let mut out = Vec::new();
    let mut next_offset = None;
    while data.len() >= 17 {
        let batch_len = i32::from_be_bytes([data[8], data[9], data[10], data[11]]);
        let Ok(batch_len) = usize::try_from(batch_len) else {
            return Err(ClientError::Protocol(format!(
                "negative batch length in {topic}-{partition}"
            )));
        };
        let total = 12 + batch_len;
        if data.len() < total {
            break;
        }
        let magic = data[16];
        let mut batch = data.split_to(total);
        if magic != 2 {
            return Err(ClientError::Protocol(format!(
                "{topic}-{partition}: message format v{magic} is not supported (only v2 batches)"
            )));
        }
        let base_offset = i64::from_be_bytes(batch[0..8].try_into().unwrap_or_default());
        let last_delta = if batch.len() >= 27 {
            i32::from_be_bytes(batch[23..27].try_into().unwrap_or_default())
        } else {
            0
        };
        next_offset = Some(base_offset + i64::from(last_delta) + 1);
        let set = RecordBatchDecoder::decode(&mut batch).map_err(|e| {
            ClientError::protocol(&format!("decoding batch in {topic}-{partition}"), e)
        })?;
        for r in set.records {
            if r.control || r.offset < min_offset {
                continue;
            }
            out.push(ConsumerRecord {
                topic: topic.to_owned(),
                partition,
                offset: r.offset,
                timestamp: r.timestamp,
                timestamp_type: match r.timestamp_type {
                    TimestampType::Creation => TimestampKind::CreateTime,
                    TimestampType::LogAppend => TimestampKind::LogAppendTime,
                },
                key: r.key,
                value: r.value,
                headers: r
                    .headers
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
            });
        }
    }
    Ok((out, next_offset))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(key: Option<&str>, value: &str, ts: i64) -> BatchRecord {
        BatchRecord {
            key: key.map(|k| Bytes::copy_from_slice(k.as_bytes())),
            value: Some(Bytes::copy_from_slice(value.as_bytes())),
            headers: vec![("h".into(), Some(Bytes::from_static(b"v")))],
            timestamp: ts,
        }
    }

    #[test]
    fn batch_round_trip_every_compression() {
        for compression in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let records: Vec<BatchRecord> = (0..50)
                .map(|i| rec(Some("k"), &format!("value-{i}"), 1000 + i))
                .collect();
            let mut buf = BytesMut::new();
            encode_batch(&records, compression, ProducerStamp::none(), &mut buf).unwrap();
            let mut bytes = buf.clone().freeze();
            let decoded = RecordBatchDecoder::decode_all(&mut bytes).unwrap();
            assert_eq!(decoded.len(), 1, "one batch for {compression:?}");
            assert_eq!(decoded[0].compression, compression);
            assert_eq!(decoded[0].records.len(), 50);
            let (out, next) = decode_batches("t", 0, buf.freeze(), 0).unwrap();
            assert_eq!(next, Some(50));
            assert_eq!(out.len(), 50);
            assert_eq!(out[7].offset, 7);
            assert_eq!(out[7].value.as_deref(), Some(&b"value-7"[..]));
            assert_eq!(out[7].key.as_deref(), Some(&b"k"[..]));
            assert_eq!(out[7].timestamp, 1007);
            assert_eq!(
                out[7].headers,
                vec![("h".to_string(), Some(Bytes::from_static(b"v")))]
            );
        }
    }

    #[test]
    fn skips_below_min_offset_and_partial_tail() {
        let records: Vec<BatchRecord> = (0..10).map(|i| rec(None, "x", i)).collect();
        let mut buf = BytesMut::new();
        encode_batch(&records, Compression::None, ProducerStamp::none(), &mut buf).unwrap();
        let one = buf.len();
        encode_batch(&records, Compression::None, ProducerStamp::none(), &mut buf).unwrap();
        // Second batch truncated: only the first decodes.
        let truncated = buf.split_to(one + 20).freeze();
        let (out, next) = decode_batches("t", 3, truncated, 4).unwrap();
        assert_eq!(
            out.iter().map(|r| r.offset).collect::<Vec<_>>(),
            vec![4, 5, 6, 7, 8, 9]
        );
        assert_eq!(out[0].partition, 3);
        assert_eq!(next, Some(10));
    }

    #[test]
    fn idempotent_stamp_is_encoded() {
        let records: Vec<BatchRecord> = (0..3).map(|i| rec(None, "x", i)).collect();
        let mut buf = BytesMut::new();
        let stamp = ProducerStamp {
            producer_id: 77,
            producer_epoch: 2,
            base_sequence: 10,
        };
        encode_batch(&records, Compression::None, stamp, &mut buf).unwrap();
        let mut bytes = buf.freeze();
        let info = RecordBatchDecoder::decode_batch_info(&mut bytes).unwrap();
        assert_eq!(info[0].producer_id, 77);
        assert_eq!(info[0].producer_epoch, 2);
        assert_eq!(info[0].base_sequence, 10);
        assert_eq!(info[0].record_count, 3);
    }

    #[test]
    fn non_idempotent_batch_has_no_producer_id_or_sequence() {
        let records: Vec<BatchRecord> = (0..5).map(|i| rec(None, "x", i)).collect();
        let mut buf = BytesMut::new();
        encode_batch(&records, Compression::None, ProducerStamp::none(), &mut buf).unwrap();
        let mut bytes = buf.freeze();
        let info = RecordBatchDecoder::decode_batch_info(&mut bytes).unwrap();
        assert_eq!(info.len(), 1);
        assert_eq!(info[0].producer_id, -1);
        assert_eq!(info[0].base_sequence, -1);
        assert_eq!(info[0].record_count, 5);
    }

    #[test]
    fn compression_names() {
        assert_eq!(parse_compression("LZ4").unwrap(), Compression::Lz4);
        assert!(parse_compression("brotli").is_err());
    }
}
