//! Authorization of the transaction APIs, as Kafka's `KafkaApis` checks them, as a filter in
//! front of their unchanged handlers:
//!
//! * AddPartitionsToTxn v0-v3: WRITE on the transactional id (every partition
//!   TRANSACTIONAL_ID_AUTHORIZATION_FAILED), WRITE on each topic (the refused ones
//!   TOPIC_AUTHORIZATION_FAILED, the rest OPERATION_NOT_ATTEMPTED); v4+ (a broker verifying):
//!   CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED);
//! * AddOffsetsToTxn: WRITE on the transactional id, READ on the group
//!   (GROUP_AUTHORIZATION_FAILED); EndTxn: WRITE on the transactional id;
//! * TxnOffsetCommit: WRITE on the transactional id (every partition
//!   TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group (GROUP_AUTHORIZATION_FAILED),
//!   READ on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions);
//! * DescribeProducers: READ on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions);
//! * WriteTxnMarkers: CLUSTER_ACTION on the cluster (every partition
//!   CLUSTER_AUTHORIZATION_FAILED): only brokers write markers;
//! * DescribeTransactions: DESCRIBE on each transactional id; ListTransactions lists only the
//!   describable ones.
//!
//! The brokers' own calls (verification, markers) run as the broker's principal, which must
//! be a super user when an authorizer is on, as in Kafka.

use std::sync::Arc;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::*;
use runnel_metadata::acl::{AclOperation, ResourceType};

use super::{add_offsets_to_txn, add_partitions_to_txn, describe_transactions, end_txn};
use super::{describe_producers, txn_offset_commit};
use super::{list_transactions, write_txn_markers};
use crate::context::{Broker, RequestContext};
use crate::errors::code;

use crate::errors::code::OPERATION_NOT_ATTEMPTED;

fn may_write_txn(broker: &Broker, ctx: &RequestContext, id: &str) -> bool {
    broker.authorized(ctx, AclOperation::Write, ResourceType::TransactionalId, id)
}

pub async fn add_partitions_to_txn(
    broker: &Arc<Broker>,
    request: AddPartitionsToTxnRequest,
    version: i16,
    ctx: &RequestContext,
) -> AddPartitionsToTxnResponse {
    if version >= 4 {
        if !broker.authorized_cluster(ctx, AclOperation::ClusterAction) {
            return AddPartitionsToTxnResponse::default()
                .with_error_code(code::CLUSTER_AUTHORIZATION_FAILED);
        }
        return add_partitions_to_txn::handle(broker, request, version).await;
    }
    let id_allowed = may_write_txn(broker, ctx, &request.v3_and_below_transactional_id);
    let topic_allowed =
        |t: &AddPartitionsToTxnTopic| broker.authorized_topic(ctx, AclOperation::Write, &t.name);
    if id_allowed && request.v3_and_below_topics.iter().all(topic_allowed) {
        return add_partitions_to_txn::handle(broker, request, version).await;
    }
    let results = request
        .v3_and_below_topics
        .iter()
        .map(|t| {
            let error = if !id_allowed {
                code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            } else if !topic_allowed(t) {
                code::TOPIC_AUTHORIZATION_FAILED
            } else {
                OPERATION_NOT_ATTEMPTED
            };
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.name.clone())
                .with_results_by_partition(
                    t.partitions
                        .iter()
                        .map(|p| {
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(*p)
                                .with_partition_error_code(error)
                        })
                        .collect(),
                )
        })
        .collect();
    AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results)
}

