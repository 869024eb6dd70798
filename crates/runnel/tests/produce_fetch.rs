//! Produce and Fetch against a real broker: round trips with every codec, byte-for-byte storage,
//! offsets, long polling, and the Kafka error code of each bad request.

mod support;

use std::time::Instant;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use support::*;

#[test]
fn every_codec_round_trips_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("codecs", 1, 1, &[]).0, 0);
    let mut expected = Vec::new();
    let mut next = 0;
    for (i, codec) in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ]
    .into_iter()
    .enumerate()
    {
        let vals: Vec<String> = (0..5).map(|j| format!("codec{i}-value{j}")).collect();
        let pairs: Vec<(Option<&str>, &str)> =
            vals.iter().map(|v| (Some("k"), v.as_str())).collect();
        let (code, base) = wire.produce("codecs", 0, batch(&pairs, codec), 1);
        assert_eq!(code, 0, "{codec:?}");
        assert_eq!(base, next, "offsets are dense across batches");
        next += 5;
        expected.extend(vals);
    }
    let records = wire.fetch_all("codecs", 0, 0);
    assert_eq!(values(&records), expected);
    let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, (0..25).collect::<Vec<_>>());
    // The compressed batch is served exactly as produced (only offset/epoch patched).
    let (_, _, from_10) = wire.fetch("codecs", 0, 10, 0);
    assert_eq!(from_10[0].offset, 10);
}

#[test]
fn fetch_long_polls_until_data_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("poll", 1, 1, &[]).0, 0);
    let start = Instant::now();
    let (code, hw, records) = wire.fetch("poll", 0, 0, 300);
    assert_eq!((code, hw, records.len()), (0, 0, 0));
    assert!(
        start.elapsed().as_millis() >= 250,
        "empty fetch must wait max_wait_ms"
    );
    let addr = broker.addr.clone();
    let producer = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(200));
        let mut w = Wire::connect(&addr);
        w.produce("poll", 0, batch(&[(None, "late")], Compression::None), 1)
    });
    let (code, _, records) = wire.fetch("poll", 0, 0, 10_000);
    assert_eq!(code, 0);
    assert_eq!(values(&records), vec!["late"]);
    assert_eq!(producer.join().unwrap().0, 0);
}

#[test]
fn produce_errors_carry_kafka_codes() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &["auto.create.topics.enable=false"]);
    let mut wire = broker.connect();
    assert_eq!(
        wire.create_topic("small", 1, 1, &[("max.message.bytes", "200")])
            .0,
        0
    );
    let ok = batch(&[(None, "hello")], Compression::None);
    assert_eq!(
        wire.produce("nope", 0, ok.clone(), 1).0,
        3,
        "UNKNOWN_TOPIC_OR_PARTITION"
    );
    assert_eq!(
        wire.produce("small", 7, ok.clone(), 1).0,
        3,
        "unknown partition"
    );
    assert_eq!(
        wire.produce("small", 0, ok.clone(), 2).0,
        21,
        "INVALID_REQUIRED_ACKS"
    );
    let big = "x".repeat(500);
    assert_eq!(
        wire.produce(
            "small",
            0,
            batch(&[(None, big.as_str())], Compression::None),
            1
        )
        .0,
        10,
        "MESSAGE_TOO_LARGE"
    );
    let mut corrupt = BytesMut::from(&ok[..]);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    assert_eq!(
        wire.produce("small", 0, corrupt.freeze(), 1).0,
        2,
        "CORRUPT_MESSAGE"
    );
    let truncated = ok.slice(..ok.len() - 3);
    assert_eq!(
        wire.produce("small", 0, truncated, 1).0,
        2,
        "truncated batch"
    );
    let mut bad_magic = BytesMut::from(&ok[..]);
    bad_magic[16] = 1;
    let code = wire.produce("small", 0, bad_magic.freeze(), 1).0;
    assert!(
        code == 87 || code == 2,
        "bad magic -> INVALID_RECORD/CORRUPT_MESSAGE, got {code}"
    );
    // Nothing from the failed requests was written; the good one lands at offset 0.
    assert_eq!(wire.produce("small", 0, ok, 1), (0, 0));
    assert_eq!(values(&wire.fetch_all("small", 0, 0)), vec!["hello"]);
}

