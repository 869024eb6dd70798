//! Authorization of the remaining APIs, as a filter in front of their unchanged handlers, with
//! Kafka's resources, operations and errors:
//!
//! * ListOffsets: DESCRIBE on each topic; DeleteRecords: DELETE on each topic;
//!   OffsetForLeaderEpoch: DESCRIBE on each topic, CLUSTER_ACTION for a follower (replica id
//!   >= 0, whole request CLUSTER_AUTHORIZATION_FAILED) — per partition TOPIC_AUTHORIZATION_FAILED;
//! * InitProducerId: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), or
//!   for an idempotent producer IDEMPOTENT_WRITE on the cluster or WRITE on some topic (Kafka
//!   3.x) else CLUSTER_AUTHORIZATION_FAILED;
//! * ElectLeaders, AlterPartitionReassignments: ALTER on the cluster; ListPartitionReassignments,
//!   DescribeQuorum and Runnel's describe request: DESCRIBE on the cluster
//!   (CLUSTER_AUTHORIZATION_FAILED for the whole request).

use std::sync::Arc;

use kafka_protocol::messages::*;
use runnel_metadata::acl::{AclOperation, ResourceType};

use super::{delete_records, describe_quorum, elect_leaders, init_producer_id, list_offsets};
use super::{offset_for_leader_epoch, reassignments};
use crate::context::{Broker, RequestContext};
use crate::errors::code;

const TOPIC_DENIED: i16 = code::TOPIC_AUTHORIZATION_FAILED;
const CLUSTER_DENIED: i16 = code::CLUSTER_AUTHORIZATION_FAILED;

pub async fn list_offsets(
    broker: &Arc<Broker>,
    mut request: ListOffsetsRequest,
    version: i16,
    ctx: &RequestContext,
) -> ListOffsetsResponse {
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut request.topics)
        .into_iter()
        .partition(|t| broker.authorized_topic(ctx, AclOperation::Describe, &t.name.0));
    request.topics = allowed;
    let mut response = list_offsets::handle(broker, request, version).await;
    response.topics.extend(refused.into_iter().map(|t| {
        let partitions = t.partitions.iter().map(|p| {
            list_offsets_response::ListOffsetsPartitionResponse::default()
                .with_partition_index(p.partition_index)
                .with_error_code(TOPIC_DENIED)
                .with_timestamp(-1)
                .with_offset(-1)
                .with_leader_epoch(-1)
        });
        list_offsets_response::ListOffsetsTopicResponse::default()
            .with_name(t.name)
            .with_partitions(partitions.collect())
    }));
    response
}

pub async fn delete_records(
    broker: &Arc<Broker>,
    mut request: DeleteRecordsRequest,
    version: i16,
    ctx: &RequestContext,
) -> DeleteRecordsResponse {
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut request.topics)
        .into_iter()
        .partition(|t| broker.authorized_topic(ctx, AclOperation::Delete, &t.name.0));
    request.topics = allowed;
    let mut response = delete_records::handle(broker, request, version).await;
    response.topics.extend(refused.into_iter().map(|t| {
        let partitions = t.partitions.iter().map(|p| {
            delete_records_response::DeleteRecordsPartitionResult::default()
                .with_partition_index(p.partition_index)
                .with_low_watermark(-1)
                .with_error_code(TOPIC_DENIED)
        });
        delete_records_response::DeleteRecordsTopicResult::default()
            .with_name(t.name)
            .with_partitions(partitions.collect())
    }));
    response
}

