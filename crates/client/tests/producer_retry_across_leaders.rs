//! Known case 8's cross-leader window (docs/faults.md): a partition's leader moves while its
//! batches wait for the old leader's answers. The old leader appended them and they were
//! replicated, so the new leader has them among the five batches it remembers of the
//! producer; batches written to the new leader before those answers push them out, and their
//! retries are then sequence gaps (OUT_OF_ORDER_SEQUENCE_NUMBER) although they are in the log.
//!
//! Two in-process fake brokers share partition 0's log (a replicated log, Kafka's five-batch
//! duplicate window). Node 1 leads partition 0: it appends the first five batches and keeps
//! their answers. Node 2 leads partition 1 and answers its first batch
//! NOT_LEADER_OR_FOLLOWER; from then on Metadata names node 2 as partition 0's leader too.
//! Node 1 answers its five NOT_LEADER_OR_FOLLOWER once node 2 has appended a batch of
//! partition 0, or 2 s after the move (with the fix nothing is sent to node 2 before the
//! answers; the deadline only ends the wait). Before the fix the five later batches went to
//! node 2 at once, and the first five records failed with OUT_OF_ORDER_SEQUENCE_NUMBER.

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, BrokerId, InitProducerIdResponse, MetadataResponse, ProduceRequest, ProduceResponse,
    ProducerId, TopicName,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use runnel_client::{Client, ClientConfig, Producer, ProducerConfig, ProducerRecord};
use runnel_codes::NOT_LEADER_OR_FOLLOWER as NOT_LEADER;
use support::{api_versions, read_frame, respond, sequence_and_count, Frame, Leader, TOPIC};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// What both fake brokers share.
#[derive(Default)]
struct Cluster {
    /// Partition 0's replicated log, and partition 1's.
    logs: [Mutex<Leader>; 2],
    /// Node 2 has answered partition 1's first batch: partition 0 is led by node 2 now.
    moved: AtomicBool,
    /// Batches of partition 0 node 1 has appended.
    at_node_1: AtomicUsize,
    /// Node 2 appended a batch of partition 0.
    written_to_node_2: Notify,
    ports: Mutex<[u16; 2]>,
}

impl Cluster {
    fn append(&self, partition: i32, batch: &Bytes) -> (i16, i64) {
        let (seq, _) = sequence_and_count(batch);
        let idx = usize::from(partition == 1);
        self.logs[idx].lock().expect("log").append(seq)
    }

    /// Both brokers; partition 0 led by node 1 until the move, then by node 2; partition 1
    /// led by node 2.
    fn metadata(&self) -> MetadataResponse {
        let ports = *self.ports.lock().expect("ports");
        let brokers = (1..=2)
            .map(|id: i32| {
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(id))
                    .with_host(StrBytes::from_static_str("127.0.0.1"))
                    .with_port(i32::from(ports[usize::from(id == 2)]))
            })
            .collect();
        let leader_of_0 = if self.moved.load(Ordering::SeqCst) {
            2
        } else {
            1
        };
        let partitions = [(0, leader_of_0), (1, 2)]
            .into_iter()
            .map(|(index, leader)| {
                MetadataResponsePartition::default()
                    .with_partition_index(index)
                    .with_leader_id(BrokerId(leader))
                    .with_replica_nodes(vec![BrokerId(1), BrokerId(2)])
                    .with_isr_nodes(vec![BrokerId(1), BrokerId(2)])
            })
            .collect();
        MetadataResponse::default()
            .with_brokers(brokers)
            .with_controller_id(BrokerId(1))
            .with_topics(vec![MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str(TOPIC))))
                .with_partitions(partitions)])
    }
}

/// A Produce answer with one result per partition.
fn answer(results: Vec<(i32, i16, i64)>) -> ProduceResponse {
    let partitions = results
        .into_iter()
        .map(|(index, code, offset)| {
            PartitionProduceResponse::default()
                .with_index(index)
                .with_error_code(code)
                .with_base_offset(offset)
        })
        .collect();
    ProduceResponse::default().with_responses(vec![TopicProduceResponse::default()
        .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
        .with_partition_responses(partitions)])
}

/// The batches of a Produce request: (partition, v2 batch).
fn batches(req: &ProduceRequest) -> Vec<(i32, Bytes)> {
    req.topic_data
        .iter()
        .flat_map(|t| t.partition_data.iter())
        .map(|p| (p.index, p.records.clone().unwrap_or_default()))
        .collect()
}

/// Node 2: answers at once; partition 1's first batch is appended and answered
/// NOT_LEADER_OR_FOLLOWER (the move).
fn node_2_answer(cluster: &Cluster, req: &ProduceRequest) -> ProduceResponse {
    let mut results = Vec::new();
    for (partition, batch) in batches(req) {
        let (code, offset) = cluster.append(partition, &batch);
        if partition == 1 && !cluster.moved.swap(true, Ordering::SeqCst) {
            results.push((partition, NOT_LEADER, -1));
            continue;
        }
        if partition == 0 && code == 0 {
            cluster.written_to_node_2.notify_one();
        }
        results.push((partition, code, offset));
    }
    answer(results)
}

