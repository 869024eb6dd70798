//! Issue 9 items 3 and 10: a Fetch a client crafts can neither make the broker build an
//! unbounded response nor pose as a follower (read above the HW, move the HW).

mod support;

use bytes::{Buf, Bytes};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, StrBytes};
use kafka_protocol::records::Compression;
use support::cluster::{leader_and_isr, live_broker_ids, Cluster};
use support::{batch, wait_until, TestBroker, Wire};

const BATCH_VALUE: usize = 100_000;
const BATCHES: usize = 100;

/// Peak and current resident memory of a process, in KiB (`VmHWM`, `VmRSS`).
fn memory_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

fn fetch_partition(offset: i64, partition_max_bytes: i32) -> FetchPartition {
    FetchPartition::default()
        .with_partition(0)
        .with_fetch_offset(offset)
        .with_current_leader_epoch(-1)
        .with_partition_max_bytes(partition_max_bytes)
}

fn topic(name: &str, partitions: Vec<FetchPartition>) -> FetchTopic {
    FetchTopic::default()
        .with_topic(TopicName(StrBytes::from_string(name.into())))
        .with_partitions(partitions)
}

/// Sends `request` as Fetch `version`; returns (request bytes, response frame bytes, response).
fn raw_fetch(
    wire: &mut Wire,
    version: i16,
    request: &FetchRequest,
) -> (usize, usize, FetchResponse) {
    let frame = wire.request_bytes(ApiKey::Fetch, version, request);
    let sent = frame.len();
    wire.send_raw(&frame);
    let mut body: Bytes = wire.read_response(ApiKey::Fetch, version);
    let size = body.len();
    let response = FetchResponse::decode(&mut body, version).expect("decode fetch response");
    assert_eq!(body.remaining(), 0);
    (sent, size, response)
}

/// The hostile request of the issue: ~600 bytes, `max_bytes` <= 0, the same partition listed
/// again and again, each asking for everything from offset 0.
fn hostile_request(name: &str, max_bytes: i32, repeats: usize) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(max_bytes)
        .with_topics(vec![topic(
            name,
            (0..repeats).map(|_| fetch_partition(0, i32::MAX)).collect(),
        )])
}

/// Caught: `max_bytes <= 0` meant unlimited, there was no `fetch.max.bytes`, and a partition
/// listed 16 times was read 16 times: against this 10 MB partition the 590-byte request got a
/// 160 MB response and the broker's peak RSS went from 21 MB to 334 MB (measured before the
/// fix; now 100 KB and 22 -> 24 MB). Now the
/// partition is answered once, with one batch (KIP-74: only the first batch may exceed a
/// limit of 0), and a positive `max_bytes` is capped by `fetch.max.bytes`.
#[test]
fn a_small_fetch_cannot_inflate_the_response_or_the_broker() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &["fetch.max.bytes=1048576"]);
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("big", 1, 1, &[]).0, 0);
    let value = "x".repeat(BATCH_VALUE);
    for _ in 0..BATCHES {
        let (code, _) = wire.produce("big", 0, batch(&[(None, &value)], Compression::None), 1);
        assert_eq!(code, 0);
    }
    let one_batch = BATCH_VALUE + 200;
    let (hwm_before, rss_before) = memory_kib(broker.pid());
    for max_bytes in [0, -1, i32::MIN] {
        let (sent, size, resp) = raw_fetch(&mut wire, 12, &hostile_request("big", max_bytes, 16));
        assert!(sent <= 650, "the attack is a small request ({sent} bytes)");
        let partitions: Vec<_> = resp.responses.iter().flat_map(|t| &t.partitions).collect();
        assert_eq!(partitions.len(), 1, "a repeated partition is answered once");
        assert_eq!(partitions[0].error_code, 0);
        let records = partitions[0].records.as_ref().map_or(0, Bytes::len);
        assert!(records > 0, "the first batch is returned (KIP-74)");
        assert!(
            size <= one_batch,
            "max_bytes={max_bytes}: response of {size} bytes, more than one batch"
        );
        println!("max_bytes={max_bytes}: request {sent} B, response {size} B");
    }
    // A positive max_bytes above the broker's cap: fetch.max.bytes (1 MiB here) wins.
    let (_, size, _) = raw_fetch(&mut wire, 12, &hostile_request("big", i32::MAX, 16));
    assert!(
        size <= (1 << 20) + one_batch,
        "capped by fetch.max.bytes: {size}"
    );
    println!("max_bytes=i32::MAX: response {size} B");
    let (hwm_after, rss_after) = memory_kib(broker.pid());
    println!("broker VmHWM {hwm_before} -> {hwm_after} KiB, VmRSS {rss_before} -> {rss_after} KiB");
    assert!(
        hwm_after < hwm_before + 64 * 1024,
        "peak RSS grew by more than 64 MiB: {hwm_before} -> {hwm_after} KiB"
    );
    // Still serving normally.
    let (code, hw, records) = wire.fetch("big", 0, 99, 0);
    assert_eq!((code, hw, records.len()), (0, 100, 1));
}

