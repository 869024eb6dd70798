//! Assignor user data formats of the Java client, so that sticky assignments survive a leader
//! of either implementation:
//!
//! * StickyAssignor (eager): `previous_assignment [topic string, partitions [int32]]` then
//!   (V1) `generation int32`; no version prefix. Eager members revoke everything before
//!   re-joining, so this is the only place their previous assignment survives.
//! * CooperativeStickyAssignor: `generation int32`, for subscriptions older than v2 that lack
//!   the generation field.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::group::TopicPartition;

/// Encodes Java's `StickyAssignorUserData` V1.
pub fn encode_sticky_user_data(previous: &[TopicPartition], generation: i32) -> Bytes {
    let mut topics: Vec<(&str, Vec<i32>)> = Vec::new();
    for tp in previous {
        match topics.iter_mut().find(|(t, _)| *t == tp.topic) {
            Some((_, ps)) => ps.push(tp.partition),
            None => topics.push((&tp.topic, vec![tp.partition])),
        }
    }
    let mut buf = BytesMut::new();
    buf.put_i32(topics.len() as i32);
    for (topic, parts) in topics {
        buf.put_i16(topic.len() as i16);
        buf.put_slice(topic.as_bytes());
        buf.put_i32(parts.len() as i32);
        for p in parts {
            buf.put_i32(p);
        }
    }
    buf.put_i32(generation);
    buf.freeze()
}

/// Decodes `StickyAssignorUserData` V0 or V1; `None` when the bytes are not in that format.
/// The generation is -1 for V0.
pub fn decode_sticky_user_data(bytes: &Bytes) -> Option<(Vec<TopicPartition>, i32)> {
    let mut buf = bytes.clone();
    let mut out = Vec::new();
    let topics = read_len(&mut buf, 4)?;
    for _ in 0..topics {
        if buf.remaining() < 2 {
            return None;
        }
        let len = usize::try_from(buf.get_i16()).ok()?;
        if buf.remaining() < len {
            return None;
        }
        let topic = String::from_utf8(buf.split_to(len).to_vec()).ok()?;
        let parts = read_len(&mut buf, 4)?;
        for _ in 0..parts {
            out.push(TopicPartition::new(topic.clone(), buf.get_i32()));
        }
    }
    let generation = match buf.remaining() {
        0 => -1,
        4 => buf.get_i32(),
        _ => return None,
    };
    Some((out, generation))
}

/// Reads an int32 array length and checks that `elem` bytes per element remain.
fn read_len(buf: &mut Bytes, elem: usize) -> Option<usize> {
    if buf.remaining() < 4 {
        return None;
    }
    let n = usize::try_from(buf.get_i32()).ok()?;
    (buf.remaining() >= n.checked_mul(elem)?).then_some(n)
}

/// Encodes Java's `CooperativeStickyAssignor` user data (the generation).
pub fn encode_cooperative_user_data(generation: i32) -> Bytes {
    Bytes::copy_from_slice(&generation.to_be_bytes())
}

/// Decodes the cooperative user data; Java falls back to -1 when it cannot be read.
pub fn decode_cooperative_user_data(bytes: &Bytes) -> i32 {
    match bytes.get(..4) {
        Some(b) => i32::from_be_bytes([b[0], b[1], b[2], b[3]]),
        None => -1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sticky_round_trip_and_layout() {
        let prev = vec![TopicPartition::new("t", 1), TopicPartition::new("t", 4)];
        let bytes = encode_sticky_user_data(&prev, 9);
        assert_eq!(
            &bytes[..],
            &[0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 9]
        );
        assert_eq!(decode_sticky_user_data(&bytes), Some((prev.clone(), 9)));
        // V0: no generation.
        let v0 = bytes.slice(..bytes.len() - 4);
        assert_eq!(decode_sticky_user_data(&v0), Some((prev, -1)));
    }

    #[test]
    fn sticky_garbage_is_none() {
        assert_eq!(
            decode_sticky_user_data(&Bytes::from_static(b"\x7f\xff\xff\xff")),
            None
        );
        assert_eq!(decode_sticky_user_data(&Bytes::from_static(b"\x00")), None);
        assert_eq!(
            decode_sticky_user_data(&Bytes::from_static(b"\x00\x00\x00\x01\xff\xff")),
            None
        );
    }

    #[test]
    fn cooperative_generation() {
        assert_eq!(
            decode_cooperative_user_data(&encode_cooperative_user_data(42)),
            42
        );
        assert_eq!(decode_cooperative_user_data(&Bytes::new()), -1);
    }
}
