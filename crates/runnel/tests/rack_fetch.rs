//! Issue 16, KIP-392: a follower serves consumer fetches v11+ from its own log, up to its own
//! high watermark (never beyond), with Kafka's errors: NOT_LEADER_OR_FOLLOWER for older
//! consumer fetches, OFFSET_OUT_OF_RANGE past its log end, the leader-epoch fencing errors;
//! ListOffsets stays leader-only. (Rack selection: tests/interop/test_rack_fetch.py.)

mod support;

use bytes::Buf;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};
use support::cluster::{leader_and_isr, live_broker_ids, partition_states, Cluster};
use support::{batch, wait_until, Wire};

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.into()))
}

/// A consumer fetch of partition 0 at `offset`: (error, HW, record count, preferred replica).
fn fetch(
    wire: &mut Wire,
    version: i16,
    topic: &str,
    offset: i64,
    epoch: i32,
) -> (i16, i64, usize, i32) {
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_rack_id(StrBytes::from_static_str("rack-x"))
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(offset)
                .with_current_leader_epoch(epoch)
                .with_partition_max_bytes(1 << 20)])]);
    let resp: FetchResponse = wire.call(ApiKey::Fetch, version, &req);
    let p = &resp.responses[0].partitions[0];
    let mut n = 0;
    if let Some(mut bytes) = p.records.clone() {
        while bytes.has_remaining() {
            n += RecordBatchDecoder::decode(&mut bytes)
                .expect("valid batches")
                .records
                .len();
        }
    }
    (
        p.error_code,
        p.high_watermark,
        n,
        p.preferred_read_replica.0,
    )
}

/// The size of partition 0's log on the broker `wire` talks to (DescribeLogDirs).
fn log_size(wire: &mut Wire, topic: &str) -> i64 {
    let req = DescribeLogDirsRequest::default().with_topics(Some(vec![
        describe_log_dirs_request::DescribableLogDirTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![0]),
    ]));
    let resp: DescribeLogDirsResponse = wire.call(ApiKey::DescribeLogDirs, 1, &req);
    resp.results
        .iter()
        .flat_map(|d| &d.topics)
        .flat_map(|t| &t.partitions)
        .map(|p| p.partition_size)
        .sum()
}

fn list_latest(wire: &mut Wire, topic: &str) -> i16 {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![
                list_offsets_request::ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_current_leader_epoch(-1)
                    .with_timestamp(-1),
            ])]);
    let resp: ListOffsetsResponse = wire.call(ApiKey::ListOffsets, 7, &request);
    resp.topics[0].partitions[0].error_code
}

#[test]
fn a_follower_serves_consumers_up_to_its_own_high_watermark() {
    let cluster = Cluster::start(
        3,
        &[
            "replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector",
            "auto.leader.rebalance.enable=false",
        ],
    );
    wait_until("all brokers live", || {
        (0..3).all(|i| live_broker_ids(&cluster.addr(i)) == Some(vec![1, 2, 3]))
    });
    assert_eq!(support::cluster::create(&cluster.addr(0), "f", 1, 3), 0);
    wait_until("a leader and a full ISR", || {
        leader_and_isr(&cluster.addr(0), "f").is_some_and(|(l, isr)| l > 0 && isr == vec![1, 2, 3])
    });
    let (leader, _) = leader_and_isr(&cluster.addr(0), "f").unwrap();
    let epoch = partition_states(&cluster.addr(0), "f").unwrap()[0].leader_epoch;
    let mut others = (1..=3).filter(|&id| id != leader);
    let (reader, holder) = (others.next().unwrap(), others.next().unwrap());
    let mut to_leader = Wire::connect(&cluster.addr(cluster.index_of(leader)));
    for i in 0..5 {
        let v = format!("v{i}");
        assert_eq!(
            to_leader
                .produce("f", 0, batch(&[(None, &v)], Compression::None), -1)
                .0,
            0
        );
    }
    let mut at = Wire::connect(&cluster.addr(cluster.index_of(reader)));
    wait_until("the follower's HW reaches 5", || {
        fetch(&mut at, 12, "f", 0, epoch) == (0, 5, 5, -1)
    });

    // The other follower freezes: the leader's HW stays at 5 (it is still in the ISR), while
    // the reading follower replicates offset 5. It must not show it.
    cluster.pause(cluster.index_of(holder));
    let before = log_size(&mut at, "f");
    assert_eq!(
        to_leader
            .produce("f", 0, batch(&[(None, "v5")], Compression::None), 1)
            .0,
        0
    );
    wait_until("the follower replicated offset 5", || {
        log_size(&mut at, "f") > before
    });
    assert_eq!(
        fetch(&mut at, 12, "f", 0, epoch),
        (0, 5, 5, -1),
        "nothing past the HW"
    );
    assert_eq!(
        fetch(&mut at, 12, "f", 5, epoch),
        (0, 5, 0, -1),
        "at the HW: empty, no error"
    );
    cluster.resume(cluster.index_of(holder));
    wait_until("the follower shows offset 5 once committed", || {
        fetch(&mut at, 12, "f", 0, epoch) == (0, 6, 6, -1)
    });

    // Kafka's errors at a follower.
    assert_eq!(
        fetch(&mut at, 10, "f", 0, epoch).0,
        6,
        "Fetch v10 needs the leader"
    );
    assert_eq!(
        fetch(&mut at, 12, "f", 100, epoch).0,
        1,
        "past its log end: OFFSET_OUT_OF_RANGE"
    );
    assert_eq!(
        fetch(&mut at, 12, "f", 0, epoch + 1).0,
        75,
        "UNKNOWN_LEADER_EPOCH"
    );
    if epoch > 0 {
        assert_eq!(
            fetch(&mut at, 12, "f", 0, epoch - 1).0,
            74,
            "FENCED_LEADER_EPOCH"
        );
    }
    assert_eq!(
        list_latest(&mut at, "f"),
        6,
        "ListOffsets stays leader-only"
    );
    // The leader names no replica for a client in a rack no replica has (no racks here).
    assert_eq!(fetch(&mut to_leader, 12, "f", 0, epoch), (0, 6, 6, -1));
}
