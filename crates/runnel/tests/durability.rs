//! Data survives clean restarts and `kill -9`; a torn tail is cut; retention and DeleteRecords
//! remove whole segments and move the log start offset.

mod support;

use std::io::Write;

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use support::*;

fn produce_n(wire: &mut Wire, topic: &str, from: usize, n: usize) -> Vec<String> {
    let mut sent = Vec::new();
    for i in from..from + n {
        let v = format!("record-{i}");
        let (code, _) = wire.produce(topic, 0, batch(&[(None, v.as_str())], Compression::None), 1);
        assert_eq!(code, 0);
        sent.push(v);
    }
    sent
}

#[test]
fn clean_restart_keeps_topics_and_records() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    assert_eq!(
        wire.create_topic("keep", 3, 1, &[("retention.ms", "123456789")])
            .0,
        0
    );
    let sent = produce_n(&mut wire, "keep", 0, 50);
    assert!(broker.stop(), "SIGTERM exits cleanly");
    assert!(
        dir.path().join(".kafka_cleanshutdown").exists(),
        "clean-shutdown marker written"
    );
    broker.restart();
    let mut wire = broker.connect();
    assert_eq!(values(&wire.fetch_all("keep", 0, 0)), sent);
    let meta: MetadataResponse = wire.call(
        ApiKey::Metadata,
        9,
        &MetadataRequest::default().with_topics(None),
    );
    let topic = meta
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.0.as_str()) == Some("keep"))
        .unwrap();
    assert_eq!(topic.partitions.len(), 3);
    // More records continue at the next offset.
    assert_eq!(
        wire.produce("keep", 0, batch(&[(None, "after")], Compression::None), 1),
        (0, 50)
    );
}

#[test]
fn kill9_with_flush_every_message_loses_nothing_acknowledged_and_cuts_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = TestBroker::start(dir.path(), &["log.flush.interval.messages=1"]);
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("durable", 1, 1, &[]).0, 0);
    let sent = produce_n(&mut wire, "durable", 0, 200);
    broker.kill9();
    // Simulate a write torn by the crash: half a batch at the end of the active segment.
    let seg = dir
        .path()
        .join("durable-0")
        .join("00000000000000000000.log");
    let torn = batch(
        &[(None, "torn-record-that-was-never-acknowledged")],
        Compression::None,
    );
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&seg)
        .expect("segment file exists");
    f.write_all(&torn[..torn.len() / 2]).unwrap();
    drop(f);
    broker.restart();
    let mut wire = broker.connect();
    assert_eq!(
        values(&wire.fetch_all("durable", 0, 0)),
        sent,
        "every acknowledged record, nothing else"
    );
    assert_eq!(
        wire.produce("durable", 0, batch(&[(None, "next")], Compression::None), 1),
        (0, 200)
    );
    assert_eq!(values(&wire.fetch_all("durable", 0, 200)), vec!["next"]);
}

#[test]
fn retention_deletes_old_segments() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &["log.retention.check.interval.ms=200"]);
    let mut wire = broker.connect();
    assert_eq!(
        wire.create_topic(
            "short",
            1,
            1,
            &[
                ("segment.bytes", "1024"),
                ("retention.bytes", "2048"),
                ("file.delete.delay.ms", "0")
            ]
        )
        .0,
        0
    );
    produce_n(&mut wire, "short", 0, 200);
    let earliest = |wire: &mut Wire| list_offset(wire, "short", -2);
    wait_until("retention to move the log start offset", || {
        earliest(&mut wire) > 0
    });
    let start = earliest(&mut wire);
    let records = wire.fetch_all("short", 0, start);
    assert_eq!(
        records.last().map(|r| r.offset),
        Some(199),
        "the newest records are kept"
    );
    let (code, _, _) = wire.fetch("short", 0, 0, 0);
    assert_eq!(
        code, 1,
        "fetching below the log start is OFFSET_OUT_OF_RANGE"
    );
}

