//! Control batches (spec J.2, KIP-98): the COMMIT / ABORT markers that end a transaction.
//!
//! A marker is a v2 batch with the control (bit 5) and transactional (bit 4) attributes, the
//! producer's id and epoch, no sequence, and one record whose key is Kafka's control record
//! key (`version: int16 = 0`, `type: int16`, 0 = ABORT, 1 = COMMIT) and whose value is the
//! `EndTransactionMarker` (`version: int16 = 0`, `coordinatorEpoch: int32`). Only the leader
//! writes them (clients may not, [`crate::batch::validate_batches`]).

use crate::batch::{BatchHeader, RECORD_BATCH_OVERHEAD};
use crate::cleaner::records::{read_varint, read_varlong, write_varlong};

/// Attributes of a marker batch: transactional (bit 4) and control (bit 5).
const MARKER_ATTRIBUTES: i16 = (1 << 4) | (1 << 5);
const CONTROL_KEY_VERSION: i16 = 0;
const MARKER_VALUE_VERSION: i16 = 0;
const TYPE_ABORT: i16 = 0;
const TYPE_COMMIT: i16 = 1;

/// A transaction marker, as written by the leader on the coordinator's WriteTxnMarkers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    pub coordinator_epoch: i32,
}

/// The marker batch for `marker`, stamped `timestamp`, base offset 0 (the append patches it).
pub fn marker_batch(marker: &Marker, timestamp: i64) -> Vec<u8> {
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&CONTROL_KEY_VERSION.to_be_bytes());
    let kind = if marker.commit {
        TYPE_COMMIT
    } else {
        TYPE_ABORT
    };
    key.extend_from_slice(&kind.to_be_bytes());
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&MARKER_VALUE_VERSION.to_be_bytes());
    value.extend_from_slice(&marker.coordinator_epoch.to_be_bytes());
    let mut body = vec![0u8]; // record attributes
    write_varlong(&mut body, 0); // timestamp delta
    write_varlong(&mut body, 0); // offset delta
    write_varlong(&mut body, key.len() as i64);
    body.extend_from_slice(&key);
    write_varlong(&mut body, value.len() as i64);
    body.extend_from_slice(&value);
    write_varlong(&mut body, 0); // no headers
    let mut record = Vec::with_capacity(body.len() + 1);
    write_varlong(&mut record, body.len() as i64);
    record.extend_from_slice(&body);

    let mut b = Vec::with_capacity(RECORD_BATCH_OVERHEAD + record.len());
    b.extend_from_slice(&0i64.to_be_bytes());
    let length = (RECORD_BATCH_OVERHEAD - 12 + record.len()) as i32;
    b.extend_from_slice(&length.to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch, patched
    b.push(2);
    b.extend_from_slice(&0u32.to_be_bytes()); // crc, below
    b.extend_from_slice(&MARKER_ATTRIBUTES.to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes()); // last offset delta
    b.extend_from_slice(&timestamp.to_be_bytes());
    b.extend_from_slice(&timestamp.to_be_bytes());
    b.extend_from_slice(&marker.producer_id.to_be_bytes());
    b.extend_from_slice(&marker.producer_epoch.to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes()); // no sequence
    b.extend_from_slice(&1i32.to_be_bytes());
    b.extend_from_slice(&record);
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

/// The marker a control batch carries: `None` for a batch that is not a control batch, or
/// whose first record is not a well-formed COMMIT / ABORT (Kafka ignores unknown control types).
/// `batch` holds the whole batch from its first byte.
pub fn parse_marker(header: &BatchHeader, batch: &[u8]) -> Option<Marker> {
    if !header.is_control() || header.compression() != 0 {
        return None;
    }
    let records = batch.get(RECORD_BATCH_OVERHEAD..)?;
    let mut pos = 0;
    let _length = read_varint(records, &mut pos)?;
    pos += 1; // attributes
    read_varlong(records, &mut pos)?;
    read_varint(records, &mut pos)?;
    let key_len = usize::try_from(read_varint(records, &mut pos)?).ok()?;
    let key = records.get(pos..pos.checked_add(key_len)?)?;
    pos += key_len;
    let kind = i16::from_be_bytes([*key.get(2)?, *key.get(3)?]);
    let value_len = usize::try_from(read_varint(records, &mut pos)?).ok()?;
    let value = records.get(pos..pos.checked_add(value_len)?)?;
    let coordinator_epoch = i32::from_be_bytes(value.get(2..6)?.try_into().ok()?);
    let commit = match kind {
        TYPE_COMMIT => true,
        TYPE_ABORT => false,
        _ => return None,
    };
    Some(Marker {
        producer_id: header.producer_id,
        producer_epoch: header.producer_epoch,
        commit,
        coordinator_epoch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{frame, verify_crc};

    #[test]
    fn markers_round_trip_as_valid_control_batches() {
        for commit in [true, false] {
            let m = Marker {
                producer_id: 42,
                producer_epoch: 3,
                commit,
                coordinator_epoch: 7,
            };
            let b = marker_batch(&m, 1_000);
            let (h, bytes) = frame(&b).unwrap();
            verify_crc(&h, bytes).unwrap();
            assert!(h.is_control() && h.is_transactional());
            assert_eq!(
                (h.record_count, h.last_offset_delta, h.base_sequence),
                (1, 0, -1)
            );
            assert_eq!(parse_marker(&h, bytes), Some(m));
        }
    }

    #[test]
    fn a_data_batch_or_a_truncated_marker_is_not_a_marker() {
        let m = Marker {
            producer_id: 1,
            producer_epoch: 0,
            commit: true,
            coordinator_epoch: 0,
        };
        let b = marker_batch(&m, 0);
        let h = BatchHeader::parse(&b).unwrap();
        // The last byte is the header count, which the marker does not need.
        for cut in RECORD_BATCH_OVERHEAD..b.len() - 1 {
            assert_eq!(parse_marker(&h, &b[..cut]), None, "cut at {cut}");
        }
        let mut data = h;
        data.attributes = 0;
        assert_eq!(parse_marker(&data, &b), None);
    }
}
