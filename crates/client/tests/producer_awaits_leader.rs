//! Known case 7 (docs/faults.md): an idempotent producer whose partition's leader is missing
//! from the broker list must keep the batch (and its sequence) until metadata names a
//! reachable leader, bounded by `delivery.timeout.ms`, instead of failing it; a failed batch
//! with an assigned sequence left a gap, and every later batch of the partition was
//! OUT_OF_ORDER_SEQUENCE_NUMBER. The in-process fake broker (node 1) names node 2, which it
//! does not list, as the leader for its first `unlisted` topic Metadata answers, then itself;
//! it checks the producer's sequences as a Kafka leader does.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, InitProducerIdResponse, MetadataRequest,
    MetadataResponse, ProduceRequest, ProduceResponse, ProducerId, RequestHeader, TopicName,
};
use kafka_protocol::protocol::{decode_request_header_from_buffer, Decodable, Encodable, StrBytes};
use runnel_client::{Client, ClientConfig, ClientError, Producer, ProducerConfig, ProducerRecord};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const TOPIC: &str = "t";

#[derive(Default)]
struct State {
    /// Topic Metadata answers still to name the unlisted node 2 as the leader.
    unlisted: usize,
    /// The next sequence the leader expects, and the next offset.
    next_sequence: i32,
    next_offset: i64,
    /// Produce answers per error code, for the assertions.
    out_of_order: usize,
}

type Shared = Arc<Mutex<State>>;

fn lock(state: &Shared) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

async fn serve(listener: TcpListener, port: u16, state: Shared) {
    while let Ok((stream, _)) = listener.accept().await {
        tokio::spawn(connection(stream, port, state.clone()));
    }
}

async fn connection(mut s: TcpStream, port: u16, state: Shared) {
    loop {
        let Ok(size) = s.read_i32().await else { return };
        let mut buf = vec![0u8; usize::try_from(size).expect("frame size")];
        if s.read_exact(&mut buf).await.is_err() {
            return;
        }
        let mut frame = Bytes::from(buf);
        let h = decode_request_header_from_buffer(&mut frame).expect("header");
        let body = answer(&h, frame, port, &state);
        let key = ApiKey::try_from(h.request_api_key).expect("api key");
        let mut out = BytesMut::new();
        let flexible = key.response_header_version(h.request_api_version) >= 1;
        out.put_i32(i32::try_from(4 + usize::from(flexible) + body.len()).expect("size"));
        out.put_i32(h.correlation_id);
        if flexible {
            out.put_u8(0);
        }
        out.put_slice(&body);
        if s.write_all(&out).await.is_err() {
            return;
        }
    }
}

fn encode<T: Encodable>(msg: &T, version: i16) -> BytesMut {
    let mut body = BytesMut::new();
    msg.encode(&mut body, version).expect("encode");
    body
}

fn answer(h: &RequestHeader, mut frame: Bytes, port: u16, state: &Shared) -> BytesMut {
    let v = h.request_api_version;
    match ApiKey::try_from(h.request_api_key).expect("api key") {
        ApiKey::ApiVersions => {
            let api = |k: ApiKey, min, max| {
                ApiVersion::default()
                    .with_api_key(k as i16)
                    .with_min_version(min)
                    .with_max_version(max)
            };
            let resp = ApiVersionsResponse::default().with_api_keys(vec![
                api(ApiKey::ApiVersions, 0, 3),
                api(ApiKey::Metadata, 1, 8),
                api(ApiKey::Produce, 3, 8),
                api(ApiKey::InitProducerId, 0, 1),
            ]);
            encode(&resp, v)
        }
        ApiKey::Metadata => {
            let req = MetadataRequest::decode(&mut frame, v).expect("metadata request");
            encode(&metadata(&req, port, state), v)
        }
        ApiKey::InitProducerId => {
            let resp = InitProducerIdResponse::default()
                .with_producer_id(ProducerId(1000))
                .with_producer_epoch(0);
            encode(&resp, v)
        }
        ApiKey::Produce => {
            let req = ProduceRequest::decode(&mut frame, v).expect("produce request");
            encode(&produce(&req, state), v)
        }
        other => panic!("the fake broker does not answer {other:?}"),
    }
}