#[test]
fn delete_records_moves_log_start_and_list_offsets_by_time() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("trim", 1, 1, &[]).0, 0);
    produce_n(&mut wire, "trim", 0, 10);
    let req = DeleteRecordsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![delete_records_request::DeleteRecordsTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("trim")))
            .with_partitions(vec![
                delete_records_request::DeleteRecordsPartition::default()
                    .with_partition_index(0)
                    .with_offset(4),
            ])]);
    let resp: DeleteRecordsResponse = wire.call(ApiKey::DeleteRecords, 2, &req);
    let p = &resp.topics[0].partitions[0];
    assert_eq!((p.error_code, p.low_watermark), (0, 4));
    assert_eq!(list_offset(&mut wire, "trim", -2), 4);
    assert_eq!(list_offset(&mut wire, "trim", -1), 10);
    assert_eq!(wire.fetch_all("trim", 0, 4).len(), 6);
    let too_far = DeleteRecordsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![delete_records_request::DeleteRecordsTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("trim")))
            .with_partitions(vec![
                delete_records_request::DeleteRecordsPartition::default()
                    .with_partition_index(0)
                    .with_offset(11),
            ])]);
    let resp: DeleteRecordsResponse = wire.call(ApiKey::DeleteRecords, 2, &too_far);
    assert_eq!(
        resp.topics[0].partitions[0].error_code, 1,
        "beyond the HW is OFFSET_OUT_OF_RANGE"
    );
    // Test batches carry the current time: every remaining record is at or after 0, none a day ahead.
    assert_eq!(list_offset(&mut wire, "trim", 0), 4);
    let tomorrow = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        + 86_400_000;
    assert_eq!(
        list_offset(&mut wire, "trim", tomorrow),
        -1,
        "no record that late"
    );
}

fn list_offset(wire: &mut Wire, topic: &str, timestamp: i64) -> i64 {
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![
                list_offsets_request::ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_current_leader_epoch(-1)
                    .with_timestamp(timestamp),
            ])]);
    let resp: ListOffsetsResponse = wire.call(ApiKey::ListOffsets, 7, &req);
    let p = &resp.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.offset
}

#[test]
fn idempotent_retry_after_restart_is_still_a_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("idem-restart", 1, 1, &[]).0, 0);
    let pid = 4242;
    assert_eq!(
        wire.produce(
            "idem-restart",
            0,
            idempotent_batch(pid, 0, 0, &["a", "b"]),
            -1
        ),
        (0, 0)
    );
    assert_eq!(
        wire.produce("idem-restart", 0, idempotent_batch(pid, 0, 2, &["c"]), -1),
        (0, 2)
    );
    assert!(broker.stop());
    broker.restart();
    let mut wire = broker.connect();
    assert_eq!(
        wire.produce("idem-restart", 0, idempotent_batch(pid, 0, 2, &["c"]), -1),
        (0, 2),
        "a retry across the restart is acknowledged with the original offset"
    );
    assert_eq!(
        wire.produce("idem-restart", 0, idempotent_batch(pid, 0, 5, &["z"]), -1)
            .0,
        45,
        "a gap is still detected after the restart"
    );
    assert_eq!(
        values(&wire.fetch_all("idem-restart", 0, 0)),
        vec!["a", "b", "c"]
    );
}

#[test]
fn compacted_topics_keep_the_latest_value_per_key() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &["log.cleaner.backoff.ms=100"]);
    let mut wire = broker.connect();
    assert_eq!(
        wire.create_topic(
            "table",
            1,
            1,
            &[
                ("cleanup.policy", "compact"),
                ("segment.bytes", "1024"),
                ("min.cleanable.dirty.ratio", "0.01")
            ]
        )
        .0,
        0
    );
    let mut latest = std::collections::BTreeMap::new();
    for round in 0..20 {
        for key in 0..5 {
            let k = format!("key{key}");
            let v = format!("round{round}");
            let (code, _) = wire.produce(
                "table",
                0,
                batch(&[(Some(k.as_str()), v.as_str())], Compression::None),
                1,
            );
            assert_eq!(code, 0);
            latest.insert(k, v);
        }
    }
    wait_until("the cleaner to drop overwritten records", || {
        wire.fetch_all("table", 0, 0).len() < 50
    });
    let records = wire.fetch_all("table", 0, 0);
    let mut last_seen = std::collections::BTreeMap::new();
    let mut previous = -1;
    for r in &records {
        assert!(r.offset > previous, "offsets stay strictly increasing");
        previous = r.offset;
        let k = String::from_utf8(r.key.clone().unwrap().to_vec()).unwrap();
        let v = String::from_utf8(r.value.clone().unwrap().to_vec()).unwrap();
        last_seen.insert(k, v);
    }
    assert_eq!(last_seen, latest, "the latest value of every key survives");
    assert_eq!(
        records.last().map(|r| r.offset),
        Some(99),
        "the newest record keeps its offset"
    );
}
