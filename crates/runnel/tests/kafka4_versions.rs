//! Issue 12: the Kafka 4.x API versions added last, each on the wire against the real binary
//! (request encoded at the new version, response decoded at it): ListTransactions v2
//! (KIP-1152's id pattern), OffsetCommit / OffsetFetch v10 (topic ids), InitProducerId v6
//! (KIP-939, answered as Kafka with two-phase commit off) and Fetch v18 (KIP-1166).

mod support;

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use runnel_codes::UNKNOWN_TOPIC_ID;
use support::cluster::partition_states;
use support::*;
use uuid::Uuid;

const SINGLE_NODE: &[&str] = &[
    "offsets.topic.num.partitions=1",
    "offsets.topic.replication.factor=1",
    "transaction.state.log.num.partitions=1",
    "transaction.state.log.replication.factor=1",
    "transaction.state.log.min.isr=1",
];

fn init_request(id: &str) -> InitProducerIdRequest {
    InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(StrBytes::from_string(id.into()))))
        .with_transaction_timeout_ms(60_000)
}

/// InitProducerId at `version`, retried while the coordinator is coming up (FindCoordinator
/// first, as a client does: it creates `__transaction_state`).
fn init(addr: &str, request: &InitProducerIdRequest, version: i16) -> InitProducerIdResponse {
    const RETRIABLE: [i16; 3] = [14, 15, 16];
    let id = request.transactional_id.clone().unwrap_or_default();
    let find = FindCoordinatorRequest::default()
        .with_key_type(1)
        .with_key(id.0);
    let mut answer = None;
    wait_until("a transaction coordinator answers", || {
        let resp = Wire::try_connect(addr).and_then(|mut w| {
            w.try_call::<_, FindCoordinatorResponse>(ApiKey::FindCoordinator, 3, &find)?;
            w.try_call::<_, InitProducerIdResponse>(ApiKey::InitProducerId, version, request)
        });
        match resp {
            Some(r) if !RETRIABLE.contains(&r.error_code) => {
                answer = Some(r);
                true
            }
            _ => false,
        }
    });
    answer.expect("answered")
}

fn list(wire: &mut Wire, version: i16, pattern: Option<&str>) -> (i16, Vec<String>) {
    let req = ListTransactionsRequest::default()
        .with_transactional_id_pattern(pattern.map(|p| StrBytes::from_string(p.into())));
    let resp: ListTransactionsResponse = wire.call(ApiKey::ListTransactions, version, &req);
    let mut ids: Vec<String> = resp
        .transaction_states
        .iter()
        .map(|t| t.transactional_id.0.to_string())
        .collect();
    ids.sort();
    (resp.error_code, ids)
}

#[test]
fn list_transactions_v2_filters_by_a_whole_id_pattern() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), SINGLE_NODE);
    for id in ["orders-a", "orders-b", "billing-a"] {
        assert_eq!(
            init(&broker.addr, &init_request(id), 5).error_code,
            0,
            "{id}"
        );
    }
    let mut wire = broker.connect();
    let all = vec!["billing-a", "orders-a", "orders-b"];
    assert_eq!(
        list(&mut wire, 2, Some("orders-.*")),
        (0, vec!["orders-a".into(), "orders-b".into()])
    );
    assert_eq!(
        list(&mut wire, 2, Some(".*-a")),
        (0, vec!["billing-a".into(), "orders-a".into()])
    );
    // The whole id must match (Java's matches(), not find()).
    assert_eq!(list(&mut wire, 2, Some("orders")), (0, vec![]));
    // Empty and null patterns filter nothing.
    let every = |(code, ids): (i16, Vec<String>)| code == 0 && ids == all;
    assert!(every(list(&mut wire, 2, Some(""))));
    assert!(every(list(&mut wire, 2, None)));
    // A pattern that does not compile: INVALID_REGULAR_EXPRESSION (128), nothing listed.
    assert_eq!(list(&mut wire, 2, Some("orders-(unclosed")), (128, vec![]));
    // v1 has no pattern field on the wire.
    assert!(every(list(&mut wire, 1, None)));
}

#[test]
fn init_producer_id_v6_refuses_two_phase_commit_as_kafka_with_it_off() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), SINGLE_NODE);
    let plain = init(&broker.addr, &init_request("tx-v6"), 6);
    assert_eq!(plain.error_code, 0);
    assert!(plain.producer_id.0 >= 0);
    assert_eq!(
        (
            plain.ongoing_txn_producer_id.0,
            plain.ongoing_txn_producer_epoch
        ),
        (-1, -1),
        "no prepared transaction to report"
    );
    let two_pc = init(
        &broker.addr,
        &init_request("tx-v6").with_enable_2_pc(true),
        6,
    );
    assert_eq!(
        two_pc.error_code, 53,
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    );
    assert_eq!(two_pc.producer_id.0, -1);
    let keep = init(
        &broker.addr,
        &init_request("tx-v6").with_keep_prepared_txn(true),
        6,
    );
    assert_eq!(keep.error_code, 35, "UNSUPPORTED_VERSION");
}

