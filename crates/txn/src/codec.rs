//! `__transaction_state` records in Kafka's layout (`TransactionLog`; the schemas
//! `TransactionLogKey` v0 and `TransactionLogValue` v0-v1): the key is an int16 version (0)
//! and the transactional id; the value an int16 version and the metadata; a tombstone (null
//! value) removes the id. As Kafka, the value version follows the cluster's
//! `transaction.version` ([`value_version`]): v0 (non-flexible) at level 0, v1 (flexible, with
//! the tagged previous/next producer ids and the client's transaction version that KIP-890
//! part 2 needs to finish an epoch-bumping transaction after a coordinator failover) from
//! level 1. Both are read. Decoding never trusts a length: every count is checked against the
//! bytes left.

use std::collections::BTreeSet;

use bytes::{BufMut, Bytes, BytesMut};

use crate::metadata::{TopicPartition, TxnMetadata, NO_PRODUCER_EPOCH, NO_PRODUCER_ID};
use crate::state::TxnState;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("record truncated")]
    Truncated,
    #[error("unknown {0} version {1}")]
    UnknownVersion(&'static str, i16),
    #[error("invalid string")]
    InvalidString,
    #[error("unknown transaction status {0}")]
    UnknownStatus(i8),
    #[error("negative length {0}")]
    NegativeLength(i64),
    #[error("{0} trailing bytes")]
    Trailing(usize),
}

type Result<T> = std::result::Result<T, CodecError>;

pub fn encode_key(transactional_id: &str) -> Bytes {
    let mut buf = BytesMut::with_capacity(4 + transactional_id.len());
    buf.put_i16(0);
    put_string(&mut buf, transactional_id);
    buf.freeze()
}

pub fn decode_key(bytes: &[u8]) -> Result<String> {
    let mut r = Reader(bytes);
    let version = r.i16()?;
    if version != 0 {
        return Err(CodecError::UnknownVersion("key", version));
    }
    let id = r.string()?;
    r.finish()?;
    Ok(id)
}

/// The value version a cluster at `transaction_version` writes (Kafka's
/// `TransactionVersion.transactionLogValueVersion`): the flexible v1 from level 1 on, v0 below.
pub fn value_version(transaction_version: i16) -> i16 {
    if transaction_version >= 1 {
        1
    } else {
        0
    }
}

/// The value for `m` in layout `version` (0, or 1 for any other number). Partitions are
/// grouped by topic, in order. v1 carries the producer id rotation and the transaction version
/// as tagged fields (only those that differ from their defaults, as Kafka's writer).
pub fn encode_value(m: &TxnMetadata, version: i16) -> Bytes {
    let flexible = version != 0;
    let mut buf = BytesMut::with_capacity(64);
    buf.put_i16(i16::from(flexible));
    buf.put_i64(m.producer_id);
    buf.put_i16(m.producer_epoch);
    buf.put_i32(m.timeout_ms);
    buf.put_i8(m.state.id());
    let topics = group_by_topic(&m.partitions);
    put_len(&mut buf, flexible, topics.len());
    for (topic, ids) in topics {
        if flexible {
            put_len(&mut buf, true, topic.len());
            buf.put_slice(topic.as_bytes());
        } else {
            put_string(&mut buf, topic);
        }
        put_len(&mut buf, flexible, ids.len());
        for id in ids {
            buf.put_i32(id);
        }
        if flexible {
            buf.put_u8(0);
        }
    }
    buf.put_i64(m.last_update_ms);
    buf.put_i64(m.start_ms);
    if flexible {
        put_tags(&mut buf, m);
    }
    buf.freeze()
}

/// v1's tagged fields: 0 PreviousProducerId, 1 NextProducerId (int64, default -1), 2
/// ClientTransactionVersion (int16, default 0).
fn put_tags(buf: &mut BytesMut, m: &TxnMetadata) {
    let mut tags: Vec<(usize, Vec<u8>)> = Vec::new();
    if m.previous_producer_id != NO_PRODUCER_ID {
        tags.push((0, m.previous_producer_id.to_be_bytes().to_vec()));
    }
    if m.next_producer_id != NO_PRODUCER_ID {
        tags.push((1, m.next_producer_id.to_be_bytes().to_vec()));
    }
    if m.client_txn_version != 0 {
        tags.push((2, m.client_txn_version.to_be_bytes().to_vec()));
    }
    put_uvarint(buf, tags.len());
    for (tag, data) in tags {
        put_uvarint(buf, tag);
        put_uvarint(buf, data.len());
        buf.put_slice(&data);
    }
}

