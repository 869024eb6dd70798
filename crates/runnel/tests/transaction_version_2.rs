//! A full transaction version 2 (KIP-890 part 2) run against real broker processes, 1 and 3
//! nodes, as a Kafka 4 client drives it (raw requests: no client here speaks version 2):
//! Produce v12 without AddPartitionsToTxn, TxnOffsetCommit v5 without AddOffsetsToTxn, EndTxn
//! v5 commits and aborts that bump the epoch, a read_committed fetch that sees exactly the
//! committed records, the committed offset, and a zombie's late write with the old epoch
//! fenced.

mod support;

use bytes::{Buf, Bytes};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;
use runnel_codes::{
    CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
    INVALID_PRODUCER_EPOCH, NONE, NOT_COORDINATOR, NOT_ENOUGH_REPLICAS, NOT_LEADER_OR_FOLLOWER,
    TOPIC_ALREADY_EXISTS,
};
use support::cluster::{leader_and_isr, Cluster};
use support::{transactional_batch, wait_for, Wire};

const TOPIC: &str = "tv2";
const TID: &str = "tv2-process";
const GROUP: &str = "tv2-process-group";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn call<Req, Resp>(addr: &str, key: ApiKey, version: i16, req: &Req) -> Option<Resp>
where
    Req: kafka_protocol::protocol::Encodable + kafka_protocol::protocol::HeaderVersion,
    Resp: kafka_protocol::protocol::Decodable,
{
    Wire::try_connect(addr)?.try_call(key, version, req)
}

/// The address of the coordinator of `key` (`key_type` 0: group, 1: transaction).
fn coordinator(any: &str, key_type: i8, key: &str) -> String {
    wait_for("a coordinator", || {
        let req = FindCoordinatorRequest::default()
            .with_key_type(key_type)
            .with_coordinator_keys(vec![s(key)]);
        let r: FindCoordinatorResponse = call(any, ApiKey::FindCoordinator, 4, &req)?;
        let c = r.coordinators.first()?;
        (c.error_code == NONE).then(|| format!("{}:{}", c.host, c.port))
    })
}

/// One Produce v12 of a transactional batch: its error code.
fn produce(leader: &str, records: Bytes) -> Option<i16> {
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_transactional_id(Some(TransactionalId(s(TID))))
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(TopicName(s(TOPIC)))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(records)),
            ])]);
    let r: ProduceResponse = call(leader, ApiKey::Produce, 12, &req)?;
    Some(r.responses.first()?.partition_responses.first()?.error_code)
}

/// Produce v12 until it is not refused with a retriable error (a coordinator still loading,
/// the previous transaction's markers still being written).
fn produce_ok(leader: &str, pid: i64, epoch: i16, seq: i32, value: &str) {
    let code = wait_for("a produce answer", || {
        let retriable = [
            NOT_LEADER_OR_FOLLOWER,
            COORDINATOR_NOT_AVAILABLE,
            NOT_COORDINATOR,
            NOT_ENOUGH_REPLICAS,
            CONCURRENT_TRANSACTIONS,
        ];
        produce(leader, transactional_batch(pid, epoch, seq, &[value]))
            .filter(|c| !retriable.contains(c))
    });
    assert_eq!(code, NONE, "produce {value}");
}

/// EndTxn v5 until not CONCURRENT_TRANSACTIONS: (error, producer id, epoch).
fn end_txn(coordinator: &str, pid: i64, epoch: i16, commit: bool) -> (i16, i64, i16) {
    wait_for("an EndTxn answer", || {
        let req = EndTxnRequest::default()
            .with_transactional_id(TransactionalId(s(TID)))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_committed(commit);
        let r: EndTxnResponse = call(coordinator, ApiKey::EndTxn, 5, &req)?;
        (r.error_code != CONCURRENT_TRANSACTIONS).then_some((
            r.error_code,
            r.producer_id.0,
            r.producer_epoch,
        ))
    })
}

fn txn_offset_commit(group_coordinator: &str, pid: i64, epoch: i16, offset: i64) -> i16 {
    wait_for("a TxnOffsetCommit answer", || {
        let req = TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(s(TID)))
            .with_group_id(GroupId(s(GROUP)))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_generation_id(-1)
            .with_member_id(s(""))
            .with_topics(vec![
                txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                    .with_name(TopicName(s(TOPIC)))
                    .with_partitions(vec![
                        txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(offset),
                    ]),
            ]);
        let r: TxnOffsetCommitResponse = call(group_coordinator, ApiKey::TxnOffsetCommit, 5, &req)?;
        let code = r.topics.first()?.partitions.first()?.error_code;
        let retriable = [
            COORDINATOR_LOAD_IN_PROGRESS,
            COORDINATOR_NOT_AVAILABLE,
            NOT_COORDINATOR,
            CONCURRENT_TRANSACTIONS,
        ];
        (!retriable.contains(&code)).then_some(code)
    })
}

