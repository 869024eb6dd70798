//! Issue 16 / issue 12: OffsetCommit to a topic or partition that does not exist answers
//! UNKNOWN_TOPIC_OR_PARTITION for that partition (Kafka checks the metadata before asking the
//! group coordinator) and stores nothing for it, while the request's valid partitions are
//! committed as usual. Over TCP against the real binary.

mod support;

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use support::cluster::partition_states;
use support::*;

use runnel_codes::UNKNOWN_TOPIC_OR_PARTITION;

fn topic(name: &str, partitions: &[i32]) -> offset_commit_request::OffsetCommitRequestTopic {
    offset_commit_request::OffsetCommitRequestTopic::default()
        .with_name(TopicName(StrBytes::from_string(name.into())))
        .with_partitions(
            partitions
                .iter()
                .map(|p| {
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(*p)
                        .with_committed_offset(5)
                })
                .collect(),
        )
}

fn commit(
    wire: &mut Wire,
    version: i16,
    topics: Vec<offset_commit_request::OffsetCommitRequestTopic>,
) -> Vec<(String, i32, i16)> {
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g-unknown")))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(StrBytes::from_static_str(""))
        .with_topics(topics);
    let resp: OffsetCommitResponse = wire.call(ApiKey::OffsetCommit, version, &req);
    resp.topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.0.to_string(), p.partition_index, p.error_code))
        })
        .collect()
}

fn committed(wire: &mut Wire) -> Vec<(String, i32, i64)> {
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g-unknown")))
        .with_topics(None);
    let resp: OffsetFetchResponse = wire.call(ApiKey::OffsetFetch, 7, &req);
    let mut out: Vec<(String, i32, i64)> = resp
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.0.to_string(), p.partition_index, p.committed_offset))
        })
        .collect();
    out.sort();
    out
}

/// Caught: the coordinator stored offsets for any name and index and answered NONE, so a
/// client committing for a deleted topic (or a typo) never heard of it.
#[test]
fn commits_to_unknown_topics_and_partitions_fail_per_partition() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &["offsets.topic.num.partitions=1"]);
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("known", 2, 1, &[]).0, 0);
    wait_until("topic known in the metadata", || {
        partition_states(&broker.addr, "known").is_some_and(|ps| ps.len() == 2)
    });
    wait_until("a group coordinator", || {
        let req =
            FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g-unknown"));
        Wire::try_connect(&broker.addr)
            .and_then(|mut w| {
                w.try_call::<_, FindCoordinatorResponse>(ApiKey::FindCoordinator, 3, &req)
            })
            .is_some_and(|r| r.error_code == 0)
    });
    for version in [2, 8] {
        let codes = commit(
            &mut wire,
            version,
            vec![topic("known", &[0, 1, 2]), topic("missing", &[0])],
        );
        assert_eq!(
            codes,
            vec![
                ("known".to_string(), 0, 0),
                ("known".to_string(), 1, 0),
                ("known".to_string(), 2, UNKNOWN_TOPIC_OR_PARTITION),
                ("missing".to_string(), 0, UNKNOWN_TOPIC_OR_PARTITION),
            ],
            "OffsetCommit v{version}"
        );
    }
    // A request with nothing valid is answered without touching the group.
    let codes = commit(&mut wire, 8, vec![topic("missing", &[0, 1])]);
    assert_eq!(
        codes,
        vec![
            ("missing".to_string(), 0, UNKNOWN_TOPIC_OR_PARTITION),
            ("missing".to_string(), 1, UNKNOWN_TOPIC_OR_PARTITION),
        ]
    );
    assert_eq!(
        committed(&mut wire),
        vec![("known".to_string(), 0, 5), ("known".to_string(), 1, 5)],
        "only the existing partitions were stored"
    );
}

/// TxnOffsetCommit too (issue 16): partitions the metadata does not have are answered
/// UNKNOWN_TOPIC_OR_PARTITION before the transaction is even looked at, at every version.
#[test]
fn transactional_commits_to_unknown_partitions_fail_per_partition() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &["offsets.topic.num.partitions=1"]);
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("known", 1, 1, &[]).0, 0);
    wait_until("topic known in the metadata", || {
        partition_states(&broker.addr, "known").is_some_and(|ps| ps.len() == 1)
    });
    let topic = |name: &str, partitions: &[i32]| {
        txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.into())))
            .with_partitions(
                partitions
                    .iter()
                    .map(|p| {
                        txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                            .with_partition_index(*p)
                            .with_committed_offset(5)
                    })
                    .collect(),
            )
    };
    for version in 0..=5 {
        let req = TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(StrBytes::from_static_str("t-unknown")))
            .with_group_id(GroupId(StrBytes::from_static_str("g-unknown")))
            .with_producer_id(ProducerId(7))
            .with_producer_epoch(0)
            .with_generation_id(-1)
            .with_member_id(StrBytes::from_static_str(""))
            .with_topics(vec![topic("known", &[1]), topic("missing", &[0])]);
        let resp: TxnOffsetCommitResponse = wire.call(ApiKey::TxnOffsetCommit, version, &req);
        let codes: Vec<(String, i32, i16)> = resp
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |p| (t.name.0.to_string(), p.partition_index, p.error_code))
            })
            .collect();
        assert_eq!(
            codes,
            vec![
                ("known".to_string(), 1, UNKNOWN_TOPIC_OR_PARTITION),
                ("missing".to_string(), 0, UNKNOWN_TOPIC_OR_PARTITION),
            ],
            "TxnOffsetCommit v{version}"
        );
    }
    assert!(committed(&mut wire).is_empty(), "nothing was stored");
}
