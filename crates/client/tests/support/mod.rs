//! The in-process fake broker the producer tests share: frames in and out, and the answers
//! every fake gives alike (ApiVersions, a one-partition Metadata, Produce answers, the v2
//! batch fields a leader checks). Each test keeps only its own broker logic.

// Each test binary compiles this module and uses a part of it.
#![allow(dead_code)]

use std::collections::VecDeque;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, MetadataResponse, RequestHeader, TopicName,
};
use kafka_protocol::protocol::{decode_request_header_from_buffer, Encodable, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The one topic the fakes know.
pub const TOPIC: &str = "t";

/// A request: its header and the body after it.
pub struct Frame {
    pub header: RequestHeader,
    pub body: Bytes,
}

/// The next request of the connection (`None` once it is closed or garbled).
pub async fn read_frame(s: &mut TcpStream) -> Option<Frame> {
    let size = s.read_i32().await.ok()?;
    let mut buf = vec![0u8; usize::try_from(size).ok()?];
    s.read_exact(&mut buf).await.ok()?;
    let mut body = Bytes::from(buf);
    let header = decode_request_header_from_buffer(&mut body).ok()?;
    Some(Frame { header, body })
}

/// Writes the response to the request `h` (a closed connection is the test's client going
/// away, not an error of the fake).
pub async fn respond<T: Encodable>(s: &mut TcpStream, h: &RequestHeader, msg: &T) {
    let key = ApiKey::try_from(h.request_api_key).expect("api key");
    let mut body = BytesMut::new();
    msg.encode(&mut body, h.request_api_version)
        .expect("encode");
    let flexible = key.response_header_version(h.request_api_version) >= 1;
    let mut out = BytesMut::new();
    out.put_i32(i32::try_from(4 + usize::from(flexible) + body.len()).expect("size"));
    out.put_i32(h.correlation_id);
    if flexible {
        out.put_u8(0);
    }
    out.put_slice(&body);
    let _ = s.write_all(&out).await;
}

/// The APIs a fake answers: enough for an idempotent producer.
pub fn api_versions() -> ApiVersionsResponse {
    let api = |k: ApiKey, min, max| {
        ApiVersion::default()
            .with_api_key(k as i16)
            .with_min_version(min)
            .with_max_version(max)
    };
    ApiVersionsResponse::default().with_api_keys(vec![
        api(ApiKey::ApiVersions, 0, 3),
        api(ApiKey::Metadata, 1, 8),
        api(ApiKey::Produce, 3, 8),
        api(ApiKey::InitProducerId, 0, 1),
    ])
}

/// Metadata listing the fake alone (node 1, also the controller), no topics.
pub fn metadata_without_topics(port: u16) -> MetadataResponse {
    let broker = MetadataResponseBroker::default()
        .with_node_id(BrokerId(1))
        .with_host(StrBytes::from_static_str("127.0.0.1"))
        .with_port(i32::from(port));
    MetadataResponse::default()
        .with_brokers(vec![broker])
        .with_controller_id(BrokerId(1))
}

/// [`metadata_without_topics`] with [`TOPIC`]'s partition 0 led by `leader`, on `replicas`
/// (all in sync).
pub fn metadata(port: u16, leader: i32, replicas: &[i32]) -> MetadataResponse {
    let replicas: Vec<BrokerId> = replicas.iter().copied().map(BrokerId).collect();
    let partition = MetadataResponsePartition::default()
        .with_partition_index(0)
        .with_leader_id(BrokerId(leader))
        .with_replica_nodes(replicas.clone())
        .with_isr_nodes(replicas);
    metadata_without_topics(port).with_topics(vec![MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_static_str(TOPIC))))
        .with_partitions(vec![partition])])
}

/// A v2 batch's base sequence (byte 53) and record count (byte 57).
pub fn sequence_and_count(batch: &Bytes) -> (i32, i32) {
    let mut b = batch.slice(53..61);
    (b.get_i32(), b.get_i32())
}

/// A Produce answer for [`TOPIC`]'s partition 0.
pub fn produce_answer(code: i16, offset: i64) -> kafka_protocol::messages::ProduceResponse {
    let p = PartitionProduceResponse::default()
        .with_index(0)
        .with_error_code(code)
        .with_base_offset(offset);
    kafka_protocol::messages::ProduceResponse::default().with_responses(vec![
        TopicProduceResponse::default()
            .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_partition_responses(vec![p]),
    ])
}

/// Kafka's leader keeps this many batches per producer for duplicate detection.
pub const REMEMBERED: usize = 5;

/// The partition's log as the leader sees it: (base sequence, offset) of the recent batches.
#[derive(Default)]
pub struct Leader {
    recent: VecDeque<(i32, i64)>,
    next_sequence: i32,
    next_offset: i64,
}

impl Leader {
    /// Kafka's sequence check for a one-record batch: a remembered one is a duplicate
    /// (answered as success at its offset), the next one is appended, anything else is a
    /// gap (45).
    pub fn append(&mut self, seq: i32) -> (i16, i64) {
        if let Some((_, offset)) = self.recent.iter().find(|(s, _)| *s == seq) {
            return (0, *offset);
        }
        if seq != self.next_sequence {
            return (45, -1);
        }
        let offset = self.next_offset;
        self.recent.push_back((seq, offset));
        if self.recent.len() > REMEMBERED {
            self.recent.pop_front();
        }
        self.next_sequence += 1;
        self.next_offset += 1;
        (0, offset)
    }
}
