//! The `__consumer_offsets` record formats (spec H.5): big-endian, non-flexible versions,
//! int16-length strings (-1 = null), int32-length bytes. We write what Kafka 2.8 writes
//! (offset key v1, offset value v3, group key v2, group value v3) so a Kafka broker could load
//! our partitions and vice versa; we read every non-flexible version (values v0..v3).
//!
//! Decoding never panics: every length is checked against the bytes left. Trailing bytes after
//! a known struct are ignored (as Kafka's schema readers do).

use bytes::{BufMut, Bytes, BytesMut};

use crate::api::CommittedOffset;

/// Offset commit key version written (0 and 1 are identical).
pub const OFFSET_KEY_VERSION: i16 = 1;
/// Group metadata key version.
pub const GROUP_KEY_VERSION: i16 = 2;
/// Offset value version written when there is no explicit expire timestamp (IBP >= 2.1).
pub const OFFSET_VALUE_VERSION: i16 = 3;
/// Group metadata value version written (IBP >= 2.3: carries group instance ids).
pub const GROUP_VALUE_VERSION: i16 = 3;

/// Why a record could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("record truncated")]
    Truncated,
    #[error("unsupported version {0}")]
    UnsupportedVersion(i16),
    #[error("negative length {0}")]
    NegativeLength(i32),
    #[error("null where a value is required")]
    UnexpectedNull,
    #[error("string is not valid UTF-8")]
    InvalidUtf8,
}

/// A decoded record key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OffsetsKey {
    /// Key versions 0 and 1: a committed offset.
    Offset {
        group: String,
        topic: String,
        partition: i32,
    },
    /// Key version 2: group metadata.
    Group { group: String },
}

/// A decoded offset value: the offset plus the explicit expire timestamp of value v1 (old
/// OffsetCommit v2-v4 retention field), which expiry still honours (spec H.6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetValue {
    pub committed: CommittedOffset,
    pub expire_timestamp: Option<i64>,
}

/// `GroupMetadataValue`, fields in wire order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadataValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    /// v2+; -1 when absent.
    pub current_state_timestamp: i64,
    pub members: Vec<MemberMetadataValue>,
}

/// One member of `GroupMetadataValue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberMetadataValue {
    pub member_id: String,
    /// v3+.
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// v1+; v0 records use the session timeout (as Kafka does when loading).
    pub rebalance_timeout: i32,
    pub session_timeout: i32,
    pub subscription: Bytes,
    pub assignment: Bytes,
}

// ---------------------------------------------------------------------------------------------
// Encoding

/// Writes an int16-length string. Callers validate lengths at the API boundary
/// ([`fits_int16_string`]); an over-long string is truncated at a char boundary here rather
/// than panicking or producing an undecodable record.
pub(crate) fn put_str(buf: &mut BytesMut, s: &str) {
    let mut end = s.len().min(i16::MAX as usize);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    debug_assert_eq!(end, s.len(), "string too long for an int16 length");
    buf.put_i16(end as i16);
    buf.put_slice(&s.as_bytes()[..end]);
}

fn put_nullable_str(buf: &mut BytesMut, s: Option<&str>) {
    match s {
        None => buf.put_i16(-1),
        Some(s) => put_str(buf, s),
    }
}

fn put_bytes(buf: &mut BytesMut, b: &[u8]) {
    let len = b.len().min(i32::MAX as usize);
    buf.put_i32(len as i32);
    buf.put_slice(&b[..len]);
}

/// Whether `s` can be written as an int16-length string.
pub fn fits_int16_string(s: &str) -> bool {
    s.len() <= i16::MAX as usize
}

/// `OffsetCommitKey` v1: group, topic, partition.
pub fn offset_key(group: &str, topic: &str, partition: i32) -> Bytes {
    let mut b = BytesMut::with_capacity(2 + 2 + group.len() + 2 + topic.len() + 4);
    b.put_i16(OFFSET_KEY_VERSION);
    put_str(&mut b, group);
    put_str(&mut b, topic);
    b.put_i32(partition);
    b.freeze()
}

/// `OffsetCommitValue` v3: offset, leader epoch, metadata, commit timestamp.
pub fn offset_value(c: &CommittedOffset) -> Bytes {
    let mut b = BytesMut::with_capacity(2 + 8 + 4 + 2 + c.metadata.len() + 8);
    b.put_i16(OFFSET_VALUE_VERSION);
    b.put_i64(c.offset);
    b.put_i32(c.leader_epoch);
    put_str(&mut b, &c.metadata);
    b.put_i64(c.commit_timestamp);
    b.freeze()
}