pub async fn add_offsets_to_txn(
    broker: &Arc<Broker>,
    request: AddOffsetsToTxnRequest,
    version: i16,
    ctx: &RequestContext,
) -> AddOffsetsToTxnResponse {
    if !may_write_txn(broker, ctx, &request.transactional_id) {
        return AddOffsetsToTxnResponse::default()
            .with_error_code(code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    }
    if !broker.authorized_group(ctx, AclOperation::Read, &request.group_id) {
        return AddOffsetsToTxnResponse::default()
            .with_error_code(code::GROUP_AUTHORIZATION_FAILED);
    }
    add_offsets_to_txn::handle(broker, request, version).await
}

pub async fn txn_offset_commit(
    broker: &Arc<Broker>,
    request: TxnOffsetCommitRequest,
    version: i16,
    ctx: &RequestContext,
) -> TxnOffsetCommitResponse {
    let all = if !may_write_txn(broker, ctx, &request.transactional_id) {
        Some(code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    } else if !broker.authorized_group(ctx, AclOperation::Read, &request.group_id) {
        Some(code::GROUP_AUTHORIZATION_FAILED)
    } else {
        None
    };
    let refused = |topic: &str| {
        all.or_else(|| {
            (!broker.authorized_topic(ctx, AclOperation::Read, topic))
                .then_some(code::TOPIC_AUTHORIZATION_FAILED)
        })
    };
    txn_offset_commit::handle(broker, request, version, refused).await
}

pub async fn describe_producers(
    broker: &Arc<Broker>,
    request: DescribeProducersRequest,
    version: i16,
    ctx: &RequestContext,
) -> DescribeProducersResponse {
    let refused = |topic: &str| {
        (!broker.authorized_topic(ctx, AclOperation::Read, topic))
            .then_some(code::TOPIC_AUTHORIZATION_FAILED)
    };
    describe_producers::handle(broker, request, version, refused).await
}

pub async fn end_txn(
    broker: &Arc<Broker>,
    request: EndTxnRequest,
    version: i16,
    ctx: &RequestContext,
) -> EndTxnResponse {
    if !may_write_txn(broker, ctx, &request.transactional_id) {
        return EndTxnResponse::default()
            .with_error_code(code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
    }
    end_txn::handle(broker, request, version).await
}

pub async fn write_txn_markers(
    broker: &Arc<Broker>,
    request: WriteTxnMarkersRequest,
    version: i16,
    ctx: &RequestContext,
) -> WriteTxnMarkersResponse {
    if broker.authorized_cluster(ctx, AclOperation::ClusterAction) {
        return write_txn_markers::handle(broker, request, version).await;
    }
    let markers = request
        .markers
        .iter()
        .map(|m| {
            let topics = m
                .topics
                .iter()
                .map(|t| {
                    let partitions = t
                        .partition_indexes
                        .iter()
                        .map(|p| {
                            WritableTxnMarkerPartitionResult::default()
                                .with_partition_index(*p)
                                .with_error_code(code::CLUSTER_AUTHORIZATION_FAILED)
                        })
                        .collect();
                    WritableTxnMarkerTopicResult::default()
                        .with_name(t.name.clone())
                        .with_partitions(partitions)
                })
                .collect();
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(topics)
        })
        .collect();
    WriteTxnMarkersResponse::default().with_markers(markers)
}

pub async fn describe_transactions(
    broker: &Arc<Broker>,
    mut request: DescribeTransactionsRequest,
    version: i16,
    ctx: &RequestContext,
) -> DescribeTransactionsResponse {
    let describable = |id: &TransactionalId| {
        broker.authorized(
            ctx,
            AclOperation::Describe,
            ResourceType::TransactionalId,
            id,
        )
    };
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut request.transactional_ids)
        .into_iter()
        .partition(|id| describable(id));
    request.transactional_ids = allowed;
    let mut response = describe_transactions::handle(broker, request, version).await;
    response
        .transaction_states
        .extend(refused.into_iter().map(|id| {
            describe_transactions_response::TransactionState::default()
                .with_error_code(code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                .with_transactional_id(id)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
                .with_transaction_timeout_ms(-1)
                .with_transaction_start_time_ms(-1)
        }));
    response
}

pub async fn list_transactions(
    broker: &Arc<Broker>,
    request: ListTransactionsRequest,
    version: i16,
    ctx: &RequestContext,
) -> ListTransactionsResponse {
    let mut response = list_transactions::handle(broker, request, version).await;
    response.transaction_states.retain(|t| {
        broker.authorized(
            ctx,
            AclOperation::Describe,
            ResourceType::TransactionalId,
            &t.transactional_id,
        )
    });
    response
}
