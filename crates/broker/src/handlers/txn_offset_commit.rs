//! TxnOffsetCommit (API 28, v0-v5): a transactional producer commits a consumer group's
//! offsets inside its transaction (`sendOffsetsToTransaction`). As in Kafka's `KafkaApis`:
//! partitions the image does not have get UNKNOWN_TOPIC_OR_PARTITION (topics the principal
//! may not read TOPIC_AUTHORIZATION_FAILED, decided by the caller) and only the others go to
//! the group coordinator. Before writing, the transaction must be ongoing with the group's
//! `__consumer_offsets` partition (KIP-890 part 1 verification, as for a transactional
//! produce; skipped while the producer's transaction is already open on that partition).
//! From v5 (KIP-890 part 2: a transaction version 2 client sends no AddOffsetsToTxn) the
//! partition is added to the transaction instead, as Kafka's group coordinator does with
//! `TransactionSupportedOperation.addPartition` for versions above 4.
//! Translation only: validation and pending offsets in `runnel-group`
//! (`GroupCoordinator::begin_txn_offset_commit`), writing in `group_manager`.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use runnel_group::{partition_for_group, CommitOffset};
use runnel_metadata::MetadataImage;

use crate::context::Broker;
use crate::errors::code;
use crate::group_manager::{COORDINATOR_NOT_AVAILABLE, INVALID_GROUP_ID, OFFSETS_TOPIC};

use crate::errors::code::TRANSACTION_ABORTABLE;

