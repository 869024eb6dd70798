//! The "consumer" embedded protocol a classic consumer speaks inside JoinGroup and SyncGroup
//! (Kafka's `ConsumerProtocolSubscription` and `ConsumerProtocolAssignment`, read and written
//! as `ConsumerProtocol` does). The classic coordinator treats these bytes as opaque; the
//! KIP-848 coordinator reads them when it serves classic members (their subscribed topics,
//! owned partitions and rack come from the subscription) and writes the assignment it
//! computed for them.
//!
//! Versions 0..=3 share one layout per message, each adding fields at the end; like Kafka, a
//! newer version is read as the newest known one and a negative version is refused. Decoding
//! never panics and never allocates more than the bytes present.

use std::collections::{BTreeMap, BTreeSet};

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{CodecError, Reader};

/// The newest subscription / assignment version Runnel knows (Kafka 4's).
pub const HIGHEST_VERSION: i16 = 3;

/// Partitions by topic name, as the embedded protocol carries them.
pub type TopicPartitions = BTreeMap<String, BTreeSet<i32>>;

/// A decoded `ConsumerProtocolSubscription`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Subscription {
    /// The version the member wrote; its assignment is written back in the same one.
    pub version: i16,
    pub topics: Vec<String>,
    /// v1+: what the member owns as it joins (cooperative rebalancing).
    pub owned_partitions: TopicPartitions,
    /// v3+: the member's rack (`client.rack`); empty reads as none, as in Kafka.
    pub rack_id: Option<String>,
}

/// The version prefix (Kafka's `deserializeVersion`), refused when negative and capped at
/// [`HIGHEST_VERSION`] (Kafka's `checkSubscriptionVersion` / `checkAssignmentVersion`).
fn read_version(r: &mut Reader<'_>) -> Result<i16, CodecError> {
    let version = r.i16()?;
    if version < 0 {
        return Err(CodecError::UnsupportedVersion(version));
    }
    Ok(version.min(HIGHEST_VERSION))
}

/// The version a member's subscription was written in (what its assignment is written in).
pub fn subscription_version(b: &[u8]) -> Result<i16, CodecError> {
    read_version(&mut Reader::new(b))
}

/// `[string]`: the topic list both messages start with.
pub(crate) fn read_topics(r: &mut Reader<'_>) -> Result<Vec<String>, CodecError> {
    let n = r.array_len(2)?;
    let mut topics = Vec::with_capacity(n);
    for _ in 0..n {
        topics.push(r.string()?);
    }
    Ok(topics)
}

/// `[{topic string, partitions [int32]}]`.
fn read_topic_partitions(r: &mut Reader<'_>) -> Result<TopicPartitions, CodecError> {
    let n = r.array_len(2 + 4)?;
    let mut out = TopicPartitions::new();
    for _ in 0..n {
        let topic = r.string()?;
        let k = r.array_len(4)?;
        let entry = out.entry(topic).or_default();
        for _ in 0..k {
            entry.insert(r.i32()?);
        }
    }
    Ok(out)
}

/// Decodes a subscription of any version.
pub fn decode_subscription(b: &[u8]) -> Result<Subscription, CodecError> {
    let mut r = Reader::new(b);
    let version = read_version(&mut r)?;
    let topics = read_topics(&mut r)?;
    r.bytes()?; // user data: the client-side assignor's business
    let owned_partitions = if version >= 1 {
        read_topic_partitions(&mut r)?
    } else {
        TopicPartitions::new()
    };
    if version >= 2 {
        r.i32()?; // generation id
    }
    let rack_id = if version >= 3 {
        r.nullable_string()?.filter(|s| !s.is_empty())
    } else {
        None
    };
    Ok(Subscription {
        version,
        topics,
        owned_partitions,
        rack_id,
    })
}

/// Decodes an assignment's partitions (the user data is dropped: the coordinator never
/// needs it).
pub fn decode_assignment(b: &[u8]) -> Result<TopicPartitions, CodecError> {
    let mut r = Reader::new(b);
    read_version(&mut r)?;
    let partitions = read_topic_partitions(&mut r)?;
    r.bytes()?;
    Ok(partitions)
}

/// Encodes an assignment in `version` (capped as when read; a negative one is written as 0)
/// with null user data, as Kafka's `ConsumerProtocol.serializeAssignment` does for the
/// assignments its coordinator computes. The topic names come from the metadata image (at
/// most 249 bytes), so they fit the int16 lengths.
pub fn encode_assignment(version: i16, partitions: &TopicPartitions) -> Bytes {
    let mut b = BytesMut::with_capacity(16 + partitions.len() * 32);
    b.put_i16(version.clamp(0, HIGHEST_VERSION));
    put_topic_partitions(&mut b, partitions);
    b.put_i32(-1);
    b.freeze()
}