/// The topic id of `name` (Metadata v12).
fn topic_id(wire: &mut Wire, name: &str) -> uuid::Uuid {
    let meta: MetadataResponse = wire.call(
        ApiKey::Metadata,
        12,
        &MetadataRequest::default().with_topics(None),
    );
    meta.topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.0.as_str()) == Some(name))
        .expect("topic")
        .topic_id
}

/// Fetch v12 as replica `replica_id`, or v15 with `ReplicaState { replica_id, epoch }`.
fn follower_fetch(
    wire: &mut Wire,
    name: &str,
    replica_id: i32,
    epoch: Option<i64>,
    offset: i64,
) -> fetch_response::PartitionData {
    let mut request = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20);
    let version = match epoch {
        None => {
            request = request
                .with_replica_id(BrokerId(replica_id))
                .with_topics(vec![topic(name, vec![fetch_partition(offset, 1 << 20)])]);
            12
        }
        Some(epoch) => {
            let id = topic_id(wire, name);
            request = request
                .with_replica_state(
                    ReplicaState::default()
                        .with_replica_id(BrokerId(replica_id))
                        .with_replica_epoch(epoch),
                )
                .with_topics(vec![FetchTopic::default()
                    .with_topic_id(id)
                    .with_partitions(vec![fetch_partition(offset, 1 << 20)])]);
            15
        }
    };
    let (_, _, resp) = raw_fetch(wire, version, &request);
    resp.responses[0].partitions[0].clone()
}

/// Caught: any client could claim `replica_id >= 0`. With an id that is no replica it read up
/// to the log end, above the HW (records not yet committed); with a real follower's id (the
/// follower being stopped) it moved the HW to the log end, so acks=all could be acknowledged
/// without replication. Now follower fetches are accepted only from a replica with its current
/// broker epoch (Fetch v15 `ReplicaState`): both get NOT_LEADER_OR_FOLLOWER and the HW stays.
#[test]
fn a_client_posing_as_a_follower_reads_nothing_above_the_hw_and_cannot_move_it() {
    let cluster = Cluster::start(
        3,
        &[
            // The stopped follower stays in the ISR and registered for the whole test.
            "replica.lag.time.max.ms=120000",
            "broker.session.timeout.ms=120000",
            "auto.leader.rebalance.enable=false",
        ],
    );
    wait_until("all brokers live", || {
        (0..3).all(|i| live_broker_ids(&cluster.addr(i)) == Some(vec![1, 2, 3]))
    });
    assert_eq!(support::cluster::create(&cluster.addr(0), "t", 1, 3), 0);
    wait_until("a leader and a full ISR", || {
        leader_and_isr(&cluster.addr(0), "t").is_some_and(|(l, isr)| l > 0 && isr == vec![1, 2, 3])
    });
    let (leader, _) = leader_and_isr(&cluster.addr(0), "t").unwrap();
    let mut wire = Wire::connect(&cluster.addr(cluster.index_of(leader)));
    let (code, _) = wire.produce("t", 0, batch(&[(None, "committed")], Compression::None), -1);
    assert_eq!(code, 0);
    // Stop one follower: the HW cannot pass its position (offset 1) any more.
    let stopped = (1..=3).find(|&id| id != leader).unwrap();
    cluster.pause(cluster.index_of(stopped));
    for i in 0..5 {
        let (code, _) = wire.produce(
            "t",
            0,
            batch(&[(None, &format!("u{i}"))], Compression::None),
            1,
        );
        assert_eq!(code, 0);
    }
    let hw = |wire: &mut Wire| wire.fetch("t", 0, 0, 0).1;
    assert_eq!(hw(&mut wire), 1, "the stopped follower holds the HW");

    let not_a_replica = 99;
    for (who, epoch) in [
        (not_a_replica, None),
        (not_a_replica, Some(0)),
        (stopped, None),
        (stopped, Some(-1)),
        (stopped, Some(i64::MAX)),
    ] {
        let p = follower_fetch(&mut wire, "t", who, epoch, 1);
        let read = p.records.as_ref().map_or(0, Bytes::len);
        assert_eq!(read, 0, "replica {who} epoch {epoch:?} read above the HW");
        assert_eq!(
            p.error_code, 6,
            "replica {who} epoch {epoch:?}: NOT_LEADER_OR_FOLLOWER"
        );
        // At the log end: a real follower's position there would move the HW to 6.
        let p = follower_fetch(&mut wire, "t", who, epoch, 6);
        assert_eq!(p.error_code, 6);
        assert_eq!(
            hw(&mut wire),
            1,
            "replica {who} epoch {epoch:?} moved the HW"
        );
    }

    // The real follower (Fetch v15 with its broker epoch) still replicates and moves the HW.
    cluster.resume(cluster.index_of(stopped));
    wait_until("the real follower moves the HW", || hw(&mut wire) == 6);
}
