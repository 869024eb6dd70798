//! Transactions on the partition side (issue 13), through the dispatcher of an in-process
//! broker: WriteTxnMarkers frames, read_committed Fetch (LSO, aborted_transactions) and
//! ListOffsets, and the produce path refusing transactional batches the coordinator has not
//! confirmed.

mod support;

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use support::InProcessBroker;

const LIMIT: Duration = Duration::from_secs(20);
const TOPIC: &str = "txn";

fn call<R: Decodable>(
    broker: &InProcessBroker,
    key: ApiKey,
    version: i16,
    body: &impl Encodable,
) -> R {
    broker.call(key, version, body, LIMIT)
}

fn name(s: &'static str) -> TopicName {
    TopicName(StrBytes::from_static_str(s))
}

fn create_topic(broker: &InProcessBroker) {
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(5_000)
        .with_topics(vec![create_topics_request::CreatableTopic::default()
            .with_name(name(TOPIC))
            .with_num_partitions(1)
            .with_replication_factor(1)]);
    let _: CreateTopicsResponse = call(broker, ApiKey::CreateTopics, 5, &create);
}

/// A batch of `n` records, transactional of producer `pid` (epoch 0) when `pid >= 0`.
fn batch(pid: i64, n: usize) -> Bytes {
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            transactional: pid >= 0,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: pid,
            producer_epoch: if pid >= 0 { 0 } else { -1 },
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: if pid >= 0 { i as i32 } else { -1 },
            // Now: an old timestamp would roll the marker into a segment of its own
            // (`segment.ms`), and one read stays in one segment.
            timestamp: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64),
            key: None,
            value: Some(Bytes::from_static(b"v")),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("batch encodes");
    buf.freeze()
}

/// Appends on the leader directly, as a verified produce would.
fn append(broker: &InProcessBroker, records: &[u8]) {
    let p = broker.broker.replicas.get(TOPIC, 0).expect("hosted");
    p.append_as_leader(records, 1, 1).expect("appended");
}

fn markers(
    pid: i64,
    epoch: i16,
    commit: bool,
    partitions: Vec<(&'static str, i32)>,
) -> WriteTxnMarkersRequest {
    let topics = partitions
        .into_iter()
        .map(|(t, p)| {
            write_txn_markers_request::WritableTxnMarkerTopic::default()
                .with_name(name(t))
                .with_partition_indexes(vec![p])
        })
        .collect();
    WriteTxnMarkersRequest::default().with_markers(vec![
        write_txn_markers_request::WritableTxnMarker::default()
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_transaction_result(commit)
            .with_coordinator_epoch(0)
            .with_topics(topics),
    ])
}

fn marker_codes(broker: &InProcessBroker, request: &WriteTxnMarkersRequest) -> Vec<i16> {
    let r: WriteTxnMarkersResponse = call(broker, ApiKey::WriteTxnMarkers, 1, request);
    r.markers[0]
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

fn fetch(broker: &InProcessBroker, isolation: i8) -> fetch_response::PartitionData {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_isolation_level(isolation)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(name(TOPIC))
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let r: FetchResponse = call(broker, ApiKey::Fetch, 11, &request);
    r.responses[0].partitions[0].clone()
}

fn latest(broker: &InProcessBroker, isolation: i8) -> i64 {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation)
        .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
            .with_name(name(TOPIC))
            .with_partitions(vec![
                list_offsets_request::ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(-1),
            ])]);
    let r: ListOffsetsResponse = call(broker, ApiKey::ListOffsets, 5, &request);
    r.topics[0].partitions[0].offset
}

#[test]
fn read_committed_reads_up_to_the_lso_and_learns_the_aborted_transactions() {
    let broker = InProcessBroker::start(&[]);
    create_topic(&broker);
    append(&broker, &batch(-1, 2));
    append(&broker, &batch(7, 3));
    // Offsets 0-1 plain, 2-4 an open transaction: read_committed stops at 2.
    let committed = fetch(&broker, 1);
    assert_eq!(
        (committed.high_watermark, committed.last_stable_offset),
        (5, 2)
    );
    assert_eq!(latest(&broker, 1), 2);
    assert_eq!(latest(&broker, 0), 5);
    let uncommitted = fetch(&broker, 0);
    assert!(uncommitted.aborted_transactions.is_none());
    assert!(
        uncommitted.records.as_ref().unwrap().len() > committed.records.as_ref().unwrap().len()
    );

    assert_eq!(
        marker_codes(&broker, &markers(7, 0, false, vec![(TOPIC, 0)])),
        vec![0]
    );
    let after = fetch(&broker, 1);
    assert_eq!((after.high_watermark, after.last_stable_offset), (6, 6));
    let aborted = after
        .aborted_transactions
        .expect("read_committed gets the list");
    assert_eq!(aborted.len(), 1);
    assert_eq!((aborted[0].producer_id.0, aborted[0].first_offset), (7, 2));
    assert_eq!(latest(&broker, 1), 6);
    // The marker is a control batch at offset 5.
    let records = after.records.unwrap();
    let mut rest = &records[..];
    let mut last = None;
    while rest.len() >= 61 {
        let len = i32::from_be_bytes(rest[8..12].try_into().unwrap()) as usize + 12;
        last = Some((
            i64::from_be_bytes(rest[0..8].try_into().unwrap()),
            i16::from_be_bytes([rest[21], rest[22]]),
        ));
        rest = &rest[len..];
    }
    assert_eq!(
        last,
        Some((5, 0x30)),
        "{} bytes left of {}",
        rest.len(),
        records.len()
    );
}

#[test]
fn markers_answer_per_partition_and_stale_epochs_are_refused() {
    let broker = InProcessBroker::start(&[]);
    create_topic(&broker);
    append(&broker, &batch(8, 1));
    let codes = marker_codes(&broker, &markers(8, 1, true, vec![(TOPIC, 0), ("nope", 0)]));
    assert_eq!(codes, vec![0, 3], "written / UNKNOWN_TOPIC_OR_PARTITION");
    // The producer's epoch is 1 now: a marker of epoch 0 comes from a fenced generation.
    assert_eq!(
        marker_codes(&broker, &markers(8, 0, false, vec![(TOPIC, 0)])),
        vec![47]
    );
    assert_eq!(fetch(&broker, 1).last_stable_offset, 2);
}

fn produce(broker: &InProcessBroker, transactional_id: Option<&'static str>) -> i16 {
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_transactional_id(
            transactional_id.map(|t| TransactionalId(StrBytes::from_static_str(t))),
        )
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(name(TOPIC))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch(9, 1))),
            ])]);
    let r: ProduceResponse = call(broker, ApiKey::Produce, 9, &request);
    r.responses[0].partition_responses[0].error_code
}

/// Caught: transactional batches of a producer whose transaction no coordinator knows were
/// stored and then shown to read_committed consumers as committed data.
#[test]
fn a_transactional_batch_no_coordinator_confirmed_is_refused() {
    let broker = InProcessBroker::start(&[]);
    create_topic(&broker);
    // No transactional id: TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka.
    assert_eq!(produce(&broker, None), 53);
    // No `__transaction_state`, hence no coordinator: the retriable NOT_ENOUGH_REPLICAS.
    assert_eq!(produce(&broker, Some("tid")), 19);
    assert_eq!(latest(&broker, 0), 0, "nothing was appended");
}
