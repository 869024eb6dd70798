//! Issue 9 items 11 and 12 against the real binary over TCP: a group write that cannot
//! replicate does not block other groups, an oversized OffsetCommit gets a final error code,
//! `__consumer_offsets` waits for `offsets.topic.replication.factor` live brokers, and one
//! Produce request cannot add an idempotent producer per batch.

mod support;

use std::sync::mpsc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use support::cluster::*;
use support::*;

const OFFSETS: &str = "__consumer_offsets";

fn group_id(g: &str) -> GroupId {
    GroupId(StrBytes::from_string(g.into()))
}

/// (error, coordinator id) for `group` asked at `addr`.
fn coordinator(addr: &str, group: &str) -> Option<(i16, i32)> {
    let mut wire = Wire::try_connect(addr)?;
    let req = FindCoordinatorRequest::default().with_key(StrBytes::from_string(group.into()));
    let resp: FindCoordinatorResponse = wire.try_call(ApiKey::FindCoordinator, 3, &req)?;
    Some((resp.error_code, resp.node_id.0))
}

/// A simple (generation -1) commit of `partitions` of `topic`, each with its metadata.
fn commit_request(group: &str, topic: &str, partitions: &[(i32, String)]) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(group_id(group))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(StrBytes::from_static_str(""))
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.into())))
                .with_partitions(
                    partitions
                        .iter()
                        .map(|(p, metadata)| {
                            offset_commit_request::OffsetCommitRequestPartition::default()
                                .with_partition_index(*p)
                                .with_committed_offset(7)
                                .with_committed_metadata(Some(StrBytes::from_string(
                                    metadata.clone(),
                                )))
                        })
                        .collect(),
                ),
        ])
}

fn partition_codes(resp: &OffsetCommitResponse) -> Vec<(i32, i16)> {
    resp.topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| (p.partition_index, p.error_code))
        .collect()
}

fn group_state(addr: &str, group: &str) -> Option<String> {
    let mut wire = Wire::try_connect(addr)?;
    let req = DescribeGroupsRequest::default().with_groups(vec![group_id(group)]);
    let resp: DescribeGroupsResponse = wire.try_call(ApiKey::DescribeGroups, 5, &req)?;
    let g = resp.groups.first()?;
    (g.error_code == 0).then(|| g.group_state.to_string())
}

fn join_group(addr: &str, group: &str) -> Option<JoinGroupResponse> {
    let mut wire = Wire::try_connect(addr)?;
    let req = JoinGroupRequest::default()
        .with_group_id(group_id(group))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(StrBytes::from_static_str(""))
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
        )
        .with_name(StrBytes::from_static_str("range"))
        .with_metadata(Bytes::from_static(b"\x00\x00\x00\x00\x00\x00\x00\x00"))]);
    wire.try_call(ApiKey::JoinGroup, 3, &req)
}

/// Caught: the group task awaited replication of every `__consumer_offsets` write (up to 5 s),
/// so while one commit could not replicate (both followers frozen with SIGSTOP) every other
/// group's request waited behind it. Now the commit is parked until its HW or its timeout and
/// other groups are answered meanwhile: the DescribeGroups and JoinGroup below are answered
/// while the stuck commit is still unanswered (checked by order, not by a clock), and the
/// stuck commit finally gets the retriable COORDINATOR_NOT_AVAILABLE.
#[test]
fn a_commit_that_cannot_replicate_does_not_block_other_groups() {
    let cluster = Cluster::start(
        3,
        &[
            "offsets.topic.num.partitions=1",
            "group.initial.rebalance.delay.ms=0",
        ],
    );
    wait_until("all brokers live", || {
        (0..3).all(|i| live_broker_ids(&cluster.addr(i)) == Some(vec![1, 2, 3]))
    });
    assert_eq!(create(&cluster.addr(0), "consumed", 1, 3), 0);
    let addr = cluster.addr(0);
    wait_until("a group coordinator", || {
        coordinator(&addr, "stuck").is_some_and(|(code, id)| code == 0 && id > 0)
    });
    let (_, coord) = coordinator(&addr, "stuck").unwrap();
    let coord_index = (coord - 1) as usize;
    let coord_addr = cluster.addr(coord_index);
    wait_until("__consumer_offsets fully in sync", || {
        partition_states(&coord_addr, OFFSETS)
            .is_some_and(|ps| ps.iter().all(|p| p.isr == vec![1, 2, 3]))
    });
    let followers: Vec<usize> = (0..3).filter(|i| *i != coord_index).collect();
    for f in &followers {
        cluster.pause(*f);
    }

    let (tx, rx) = mpsc::channel();
    let stuck_addr = coord_addr.clone();
    std::thread::spawn(move || {
        let mut wire = Wire::connect(&stuck_addr);
        let req = commit_request("stuck", "consumed", &[(0, String::new())]);
        let resp: OffsetCommitResponse = wire.call(ApiKey::OffsetCommit, 8, &req);
        let _ = tx.send(partition_codes(&resp));
    });
    // The commit created the (Empty) group in memory once the group task took it.
    wait_until("the stuck commit to reach the group task", || {
        group_state(&coord_addr, "stuck").as_deref() == Some("Empty")
    });
    let joined = join_group(&coord_addr, "other").expect("JoinGroup answered");
    assert_eq!(joined.error_code, 0, "another group joins meanwhile");
    assert!(
        rx.try_recv().is_err(),
        "the other group was answered while the stuck commit still waits for replication"
    );
    let stuck = rx.recv().expect("the stuck commit is answered");
    assert_eq!(stuck, vec![(0, 15)], "not replicated in time: retriable");
    for f in &followers {
        cluster.resume(*f);
    }
}

