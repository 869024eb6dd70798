//! The "consumer" protocol payloads carried opaquely by JoinGroup and SyncGroup (spec H.3):
//! each member's subscription (in its JoinGroup protocol metadata) and each member's assignment
//! (computed by the leader, returned by SyncGroup). Both are `int16 version` followed by the
//! versioned struct; kafka-protocol provides the structs, this module adds the version prefix
//! and Kafka's forward-compatibility rule (a newer version is read as the newest we know,
//! because later versions only append fields).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTp;
use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition as OwnedTp;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::TopicPartition;
use crate::error::{ClientError, Result};

/// Newest ConsumerProtocolSubscription version we write and fully read.
pub const SUBSCRIPTION_VERSION: i16 = 3;
/// Newest ConsumerProtocolAssignment version we know (v1-v3 are byte-identical to v0).
pub const ASSIGNMENT_VERSION: i16 = 3;
/// The JoinGroup `protocol_type` of Kafka consumers.
pub const PROTOCOL_TYPE: &str = "consumer";

/// A member's subscription as the assignors see it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Subscription {
    /// Subscribed topic names.
    pub topics: Vec<String>,
    /// Assignor-specific bytes (e.g. the eager sticky assignor's previous assignment).
    pub user_data: Option<Bytes>,
    /// Partitions the member owns now (v1+; cooperative protocols rely on it).
    pub owned_partitions: Vec<TopicPartition>,
    /// Generation in which `owned_partitions` were assigned (v2+), -1 when unknown.
    pub generation_id: i32,
    /// `client.rack` (v3+).
    pub rack_id: Option<String>,
}

/// The partitions the leader assigned to one member.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Assignment {
    /// Assigned partitions.
    pub partitions: Vec<TopicPartition>,
    /// Assignor-specific bytes.
    pub user_data: Option<Bytes>,
}

/// Groups partitions by topic (first-seen topic order, partitions in the given order).
fn by_topic(parts: &[TopicPartition]) -> Vec<(String, Vec<i32>)> {
    let mut out: Vec<(String, Vec<i32>)> = Vec::new();
    for tp in parts {
        match out.iter_mut().find(|(t, _)| *t == tp.topic) {
            Some((_, ps)) => ps.push(tp.partition),
            None => out.push((tp.topic.clone(), vec![tp.partition])),
        }
    }
    out
}

fn flatten<I: IntoIterator<Item = (String, Vec<i32>)>>(topics: I) -> Vec<TopicPartition> {
    topics
        .into_iter()
        .flat_map(|(t, ps)| {
            ps.into_iter()
                .map(move |p| TopicPartition::new(t.clone(), p))
        })
        .collect()
}

/// Reads the version prefix and clamps it as Kafka's `ConsumerProtocol` does.
fn read_version(buf: &mut Bytes, what: &str, newest: i16) -> Result<i16> {
    if buf.remaining() < 2 {
        return Err(ClientError::Protocol(format!(
            "{what} is {} bytes, shorter than its version",
            buf.remaining()
        )));
    }
    let version = buf.get_i16();
    if version < 0 {
        return Err(ClientError::Protocol(format!(
            "unsupported {what} version {version}"
        )));
    }
    Ok(version.min(newest))
}

/// Encodes a subscription at `version` (0..=3); fields the version lacks are dropped.
pub fn encode_subscription(sub: &Subscription, version: i16) -> Result<Bytes> {
    let version = version.clamp(0, SUBSCRIPTION_VERSION);
    let mut msg = ConsumerProtocolSubscription::default();
    msg.topics = sub
        .topics
        .iter()
        .map(|t| StrBytes::from_string(t.clone()))
        .collect();
    msg.user_data = sub.user_data.clone();
    if version >= 1 {
        msg.owned_partitions = by_topic(&sub.owned_partitions)
            .into_iter()
            .map(|(t, ps)| {
                let mut tp = OwnedTp::default();
                tp.topic = TopicName(StrBytes::from_string(t));
                tp.partitions = ps;
                tp
            })
            .collect();
    }
    if version >= 2 {
        msg.generation_id = sub.generation_id;
    }
    if version >= 3 {
        msg.rack_id = sub.rack_id.clone().map(StrBytes::from_string);
    }
    let mut buf = BytesMut::new();
    buf.put_i16(version);
    msg.encode(&mut buf, version)
        .map_err(|e| ClientError::protocol("encoding a consumer subscription", e))?;
    Ok(buf.freeze())
}

/// Decodes a subscription; returns the version the member wrote with it.
pub fn decode_subscription(bytes: &Bytes) -> Result<(i16, Subscription)> {
    let mut buf = bytes.clone();
    let written = if buf.len() >= 2 {
        i16::from_be_bytes([buf[0], buf[1]])
    } else {
        -1
    };
    let version = read_version(&mut buf, "consumer subscription", SUBSCRIPTION_VERSION)?;
    let msg = ConsumerProtocolSubscription::decode(&mut buf, version)
        .map_err(|e| ClientError::protocol("decoding a consumer subscription", e))?;
    let sub = Subscription {
        topics: msg.topics.iter().map(|t| t.to_string()).collect(),
        user_data: msg.user_data,
        owned_partitions: flatten(
            msg.owned_partitions
                .into_iter()
                .map(|tp| (tp.topic.0.to_string(), tp.partitions)),
        ),
        generation_id: if version >= 2 { msg.generation_id } else { -1 },
        rack_id: msg.rack_id.map(|r| r.to_string()),
    };
    Ok((written, sub))
}