#[test]
fn fetch_out_of_range_and_fenced_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("range", 1, 1, &[]).0, 0);
    wire.produce(
        "range",
        0,
        batch(&[(None, "a"), (None, "b")], Compression::None),
        1,
    );
    let (code, hw, _) = wire.fetch("range", 0, 5, 0);
    assert_eq!((code, hw), (1, 2), "OFFSET_OUT_OF_RANGE carries the HW");
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_bytes(1 << 20)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str("range")))
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(42)
                .with_partition_max_bytes(1 << 20)])]);
    let resp: FetchResponse = wire.call(ApiKey::Fetch, 12, &req);
    assert_eq!(
        resp.responses[0].partitions[0].error_code, 75,
        "UNKNOWN_LEADER_EPOCH"
    );
}

#[test]
fn acks_zero_gets_no_response_but_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("fire", 1, 1, &[]).0, 0);
    let req = ProduceRequest::default()
        .with_acks(0)
        .with_timeout_ms(1000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("fire")))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch(&[(None, "fire-and-forget")], Compression::None))),
            ])]);
    let frame = wire.request_bytes(ApiKey::Produce, 9, &req);
    wire.send_raw(&frame);
    // The next response on this connection must be the Metadata one (no Produce response).
    let resp: MetadataResponse = wire.call(ApiKey::Metadata, 9, &MetadataRequest::default());
    assert_eq!(resp.brokers.len(), 1);
    wait_until("acks=0 record visible", || {
        wire.fetch("fire", 0, 0, 100).2.len() == 1
    });
}

#[test]
fn idempotent_retries_are_deduplicated_and_gaps_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("idem", 1, 1, &[]).0, 0);
    let resp: InitProducerIdResponse = wire.call(
        ApiKey::InitProducerId,
        4,
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    );
    assert_eq!(resp.error_code, 0);
    let pid = resp.producer_id.0;
    let make = |seq: i32, vals: &[&str]| idempotent_batch(pid, resp.producer_epoch, seq, vals);
    assert_eq!(wire.produce("idem", 0, make(0, &["a", "b"]), -1), (0, 0));
    assert_eq!(wire.produce("idem", 0, make(2, &["c"]), -1), (0, 2));
    assert_eq!(
        wire.produce("idem", 0, make(2, &["c"]), -1),
        (0, 2),
        "retry acknowledged with the original offset"
    );
    assert_eq!(
        wire.produce("idem", 0, make(9, &["z"]), -1).0,
        45,
        "OUT_OF_ORDER_SEQUENCE_NUMBER"
    );
    assert_eq!(values(&wire.fetch_all("idem", 0, 0)), vec!["a", "b", "c"]);
}

#[test]
fn log_append_time_topics_stamp_the_broker_clock() {
    use kafka_protocol::records::TimestampType;
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    assert_eq!(
        wire.create_topic(
            "stamped",
            1,
            1,
            &[("message.timestamp.type", "LogAppendTime")]
        )
        .0,
        0
    );
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let req = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("stamped")))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch(&[(None, "a"), (None, "b")], Compression::Gzip))),
            ])]);
    let resp: ProduceResponse = wire.call(ApiKey::Produce, 9, &req);
    let p = &resp.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 0);
    assert!(
        p.log_append_time_ms >= before,
        "response carries the append time"
    );
    let records = wire.fetch_all("stamped", 0, 0);
    assert_eq!(
        values(&records),
        vec!["a", "b"],
        "the re-stamped batch still decodes (CRC valid)"
    );
    assert!(records
        .iter()
        .all(|r| r.timestamp_type == TimestampType::LogAppend));
}

#[test]
fn timestamps_outside_the_topic_window_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    assert_eq!(
        wire.create_topic(
            "window",
            1,
            1,
            &[("message.timestamp.after.max.ms", "60000")]
        )
        .0,
        0
    );
    let ok = batch(&[(None, "now")], Compression::None);
    assert_eq!(wire.produce("window", 0, ok.clone(), 1), (0, 0));
    // Move the batch's timestamps an hour into the future (fields are inside the CRC).
    let mut future = BytesMut::from(&ok[..]);
    let hour_ahead = i64::from_be_bytes(future[27..35].try_into().unwrap()) + 3_600_000;
    future[27..35].copy_from_slice(&hour_ahead.to_be_bytes());
    future[35..43].copy_from_slice(&hour_ahead.to_be_bytes());
    let crc = crc32c_of(&future[21..]);
    future[17..21].copy_from_slice(&crc.to_be_bytes());
    assert_eq!(
        wire.produce("window", 0, future.freeze(), 1).0,
        32,
        "INVALID_TIMESTAMP"
    );
}