/// `OffsetCommitValue` v1 (offset, metadata, commit timestamp, expire timestamp): what Kafka
/// writes when the client sent an explicit retention time. Runnel never does (OffsetCommit
/// v5+ has no retention field), but tests and tools use it.
pub fn offset_value_v1(c: &CommittedOffset, expire_timestamp: i64) -> Bytes {
    let mut b = BytesMut::with_capacity(2 + 8 + 2 + c.metadata.len() + 16);
    b.put_i16(1);
    b.put_i64(c.offset);
    put_str(&mut b, &c.metadata);
    b.put_i64(c.commit_timestamp);
    b.put_i64(expire_timestamp);
    b.freeze()
}

/// `GroupMetadataKey` v2: group.
pub fn group_key(group: &str) -> Bytes {
    let mut b = BytesMut::with_capacity(4 + group.len());
    b.put_i16(GROUP_KEY_VERSION);
    put_str(&mut b, group);
    b.freeze()
}

/// `GroupMetadataValue` v3.
pub fn group_value(v: &GroupMetadataValue) -> Bytes {
    let mut b = BytesMut::with_capacity(64);
    b.put_i16(GROUP_VALUE_VERSION);
    put_str(&mut b, &v.protocol_type);
    b.put_i32(v.generation);
    put_nullable_str(&mut b, v.protocol.as_deref());
    put_nullable_str(&mut b, v.leader.as_deref());
    b.put_i64(v.current_state_timestamp);
    b.put_i32(v.members.len().min(i32::MAX as usize) as i32);
    for m in &v.members {
        put_str(&mut b, &m.member_id);
        put_nullable_str(&mut b, m.group_instance_id.as_deref());
        put_str(&mut b, &m.client_id);
        put_str(&mut b, &m.client_host);
        b.put_i32(m.rebalance_timeout);
        b.put_i32(m.session_timeout);
        put_bytes(&mut b, &m.subscription);
        put_bytes(&mut b, &m.assignment);
    }
    b.freeze()
}

// ---------------------------------------------------------------------------------------------
// Decoding

/// A bounds-checked big-endian reader over a byte slice.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        if self.buf.len() < n {
            return Err(CodecError::Truncated);
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    pub(crate) fn i16(&mut self) -> Result<i16, CodecError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    pub(crate) fn i32(&mut self) -> Result<i32, CodecError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn i64(&mut self) -> Result<i64, CodecError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }

    pub(crate) fn nullable_string(&mut self) -> Result<Option<String>, CodecError> {
        let len = self.i16()?;
        if len == -1 {
            return Ok(None);
        }
        if len < 0 {
            return Err(CodecError::NegativeLength(i32::from(len)));
        }
        let raw = self.take(len as usize)?;
        std::str::from_utf8(raw)
            .map(|s| Some(s.to_owned()))
            .map_err(|_| CodecError::InvalidUtf8)
    }

    pub(crate) fn string(&mut self) -> Result<String, CodecError> {
        self.nullable_string()?.ok_or(CodecError::UnexpectedNull)
    }

    /// int32-length bytes; null (-1) reads as empty, which is how Kafka treats a null
    /// subscription or assignment.
    pub(crate) fn bytes(&mut self) -> Result<Bytes, CodecError> {
        let len = self.i32()?;
        if len == -1 {
            return Ok(Bytes::new());
        }
        if len < 0 {
            return Err(CodecError::NegativeLength(len));
        }
        Ok(Bytes::copy_from_slice(self.take(len as usize)?))
    }

    /// An int32 array length, rejected if negative or larger than the bytes left could hold
    /// (each element needs at least `min_element_size` bytes), so a forged length cannot make
    /// us pre-allocate gigabytes.
    pub(crate) fn array_len(&mut self, min_element_size: usize) -> Result<usize, CodecError> {
        let len = self.i32()?;
        if len < 0 {
            return Err(CodecError::NegativeLength(len));
        }
        let len = len as usize;
        if len.saturating_mul(min_element_size.max(1)) > self.buf.len() {
            return Err(CodecError::Truncated);
        }
        Ok(len)
    }
}