/// An array length: int32 (v0) or compact (length + 1 as an unsigned varint, v1).
fn put_len(buf: &mut BytesMut, compact: bool, n: usize) {
    if compact {
        put_uvarint(buf, n.saturating_add(1));
    } else {
        buf.put_i32(len_i32(n));
    }
}

fn put_uvarint(buf: &mut BytesMut, mut v: usize) {
    loop {
        let low = u8::try_from(v & 0x7f).unwrap_or(0);
        v >>= 7;
        if v == 0 {
            buf.put_u8(low);
            return;
        }
        buf.put_u8(low | 0x80);
    }
}

pub fn decode_value(transactional_id: &str, bytes: &[u8]) -> Result<TxnMetadata> {
    let mut r = Reader(bytes);
    let version = r.i16()?;
    let flexible = match version {
        0 => false,
        1 => true,
        v => return Err(CodecError::UnknownVersion("value", v)),
    };
    let producer_id = r.i64()?;
    let producer_epoch = r.i16()?;
    let timeout_ms = r.i32()?;
    let status = r.i8()?;
    let state = TxnState::from_id(status).ok_or(CodecError::UnknownStatus(status))?;
    let mut partitions = BTreeSet::new();
    // Each topic entry takes at least 6 bytes (v0) or 3 (v1): bounds the count.
    let topics = r.array_len(flexible, 3)?;
    for _ in 0..topics.unwrap_or(0) {
        let topic = if flexible {
            r.compact_string()?
        } else {
            r.string()?
        };
        let ids = r.array_len(flexible, 4)?.unwrap_or(0);
        for _ in 0..ids {
            partitions.insert(TopicPartition::new(topic.clone(), r.i32()?));
        }
        if flexible {
            r.skip_tagged_fields(|_, _| Ok(()))?;
        }
    }
    let last_update_ms = r.i64()?;
    let start_ms = r.i64()?;
    let mut previous_producer_id = NO_PRODUCER_ID;
    let mut next_producer_id = NO_PRODUCER_ID;
    let mut client_txn_version = 0;
    if flexible {
        r.skip_tagged_fields(|tag, data| {
            match tag {
                0 => previous_producer_id = Reader(data).i64()?,
                1 => next_producer_id = Reader(data).i64()?,
                2 => client_txn_version = Reader(data).i16()?,
                _ => {}
            }
            Ok(())
        })?;
    }
    r.finish()?;
    Ok(TxnMetadata {
        transactional_id: transactional_id.to_string(),
        producer_id,
        previous_producer_id,
        producer_epoch,
        last_producer_epoch: NO_PRODUCER_EPOCH,
        timeout_ms,
        state,
        partitions,
        start_ms,
        last_update_ms,
        next_producer_id,
        client_txn_version,
    })
}

fn group_by_topic(partitions: &BTreeSet<TopicPartition>) -> Vec<(&str, Vec<i32>)> {
    let mut out: Vec<(&str, Vec<i32>)> = Vec::new();
    for tp in partitions {
        match out.last_mut() {
            Some((topic, ids)) if *topic == tp.topic => ids.push(tp.partition),
            _ => out.push((&tp.topic, vec![tp.partition])),
        }
    }
    out
}

