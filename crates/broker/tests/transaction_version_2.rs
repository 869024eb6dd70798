//! Transaction version 2 (KIP-890 part 2) at the request level, through the dispatcher of an
//! in-process broker (its own transaction coordinator): ApiVersions reports the finalized
//! level, Produce v12 and TxnOffsetCommit v5 add their partitions without AddPartitionsToTxn /
//! AddOffsetsToTxn, EndTxn v5 bumps the epoch (and answers it), the markers carry the bumped
//! epoch so a late write of the old epoch is fenced, EndTxn v4 keeps today's semantics, and
//! UpdateFeatures moves `transaction.version` (the request's version still decides).

mod support;

use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use runnel_codes::{INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, NONE, PRODUCER_FENCED};
use support::InProcessBroker;

const LIMIT: Duration = Duration::from_secs(20);
const TOPIC: &str = "tv2";
const TID: &str = "tv2-producer";
const GROUP: &str = "tv2-group";

fn call<R: Decodable>(b: &InProcessBroker, key: ApiKey, version: i16, body: &impl Encodable) -> R {
    b.call(key, version, body, LIMIT)
}

fn str(s: &'static str) -> StrBytes {
    StrBytes::from_static_str(s)
}

/// Calls `f` until it returns `Some`, for at most 20 s (the coordinator loads its partition
/// in the background; markers are written after EndTxn answers).
fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(Instant::now() < deadline, "{what} within {LIMIT:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn setup() -> (InProcessBroker, i64) {
    let b = InProcessBroker::start(&[]);
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(5_000)
        .with_topics(vec![create_topics_request::CreatableTopic::default()
            .with_name(TopicName(str(TOPIC)))
            .with_num_partitions(2)
            .with_replication_factor(1)]);
    let _: CreateTopicsResponse = call(&b, ApiKey::CreateTopics, 5, &create);
    let init = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(str(TID))))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let pid = eventually("InitProducerId", || {
        let find = FindCoordinatorRequest::default()
            .with_key_type(1)
            .with_coordinator_keys(vec![str(TID)]);
        let _: FindCoordinatorResponse = call(&b, ApiKey::FindCoordinator, 4, &find);
        let group = FindCoordinatorRequest::default()
            .with_key_type(0)
            .with_coordinator_keys(vec![str(GROUP)]);
        let g: FindCoordinatorResponse = call(&b, ApiKey::FindCoordinator, 4, &group);
        let r: InitProducerIdResponse = call(&b, ApiKey::InitProducerId, 5, &init);
        (r.error_code == NONE && g.coordinators[0].error_code == NONE).then_some(r.producer_id.0)
    });
    (b, pid)
}

/// A transactional batch of producer `pid` at `epoch`, sequences from `seq`.
fn batch(pid: i64, epoch: i16, seq: i32, value: &'static [u8]) -> Bytes {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let record = Record {
        transactional: true,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: pid,
        producer_epoch: epoch,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: seq,
        timestamp: now,
        key: None,
        value: Some(Bytes::from_static(value)),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, [record].iter(), &options).expect("batch encodes");
    buf.freeze()
}

fn produce(b: &InProcessBroker, version: i16, partition: i32, records: Bytes) -> i16 {
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_transactional_id(Some(TransactionalId(str(TID))))
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(TopicName(str(TOPIC)))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(records)),
            ])]);
    let r: ProduceResponse = call(b, ApiKey::Produce, version, &request);
    r.responses[0].partition_responses[0].error_code
}