/// Encodes a subscription as a client writes it (`version` capped as when read), with null
/// user data, owned partitions (v1+), generation -1 (v2+) and the rack (v3+). The broker never
/// writes one; tests and tools do.
pub fn encode_subscription(
    version: i16,
    topics: &[&str],
    owned: &TopicPartitions,
    rack_id: Option<&str>,
) -> Bytes {
    let version = version.clamp(0, HIGHEST_VERSION);
    let mut b = BytesMut::with_capacity(32);
    b.put_i16(version);
    b.put_i32(i32::try_from(topics.len()).unwrap_or(i32::MAX));
    for t in topics {
        crate::codec::put_str(&mut b, t);
    }
    b.put_i32(-1);
    if version >= 1 {
        put_topic_partitions(&mut b, owned);
    }
    if version >= 2 {
        b.put_i32(-1);
    }
    if version >= 3 {
        match rack_id {
            Some(r) => crate::codec::put_str(&mut b, r),
            None => b.put_i16(-1),
        }
    }
    b.freeze()
}

fn put_topic_partitions(b: &mut BytesMut, partitions: &TopicPartitions) {
    b.put_i32(i32::try_from(partitions.len()).unwrap_or(i32::MAX));
    for (topic, ps) in partitions {
        crate::codec::put_str(b, topic);
        b.put_i32(i32::try_from(ps.len()).unwrap_or(i32::MAX));
        for p in ps {
            b.put_i32(*p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tps(parts: &[(&str, &[i32])]) -> TopicPartitions {
        parts
            .iter()
            .map(|(t, ps)| (t.to_string(), ps.iter().copied().collect()))
            .collect()
    }

    /// A v3 subscription as the Java client writes it (checked against
    /// `ConsumerProtocol.serializeSubscription` by hand).
    #[test]
    fn reads_every_field_of_a_v3_subscription() {
        #[rustfmt::skip]
        let v3: &[u8] = &[
            0, 3,                           // version
            0, 0, 0, 1, 0, 1, b't',         // topics ["t"]
            0xff, 0xff, 0xff, 0xff,         // user data null
            0, 0, 0, 1, 0, 1, b't',         // owned: t
            0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2, //   [0, 2]
            0, 0, 0, 7,                     // generation 7
            0, 2, b'r', b'1',               // rack "r1"
        ];
        let s = decode_subscription(v3).unwrap();
        assert_eq!(s.version, 3);
        assert_eq!(s.topics, vec!["t"]);
        assert_eq!(s.owned_partitions, tps(&[("t", &[0, 2])]));
        assert_eq!(s.rack_id.as_deref(), Some("r1"));
        // v0 stops after the user data; a newer version reads as v3.
        let v0 = crate::subscription::encode_subscription_v0(&["a"]);
        assert_eq!(decode_subscription(&v0).unwrap().topics, vec!["a"]);
        let mut v9 = v3.to_vec();
        v9[1] = 9;
        assert_eq!(decode_subscription(&v9).unwrap().version, 3);
        assert!(decode_subscription(&[0xff, 0xff]).is_err());
        assert!(decode_subscription(&v3[..v3.len() - 1]).is_err());
    }

    #[test]
    fn assignment_bytes_and_round_trip() {
        let a = tps(&[("t", &[1])]);
        let b = encode_assignment(1, &a);
        #[rustfmt::skip]
        let want: &[u8] = &[
            0, 1, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff,
        ];
        assert_eq!(&b[..], want);
        assert_eq!(decode_assignment(&b), Ok(a));
        assert_eq!(subscription_version(&b), Ok(1));
        assert_eq!(decode_assignment(&[]), Err(CodecError::Truncated));
    }

    proptest! {
        #[test]
        fn decoders_never_panic(b in proptest::collection::vec(any::<u8>(), 0..96)) {
            let _ = decode_subscription(&b);
            let _ = decode_assignment(&b);
        }

        #[test]
        fn subscriptions_round_trip(
            version in 0i16..=3,
            topics in proptest::collection::vec("[a-z]{1,5}", 0..4),
            owned in proptest::collection::btree_map("[a-z]{1,5}", proptest::collection::btree_set(0i32..100, 0..6), 0..4),
            rack in proptest::option::of("[a-z]{1,3}"),
        ) {
            let names: Vec<&str> = topics.iter().map(String::as_str).collect();
            let b = encode_subscription(version, &names, &owned, rack.as_deref());
            let s = decode_subscription(&b).unwrap();
            prop_assert_eq!(s.version, version);
            prop_assert_eq!(s.topics, topics);
            let want_owned = if version >= 1 { owned } else { TopicPartitions::new() };
            prop_assert_eq!(s.owned_partitions, want_owned);
            prop_assert_eq!(s.rack_id, if version >= 3 { rack } else { None });
        }

        #[test]
        fn assignments_round_trip(
            version in 0i16..=3,
            parts in proptest::collection::btree_map("[a-z]{1,5}", proptest::collection::btree_set(0i32..100, 0..6), 0..5),
        ) {
            let b = encode_assignment(version, &parts);
            prop_assert_eq!(decode_assignment(&b), Ok(parts));
        }
    }
}