/// Caught: a commit whose records exceed `max.message.bytes` of `__consumer_offsets` was
/// answered COORDINATOR_NOT_AVAILABLE (retriable), so the client retried it forever. Now its
/// partitions get INVALID_COMMIT_OFFSET_SIZE (28), metadata over `offset.metadata.max.bytes`
/// gets OFFSET_METADATA_TOO_LARGE (12), and nothing of it is stored.
#[test]
fn an_oversized_offset_commit_gets_a_final_error() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &["offsets.topic.num.partitions=1"]);
    wait_until("a group coordinator", || {
        coordinator(&broker.addr, "big").is_some_and(|(code, _)| code == 0)
    });
    let mut wire = broker.connect();
    // Commits to partitions that do not exist get UNKNOWN_TOPIC_OR_PARTITION (as in Kafka).
    assert_eq!(wire.create_topic("t", 300, 1, &[]).0, 0);
    wait_until("topic t in the metadata", || {
        partition_states(&broker.addr, "t").is_some_and(|ps| ps.len() == 300)
    });
    let too_long = vec![(0, "m".repeat(4097))];
    let resp: OffsetCommitResponse = wire.call(
        ApiKey::OffsetCommit,
        8,
        &commit_request("big", "t", &too_long),
    );
    assert_eq!(partition_codes(&resp), vec![(0, 12)]);
    // 300 partitions of 3900-byte metadata: each valid, together over 1 MiB.
    let many: Vec<(i32, String)> = (0..300).map(|p| (p, "m".repeat(3900))).collect();
    let resp: OffsetCommitResponse =
        wire.call(ApiKey::OffsetCommit, 8, &commit_request("big", "t", &many));
    let codes = partition_codes(&resp);
    assert_eq!(codes.len(), 300);
    assert!(
        codes.iter().all(|(_, c)| *c == 28),
        "INVALID_COMMIT_OFFSET_SIZE for every partition, got {:?}",
        &codes[..3]
    );
    let fetch = OffsetFetchRequest::default()
        .with_group_id(group_id("big"))
        .with_topics(None);
    let fetched: OffsetFetchResponse = wire.call(ApiKey::OffsetFetch, 7, &fetch);
    assert!(fetched.topics.is_empty(), "nothing was stored");
    // A commit that fits is stored as usual.
    let resp: OffsetCommitResponse = wire.call(
        ApiKey::OffsetCommit,
        8,
        &commit_request("big", "t", &many[..10]),
    );
    assert!(partition_codes(&resp).iter().all(|(_, c)| *c == 0));
}

/// Caught: one Produce request with many batches, each from another producer id, was accepted
/// and added one idempotent-producer entry per batch (1.5M entries for one 100 MiB request).
/// Now, as in Kafka (Produce v3+ carries exactly one batch per partition), it is refused with
/// INVALID_RECORD and stores nothing; the single-batch request of a real producer still works.
#[test]
fn one_produce_request_cannot_add_a_producer_per_batch() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("pids", 1, 1, &[]).0, 0);
    let mut many = BytesMut::new();
    for pid in 1..=2_000 {
        many.extend_from_slice(&idempotent_batch(pid, 0, 0, &["x"]));
    }
    let (code, _) = wire.produce("pids", 0, many.freeze(), -1);
    assert_eq!(code, 87, "INVALID_RECORD");
    let (_, hw, records) = wire.fetch("pids", 0, 0, 0);
    assert_eq!((hw, records.len()), (0, 0), "nothing stored");
    let (code, offset) = wire.produce("pids", 0, idempotent_batch(1, 0, 0, &["a", "b"]), -1);
    assert_eq!((code, offset), (0, 0));
}

/// Caught: `__consumer_offsets` was created on first use with its RF clamped to the brokers
/// alive at that moment, so a group used while one broker of three was down got RF 2 for good.
/// Now FindCoordinator answers COORDINATOR_NOT_AVAILABLE (15) until
/// `offsets.topic.replication.factor` (3) brokers are registered and unfenced, and the topic is
/// then created with RF 3.
#[test]
fn consumer_offsets_waits_for_the_replication_factor_in_live_brokers() {
    let mut cluster = Cluster::start(
        3,
        &[
            "broker.session.timeout.ms=2000",
            "broker.heartbeat.interval.ms=300",
            "offsets.topic.num.partitions=3",
        ],
    );
    cluster.kill9(2);
    let addr = cluster.addr(0);
    wait_until("two live brokers", || {
        live_broker_ids(&addr) == Some(vec![1, 2])
    });
    for _ in 0..5 {
        assert_eq!(
            coordinator(&addr, "early").map(|(code, _)| code),
            Some(15),
            "no coordinator with two of three brokers"
        );
    }
    assert!(
        partition_states(&addr, OFFSETS).is_none_or(|ps| ps.is_empty()),
        "__consumer_offsets not created yet"
    );
    cluster.restart(2);
    wait_until("a coordinator once three brokers are live", || {
        coordinator(&addr, "early").is_some_and(|(code, _)| code == 0)
    });
    let parts = partition_states(&addr, OFFSETS).expect("metadata");
    assert_eq!(parts.len(), 3);
    assert!(
        parts.iter().all(|p| p.replicas.len() == 3),
        "RF 3: {parts:?}"
    );
}