fn end_txn(
    b: &InProcessBroker,
    version: i16,
    pid: i64,
    epoch: i16,
    commit: bool,
) -> EndTxnResponse {
    let request = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(str(TID)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    call(b, ApiKey::EndTxn, version, &request)
}

fn offset_commit(b: &InProcessBroker, version: i16, pid: i64, epoch: i16) -> i16 {
    let request = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(str(TID)))
        .with_group_id(GroupId(str(GROUP)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_generation_id(-1)
        .with_member_id(str(""))
        .with_topics(vec![
            txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                .with_name(TopicName(str(TOPIC)))
                .with_partitions(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(1),
                ]),
        ]);
    let r: TxnOffsetCommitResponse = call(b, ApiKey::TxnOffsetCommit, version, &request);
    r.topics[0].partitions[0].error_code
}

/// The last stable offset and the committed values of partition `p` (read_committed).
fn read_committed(b: &InProcessBroker, p: i32) -> (i64, Vec<Bytes>) {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_isolation_level(1)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(TopicName(str(TOPIC)))
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_partition(p)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let r: FetchResponse = call(b, ApiKey::Fetch, 11, &request);
    let data = &r.responses[0].partitions[0];
    let aborted: Vec<i64> = data
        .aborted_transactions
        .iter()
        .flatten()
        .map(|a| a.first_offset)
        .collect();
    let mut bytes = data.records.clone().unwrap_or_default();
    let mut records = Vec::new();
    while bytes.has_remaining() {
        let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut bytes)
            .expect("batches decode");
        records.extend(set.records);
    }
    let values = records
        .into_iter()
        .filter(|r| !r.control && r.offset < data.last_stable_offset)
        .filter(|r| !aborted.contains(&r.offset))
        .filter_map(|r| r.value)
        .collect();
    (data.last_stable_offset, values)
}

#[test]
fn api_versions_report_transaction_version_2_and_end_txn_v5() {
    let b = InProcessBroker::start(&[]);
    let r: ApiVersionsResponse = call(&b, ApiKey::ApiVersions, 4, &ApiVersionsRequest::default());
    let finalized = r
        .finalized_features
        .iter()
        .find(|f| f.name.as_str() == "transaction.version")
        .map(|f| (f.min_version_level, f.max_version_level));
    assert_eq!(finalized, Some((2, 2)));
    let supported = r
        .supported_features
        .iter()
        .find(|f| f.name.as_str() == "transaction.version")
        .map(|f| (f.min_version, f.max_version));
    assert_eq!(supported, Some((0, 2)));
    let end_txn = r
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::EndTxn as i16)
        .map(|k| k.max_version);
    assert_eq!(end_txn, Some(5));
}

#[test]
fn a_version_2_transaction_commits_without_add_requests_and_fences_the_old_epoch() {
    let (b, pid) = setup();
    // Produce v12: the partition joins the transaction without AddPartitionsToTxn.
    assert_eq!(produce(&b, 12, 0, batch(pid, 0, 0, b"one")), NONE);
    assert_eq!(produce(&b, 12, 0, batch(pid, 0, 1, b"two")), NONE);
    // TxnOffsetCommit v5: the offsets partition joins it without AddOffsetsToTxn.
    assert_eq!(offset_commit(&b, 5, pid, 0), NONE);
    let ended = end_txn(&b, 5, pid, 0, true);
    assert_eq!(
        (ended.error_code, ended.producer_id.0, ended.producer_epoch),
        (NONE, pid, 1)
    );
    let values = eventually("the commit marker", || {
        let (lso, values) = read_committed(&b, 0);
        (lso == 3).then_some(values)
    });
    assert_eq!(
        values,
        vec![Bytes::from_static(b"one"), Bytes::from_static(b"two")]
    );
    // A retry of the commit with the old epoch is answered as done, with the new epoch.
    let retry = end_txn(&b, 5, pid, 0, true);
    assert_eq!((retry.error_code, retry.producer_epoch), (NONE, 1));
    // A zombie's late write with epoch 0: the coordinator refuses to add it, and the
    // partition's producer state (which took epoch 1 from the marker) would too.
    assert_eq!(
        produce(&b, 12, 0, batch(pid, 0, 2, b"late")),
        INVALID_PRODUCER_EPOCH
    );
    assert_eq!(
        produce(&b, 12, 1, batch(pid, 0, 0, b"late")),
        INVALID_PRODUCER_EPOCH
    );
    assert_eq!(offset_commit(&b, 5, pid, 0), INVALID_PRODUCER_EPOCH);
    let leader = b.broker.replicas.get(TOPIC, 0).expect("hosted");
    let refused = leader
        .append_as_leader(&batch(pid, 0, 2, b"late"), 1, 1)
        .expect_err("the partition fences epoch 0 itself");
    assert_eq!(refused.code, INVALID_PRODUCER_EPOCH);
    // The next transaction runs at epoch 1 (sequences restart) and is aborted.
    assert_eq!(produce(&b, 12, 0, batch(pid, 1, 0, b"three")), NONE);
    let aborted = end_txn(&b, 5, pid, 1, false);
    assert_eq!((aborted.error_code, aborted.producer_epoch), (NONE, 2));
    let values = eventually("the abort marker", || {
        let (lso, values) = read_committed(&b, 0);
        (lso == 5).then_some(values)
    });
    assert_eq!(
        values,
        vec![Bytes::from_static(b"one"), Bytes::from_static(b"two")]
    );
    assert_eq!(
        end_txn(&b, 5, pid, 0, false).error_code,
        PRODUCER_FENCED,
        "two ends later, epoch 0 is no retry"
    );
}

