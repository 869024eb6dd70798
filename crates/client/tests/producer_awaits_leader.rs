//! Known case 7 (docs/faults.md): an idempotent producer whose partition's leader is missing
//! from the broker list must keep the batch (and its sequence) until metadata names a
//! reachable leader, bounded by `delivery.timeout.ms`, instead of failing it; a failed batch
//! with an assigned sequence left a gap, and every later batch of the partition was
//! OUT_OF_ORDER_SEQUENCE_NUMBER. The in-process fake broker (node 1) names node 2, which it
//! does not list, as the leader for its first `unlisted` topic Metadata answers, then itself;
//! it checks the producer's sequences as a Kafka leader does.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, InitProducerIdResponse, MetadataRequest, MetadataResponse, ProduceRequest,
    ProduceResponse, ProducerId,
};
use kafka_protocol::protocol::Decodable;
use runnel_client::{Client, ClientConfig, ClientError, Producer, ProducerConfig, ProducerRecord};
use support::{api_versions, read_frame, respond, sequence_and_count, Frame, TOPIC};
use tokio::net::{TcpListener, TcpStream};

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
    while let Some(Frame { header, mut body }) = read_frame(&mut s).await {
        let v = header.request_api_version;
        match ApiKey::try_from(header.request_api_key).expect("api key") {
            ApiKey::ApiVersions => respond(&mut s, &header, &api_versions()).await,
            ApiKey::Metadata => {
                let req = MetadataRequest::decode(&mut body, v).expect("metadata request");
                respond(&mut s, &header, &metadata(&req, port, &state)).await
            }
            ApiKey::InitProducerId => {
                let resp = InitProducerIdResponse::default()
                    .with_producer_id(ProducerId(1000))
                    .with_producer_epoch(0);
                respond(&mut s, &header, &resp).await
            }
            ApiKey::Produce => {
                let req = ProduceRequest::decode(&mut body, v).expect("produce request");
                respond(&mut s, &header, &produce(&req, &state)).await
            }
            other => panic!("the fake broker does not answer {other:?}"),
        }
    }
}

fn metadata(req: &MetadataRequest, port: u16, state: &Shared) -> MetadataResponse {
    let asks_topic = req
        .topics
        .iter()
        .flatten()
        .any(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == TOPIC));
    if !asks_topic {
        return support::metadata_without_topics(port);
    }
    let mut st = lock(state);
    let leader = if st.unlisted > 0 {
        st.unlisted -= 1;
        2
    } else {
        1
    };
    support::metadata(port, leader, &[1, 2])
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