/// Node 1: appends partition 0's first five batches and answers them NOT_LEADER_OR_FOLLOWER
/// (in request order) once node 2 has written one of partition 0 after the move, or 2 s
/// after it; anything later is NOT_LEADER_OR_FOLLOWER at once.
async fn node_1(mut s: TcpStream, cluster: Arc<Cluster>) {
    let mut owed = Vec::new();
    while let Some(Frame { header, mut body }) = read_frame(&mut s).await {
        let v = header.request_api_version;
        match ApiKey::try_from(header.request_api_key).expect("api key") {
            ApiKey::ApiVersions => respond(&mut s, &header, &api_versions()).await,
            ApiKey::Produce => {
                let req = ProduceRequest::decode(&mut body, v).expect("produce");
                let parts = batches(&req);
                if cluster.moved.load(Ordering::SeqCst) {
                    let results = parts.iter().map(|(p, _)| (*p, NOT_LEADER, -1)).collect();
                    respond(&mut s, &header, &answer(results)).await;
                    continue;
                }
                for (partition, batch) in &parts {
                    cluster.append(*partition, batch);
                }
                cluster.at_node_1.fetch_add(1, Ordering::SeqCst);
                owed.push((header, parts));
                if owed.len() == 5 {
                    await_move_then_answer(&mut s, &cluster, &mut owed).await;
                }
            }
            other => panic!("node 1 does not answer {other:?}"),
        }
    }
}

/// Node 1's five answers: NOT_LEADER_OR_FOLLOWER, after the move and node 2's first write of
/// partition 0 (or 2 s).
async fn await_move_then_answer(
    s: &mut TcpStream,
    cluster: &Cluster,
    owed: &mut Vec<(kafka_protocol::messages::RequestHeader, Vec<(i32, Bytes)>)>,
) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cluster.moved.load(Ordering::SeqCst) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let _ =
        tokio::time::timeout(Duration::from_secs(2), cluster.written_to_node_2.notified()).await;
    for (header, parts) in owed.drain(..) {
        let results = parts.iter().map(|(p, _)| (*p, NOT_LEADER, -1)).collect();
        respond(s, &header, &answer(results)).await;
    }
}

async fn node_2(mut s: TcpStream, cluster: Arc<Cluster>) {
    while let Some(Frame { header, mut body }) = read_frame(&mut s).await {
        let v = header.request_api_version;
        match ApiKey::try_from(header.request_api_key).expect("api key") {
            ApiKey::ApiVersions => respond(&mut s, &header, &api_versions()).await,
            ApiKey::Metadata => respond(&mut s, &header, &cluster.metadata()).await,
            ApiKey::InitProducerId => {
                let resp = InitProducerIdResponse::default().with_producer_id(ProducerId(7));
                respond(&mut s, &header, &resp).await
            }
            ApiKey::Produce => {
                let req = ProduceRequest::decode(&mut body, v).expect("produce");
                respond(&mut s, &header, &node_2_answer(&cluster, &req)).await
            }
            other => panic!("node 2 does not answer {other:?}"),
        }
    }
}

/// Waits for `done` with a deadline (the test fails rather than hangs).
async fn until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "{what} within 10 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn record(partition: i32, i: usize) -> ProducerRecord {
    ProducerRecord {
        partition: Some(partition),
        ..ProducerRecord::new(TOPIC, Bytes::from(format!("v{i}")))
    }
}

#[tokio::test]
async fn batches_waiting_for_the_old_leader_are_not_overtaken_at_the_new_one() {
    let cluster = Arc::new(Cluster::default());
    let one = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let two = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let ports = [
        one.local_addr().expect("addr").port(),
        two.local_addr().expect("addr").port(),
    ];
    *cluster.ports.lock().expect("ports") = ports;
    for (listener, node) in [(one, 1), (two, 2)] {
        let cluster = cluster.clone();
        tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                match node {
                    1 => tokio::spawn(node_1(s, cluster.clone())),
                    _ => tokio::spawn(node_2(s, cluster.clone())),
                };
            }
        });
    }
    // Metadata and InitProducerId go to the bootstrap connection: node 2.
    let client = Client::connect(ClientConfig::new(&format!("127.0.0.1:{}", ports[1])))
        .await
        .expect("connect");
    let config = ProducerConfig {
        idempotence: true,
        linger: Duration::ZERO,
        batch_size: 1,
        retries: 3,
        retry_backoff: Duration::from_millis(10),
        ..ProducerConfig::default()
    };
    let producer = Producer::new(client.clone(), config)
        .await
        .expect("producer");
    let mut first = Vec::new();
    for i in 0..5 {
        first.push(producer.send(record(0, i)).await.expect("queued"));
    }
    until("node 1 has the five batches", || {
        cluster.at_node_1.load(Ordering::SeqCst) == 5
    })
    .await;
    let moving = producer.send(record(1, 0)).await.expect("queued");
    until("the producer knows node 2 leads partition 0", || {
        client.metadata().leader_for(TOPIC, 0) == Some(2)
    })
    .await;
    let mut later = Vec::new();
    for i in 5..10 {
        later.push(producer.send(record(0, i)).await.expect("queued"));
    }
    let mut offsets = Vec::new();
    for d in first.into_iter().chain(later) {
        let outcome = tokio::time::timeout(Duration::from_secs(20), d.wait())
            .await
            .expect("an outcome within 20 s");
        offsets.push(outcome.map(|m| m.offset).map_err(|e| e.to_string()));
    }
    let moved = tokio::time::timeout(Duration::from_secs(20), moving.wait()).await;
    assert!(
        matches!(moved, Ok(Ok(_))),
        "partition 1's record: {moved:?}"
    );
    // Before the fix: the first five failed with OUT_OF_ORDER_SEQUENCE_NUMBER.
    let want: Vec<Result<i64, String>> = (0..10).map(Ok).collect();
    assert_eq!(offsets, want);
}