/// Decodes a record key (versions 0..2).
pub fn decode_key(b: &[u8]) -> Result<OffsetsKey, CodecError> {
    let mut r = Reader::new(b);
    match r.i16()? {
        0 | 1 => Ok(OffsetsKey::Offset {
            group: r.string()?,
            topic: r.string()?,
            partition: r.i32()?,
        }),
        2 => Ok(OffsetsKey::Group { group: r.string()? }),
        v => Err(CodecError::UnsupportedVersion(v)),
    }
}

/// Decodes an offset value (v0..v3), dropping the v1 expire timestamp.
pub fn decode_offset_value(b: &[u8]) -> Result<CommittedOffset, CodecError> {
    decode_offset_value_with_expiry(b).map(|v| v.committed)
}

/// Decodes an offset value (v0..v3) including the v1 expire timestamp.
pub fn decode_offset_value_with_expiry(b: &[u8]) -> Result<OffsetValue, CodecError> {
    let mut r = Reader::new(b);
    let version = r.i16()?;
    let offset = r.i64()?;
    let (leader_epoch, metadata, commit_timestamp, expire_timestamp) = match version {
        0 | 2 => (-1, r.string()?, r.i64()?, None),
        1 => (-1, r.string()?, r.i64()?, Some(r.i64()?)),
        3 => {
            let epoch = r.i32()?;
            (epoch, r.string()?, r.i64()?, None)
        }
        v => return Err(CodecError::UnsupportedVersion(v)),
    };
    Ok(OffsetValue {
        committed: CommittedOffset {
            offset,
            leader_epoch,
            metadata,
            commit_timestamp,
        },
        expire_timestamp,
    })
}

