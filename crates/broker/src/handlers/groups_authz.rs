//! Authorization of the group APIs, as Kafka's `KafkaApis` checks them, as a filter in front
//! of `groups` / `consumer_group` (whose bodies do not change): READ on the group for
//! JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit and ConsumerGroupHeartbeat;
//! DESCRIBE for FindCoordinator, OffsetFetch, DescribeGroups, ConsumerGroupDescribe; DELETE
//! for DeleteGroups and OffsetDelete (GROUP_AUTHORIZATION_FAILED); READ on each committed
//! topic, DESCRIBE on each fetched one (TOPIC_AUTHORIZATION_FAILED); ListGroups lists every
//! group to DESCRIBE on the cluster, else only the describable ones. FindCoordinator for a
//! transaction needs DESCRIBE on the transactional id.

use std::sync::Arc;

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::*;
use runnel_metadata::acl::{AclOperation, ResourceType};

use super::{consumer_group, groups, offset_topic_ids};
use crate::context::{Broker, RequestContext};
use crate::errors::code;

const DENIED: i16 = code::GROUP_AUTHORIZATION_FAILED;

fn may(broker: &Broker, ctx: &RequestContext, op: AclOperation, group: &str) -> bool {
    broker.authorized_group(ctx, op, group)
}

pub async fn find_coordinator(
    broker: &Arc<Broker>,
    mut request: FindCoordinatorRequest,
    version: i16,
    ctx: &RequestContext,
) -> FindCoordinatorResponse {
    let (resource, refusal) = if request.key_type == 1 {
        (
            ResourceType::TransactionalId,
            code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        )
    } else {
        (ResourceType::Group, DENIED)
    };
    let allowed = |key: &str| broker.authorized(ctx, AclOperation::Describe, resource, key);
    if version < 4 {
        if !allowed(&request.key) {
            return FindCoordinatorResponse::default()
                .with_error_code(refusal)
                .with_node_id(BrokerId(-1))
                .with_port(-1);
        }
        return groups::find_coordinator(broker, request, version, ctx).await;
    }
    let (keys, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut request.coordinator_keys)
        .into_iter()
        .partition(|k| allowed(k));
    request.coordinator_keys = keys;
    let mut response = groups::find_coordinator(broker, request, version, ctx).await;
    response.coordinators.extend(refused.into_iter().map(|key| {
        Coordinator::default()
            .with_key(key)
            .with_node_id(BrokerId(-1))
            .with_port(-1)
            .with_error_code(refusal)
    }));
    response
}

pub async fn join_group(
    broker: &Arc<Broker>,
    request: JoinGroupRequest,
    version: i16,
    ctx: &RequestContext,
) -> JoinGroupResponse {
    if !may(broker, ctx, AclOperation::Read, &request.group_id) {
        return JoinGroupResponse::default()
            .with_error_code(DENIED)
            .with_generation_id(-1);
    }
    groups::join_group(broker, request, version, ctx).await
}

pub async fn sync_group(
    broker: &Arc<Broker>,
    request: SyncGroupRequest,
    version: i16,
    ctx: &RequestContext,
) -> SyncGroupResponse {
    if !may(broker, ctx, AclOperation::Read, &request.group_id) {
        return SyncGroupResponse::default().with_error_code(DENIED);
    }
    groups::sync_group(broker, request, version).await
}

pub async fn heartbeat(
    broker: &Arc<Broker>,
    request: HeartbeatRequest,
    version: i16,
    ctx: &RequestContext,
) -> HeartbeatResponse {
    if !may(broker, ctx, AclOperation::Read, &request.group_id) {
        return HeartbeatResponse::default().with_error_code(DENIED);
    }
    groups::heartbeat(broker, request, version).await
}

pub async fn leave_group(
    broker: &Arc<Broker>,
    request: LeaveGroupRequest,
    version: i16,
    ctx: &RequestContext,
) -> LeaveGroupResponse {
    if !may(broker, ctx, AclOperation::Read, &request.group_id) {
        return LeaveGroupResponse::default().with_error_code(DENIED);
    }
    groups::leave_group(broker, request, version).await
}

pub async fn offset_commit(
    broker: &Arc<Broker>,
    mut request: OffsetCommitRequest,
    version: i16,
    ctx: &RequestContext,
) -> OffsetCommitResponse {
    let answer = |topic: &offset_commit_request::OffsetCommitRequestTopic, error: i16| {
        OffsetCommitResponseTopic::default()
            .with_name(topic.name.clone())
            .with_topic_id(topic.topic_id)
            .with_partitions(
                topic
                    .partitions
                    .iter()
                    .map(|p| {
                        OffsetCommitResponsePartition::default()
                            .with_partition_index(p.partition_index)
                            .with_error_code(error)
                    })
                    .collect(),
            )
    };
    if !may(broker, ctx, AclOperation::Read, &request.group_id) {
        let topics = request.topics.iter().map(|t| answer(t, DENIED)).collect();
        return OffsetCommitResponse::default().with_topics(topics);
    }
    // v10 names topics by id: resolved before the topic ACLs, as Kafka does.
    let unknown_ids = if version >= offset_topic_ids::TOPIC_ID_VERSION {
        offset_topic_ids::resolve_commit(&mut request, &broker.image())
    } else {
        Vec::new()
    };
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut request.topics)
        .into_iter()
        .partition(|t| broker.authorized_topic(ctx, AclOperation::Read, &t.name.0));
    request.topics = allowed;
    let mut response = groups::offset_commit(broker, request, version).await;
    let refused = refused
        .iter()
        .map(|t| answer(t, code::TOPIC_AUTHORIZATION_FAILED));
    response.topics.extend(refused);
    response.topics.extend(unknown_ids);
    response
}