/// The last stable offset and the committed values (read_committed, aborted ones dropped).
fn read_committed(leader: &str) -> Option<(i64, Vec<String>)> {
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_isolation_level(1)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(TopicName(s(TOPIC)))
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let r: FetchResponse = call(leader, ApiKey::Fetch, 11, &req)?;
    let data = r.responses.first()?.partitions.first()?;
    let aborted: Vec<(i64, i64)> = data
        .aborted_transactions
        .iter()
        .flatten()
        .map(|a| (a.producer_id.0, a.first_offset))
        .collect();
    let mut bytes = data.records.clone().unwrap_or_default();
    let mut records = Vec::new();
    while bytes.has_remaining() {
        records.extend(RecordBatchDecoder::decode(&mut bytes).ok()?.records);
    }
    // An aborted transaction's records run from its first offset to its marker.
    let mut values = Vec::new();
    let mut skipping = false;
    for r in records {
        if r.control {
            skipping = false;
            continue;
        }
        if aborted
            .iter()
            .any(|(p, o)| *p == r.producer_id && *o == r.offset)
        {
            skipping = true;
        }
        if !skipping && r.offset < data.last_stable_offset {
            values.push(String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into());
        }
    }
    Some((data.last_stable_offset, values))
}

fn committed_offset(group_coordinator: &str) -> Option<i64> {
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_require_stable(true)
        .with_topics(Some(vec![
            offset_fetch_request::OffsetFetchRequestTopic::default()
                .with_name(TopicName(s(TOPIC)))
                .with_partition_indexes(vec![0]),
        ]));
    let r: OffsetFetchResponse = call(group_coordinator, ApiKey::OffsetFetch, 7, &req)?;
    let p = r.topics.first()?.partitions.first()?;
    (p.error_code == NONE).then_some(p.committed_offset)
}

fn full_transaction_run(nodes: i32) {
    let cluster = Cluster::start(nodes, &[]);
    let any = cluster.addr(0);
    let rf = i16::try_from(nodes).expect("small");
    wait_for("the topic", || {
        let mut wire = Wire::try_connect(&any)?;
        let (code, _) = wire.create_topic(TOPIC, 1, rf, &[]);
        [NONE, TOPIC_ALREADY_EXISTS].contains(&code).then_some(())
    });
    let leader = wait_for("a leader", || {
        let (leader, isr) = leader_and_isr(&any, TOPIC)?;
        (leader >= 0 && isr.len() == cluster.nodes.len()).then_some(leader)
    });
    let leader = cluster.addr(cluster.index_of(leader));
    let txn = coordinator(&any, 1, TID);
    let group = coordinator(&any, 0, GROUP);
    let (pid, epoch) = wait_for("InitProducerId", || {
        let req = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(s(TID))))
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let r: InitProducerIdResponse = call(&txn, ApiKey::InitProducerId, 5, &req)?;
        (r.error_code == NONE).then_some((r.producer_id.0, r.producer_epoch))
    });
    assert_eq!(epoch, 0);

    // Committed: two records and the consumed offset, no AddPartitionsToTxn/AddOffsetsToTxn.
    produce_ok(&leader, pid, 0, 0, "one");
    produce_ok(&leader, pid, 0, 1, "two");
    assert_eq!(txn_offset_commit(&group, pid, 0, 2), NONE);
    assert_eq!(end_txn(&txn, pid, 0, true), (NONE, pid, 1));
    // Aborted, at the bumped epoch (sequences restart).
    produce_ok(&leader, pid, 1, 0, "aborted");
    assert_eq!(txn_offset_commit(&group, pid, 1, 3), NONE);
    assert_eq!(end_txn(&txn, pid, 1, false), (NONE, pid, 2));
    // Committed again.
    produce_ok(&leader, pid, 2, 0, "three");
    assert_eq!(end_txn(&txn, pid, 2, true), (NONE, pid, 3));

    // A zombie of the first transaction writes late with epoch 0: fenced.
    let late = wait_for("the late write's answer", || {
        produce(&leader, transactional_batch(pid, 0, 2, &["zombie"]))
            .filter(|c| ![NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS].contains(c))
    });
    assert_eq!(late, INVALID_PRODUCER_EPOCH);

    // Three markers behind six data records: the LSO covers all of them at offset 7.
    let values = wait_for("every marker", || {
        let (lso, values) = read_committed(&leader)?;
        (lso == 7).then_some(values)
    });
    assert_eq!(values, vec!["one", "two", "three"]);
    assert_eq!(
        wait_for("the committed offset", || committed_offset(&group)),
        2,
        "the aborted transaction's offset was dropped"
    );
}

#[test]
fn a_version_2_transaction_on_one_node() {
    full_transaction_run(1);
}

#[test]
fn a_version_2_transaction_on_three_nodes() {
    full_transaction_run(3);
}