/// Decodes a group metadata value (v0..v3).
pub fn decode_group_value(b: &[u8]) -> Result<GroupMetadataValue, CodecError> {
    let mut r = Reader::new(b);
    let version = r.i16()?;
    if !(0..=3).contains(&version) {
        return Err(CodecError::UnsupportedVersion(version));
    }
    let protocol_type = r.string()?;
    let generation = r.i32()?;
    let protocol = r.nullable_string()?;
    let leader = r.nullable_string()?;
    let current_state_timestamp = if version >= 2 { r.i64()? } else { -1 };
    // Smallest member (v0): 3 empty strings, the session timeout, 2 empty bytes = 6 + 4 + 8.
    let n = r.array_len(18)?;
    let mut members = Vec::with_capacity(n);
    for _ in 0..n {
        let member_id = r.string()?;
        let group_instance_id = if version >= 3 {
            r.nullable_string()?
        } else {
            None
        };
        let client_id = r.string()?;
        let client_host = r.string()?;
        let rebalance_timeout = if version >= 1 { Some(r.i32()?) } else { None };
        let session_timeout = r.i32()?;
        let subscription = r.bytes()?;
        let assignment = r.bytes()?;
        members.push(MemberMetadataValue {
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout: rebalance_timeout.unwrap_or(session_timeout),
            session_timeout,
            subscription,
            assignment,
        });
    }
    Ok(GroupMetadataValue {
        protocol_type,
        generation,
        protocol,
        leader,
        current_state_timestamp,
        members,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn committed(offset: i64, epoch: i32, meta: &str, ts: i64) -> CommittedOffset {
        CommittedOffset {
            offset,
            leader_epoch: epoch,
            metadata: meta.to_owned(),
            commit_timestamp: ts,
        }
    }

    #[test]
    fn offset_key_bytes() {
        let k = offset_key("g", "tp", 5);
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0x00, 0x01,             // key version 1
            0x00, 0x01, b'g',       // group
            0x00, 0x02, b't', b'p', // topic
            0x00, 0x00, 0x00, 0x05, // partition
        ];
        assert_eq!(&k[..], expected);
        assert_eq!(
            decode_key(&k).unwrap(),
            OffsetsKey::Offset {
                group: "g".into(),
                topic: "tp".into(),
                partition: 5
            }
        );
    }

    #[test]
    fn offset_key_v0_decodes_like_v1() {
        let b = [0, 0, 0, 1, b'g', 0, 1, b't', 0xff, 0xff, 0xff, 0xff];
        assert_eq!(
            decode_key(&b).unwrap(),
            OffsetsKey::Offset {
                group: "g".into(),
                topic: "t".into(),
                partition: -1
            }
        );
    }

    #[test]
    fn offset_value_v3_bytes() {
        let v = offset_value(&committed(0x0102, -1, "m", 1000));
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0x00, 0x03,                                     // value version 3
            0, 0, 0, 0, 0, 0, 0x01, 0x02,                   // offset 258
            0xff, 0xff, 0xff, 0xff,                         // leader epoch -1
            0x00, 0x01, b'm',                               // metadata
            0, 0, 0, 0, 0, 0, 0x03, 0xe8,                   // commit timestamp 1000
        ];
        assert_eq!(&v[..], expected);
        let d = decode_offset_value_with_expiry(&v).unwrap();
        assert_eq!(d.committed, committed(258, -1, "m", 1000));
        assert_eq!(d.expire_timestamp, None);
    }

    #[test]
    fn offset_value_old_versions() {
        #[rustfmt::skip]
        let v0: &[u8] = &[0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9];
        assert_eq!(decode_offset_value(v0).unwrap(), committed(7, -1, "", 9));
        #[rustfmt::skip]
        let v1: &[u8] = &[0, 1, 0, 0, 0, 0, 0, 0, 0, 7, 0, 1, b'x', 0, 0, 0, 0, 0, 0, 0, 9,
                          0, 0, 0, 0, 0, 0, 0, 11];
        let d = decode_offset_value_with_expiry(v1).unwrap();
        assert_eq!(d.committed, committed(7, -1, "x", 9));
        assert_eq!(d.expire_timestamp, Some(11));
        assert_eq!(&offset_value_v1(&committed(7, -1, "x", 9), 11)[..], v1);
        #[rustfmt::skip]
        let v2: &[u8] = &[0, 2, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9];
        assert_eq!(decode_offset_value(v2).unwrap(), committed(7, -1, "", 9));
        assert_eq!(
            decode_offset_value(&[0, 4, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(CodecError::UnsupportedVersion(4))
        );
    }

    #[test]
    fn group_key_bytes() {
        assert_eq!(&group_key("ab")[..], &[0, 2, 0, 2, b'a', b'b']);
        assert_eq!(
            decode_key(&[0, 2, 0, 2, b'a', b'b']).unwrap(),
            OffsetsKey::Group { group: "ab".into() }
        );
        assert_eq!(
            decode_key(&[0, 3, 0, 0]),
            Err(CodecError::UnsupportedVersion(3))
        );
    }

    fn sample_group() -> GroupMetadataValue {
        GroupMetadataValue {
            protocol_type: "consumer".into(),
            generation: 1,
            protocol: Some("range".into()),
            leader: Some("m".into()),
            current_state_timestamp: 5,
            members: vec![MemberMetadataValue {
                member_id: "m".into(),
                group_instance_id: None,
                client_id: "c".into(),
                client_host: "/h".into(),
                rebalance_timeout: 300_000,
                session_timeout: 10_000,
                subscription: Bytes::from_static(&[1, 2]),
                assignment: Bytes::from_static(&[3]),
            }],
        }
    }

    #[test]
    fn group_value_v3_bytes() {
        let v = group_value(&sample_group());
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0x00, 0x03,                                         // value version 3
            0x00, 0x08, b'c', b'o', b'n', b's', b'u', b'm', b'e', b'r', // protocol type
            0x00, 0x00, 0x00, 0x01,                             // generation
            0x00, 0x05, b'r', b'a', b'n', b'g', b'e',           // protocol
            0x00, 0x01, b'm',                                   // leader
            0, 0, 0, 0, 0, 0, 0, 5,                             // current state timestamp
            0x00, 0x00, 0x00, 0x01,                             // 1 member
            0x00, 0x01, b'm',                                   //   member id
            0xff, 0xff,                                         //   group instance id: null
            0x00, 0x01, b'c',                                   //   client id
            0x00, 0x02, b'/', b'h',                             //   client host
            0x00, 0x04, 0x93, 0xe0,                             //   rebalance timeout 300000
            0x00, 0x00, 0x27, 0x10,                             //   session timeout 10000
            0x00, 0x00, 0x00, 0x02, 1, 2,                       //   subscription
            0x00, 0x00, 0x00, 0x01, 3,                          //   assignment
        ];
        assert_eq!(&v[..], expected);
        assert_eq!(decode_group_value(&v).unwrap(), sample_group());
    }

    #[test]
    fn empty_group_value_bytes() {
        let g = GroupMetadataValue {
            protocol_type: String::new(),
            generation: 0,
            protocol: None,
            leader: None,
            current_state_timestamp: -1,
            members: vec![],
        };
        let v = group_value(&g);
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0, 3, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0,
        ];
        assert_eq!(&v[..], expected);
        assert_eq!(decode_group_value(&v).unwrap(), g);
    }

    #[test]
    fn group_value_v0_uses_session_timeout_as_rebalance_timeout() {
        #[rustfmt::skip]
        let v0: &[u8] = &[
            0, 0, 0, 1, b'c', 0, 0, 0, 2, 0xff, 0xff, 0xff, 0xff,
            0, 0, 0, 1,
            0, 1, b'm', 0, 1, b'c', 0, 0, 0, 0, 0x27, 0x10, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0,
        ];
        let g = decode_group_value(v0).unwrap();
        assert_eq!(g.generation, 2);
        assert_eq!(g.current_state_timestamp, -1);
        assert_eq!(g.members[0].rebalance_timeout, 10_000);
        assert_eq!(g.members[0].session_timeout, 10_000);
        assert!(g.members[0].subscription.is_empty());
    }

    #[test]
    fn decode_errors() {
        assert_eq!(decode_key(&[]), Err(CodecError::Truncated));
        assert_eq!(decode_key(&[0, 2, 0, 5, b'a']), Err(CodecError::Truncated));
        assert_eq!(
            decode_key(&[0, 2, 0xff, 0xff]),
            Err(CodecError::UnexpectedNull)
        );
        assert_eq!(
            decode_key(&[0, 2, 0xff, 0xfe]),
            Err(CodecError::NegativeLength(-2))
        );
        assert_eq!(
            decode_key(&[0, 2, 0, 1, 0xff]),
            Err(CodecError::InvalidUtf8)
        );
        // A forged member count must not allocate.
        let mut v = vec![0, 3, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff];
        v.extend_from_slice(&[0; 8]);
        v.extend_from_slice(&[0x7f, 0xff, 0xff, 0xff]);
        assert_eq!(decode_group_value(&v), Err(CodecError::Truncated));
    }

    fn arb_string() -> impl Strategy<Value = String> {
        ".{0,12}"
    }

    proptest! {
        #[test]
        fn decoders_never_panic(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode_key(&b);
            let _ = decode_offset_value_with_expiry(&b);
            let _ = decode_group_value(&b);
        }

        #[test]
        fn decoders_never_panic_on_valid_prefixes(b in proptest::collection::vec(any::<u8>(), 0..64), v in 0i16..4) {
            let mut buf = v.to_be_bytes().to_vec();
            buf.extend_from_slice(&b);
            let _ = decode_key(&buf);
            let _ = decode_offset_value_with_expiry(&buf);
            let _ = decode_group_value(&buf);
        }

        #[test]
        fn offset_round_trip(g in arb_string(), t in arb_string(), p in any::<i32>(), o in any::<i64>(),
                             e in any::<i32>(), m in arb_string(), ts in any::<i64>()) {
            prop_assert_eq!(decode_key(&offset_key(&g, &t, p)).unwrap(),
                OffsetsKey::Offset { group: g.clone(), topic: t.clone(), partition: p });
            let c = committed(o, e, &m, ts);
            prop_assert_eq!(decode_offset_value(&offset_value(&c)).unwrap(), c);
        }

        #[test]
        fn group_round_trip(g in arb_string(), pt in arb_string(), gen in any::<i32>(),
                            proto in proptest::option::of(arb_string()), leader in proptest::option::of(arb_string()),
                            ts in any::<i64>(),
                            members in proptest::collection::vec((arb_string(), proptest::option::of(arb_string()),
                                arb_string(), any::<i32>(), proptest::collection::vec(any::<u8>(), 0..8)), 0..4)) {
            prop_assert_eq!(decode_key(&group_key(&g)).unwrap(), OffsetsKey::Group { group: g.clone() });
            let v = GroupMetadataValue {
                protocol_type: pt, generation: gen, protocol: proto, leader, current_state_timestamp: ts,
                members: members.into_iter().map(|(id, inst, host, to, bytes)| MemberMetadataValue {
                    member_id: id.clone(), group_instance_id: inst, client_id: id, client_host: host,
                    rebalance_timeout: to, session_timeout: to.wrapping_add(1),
                    subscription: Bytes::from(bytes.clone()), assignment: Bytes::from(bytes),
                }).collect(),
            };
            prop_assert_eq!(decode_group_value(&group_value(&v)).unwrap(), v);
        }
    }
}