fn metadata(req: &MetadataRequest, port: u16, state: &Shared) -> MetadataResponse {
    let asks_topic = req
        .topics
        .iter()
        .flatten()
        .any(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == TOPIC));
    let broker = MetadataResponseBroker::default()
        .with_node_id(BrokerId(1))
        .with_host(StrBytes::from_static_str("127.0.0.1"))
        .with_port(i32::from(port));
    let mut resp = MetadataResponse::default()
        .with_brokers(vec![broker])
        .with_controller_id(BrokerId(1));
    if asks_topic {
        let mut st = lock(state);
        let leader = if st.unlisted > 0 {
            st.unlisted -= 1;
            2
        } else {
            1
        };
        let partition = MetadataResponsePartition::default()
            .with_partition_index(0)
            .with_leader_id(BrokerId(leader))
            .with_replica_nodes(vec![BrokerId(1), BrokerId(2)])
            .with_isr_nodes(vec![BrokerId(1), BrokerId(2)]);
        resp.topics = vec![MetadataResponseTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str(TOPIC))))
            .with_partitions(vec![partition])];
    }
    resp
}

/// Appends the one batch of partition 0 if its sequence is the next one (a Kafka leader's
/// check, without duplicates: this test never resends an acknowledged batch).
fn produce(req: &ProduceRequest, state: &Shared) -> ProduceResponse {
    let mut st = lock(state);
    let mut topics = Vec::new();
    for t in &req.topic_data {
        let mut partitions = Vec::new();
        for p in &t.partition_data {
            let records = p.records.clone().unwrap_or_default();
            let (base_sequence, count) = sequence_and_count(&records);
            let mut r = PartitionProduceResponse::default().with_index(p.index);
            if base_sequence == st.next_sequence {
                r.base_offset = st.next_offset;
                st.next_offset += i64::from(count);
                st.next_sequence += count;
            } else {
                st.out_of_order += 1;
                r.error_code = 45;
            }
            partitions.push(r);
        }
        topics.push(
            TopicProduceResponse::default()
                .with_name(t.name.clone())
                .with_partition_responses(partitions),
        );
    }
    ProduceResponse::default().with_responses(topics)
}

/// A v2 batch's base sequence (byte 53) and record count (byte 57).
fn sequence_and_count(batch: &Bytes) -> (i32, i32) {
    let mut b = batch.slice(53..61);
    (b.get_i32(), b.get_i32())
}

async fn fake_broker(unlisted: usize) -> (String, Shared) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let state: Shared = Arc::new(Mutex::new(State {
        unlisted,
        ..State::default()
    }));
    tokio::spawn(serve(listener, addr.port(), state.clone()));
    (addr.to_string(), state)
}

async fn producer(addr: &str, delivery_timeout: Duration) -> Producer {
    let client = Client::connect(ClientConfig::new(addr))
        .await
        .expect("connect");
    let config = ProducerConfig {
        idempotence: true,
        linger: Duration::ZERO,
        retries: 3,
        retry_backoff: Duration::from_millis(10),
        delivery_timeout,
        ..ProducerConfig::default()
    };
    Producer::new(client, config).await.expect("producer")
}

async fn deliver(p: &Producer, value: &'static str) -> Result<i64, ClientError> {
    let record = ProducerRecord {
        partition: Some(0),
        ..ProducerRecord::new(TOPIC, Bytes::from_static(value.as_bytes()))
    };
    let delivery = p.send(record).await.expect("queued");
    // A deadline, not a pause: the outcome comes well before it with the fix.
    match tokio::time::timeout(Duration::from_secs(20), delivery.wait()).await {
        Ok(outcome) => outcome.map(|m| m.offset),
        Err(_) => panic!("no outcome for {value} within 20 s"),
    }
}

#[tokio::test]
async fn a_batch_waits_for_its_leader_to_be_listed_and_keeps_its_sequence() {
    // Far more Metadata answers with the unlisted leader than 3 retries take.
    let (addr, state) = fake_broker(30).await;
    let p = producer(&addr, Duration::from_secs(15)).await;
    let first = deliver(&p, "a").await;
    let second = deliver(&p, "b").await;
    // Before the fix: the first batch failed (LEADER_NOT_AVAILABLE once retries ran out)
    // and the second one was a sequence gap.
    assert_eq!(
        (first.as_ref().ok(), second.as_ref().ok()),
        (Some(&0), Some(&1)),
        "{first:?} {second:?}"
    );
    let st = lock(&state);
    assert_eq!(
        st.unlisted, 0,
        "the producer refreshed metadata while waiting"
    );
    assert_eq!(st.out_of_order, 0, "no sequence gap");
}

#[tokio::test]
async fn a_leader_that_never_appears_fails_the_batch_at_the_delivery_timeout() {
    let (addr, _state) = fake_broker(usize::MAX).await;
    let p = producer(&addr, Duration::from_millis(800)).await;
    let started = std::time::Instant::now();
    let outcome = deliver(&p, "a").await;
    assert!(
        matches!(outcome, Err(ClientError::Timeout(..))),
        "{outcome:?}"
    );
    assert!(started.elapsed() >= Duration::from_millis(800));
}