/// CRC-32C (Castagnoli), bitwise: enough for one test batch.
fn crc32c_of(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn acks_all_needs_min_insync_replicas() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    assert_eq!(
        wire.create_topic("strict", 1, 1, &[("min.insync.replicas", "2")])
            .0,
        0
    );
    let b = batch(&[(None, "x")], Compression::None);
    assert_eq!(
        wire.produce("strict", 0, b.clone(), -1).0,
        19,
        "NOT_ENOUGH_REPLICAS"
    );
    assert_eq!(
        wire.produce("strict", 0, b, 1),
        (0, 0),
        "acks=1 ignores min.insync.replicas"
    );
    assert_eq!(
        values(&wire.fetch_all("strict", 0, 0)),
        vec!["x"],
        "the refused write left nothing"
    );
}

#[test]
fn compacted_topics_refuse_records_without_keys() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    assert_eq!(
        wire.create_topic("compacted", 1, 1, &[("cleanup.policy", "compact")])
            .0,
        0
    );
    let keyless = batch(&[(Some("k"), "a"), (None, "b")], Compression::Lz4);
    assert_eq!(
        wire.produce("compacted", 0, keyless, 1).0,
        87,
        "INVALID_RECORD"
    );
    let keyed = batch(&[(Some("k"), "a"), (Some("k"), "b")], Compression::Lz4);
    assert_eq!(wire.produce("compacted", 0, keyed, 1), (0, 0));
}

/// librdkafka's 0011_produce_batch (`invalid_record_fail_cnt == 10`): every keyless record of
/// a batch to a compacted topic comes back in `record_errors` with its index (Produce v8+,
/// KIP-467), the batch is INVALID_RECORD and nothing is stored. Before v8 there is no such field.
#[test]
fn produce_reports_every_invalid_record_with_its_batch_index() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    assert_eq!(
        wire.create_topic("compacted", 1, 1, &[("cleanup.policy", "compact")])
            .0,
        0
    );
    let keys: Vec<String> = (0..100).map(|i| format!("k{i}")).collect();
    let records: Vec<(Option<&str>, &str)> = (0..100)
        .map(|i| ((i % 10 != 3).then_some(keys[i].as_str()), "v"))
        .collect();
    let keyless = batch(&records, Compression::Snappy);
    let request = |records: Bytes| {
        ProduceRequest::default()
            .with_acks(1)
            .with_timeout_ms(10_000)
            .with_topic_data(vec![produce_request::TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_static_str("compacted")))
                .with_partition_data(vec![
                    produce_request::PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(records)),
                ])])
    };
    for version in [8, 9, 11] {
        let resp: ProduceResponse = wire.call(ApiKey::Produce, version, &request(keyless.clone()));
        let p = &resp.responses[0].partition_responses[0];
        assert_eq!(p.error_code, 87, "v{version}: INVALID_RECORD");
        let indexes: Vec<i32> = p.record_errors.iter().map(|e| e.batch_index).collect();
        assert_eq!(
            indexes,
            (3..100).step_by(10).collect::<Vec<i32>>(),
            "v{version}: one entry per keyless record"
        );
        assert!(p.record_errors.iter().all(|e| e
            .batch_index_error_message
            .as_ref()
            .is_some_and(|m| m.contains("without key"))));
        assert!(p
            .error_message
            .as_ref()
            .is_some_and(|m| m.contains("10 record errors")));
    }
    let resp: ProduceResponse = wire.call(ApiKey::Produce, 7, &request(keyless));
    let p = &resp.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 87);
    assert!(p.record_errors.is_empty());
    assert!(
        wire.fetch_all("compacted", 0, 0).is_empty(),
        "nothing stored"
    );
}