/// Lengths come from in-memory collections far below `i32::MAX` (topic names are at most 249
/// bytes, transactional ids are bounded by the request size).
fn len_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn put_string(buf: &mut BytesMut, s: &str) {
    let bytes = &s.as_bytes()[..s.len().min(i16::MAX as usize)];
    buf.put_i16(i16::try_from(bytes.len()).unwrap_or(i16::MAX));
    buf.put_slice(bytes);
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.0.len() < n {
            return Err(CodecError::Truncated);
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }
    fn i8(&mut self) -> Result<i8> {
        Ok(i8::from_be_bytes(self.array()?))
    }
    fn i16(&mut self) -> Result<i16> {
        Ok(i16::from_be_bytes(self.array()?))
    }
    fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_be_bytes(self.array()?))
    }
    fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_be_bytes(self.array()?))
    }
    fn uvarint(&mut self) -> Result<u64> {
        let mut value = 0u64;
        for shift in (0..35).step_by(7) {
            let b = self.array::<1>()?[0];
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(CodecError::Truncated)
    }
    fn text(&mut self, n: usize) -> Result<String> {
        let bytes = self.take(n)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| CodecError::InvalidString)
    }
    fn string(&mut self) -> Result<String> {
        let n = self.i16()?;
        let n = usize::try_from(n).map_err(|_| CodecError::NegativeLength(n.into()))?;
        self.text(n)
    }
    fn compact_string(&mut self) -> Result<String> {
        let n = self.uvarint()?;
        let n = usize::try_from(n.checked_sub(1).ok_or(CodecError::NegativeLength(-1))?)
            .map_err(|_| CodecError::Truncated)?;
        self.text(n)
    }
    /// An array's element count (`None`: null), refused when `min_element` bytes per element
    /// would not fit in what is left.
    fn array_len(&mut self, compact: bool, min_element: usize) -> Result<Option<usize>> {
        let n: i64 = if compact {
            i64::try_from(self.uvarint()?).unwrap_or(i64::MAX) - 1
        } else {
            i64::from(self.i32()?)
        };
        if n < 0 {
            return if n == -1 {
                Ok(None)
            } else {
                Err(CodecError::NegativeLength(n))
            };
        }
        let n = usize::try_from(n).map_err(|_| CodecError::Truncated)?;
        if n.saturating_mul(min_element) > self.0.len() {
            return Err(CodecError::Truncated);
        }
        Ok(Some(n))
    }
    fn skip_tagged_fields(&mut self, mut each: impl FnMut(u64, &[u8]) -> Result<()>) -> Result<()> {
        let count = self.uvarint()?;
        for _ in 0..count {
            let tag = self.uvarint()?;
            let size = usize::try_from(self.uvarint()?).map_err(|_| CodecError::Truncated)?;
            let data = self.take(size)?;
            each(tag, data)?;
        }
        Ok(())
    }
    fn finish(&self) -> Result<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(CodecError::Trailing(self.0.len()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> TxnMetadata {
        let mut m = TxnMetadata::fresh("my-txn", 4000, 60_000, 1_000);
        m.producer_epoch = 3;
        m.state = TxnState::Ongoing;
        m.start_ms = 900;
        m.partitions.insert(TopicPartition::new("a", 1));
        m.partitions.insert(TopicPartition::new("a", 0));
        m.partitions.insert(TopicPartition::new("b", 7));
        m
    }

    /// The bytes Kafka's generated `TransactionLogKey`/`TransactionLogValue` v0 writers
    /// produce for the same metadata, laid out field by field from the JSON schemas.
    #[test]
    fn the_layout_is_kafkas_v0() {
        assert_eq!(&encode_key("tx")[..], &[0, 0, 0, 2, b't', b'x']);
        let mut expected = vec![0u8, 0];
        expected.extend(4000i64.to_be_bytes());
        expected.extend(3i16.to_be_bytes());
        expected.extend(60_000i32.to_be_bytes());
        expected.push(1);
        expected.extend(2i32.to_be_bytes());
        expected.extend([0, 1, b'a']);
        expected.extend(2i32.to_be_bytes());
        expected.extend(0i32.to_be_bytes());
        expected.extend(1i32.to_be_bytes());
        expected.extend([0, 1, b'b']);
        expected.extend(1i32.to_be_bytes());
        expected.extend(7i32.to_be_bytes());
        expected.extend(1_000i64.to_be_bytes());
        expected.extend(900i64.to_be_bytes());
        assert_eq!(&encode_value(&sample(), 0)[..], &expected[..]);
    }

    #[test]
    fn round_trip() {
        let m = sample();
        assert_eq!(decode_key(&encode_key("my-txn")).unwrap(), "my-txn");
        assert_eq!(decode_value("my-txn", &encode_value(&m, 0)).unwrap(), m);
        let mut tv2 = m.clone();
        tv2.previous_producer_id = 3999;
        tv2.next_producer_id = 4001;
        tv2.client_txn_version = 2;
        assert_eq!(decode_value("my-txn", &encode_value(&tv2, 1)).unwrap(), tv2);
        // v0 has no room for them: a level-0 cluster loses them, as Kafka's.
        let back = decode_value("my-txn", &encode_value(&tv2, 0)).unwrap();
        assert_eq!((back.next_producer_id, back.client_txn_version), (-1, 0));
    }

    #[test]
    fn v1_is_written_as_kafkas_flexible_layout() {
        let mut m = sample();
        m.next_producer_id = 4001;
        m.client_txn_version = 2;
        let mut v = vec![0u8, 1];
        v.extend(4000i64.to_be_bytes());
        v.extend(3i16.to_be_bytes());
        v.extend(60_000i32.to_be_bytes());
        v.push(1);
        v.push(3); // two topics
        v.extend([2, b'a', 3]);
        v.extend(0i32.to_be_bytes());
        v.extend(1i32.to_be_bytes());
        v.push(0);
        v.extend([2, b'b', 2]);
        v.extend(7i32.to_be_bytes());
        v.push(0);
        v.extend(1_000i64.to_be_bytes());
        v.extend(900i64.to_be_bytes());
        v.extend([2, 1, 8]);
        v.extend(4001i64.to_be_bytes());
        v.extend([2, 2]);
        v.extend(2i16.to_be_bytes());
        assert_eq!(&encode_value(&m, 1)[..], &v[..]);
        assert_eq!(
            (value_version(0), value_version(1), value_version(2)),
            (0, 1, 1)
        );
    }

    #[test]
    fn reads_the_flexible_v1_with_tagged_producer_ids() {
        let mut v = vec![0u8, 1];
        v.extend(4000i64.to_be_bytes());
        v.extend(3i16.to_be_bytes());
        v.extend(60_000i32.to_be_bytes());
        v.push(4); // CompleteCommit
        v.push(2); // one topic
        v.extend([2, b'a']); // compact string "a"
        v.push(2); // one partition
        v.extend(5i32.to_be_bytes());
        v.push(0); // topic's tagged fields
        v.extend(1_000i64.to_be_bytes());
        v.extend(900i64.to_be_bytes());
        v.push(2); // two tagged fields
        v.extend([0, 8]);
        v.extend(3999i64.to_be_bytes());
        v.extend([2, 2]);
        v.extend(2i16.to_be_bytes());
        let m = decode_value("x", &v).unwrap();
        assert_eq!(m.state, TxnState::CompleteCommit);
        assert_eq!(m.previous_producer_id, 3999);
        assert_eq!(
            m.partitions.into_iter().collect::<Vec<_>>(),
            vec![TopicPartition::new("a", 5)]
        );
    }

    #[test]
    fn bad_bytes_are_errors_not_panics() {
        assert_eq!(decode_key(&[0]), Err(CodecError::Truncated));
        assert_eq!(decode_key(&[0, 0, 0, 5, b'a']), Err(CodecError::Truncated));
        assert_eq!(
            decode_key(&[0, 9, 0, 0]),
            Err(CodecError::UnknownVersion("key", 9))
        );
        let good = encode_value(&sample(), 0);
        for cut in 0..good.len() {
            assert!(decode_value("x", &good[..cut]).is_err(), "cut at {cut}");
        }
        // A forged huge topic count is refused before any allocation.
        let mut forged = good[..17].to_vec();
        forged.extend(i32::MAX.to_be_bytes());
        assert_eq!(decode_value("x", &forged), Err(CodecError::Truncated));
        let mut bad_status = good.to_vec();
        bad_status[16] = 9;
        assert_eq!(
            decode_value("x", &bad_status),
            Err(CodecError::UnknownStatus(9))
        );
    }
}
