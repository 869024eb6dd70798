//! Known case 8 (docs/faults.md): an idempotent producer's retry must not be overtaken by a
//! later batch of its partition. The broker remembers a producer's last five batches; a
//! retry of a batch already in the log is a duplicate (success) only while it is among
//! them. The in-process fake broker (node 1, one partition) appends every batch in sequence
//! and answers in request order, as Kafka; it fails the first attempt of sequence 0 with
//! REQUEST_TIMED_OUT after appending it (a leader whose replication stalled), with four later
//! batches in flight behind it, and waits for the client's next Produce before answering
//! them. Before the fix that next Produce was sequence 5, already drained and waiting for an
//! in-flight slot: it took the slot sequence 0's failure freed, pushed sequence 0 out of the
//! five remembered batches, and every retry of sequence 0 was OUT_OF_ORDER_SEQUENCE_NUMBER.
//! The second fake broker reproduces the window that fix left (the successes behind a
//! failure freed their slots while the failure waited for a metadata refresh), closed by
//! recording the failure when it is read (`producer::in_flight`).

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, InitProducerIdResponse, ProduceRequest, ProduceResponse, ProducerId, RequestHeader,
};
use kafka_protocol::protocol::Decodable;
use runnel_client::{Client, ClientConfig, Producer, ProducerConfig, ProducerRecord};
use support::{api_versions, produce_answer, read_frame, respond, Frame, Leader, TOPIC};
use tokio::net::{TcpListener, TcpStream};

/// The base sequence of partition 0's one-record v2 batch (byte 53).
fn sequence(req: &ProduceRequest) -> i32 {
    let records = req.topic_data[0].partition_data[0]
        .records
        .clone()
        .unwrap_or_default();
    support::sequence_and_count(&records).0
}

/// One connection: requests are answered in order; sequence 0's first attempt is answered
/// REQUEST_TIMED_OUT once four more Produce requests are in, and their answers wait for the
/// next request (at most 5 s: the test fails rather than hangs).
async fn connection(mut s: TcpStream, port: u16) {
    let mut leader = Leader::default();
    let mut owed: Vec<(RequestHeader, ProduceResponse)> = Vec::new();
    let mut failed_first = false;
    while let Some(Frame { header, mut body }) = read_frame(&mut s).await {
        let v = header.request_api_version;
        match ApiKey::try_from(header.request_api_key).expect("api key") {
            ApiKey::ApiVersions => respond(&mut s, &header, &api_versions()).await,
            ApiKey::Metadata => respond(&mut s, &header, &support::metadata(port, 1, &[1])).await,
            ApiKey::InitProducerId => {
                let resp = InitProducerIdResponse::default().with_producer_id(ProducerId(7));
                respond(&mut s, &header, &resp).await
            }
            ApiKey::Produce => {
                let req = ProduceRequest::decode(&mut body, v).expect("produce");
                let (code, offset) = leader.append(sequence(&req));
                // Only the very first Produce (sequence 0) fails, after its append.
                let answer = if failed_first || !owed.is_empty() {
                    produce_answer(code, offset)
                } else {
                    produce_answer(7, -1)
                };
                owed.push((header, answer));
                if failed_first {
                    for (h, a) in owed.drain(..) {
                        respond(&mut s, &h, &a).await;
                    }
                } else if owed.len() == 5 {
                    failed_first = true;
                    let (h, a) = owed.remove(0);
                    respond(&mut s, &h, &a).await;
                    let next = tokio::time::timeout(Duration::from_secs(5), read_frame(&mut s));
                    let Ok(Some(Frame { header, mut body })) = next.await else {
                        return;
                    };
                    for (h, a) in owed.drain(..) {
                        respond(&mut s, &h, &a).await;
                    }
                    let req = ProduceRequest::decode(&mut body, header.request_api_version)
                        .expect("produce");
                    let (code, offset) = leader.append(sequence(&req));
                    respond(&mut s, &header, &produce_answer(code, offset)).await;
                }
            }
            other => panic!("the fake broker does not answer {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_retry_is_not_overtaken_by_a_later_batch_of_its_partition() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(connection(s, port));
        }
    });
    produce_eight_in_order(port).await;
}

/// What the connections of the second fake broker share: the partition's log and whether
/// sequence 0's first attempt has been failed yet.
#[derive(Default)]
struct Shared {
    leader: Mutex<Leader>,
    failed_first: AtomicBool,
}

