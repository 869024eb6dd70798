//! The size of the record batch the shell writes for a list of `__consumer_offsets` records
//! (one uncompressed v2 batch, every record stamped with the same timestamp), so the pure
//! coordinator can refuse a commit whose batch the partition would reject
//! (`max.message.bytes`) before it changes any state: Kafka answers such a commit with
//! INVALID_COMMIT_OFFSET_SIZE (28), a non-retriable error, where a failed append would leave
//! the client retrying forever.

use crate::api::OffsetsRecord;

/// Bytes of a v2 record batch header (base offset .. record count).
pub const BATCH_HEADER_BYTES: usize = 61;

/// Bytes of a zigzag varint holding `v`.
fn varint_len(v: i64) -> usize {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    let mut n = 1;
    while z >= 0x80 {
        z >>= 7;
        n += 1;
    }
    n
}

/// Bytes of record `index` of a batch (attributes, deltas, key, value, no headers) with its
/// length prefix.
fn record_len(index: usize, r: &OffsetsRecord) -> usize {
    let offset_delta = i64::try_from(index).unwrap_or(i64::MAX);
    let key = r.key.len();
    let value = r.value.as_ref().map_or(0, |v| v.len());
    let value_len = r
        .value
        .as_ref()
        .map_or(-1, |v| i64::try_from(v.len()).unwrap_or(i64::MAX));
    let body = 1 // attributes
        + varint_len(0) // timestamp delta: one timestamp for the whole batch
        + varint_len(offset_delta)
        + varint_len(i64::try_from(key).unwrap_or(i64::MAX))
        + key
        + varint_len(value_len)
        + value
        + varint_len(0); // header count
    varint_len(i64::try_from(body).unwrap_or(i64::MAX)) + body
}

/// Size in bytes of the uncompressed v2 batch holding `records`.
pub fn record_batch_size(records: &[OffsetsRecord]) -> usize {
    records
        .iter()
        .enumerate()
        .fold(BATCH_HEADER_BYTES, |acc, (i, r)| {
            acc.saturating_add(record_len(i, r))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn varints_grow_every_seven_bits() {
        assert_eq!(varint_len(0), 1);
        assert_eq!(varint_len(-1), 1);
        assert_eq!(varint_len(63), 1);
        assert_eq!(varint_len(64), 2);
        assert_eq!(varint_len(8191), 2);
        assert_eq!(varint_len(8192), 3);
    }

    #[test]
    fn one_small_record() {
        let r = OffsetsRecord {
            key: Bytes::from_static(b"k"),
            value: None,
        };
        // body: attr 1 + ts 1 + offset 1 + keylen 1 + key 1 + valuelen 1 + headers 1 = 7.
        assert_eq!(record_batch_size(&[r]), 61 + 1 + 7);
    }
}