#[test]
fn version_1_requests_keep_their_semantics_on_a_version_2_cluster() {
    let (b, pid) = setup();
    // Produce v11 still only verifies: a partition no AddPartitionsToTxn added is refused.
    assert_eq!(
        produce(&b, 11, 0, batch(pid, 0, 0, b"x")),
        INVALID_TXN_STATE
    );
    // (Runnel's verification answers INVALID_TXN_STATE where Kafka's says
    // TRANSACTION_ABORTABLE, unchanged here.)
    assert_eq!(offset_commit(&b, 4, pid, 0), INVALID_TXN_STATE);
    // A v12 add, then EndTxn v4: the epoch stays and the answer carries no identity.
    assert_eq!(produce(&b, 12, 0, batch(pid, 0, 0, b"x")), NONE);
    let ended = end_txn(&b, 4, pid, 0, true);
    assert_eq!(ended.error_code, NONE);
    eventually("the commit marker", || {
        (read_committed(&b, 0).0 == 2).then_some(())
    });
    // The same epoch opens the next transaction (sequence 1 follows on).
    assert_eq!(produce(&b, 12, 0, batch(pid, 0, 1, b"y")), NONE);
    // EndTxn v5 ends that transaction with a bump.
    let ended = end_txn(&b, 5, pid, 0, false);
    assert_eq!((ended.error_code, ended.producer_epoch), (NONE, 1));
}

fn update_tv(b: &InProcessBroker, level: i16, upgrade_type: i8, validate_only: bool) -> i16 {
    let request = UpdateFeaturesRequest::default()
        .with_timeout_ms(5_000)
        .with_validate_only(validate_only)
        .with_feature_updates(vec![update_features_request::FeatureUpdateKey::default()
            .with_feature(str("transaction.version"))
            .with_max_version_level(level)
            .with_upgrade_type(upgrade_type)]);
    let r: UpdateFeaturesResponse = call(b, ApiKey::UpdateFeatures, 1, &request);
    r.results[0].error_code
}

fn finalized_tv(b: &InProcessBroker) -> i16 {
    let r: ApiVersionsResponse = call(b, ApiKey::ApiVersions, 4, &ApiVersionsRequest::default());
    r.finalized_features
        .iter()
        .find(|f| f.name.as_str() == "transaction.version")
        .map_or(0, |f| f.max_version_level)
}

#[test]
fn update_features_moves_transaction_version_and_end_txn_v5_bumps_at_any_level() {
    let (b, pid) = setup();
    const UPGRADE: i8 = 1;
    const SAFE_DOWNGRADE: i8 = 2;
    assert_eq!(
        update_tv(&b, 0, UPGRADE, false),
        runnel_codes::INVALID_UPDATE_VERSION,
        "a downgrade needs a downgrade type"
    );
    assert_eq!(update_tv(&b, 0, SAFE_DOWNGRADE, true), NONE);
    assert_eq!(finalized_tv(&b), 2, "validate_only changes nothing");
    assert_eq!(update_tv(&b, 0, SAFE_DOWNGRADE, false), NONE);
    eventually("transaction.version 0", || {
        (finalized_tv(&b) == 0).then_some(())
    });
    // The request's version decides, not the cluster's level (Kafka's
    // `transactionVersionForEndTxn`): Produce v12 adds, EndTxn v5 bumps.
    assert_eq!(produce(&b, 12, 0, batch(pid, 0, 0, b"x")), NONE);
    let ended = end_txn(&b, 5, pid, 0, true);
    assert_eq!((ended.error_code, ended.producer_epoch), (NONE, 1));
    assert_eq!(update_tv(&b, 2, UPGRADE, false), NONE);
    eventually("transaction.version 2", || {
        (finalized_tv(&b) == 2).then_some(())
    });
}
