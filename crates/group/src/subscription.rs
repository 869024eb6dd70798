//! Reading the topics out of a "consumer" protocol subscription (spec H.3). The coordinator
//! otherwise treats subscriptions as opaque; it needs the topics for OffsetDelete (86
//! GROUP_SUBSCRIBED_TO_TOPIC) and for expiring offsets of topics a Stable group no longer
//! consumes (KIP-211).

use std::collections::BTreeSet;

use crate::codec::{CodecError, Reader};

/// The protocol type whose subscriptions we know how to read.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// `ConsumerProtocolSubscription`: `version int16`, `topics [string]`, ... Every version
/// (0..3, and newer ones, which Kafka reads as its latest) starts with the topics, so only the
/// prefix is read. A negative version is invalid, as in Kafka.
pub fn subscription_topics(b: &[u8]) -> Result<Vec<String>, CodecError> {
    let mut r = Reader::new(b);
    let version = r.i16()?;
    if version < 0 {
        return Err(CodecError::UnsupportedVersion(version));
    }
    crate::consumer_protocol::read_topics(&mut r)
}

/// The union of the members' subscribed topics, or None when any subscription is unreadable
/// (then the group counts as subscribed to every topic, like Kafka).
pub fn union_of_topics<'a>(
    subscriptions: impl IntoIterator<Item = &'a [u8]>,
) -> Option<BTreeSet<String>> {
    let mut all = BTreeSet::new();
    for s in subscriptions {
        all.extend(subscription_topics(s).ok()?);
    }
    Some(all)
}

/// Encodes a v0 subscription (tests and tools; the broker never writes one).
pub fn encode_subscription_v0(topics: &[&str]) -> bytes::Bytes {
    use bytes::BufMut;
    let mut b = bytes::BytesMut::new();
    b.put_i16(0);
    b.put_i32(topics.len() as i32);
    for t in topics {
        b.put_i16(t.len() as i16);
        b.put_slice(t.as_bytes());
    }
    b.put_i32(-1); // user data: null
    b.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_topics() {
        #[rustfmt::skip]
        let v1: &[u8] = &[
            0, 1,                       // version 1
            0, 0, 0, 2,                 // 2 topics
            0, 1, b'a', 0, 2, b'b', b'c',
            0xff, 0xff, 0xff, 0xff,     // user data null
            0, 0, 0, 0,                 // owned partitions
        ];
        assert_eq!(subscription_topics(v1).unwrap(), vec!["a", "bc"]);
        assert_eq!(
            subscription_topics(&encode_subscription_v0(&["x"])).unwrap(),
            vec!["x"]
        );
        assert!(subscription_topics(&[0xff, 0xff, 0, 0, 0, 0]).is_err());
        assert!(subscription_topics(&[0, 0, 0, 0, 0, 9]).is_err());
        assert_eq!(union_of_topics([&[1u8][..]]), None);
        let s1 = encode_subscription_v0(&["a", "b"]);
        let s2 = encode_subscription_v0(&["c", "a"]);
        let u = union_of_topics([&s1[..], &s2[..]]).unwrap();
        assert_eq!(u.into_iter().collect::<Vec<_>>(), vec!["a", "b", "c"]);
    }

    proptest! {
        #[test]
        fn never_panics(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = subscription_topics(&b);
        }
    }
}