fn topic_id(addr: &str, topic: &str) -> Uuid {
    let mut id = Uuid::nil();
    wait_until("the topic has an id", || {
        let req = MetadataRequest::default()
            .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
            )
            .with_name(Some(TopicName(StrBytes::from_string(topic.into()))))]));
        let resp = Wire::try_connect(addr)
            .and_then(|mut w| w.try_call::<_, MetadataResponse>(ApiKey::Metadata, 12, &req));
        if let Some(t) = resp.as_ref().and_then(|r| r.topics.first()) {
            id = t.topic_id;
        }
        !id.is_nil()
    });
    id
}

fn commit_v10(wire: &mut Wire, ids: &[Uuid]) -> Vec<(Uuid, i32, i16)> {
    let topics = ids
        .iter()
        .map(|id| {
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_topic_id(*id)
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(42),
                ])
        })
        .collect();
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g10")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(topics);
    let resp: OffsetCommitResponse = wire.call(ApiKey::OffsetCommit, 10, &req);
    let mut out: Vec<(Uuid, i32, i16)> = resp
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.topic_id, p.partition_index, p.error_code))
        })
        .collect();
    out.sort();
    out
}

fn fetch_v10(wire: &mut Wire, ids: Option<&[Uuid]>) -> Vec<(Uuid, i32, i64, i16)> {
    let topics = ids.map(|ids| {
        ids.iter()
            .map(|id| {
                offset_fetch_request::OffsetFetchRequestTopics::default()
                    .with_topic_id(*id)
                    .with_partition_indexes(vec![0])
            })
            .collect()
    });
    let req = OffsetFetchRequest::default().with_groups(vec![
        offset_fetch_request::OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g10")))
            .with_topics(topics),
    ]);
    let resp: OffsetFetchResponse = wire.call(ApiKey::OffsetFetch, 10, &req);
    assert_eq!(resp.groups.len(), 1);
    assert_eq!(resp.groups[0].error_code, 0);
    let mut out: Vec<(Uuid, i32, i64, i16)> = resp.groups[0]
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                (
                    t.topic_id,
                    p.partition_index,
                    p.committed_offset,
                    p.error_code,
                )
            })
        })
        .collect();
    out.sort();
    out
}

#[test]
fn offset_commit_and_fetch_v10_name_topics_by_id() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), SINGLE_NODE);
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("by-id", 1, 1, &[]).0, 0);
    wait_until("topic by-id in the metadata", || {
        partition_states(&broker.addr, "by-id").is_some_and(|ps| ps.len() == 1)
    });
    let id = topic_id(&broker.addr, "by-id");
    let unknown = Uuid::from_u128(0xdead_beef);
    let mut codes = Vec::new();
    let find = FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g10"));
    wait_until("the group coordinator takes the commit", || {
        let _: FindCoordinatorResponse = wire.call(ApiKey::FindCoordinator, 3, &find);
        codes = commit_v10(&mut wire, &[id, unknown, Uuid::nil()]);
        codes.iter().any(|c| c.0 == id && c.2 == 0)
    });
    let mut want = vec![
        (Uuid::nil(), 0, UNKNOWN_TOPIC_ID),
        (id, 0, 0),
        (unknown, 0, UNKNOWN_TOPIC_ID),
    ];
    want.sort();
    assert_eq!(codes, want, "answered by id; unknown and zero ids refused");
    let mut want = vec![(id, 0, 42, 0), (unknown, 0, -1, UNKNOWN_TOPIC_ID)];
    want.sort();
    assert_eq!(fetch_v10(&mut wire, Some(&[id, unknown])), want);
    assert_eq!(
        fetch_v10(&mut wire, None),
        vec![(id, 0, 42, 0)],
        "all topics, each named by its id"
    );
}

#[test]
fn fetch_v18_reads_as_v17() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), SINGLE_NODE);
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("f18", 1, 1, &[]).0, 0);
    wait_until("the partition led", || {
        support::cluster::leader_and_isr(&broker.addr, "f18").is_some_and(|(l, _)| l >= 0)
    });
    let produced = batch(
        &[(None, "x"), (None, "y")],
        kafka_protocol::records::Compression::None,
    );
    assert_eq!(wire.produce("f18", 0, produced, -1), (0, 0));
    let id = topic_id(&broker.addr, "f18");
    // A consumer's v18 fetch: the replica state (with KIP-1166's high-watermark) is a
    // follower's; a consumer leaves it at its defaults.
    let req = FetchRequest::default()
        .with_max_wait_ms(100)
        .with_min_bytes(1)
        .with_max_bytes(1024 * 1024)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic_id(id)
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_current_leader_epoch(-1)
                .with_partition_max_bytes(1024 * 1024)])]);
    let resp: FetchResponse = wire.call(ApiKey::Fetch, 18, &req);
    let p = &resp.responses[0].partitions[0];
    assert_eq!(
        (resp.responses[0].topic_id, p.error_code, p.high_watermark),
        (id, 0, 2)
    );
    let mut bytes = p.records.clone().expect("records");
    let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut bytes).expect("a batch");
    assert_eq!(values(&set.records), vec!["x", "y"]);
}
