//! Issue 9 item 7: DeleteRecords reaches the followers, so a leader change never brings the
//! deleted records back.

mod support;

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use support::cluster::{leader_and_isr, live_broker_ids, Cluster};
use support::{batch, values, wait_until, Wire};

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.into()))
}

/// DeleteRecords before `offset` on partition 0; returns (error code, low watermark).
fn delete_records(wire: &mut Wire, topic: &str, offset: i64) -> (i16, i64) {
    let request = DeleteRecordsRequest::default()
        .with_timeout_ms(20_000)
        .with_topics(vec![delete_records_request::DeleteRecordsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![
                delete_records_request::DeleteRecordsPartition::default()
                    .with_partition_index(0)
                    .with_offset(offset),
            ])]);
    let resp: DeleteRecordsResponse = wire.call(ApiKey::DeleteRecords, 2, &request);
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.low_watermark)
}

/// ListOffsets EARLIEST (-2) of partition 0: (error code, offset).
fn earliest(wire: &mut Wire, topic: &str) -> (i16, i64) {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![
                list_offsets_request::ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_current_leader_epoch(-1)
                    .with_timestamp(-2),
            ])]);
    let resp: ListOffsetsResponse = wire.call(ApiKey::ListOffsets, 7, &request);
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.offset)
}

/// Caught: the leader moved its log start, but followers never learnt it (they ignored the
/// log start offset of fetch responses) and DeleteRecords answered at once; after kill -9 of
/// the leader the new leader served offsets 0..6 again (ListOffsets EARLIEST 0). Now every
/// follower takes the leader's log start from its fetches, DeleteRecords answers once the low
/// watermark of the replicas reached the target, and the deleted records stay deleted.
#[test]
fn deleted_records_never_come_back_after_the_leader_is_killed() {
    let mut cluster = Cluster::start(
        3,
        &[
            "broker.session.timeout.ms=2000",
            "broker.heartbeat.interval.ms=300",
            "auto.leader.rebalance.enable=false",
            // Several segments, so the followers delete whole files too.
            "log.segment.bytes=300",
        ],
    );
    wait_until("all brokers live", || {
        (0..3).all(|i| live_broker_ids(&cluster.addr(i)) == Some(vec![1, 2, 3]))
    });
    assert_eq!(support::cluster::create(&cluster.addr(0), "d", 1, 3), 0);
    wait_until("a leader and a full ISR", || {
        leader_and_isr(&cluster.addr(0), "d").is_some_and(|(l, isr)| l > 0 && isr == vec![1, 2, 3])
    });
    let (leader, _) = leader_and_isr(&cluster.addr(0), "d").unwrap();
    let mut wire = Wire::connect(&cluster.addr(cluster.index_of(leader)));
    for i in 0..10 {
        let value = format!("v{i}");
        let (code, offset) = wire.produce("d", 0, batch(&[(None, &value)], Compression::None), -1);
        assert_eq!((code, offset), (0, i));
    }
    assert_eq!(delete_records(&mut wire, "d", 6), (0, 6));
    assert_eq!(earliest(&mut wire, "d"), (0, 6));

    cluster.kill9(cluster.index_of(leader));
    let survivor = (1..=3).find(|&id| id != leader).unwrap();
    let survivor_addr = cluster.addr(cluster.index_of(survivor));
    wait_until("a new leader", || {
        leader_and_isr(&survivor_addr, "d").is_some_and(|(l, _)| l > 0 && l != leader)
    });
    let (new_leader, _) = leader_and_isr(&survivor_addr, "d").unwrap();
    let mut wire = Wire::connect(&cluster.addr(cluster.index_of(new_leader)));
    wait_until("the new leader answers", || wire.fetch("d", 0, 6, 0).0 == 0);
    assert_eq!(
        earliest(&mut wire, "d"),
        (0, 6),
        "the new leader's log starts where the old one's did"
    );
    let (code, _, records) = wire.fetch("d", 0, 0, 0);
    assert_eq!(code, 1, "offset 0 was deleted: OFFSET_OUT_OF_RANGE");
    assert!(records.is_empty());
    let rest = wire.fetch_all("d", 0, 6);
    assert_eq!(values(&rest), ["v6", "v7", "v8", "v9"]);
}
