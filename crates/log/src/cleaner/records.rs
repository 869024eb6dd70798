//! The records inside a v2 batch (spec J.2), parsed just enough to filter them.
//!
//! Each record is kept as its raw bytes plus the fields compaction needs (offset, timestamp,
//! key, whether the value is null). The key..headers tail is never re-encoded: when a batch is
//! rebuilt only the length, timestamp delta and offset delta are written again, so headers with
//! duplicate or non-UTF-8 keys, and any attribute byte, survive exactly as produced.

/// Reads a zig-zag varlong (protobuf `sint64`) at `*pos`, advancing it.
pub(crate) fn read_varlong(buf: &[u8], pos: &mut usize) -> Option<i64> {
    let mut raw: u64 = 0;
    for shift in (0..70).step_by(7) {
        let b = *buf.get(*pos)?;
        *pos += 1;
        raw |= u64::from(b & 0x7f).checked_shl(shift)?;
        if b & 0x80 == 0 {
            return Some((raw >> 1) as i64 ^ -((raw & 1) as i64));
        }
    }
    None
}

/// Reads a zig-zag varint (`sint32`).
pub(crate) fn read_varint(buf: &[u8], pos: &mut usize) -> Option<i32> {
    i32::try_from(read_varlong(buf, pos)?).ok()
}

/// Appends `v` as a zig-zag varlong.
pub(crate) fn write_varlong(out: &mut Vec<u8>, v: i64) {
    let mut raw = ((v << 1) ^ (v >> 63)) as u64;
    while raw >= 0x80 {
        out.push((raw as u8 & 0x7f) | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
}

/// One record of a batch, borrowing the (decompressed) records area.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawRecord<'a> {
    pub(crate) offset: i64,
    /// `batch baseTimestamp + timestampDelta`.
    pub(crate) timestamp: i64,
    pub(crate) key: Option<&'a [u8]>,
    /// A tombstone: the value is null.
    pub(crate) null_value: bool,
    attributes: u8,
    offset_delta: i32,
    /// The whole record as stored, length prefix included.
    raw: &'a [u8],
    /// From `keyLength` to the end of the record: copied verbatim when re-encoding.
    tail: &'a [u8],
}

impl<'a> RawRecord<'a> {
    /// The record's bytes, unchanged (valid as long as base offset and base timestamp stay).
    pub(crate) fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// Re-encodes the record for a batch whose base timestamp is `base_timestamp` (the offset
    /// delta is unchanged: rebuilt batches keep their base offset).
    pub(crate) fn encode_with_base_timestamp(&self, base_timestamp: i64, out: &mut Vec<u8>) {
        let mut body = Vec::with_capacity(self.tail.len() + 16);
        body.push(self.attributes);
        write_varlong(&mut body, self.timestamp.wrapping_sub(base_timestamp));
        write_varlong(&mut body, i64::from(self.offset_delta));
        body.extend_from_slice(self.tail);
        write_varlong(out, body.len() as i64);
        out.extend_from_slice(&body);
    }
}

/// Splits a records area of `count` records. Any malformed framing (lengths out of bounds,
/// bad varints, trailing bytes) is an error: the caller then leaves the batch alone.
pub(crate) fn parse_records(
    data: &[u8],
    count: i32,
    base_offset: i64,
    base_timestamp: i64,
) -> Result<Vec<RawRecord<'_>>, String> {
    let bad = |what: &str, i: i32| format!("record {i}: {what}");
    let count = usize::try_from(count).map_err(|_| format!("negative record count {count}"))?;
    // Every record takes at least 7 bytes: never trust `count` for an allocation.
    let mut out = Vec::with_capacity(count.min(data.len() / 7 + 1));
    let mut pos = 0usize;
    for i in 0..count as i32 {
        let start = pos;
        let len = read_varint(data, &mut pos).ok_or_else(|| bad("bad length", i))?;
        let len = usize::try_from(len).map_err(|_| bad("negative length", i))?;
        let end = pos
            .checked_add(len)
            .filter(|&e| e <= data.len())
            .ok_or_else(|| bad("length beyond the batch", i))?;
        let body = &data[pos..end];
        let mut p = 0usize;
        let attributes = *body.first().ok_or_else(|| bad("empty record", i))?;
        p += 1;
        let ts_delta = read_varlong(body, &mut p).ok_or_else(|| bad("bad timestamp", i))?;
        let offset_delta = read_varint(body, &mut p).ok_or_else(|| bad("bad offset delta", i))?;
        let tail_start = p;
        let key_len = read_varint(body, &mut p).ok_or_else(|| bad("bad key length", i))?;
        let key = match key_len {
            -1 => None,
            n if n >= 0 && p + n as usize <= body.len() => {
                let k = &body[p..p + n as usize];
                p += n as usize;
                Some(k)
            }
            _ => return Err(bad("bad key length", i)),
        };
        let value_len = read_varint(body, &mut p).ok_or_else(|| bad("bad value length", i))?;
        if value_len < -1 || (value_len >= 0 && p + value_len as usize > body.len()) {
            return Err(bad("bad value length", i));
        }
        out.push(RawRecord {
            offset: base_offset.saturating_add(i64::from(offset_delta)),
            timestamp: base_timestamp.wrapping_add(ts_delta),
            key,
            null_value: value_len == -1,
            attributes,
            offset_delta,
            raw: &data[start..end],
            tail: &body[tail_start..],
        });
        pos = end;
    }
    if pos != data.len() {
        return Err(format!(
            "{} trailing bytes after the records",
            data.len() - pos
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_the_edges() {
        for v in [
            0i64,
            1,
            -1,
            63,
            -64,
            64,
            300,
            i64::from(i32::MAX),
            i64::MIN,
            i64::MAX,
        ] {
            let mut b = Vec::new();
            write_varlong(&mut b, v);
            let mut p = 0;
            assert_eq!(read_varlong(&b, &mut p), Some(v));
            assert_eq!(p, b.len());
        }
        let mut p = 0;
        assert_eq!(read_varlong(&[0xff; 11], &mut p), None);
        let mut b = Vec::new();
        write_varlong(&mut b, i64::from(i32::MAX) + 1);
        let mut p = 0;
        assert_eq!(read_varint(&b, &mut p), None);
    }

    #[test]
    fn malformed_records_are_errors() {
        assert!(parse_records(&[], 1, 0, 0).is_err());
        assert!(parse_records(&[0x7f], 1, 0, 0).is_err());
        assert!(parse_records(&[0], 0, 0, 0).is_err()); // trailing byte
        assert!(parse_records(&[], -1, 0, 0).is_err());
        // length 3: attributes, ts 0, offset 0, then no key length.
        assert!(parse_records(&[6, 0, 0, 0], 1, 0, 0).is_err());
    }
}
