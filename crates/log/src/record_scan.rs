//! Walking the records of an *uncompressed* v2 batch without decoding keys or values: just the
//! varint header of each record (spec J.2), to find the exact record for a timestamp lookup.

use crate::batch::{BatchHeader, RECORD_BATCH_OVERHEAD};

/// Reads a zig-zag varint (protobuf `sint64`) at `*pos`, advancing it.
fn varlong(buf: &[u8], pos: &mut usize) -> Option<i64> {
    let mut raw: u64 = 0;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos)?;
        *pos += 1;
        raw |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some((raw >> 1) as i64 ^ -((raw & 1) as i64));
        }
    }
    None
}

/// The first record of `batch` (an uncompressed batch, bytes from its start) whose timestamp is
/// at least `ts` and whose offset is at least `min_offset`, as `(offset, timestamp)`. `None` if
/// there is none or the records are malformed (callers fall back to batch-level answers).
pub(crate) fn first_record_at_or_after(
    header: &BatchHeader,
    batch: &[u8],
    ts: i64,
    min_offset: i64,
) -> Option<(i64, i64)> {
    if header.compression() != 0 {
        return None;
    }
    let mut pos = RECORD_BATCH_OVERHEAD;
    for _ in 0..header.record_count.max(0) {
        let len = usize::try_from(varlong(batch, &mut pos)?).ok()?;
        let body_start = pos;
        let end = body_start.checked_add(len)?;
        if end > batch.len() {
            return None;
        }
        let mut p = body_start + 1; // attributes
        let ts_delta = varlong(batch, &mut p)?;
        let offset_delta = varlong(batch, &mut p)?;
        let offset = header.base_offset.checked_add(offset_delta)?;
        let timestamp = header.base_timestamp.checked_add(ts_delta)?;
        if timestamp >= ts && offset >= min_offset {
            return Some((offset, timestamp));
        }
        pos = end;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag() {
        for (bytes, v) in [
            (&[0u8][..], 0i64),
            (&[1], -1),
            (&[2], 1),
            (&[0xac, 0x02], 150),
        ] {
            let mut p = 0;
            assert_eq!(varlong(bytes, &mut p), Some(v));
        }
        let mut p = 0;
        assert_eq!(varlong(&[0x80; 12], &mut p), None);
    }
}