/// Encodes an assignment at `version` (every version has the same layout).
pub fn encode_assignment(assignment: &Assignment, version: i16) -> Result<Bytes> {
    let version = version.clamp(0, ASSIGNMENT_VERSION);
    let mut msg = ConsumerProtocolAssignment::default();
    msg.assigned_partitions = by_topic(&assignment.partitions)
        .into_iter()
        .map(|(t, ps)| {
            let mut tp = AssignedTp::default();
            tp.topic = TopicName(StrBytes::from_string(t));
            tp.partitions = ps;
            tp
        })
        .collect();
    msg.user_data = assignment.user_data.clone();
    let mut buf = BytesMut::new();
    buf.put_i16(version);
    msg.encode(&mut buf, version)
        .map_err(|e| ClientError::protocol("encoding a consumer assignment", e))?;
    Ok(buf.freeze())
}

/// Decodes an assignment. Empty bytes mean "nothing assigned": the coordinator sends them to
/// members the leader left out of its SyncGroup.
pub fn decode_assignment(bytes: &Bytes) -> Result<Assignment> {
    if bytes.is_empty() {
        return Ok(Assignment::default());
    }
    let mut buf = bytes.clone();
    let version = read_version(&mut buf, "consumer assignment", ASSIGNMENT_VERSION)?;
    let msg = ConsumerProtocolAssignment::decode(&mut buf, version)
        .map_err(|e| ClientError::protocol("decoding a consumer assignment", e))?;
    Ok(Assignment {
        partitions: flatten(
            msg.assigned_partitions
                .into_iter()
                .map(|tp| (tp.topic.0.to_string(), tp.partitions)),
        ),
        user_data: msg.user_data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tp(t: &str, p: i32) -> TopicPartition {
        TopicPartition::new(t, p)
    }

    fn full() -> Subscription {
        Subscription {
            topics: vec!["a".into(), "b".into()],
            user_data: Some(Bytes::from_static(b"ud")),
            owned_partitions: vec![tp("a", 0), tp("a", 2), tp("b", 1)],
            generation_id: 7,
            rack_id: Some("r1".into()),
        }
    }

    #[test]
    fn subscription_round_trips_per_version() {
        let sub = full();
        for version in 0..=3 {
            let bytes = encode_subscription(&sub, version).unwrap();
            let (v, back) = decode_subscription(&bytes).unwrap();
            assert_eq!(v, version);
            assert_eq!(back.topics, sub.topics);
            assert_eq!(back.user_data, sub.user_data);
            let owned = if version >= 1 {
                sub.owned_partitions.clone()
            } else {
                vec![]
            };
            assert_eq!(back.owned_partitions, owned);
            assert_eq!(back.generation_id, if version >= 2 { 7 } else { -1 });
            assert_eq!(back.rack_id, (version >= 3).then(|| "r1".to_string()));
        }
    }

    #[test]
    fn subscription_v0_bytes_match_kafka_layout() {
        // version 0, topics ["t"], user_data null (-1)
        let sub = Subscription {
            topics: vec!["t".into()],
            ..Default::default()
        };
        let bytes = encode_subscription(&sub, 0).unwrap();
        assert_eq!(
            &bytes[..],
            &[0, 0, 0, 0, 0, 1, 0, 1, b't', 0xff, 0xff, 0xff, 0xff]
        );
    }

    #[test]
    fn newer_versions_read_as_newest_known() {
        // A v4 subscription from a future client: v3 layout plus appended bytes.
        let mut bytes = BytesMut::new();
        bytes.put_i16(4);
        bytes.extend_from_slice(&encode_subscription(&full(), 3).unwrap()[2..]);
        bytes.extend_from_slice(&[1, 2, 3]);
        let (v, back) = decode_subscription(&bytes.freeze()).unwrap();
        assert_eq!(v, 4);
        assert_eq!(back.topics, full().topics);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode_subscription(&Bytes::from_static(b"\x00")).is_err());
        assert!(decode_subscription(&Bytes::from_static(b"\xff\xff")).is_err());
        assert!(decode_subscription(&Bytes::from_static(b"\x00\x00\x7f\xff\xff\xff")).is_err());
        assert!(decode_assignment(&Bytes::from_static(b"\x00\x00\x00")).is_err());
    }

    #[test]
    fn empty_assignment_bytes_mean_nothing_assigned() {
        assert_eq!(
            decode_assignment(&Bytes::new()).unwrap(),
            Assignment::default()
        );
    }

    #[test]
    fn assignment_round_trip_and_layout() {
        let a = Assignment {
            partitions: vec![tp("t", 0), tp("t", 1)],
            user_data: None,
        };
        let bytes = encode_assignment(&a, 0).unwrap();
        assert_eq!(
            &bytes[..],
            &[
                0, 0, // version
                0, 0, 0, 1, // one topic
                0, 1, b't', // "t"
                0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1, // [0, 1]
                0xff, 0xff, 0xff, 0xff // null user data
            ]
        );
        assert_eq!(decode_assignment(&bytes).unwrap(), a);
    }

    proptest! {
        #[test]
        fn decoding_random_bytes_never_panics(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let bytes = Bytes::from(data);
            let _ = decode_subscription(&bytes);
            let _ = decode_assignment(&bytes);
        }

        #[test]
        fn assignment_round_trips(parts in proptest::collection::vec(("[a-c]", 0i32..8), 0..20)) {
            let a = Assignment {
                partitions: parts.into_iter().map(|(t, p)| tp(&t, p)).collect(),
                user_data: Some(Bytes::from_static(b"x")),
            };
            let back = decode_assignment(&encode_assignment(&a, 3).unwrap()).unwrap();
            let mut want = a.partitions.clone();
            want.sort();
            let mut got = back.partitions;
            got.sort();
            prop_assert_eq!(got, want);
        }
    }
}