/// `refused_topic(name)`: the code for a topic the caller's authorization refuses, if any.
pub async fn handle(
    broker: &Arc<Broker>,
    request: TxnOffsetCommitRequest,
    version: i16,
    refused_topic: impl Fn(&str) -> Option<i16>,
) -> TxnOffsetCommitResponse {
    let early = early_codes(&broker.image(), &request, refused_topic);
    let offsets = to_commit(&request, &early, version);
    let codes = if offsets.is_empty() {
        BTreeMap::new()
    } else {
        commit(broker, &request, offsets, version).await
    };
    let topics = request
        .topics
        .iter()
        .zip(early)
        .map(|(t, early)| {
            let partitions = t
                .partitions
                .iter()
                .zip(early)
                .map(|(p, early)| {
                    let key = (t.name.0.to_string(), p.partition_index);
                    let error = early
                        .or_else(|| codes.get(&key).copied())
                        .unwrap_or(code::UNKNOWN_SERVER_ERROR);
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(error)
                })
                .collect();
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}

/// Per partition of the request, in order: a code decided here (refused topic, unknown
/// partition), or None (to commit).
fn early_codes(
    image: &MetadataImage,
    request: &TxnOffsetCommitRequest,
    refused_topic: impl Fn(&str) -> Option<i16>,
) -> Vec<Vec<Option<i16>>> {
    request
        .topics
        .iter()
        .map(|t| {
            let name = t.name.0.as_str();
            let refused = refused_topic(name);
            t.partitions
                .iter()
                .map(|p| {
                    refused.or_else(|| {
                        image
                            .partition(name, p.partition_index)
                            .is_none()
                            .then_some(code::UNKNOWN_TOPIC_OR_PARTITION)
                    })
                })
                .collect()
        })
        .collect()
}

/// The offsets of the partitions without an early code.
fn to_commit(
    request: &TxnOffsetCommitRequest,
    early: &[Vec<Option<i16>>],
    version: i16,
) -> Vec<CommitOffset> {
    request
        .topics
        .iter()
        .zip(early)
        .flat_map(|(t, codes)| {
            t.partitions
                .iter()
                .zip(codes)
                .filter(|(_, c)| c.is_none())
                .map(|(p, _)| CommitOffset {
                    topic: t.name.0.to_string(),
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: if version >= 2 {
                        p.committed_leader_epoch
                    } else {
                        -1
                    },
                    metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
                })
        })
        .collect()
}

/// Verifies the transaction with the group's partition, then hands the offsets to the group
/// coordinator: each partition's code (as this version knows it).
async fn commit(
    broker: &Arc<Broker>,
    request: &TxnOffsetCommitRequest,
    offsets: Vec<CommitOffset>,
    version: i16,
) -> BTreeMap<(String, i32), i16> {
    let group_id = request.group_id.0.to_string();
    let answered = match verify(
        broker,
        request,
        &group_id,
        version >= FIRST_ADD_PARTITION_VERSION,
    )
    .await
    .err()
    {
        Some(code) => offsets
            .iter()
            .map(|o| (o.topic.clone(), o.partition, code))
            .collect(),
        None => {
            let req = runnel_group::TxnOffsetCommitRequest {
                group_id,
                producer_id: request.producer_id.0,
                producer_epoch: request.producer_epoch,
                generation_id: request.generation_id,
                member_id: request.member_id.to_string(),
                group_instance_id: request.group_instance_id.as_ref().map(|s| s.to_string()),
                offsets,
            };
            broker.groups.txn_commit(req).await
        }
    };
    answered
        .into_iter()
        .map(|(t, p, c)| ((t, p), for_version(c, version)))
        .collect()
}

/// TRANSACTION_ABORTABLE exists from v4; older clients get INVALID_TXN_STATE.
fn for_version(error: i16, version: i16) -> i16 {
    if error == TRANSACTION_ABORTABLE && version < 4 {
        code::INVALID_TXN_STATE
    } else {
        error
    }
}

/// The first TxnOffsetCommit version that adds the offsets partition implicitly.
const FIRST_ADD_PARTITION_VERSION: i16 = 5;

/// The transaction coordinator confirms that the producer's transaction is ongoing with the
/// group's `__consumer_offsets` partition (`add`: adds the partition to it), unless it already
/// is open there. Errors as Kafka's group coordinator answers them: the retriable ones
/// COORDINATOR_NOT_AVAILABLE (CONCURRENT_TRANSACTIONS itself after an add), a fenced
/// producer INVALID_PRODUCER_EPOCH, TRANSACTION_ABORTABLE, INVALID_TXN_STATE otherwise.
async fn verify(
    broker: &Arc<Broker>,
    request: &TxnOffsetCommitRequest,
    group_id: &str,
    add: bool,
) -> Result<(), i16> {
    if group_id.is_empty() {
        return Err(INVALID_GROUP_ID);
    }
    let image = broker.image();
    let count = image
        .topic(OFFSETS_TOPIC)
        .map_or(0, |t| i32::try_from(t.partitions.len()).unwrap_or(0));
    if count == 0 {
        return Err(COORDINATOR_NOT_AVAILABLE);
    }
    let partition = partition_for_group(group_id, count);
    let producer_id = request.producer_id.0;
    let open = broker
        .replicas
        .get(OFFSETS_TOPIC, partition)
        .is_some_and(|p| p.in_transaction_at(producer_id, request.producer_epoch));
    if open {
        return Ok(());
    }
    let v = crate::txn_verify::Verify {
        transactional_id: request.transactional_id.0.to_string(),
        producer_id,
        producer_epoch: request.producer_epoch,
        partitions: BTreeMap::from([(OFFSETS_TOPIC.to_string(), vec![partition])]),
        add,
    };
    let answers = crate::txn_verify::verify(&image, &v).await;
    let verification = answers
        .get(&(OFFSETS_TOPIC.to_string(), partition))
        .copied()
        .unwrap_or(code::INVALID_TXN_STATE);
    if verification == code::NONE {
        return Ok(());
    }
    let error = match crate::txn_verify::produce_error(verification, add) {
        code::NOT_ENOUGH_REPLICAS => COORDINATOR_NOT_AVAILABLE,
        // Before the translation to INVALID_TXN_STATE that older produce clients need.
        _ if verification == TRANSACTION_ABORTABLE => TRANSACTION_ABORTABLE,
        other => other,
    };
    Err(error)
}