pub async fn offset_for_leader_epoch(
    broker: &Arc<Broker>,
    mut request: OffsetForLeaderEpochRequest,
    version: i16,
    ctx: &RequestContext,
) -> OffsetForLeaderEpochResponse {
    let follower = request.replica_id.0 >= 0;
    let cluster_ok = !follower || broker.authorized_cluster(ctx, AclOperation::ClusterAction);
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut request.topics)
        .into_iter()
        .partition(|t| {
            cluster_ok && broker.authorized_topic(ctx, AclOperation::Describe, &t.topic.0)
        });
    request.topics = allowed;
    let error = if cluster_ok {
        TOPIC_DENIED
    } else {
        CLUSTER_DENIED
    };
    let mut response = offset_for_leader_epoch::handle(broker, request, version).await;
    response.topics.extend(refused.into_iter().map(|t| {
        let partitions = t.partitions.iter().map(|p| {
            offset_for_leader_epoch_response::EpochEndOffset::default()
                .with_partition(p.partition)
                .with_error_code(error)
                .with_leader_epoch(-1)
                .with_end_offset(-1)
        });
        offset_for_leader_epoch_response::OffsetForLeaderTopicResult::default()
            .with_topic(t.topic)
            .with_partitions(partitions.collect())
    }));
    response
}

pub async fn init_producer_id(
    broker: &Arc<Broker>,
    request: InitProducerIdRequest,
    version: i16,
    ctx: &RequestContext,
) -> InitProducerIdResponse {
    let refusal = match &request.transactional_id {
        Some(id)
            if !broker.authorized(ctx, AclOperation::Write, ResourceType::TransactionalId, id) =>
        {
            Some(code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        }
        Some(_) => None,
        None if broker.authorized_cluster(ctx, AclOperation::IdempotentWrite)
            || broker.authorized_any(ctx, AclOperation::Write, ResourceType::Topic) =>
        {
            None
        }
        None => Some(CLUSTER_DENIED),
    };
    match refusal {
        Some(error) => InitProducerIdResponse::default()
            .with_error_code(error)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
        None => init_producer_id::handle(broker, request, version).await,
    }
}

/// Whether the requester may perform a cluster-wide operation.
fn cluster(broker: &Broker, ctx: &RequestContext, op: AclOperation) -> bool {
    broker.authorized_cluster(ctx, op)
}

pub async fn elect_leaders(
    broker: &Arc<Broker>,
    request: ElectLeadersRequest,
    version: i16,
    ctx: &RequestContext,
) -> ElectLeadersResponse {
    if !cluster(broker, ctx, AclOperation::Alter) {
        return ElectLeadersResponse::default().with_error_code(CLUSTER_DENIED);
    }
    elect_leaders::handle(broker, request, version).await
}

pub async fn alter_reassignments(
    broker: &Arc<Broker>,
    request: AlterPartitionReassignmentsRequest,
    version: i16,
    ctx: &RequestContext,
) -> AlterPartitionReassignmentsResponse {
    if !cluster(broker, ctx, AclOperation::Alter) {
        return AlterPartitionReassignmentsResponse::default().with_error_code(CLUSTER_DENIED);
    }
    reassignments::alter(broker, request, version).await
}

pub async fn list_reassignments(
    broker: &Arc<Broker>,
    request: ListPartitionReassignmentsRequest,
    version: i16,
    ctx: &RequestContext,
) -> ListPartitionReassignmentsResponse {
    if !cluster(broker, ctx, AclOperation::Describe) {
        return ListPartitionReassignmentsResponse::default().with_error_code(CLUSTER_DENIED);
    }
    reassignments::list(broker, request, version).await
}

pub async fn describe_quorum(
    broker: &Arc<Broker>,
    request: DescribeQuorumRequest,
    version: i16,
    ctx: &RequestContext,
) -> DescribeQuorumResponse {
    if !cluster(broker, ctx, AclOperation::Describe) {
        return DescribeQuorumResponse::default().with_error_code(CLUSTER_DENIED);
    }
    describe_quorum::handle(broker, request, version).await
}

/// Runnel's describe request shows the whole metadata: DESCRIBE on the cluster.
pub fn may_describe_runnel(broker: &Broker, ctx: &RequestContext) -> bool {
    cluster(broker, ctx, AclOperation::Describe)
}