/// The second fake broker's connection: sequence 0's first attempt is appended and answered
/// NOT_LEADER_OR_FOLLOWER once four more Produce requests are in, the four are answered at
/// once behind it (responses in request order, as Kafka), and from then on every Metadata
/// answer waits 300 ms. The producer refreshes metadata before it requeues sequence 0, so the
/// four successes are in the client before that failure is handled.
async fn connection_with_slow_refresh(mut s: TcpStream, port: u16, shared: Arc<Shared>) {
    let mut owed: Vec<(RequestHeader, ProduceResponse)> = Vec::new();
    while let Some(Frame { header, mut body }) = read_frame(&mut s).await {
        let v = header.request_api_version;
        match ApiKey::try_from(header.request_api_key).expect("api key") {
            ApiKey::ApiVersions => respond(&mut s, &header, &api_versions()).await,
            ApiKey::Metadata => {
                if shared.failed_first.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                respond(&mut s, &header, &support::metadata(port, 1, &[1])).await
            }
            ApiKey::InitProducerId => {
                let resp = InitProducerIdResponse::default().with_producer_id(ProducerId(7));
                respond(&mut s, &header, &resp).await
            }
            ApiKey::Produce => {
                let req = ProduceRequest::decode(&mut body, v).expect("produce");
                let (code, offset) = shared.leader.lock().expect("leader").append(sequence(&req));
                if shared.failed_first.load(Ordering::SeqCst) {
                    respond(&mut s, &header, &produce_answer(code, offset)).await;
                    continue;
                }
                let answer = if owed.is_empty() {
                    produce_answer(6, -1)
                } else {
                    produce_answer(code, offset)
                };
                owed.push((header, answer));
                if owed.len() == 5 {
                    shared.failed_first.store(true, Ordering::SeqCst);
                    for (h, a) in owed.drain(..) {
                        respond(&mut s, &h, &a).await;
                    }
                }
            }
            other => panic!("the fake broker does not answer {other:?}"),
        }
    }
}

/// The window case 8 left: the responses of one connection arrive in order, but each
/// request's task handled its own; the four successes freed their in-flight slots while
/// sequence 0's failure still waited for its metadata refresh, so sequence 5 (drained,
/// waiting for a slot) was written before sequence 0's retry was queued, pushed it out of the
/// five remembered batches, and the first record failed with OUT_OF_ORDER_SEQUENCE_NUMBER.
/// Now the failure is recorded as it is read, and the partition sends nothing but sequence
/// 0's retry until it is acknowledged.
#[tokio::test]
async fn a_failure_is_handled_before_the_later_responses_free_their_slots() {
    slow_refresh_broker_then_eight().await;
}

/// The same on worker threads. (There the tasks that handle the four successes may also run
/// before the one that reads sequence 0's failure; the rule for that, a success handled
/// first makes the earlier batches unresolved, is tested in `producer::in_flight`: this fake
/// does not make that order happen reliably.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_is_handled_first_on_a_multi_thread_runtime_too() {
    slow_refresh_broker_then_eight().await;
}

async fn slow_refresh_broker_then_eight() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let shared = Arc::new(Shared::default());
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(connection_with_slow_refresh(s, port, shared.clone()));
        }
    });
    produce_eight_in_order(port).await;
}

/// Eight one-record batches to partition 0 of the fake broker at `port`, each acknowledged
/// at its own offset 0..8.
async fn produce_eight_in_order(port: u16) {
    let client = Client::connect(ClientConfig::new(&format!("127.0.0.1:{port}")))
        .await
        .expect("connect");
    let config = ProducerConfig {
        idempotence: true,
        linger: Duration::ZERO,
        // One record per batch, so each batch is a request of its own.
        batch_size: 1,
        retries: 3,
        retry_backoff: Duration::from_millis(10),
        ..ProducerConfig::default()
    };
    let producer = Producer::new(client, config).await.expect("producer");
    let mut deliveries = Vec::new();
    for i in 0..8 {
        let record = ProducerRecord {
            partition: Some(0),
            ..ProducerRecord::new(TOPIC, Bytes::from(format!("v{i}")))
        };
        deliveries.push(producer.send(record).await.expect("queued"));
    }
    let mut offsets = Vec::new();
    for d in deliveries {
        let outcome = tokio::time::timeout(Duration::from_secs(20), d.wait())
            .await
            .expect("an outcome within 20 s");
        offsets.push(outcome.map(|m| m.offset).map_err(|e| e.to_string()));
    }
    // Before the fix: the first record failed with OUT_OF_ORDER_SEQUENCE_NUMBER.
    let want: Vec<Result<i64, String>> = (0..8).map(Ok).collect();
    assert_eq!(offsets, want);
}