pub async fn offset_fetch(
    broker: &Arc<Broker>,
    mut request: OffsetFetchRequest,
    version: i16,
    ctx: &RequestContext,
) -> OffsetFetchResponse {
    if version < 8 && !may(broker, ctx, AclOperation::Describe, &request.group_id) {
        return OffsetFetchResponse::default().with_error_code(DENIED);
    }
    let asked_all = if version < 8 {
        request.topics.is_none()
    } else {
        request.groups.iter().all(|g| g.topics.is_none())
    };
    let by_id = version >= offset_topic_ids::TOPIC_ID_VERSION;
    let image = broker.image();
    let unknown_ids = if by_id {
        offset_topic_ids::resolve_fetch(&mut request, &image)
    } else {
        Vec::new()
    };
    let mut response = groups::offset_fetch(broker, request, version).await;
    let describable = |t: &str| broker.authorized_topic(ctx, AclOperation::Describe, t);
    if asked_all {
        response.topics.retain(|t| describable(&t.name));
    }
    for t in response.topics.iter_mut().filter(|t| !describable(&t.name)) {
        for p in &mut t.partitions {
            p.committed_offset = -1;
            p.error_code = code::TOPIC_AUTHORIZATION_FAILED;
        }
    }
    for g in &mut response.groups {
        if !may(broker, ctx, AclOperation::Describe, &g.group_id) {
            g.error_code = DENIED;
            g.topics.clear();
            continue;
        }
        if asked_all {
            g.topics.retain(|t| describable(&t.name));
        }
        for t in g.topics.iter_mut().filter(|t| !describable(&t.name)) {
            for p in &mut t.partitions {
                p.committed_offset = -1;
                p.error_code = code::TOPIC_AUTHORIZATION_FAILED;
            }
        }
    }
    if by_id {
        offset_topic_ids::finish_fetch(&mut response, unknown_ids, &image);
    }
    response
}

pub async fn list_groups(
    broker: &Arc<Broker>,
    request: ListGroupsRequest,
    version: i16,
    ctx: &RequestContext,
) -> ListGroupsResponse {
    let mut response = groups::list_groups(broker, request, version).await;
    if !broker.authorized_cluster(ctx, AclOperation::Describe) {
        response
            .groups
            .retain(|g| may(broker, ctx, AclOperation::Describe, &g.group_id));
    }
    response
}

pub async fn describe_groups(
    broker: &Arc<Broker>,
    request: DescribeGroupsRequest,
    version: i16,
    ctx: &RequestContext,
) -> DescribeGroupsResponse {
    let include_ops = request.include_authorized_operations;
    let mut response = groups::describe_groups(broker, request, version).await;
    for g in &mut response.groups {
        if !may(broker, ctx, AclOperation::Describe, &g.group_id) {
            *g = describe_groups_response::DescribedGroup::default()
                .with_group_id(g.group_id.clone())
                .with_error_code(DENIED);
        } else if include_ops && version >= 3 && broker.authorizer.is_some() {
            g.authorized_operations =
                broker.authorized_operations(ctx, ResourceType::Group, &g.group_id);
        }
    }
    response
}

pub async fn delete_groups(
    broker: &Arc<Broker>,
    mut request: DeleteGroupsRequest,
    version: i16,
    ctx: &RequestContext,
) -> DeleteGroupsResponse {
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut request.groups_names)
        .into_iter()
        .partition(|g| may(broker, ctx, AclOperation::Delete, g));
    request.groups_names = allowed;
    let mut response = groups::delete_groups(broker, request, version).await;
    response.results.extend(refused.into_iter().map(|g| {
        DeletableGroupResult::default()
            .with_group_id(g)
            .with_error_code(DENIED)
    }));
    response
}

pub async fn offset_delete(
    broker: &Arc<Broker>,
    request: OffsetDeleteRequest,
    version: i16,
    ctx: &RequestContext,
) -> OffsetDeleteResponse {
    if !may(broker, ctx, AclOperation::Delete, &request.group_id) {
        return OffsetDeleteResponse::default().with_error_code(DENIED);
    }
    groups::offset_delete(broker, request, version).await
}

pub async fn consumer_group_heartbeat(
    broker: &Arc<Broker>,
    request: ConsumerGroupHeartbeatRequest,
    version: i16,
    ctx: &RequestContext,
) -> ConsumerGroupHeartbeatResponse {
    if let Some(disabled) = consumer_group::heartbeat_if_disabled(broker) {
        return disabled;
    }
    if !may(broker, ctx, AclOperation::Read, &request.group_id) {
        return ConsumerGroupHeartbeatResponse::default().with_error_code(DENIED);
    }
    consumer_group::heartbeat(broker, request, version, ctx).await
}

pub async fn consumer_group_describe(
    broker: &Arc<Broker>,
    request: ConsumerGroupDescribeRequest,
    version: i16,
    ctx: &RequestContext,
) -> ConsumerGroupDescribeResponse {
    if let Some(disabled) = consumer_group::describe_if_disabled(broker, &request) {
        return disabled;
    }
    let mut response = consumer_group::describe(broker, request, version).await;
    for g in &mut response.groups {
        if !may(broker, ctx, AclOperation::Describe, &g.group_id) {
            *g = consumer_group_describe_response::DescribedGroup::default()
                .with_group_id(g.group_id.clone())
                .with_error_code(DENIED);
        }
    }
    response
}
