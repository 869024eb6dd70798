//! KIP-848: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69), for clients that use
//! `group.protocol=consumer`. The broker computes assignments (`runnel-group`'s
//! `consumer_group`), so members reconcile incrementally with no rebalance barrier.

use std::sync::Arc;

use kafka_protocol::messages::consumer_group_describe_response::{
    self as describe, DescribedGroup, Member,
};
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, GroupId,
};
use runnel_group::ConsumerHeartbeat;

use super::{str_bytes, topic_name};
use crate::context::{Broker, RequestContext};
use crate::errors::code;

/// With `consumer` left out of `group.coordinator.rebalance.protocols`, both KIP-848 APIs
/// answer UNSUPPORTED_VERSION before anything else (Kafka's
/// `KafkaApis.isConsumerGroupProtocolEnabled`); `None` when the protocol is on.
pub fn heartbeat_if_disabled(broker: &Broker) -> Option<ConsumerGroupHeartbeatResponse> {
    (!broker.settings.consumer_protocol_enabled).then(|| {
        ConsumerGroupHeartbeatResponse::default().with_error_code(code::UNSUPPORTED_VERSION)
    })
}

/// [`heartbeat_if_disabled`] for ConsumerGroupDescribe: the error for every group asked about.
pub fn describe_if_disabled(
    broker: &Broker,
    request: &ConsumerGroupDescribeRequest,
) -> Option<ConsumerGroupDescribeResponse> {
    (!broker.settings.consumer_protocol_enabled).then(|| {
        let groups = request
            .group_ids
            .iter()
            .map(|g| {
                DescribedGroup::default()
                    .with_group_id(g.clone())
                    .with_error_code(code::UNSUPPORTED_VERSION)
            })
            .collect();
        ConsumerGroupDescribeResponse::default().with_groups(groups)
    })
}

pub async fn heartbeat(
    broker: &Arc<Broker>,
    request: ConsumerGroupHeartbeatRequest,
    version: i16,
    ctx: &RequestContext,
) -> ConsumerGroupHeartbeatResponse {
    let req = ConsumerHeartbeat {
        group_id: request.group_id.0.to_string(),
        member_id: request.member_id.to_string(),
        member_epoch: request.member_epoch,
        instance_id: request.instance_id.as_ref().map(|s| s.to_string()),
        rack_id: request.rack_id.as_ref().map(|s| s.to_string()),
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        subscribed_topic_names: request
            .subscribed_topic_names
            .as_ref()
            .map(|names| names.iter().map(|n| n.0.to_string()).collect()),
        subscribed_topic_regex: request
            .subscribed_topic_regex
            .as_ref()
            .map(|s| s.to_string()),
        server_assignor: request.server_assignor.as_ref().map(|s| s.to_string()),
        topic_partitions: request.topic_partitions.as_ref().map(|tps| {
            tps.iter()
                .map(|tp| (tp.topic_id, tp.partitions.clone()))
                .collect()
        }),
        api_version: version,
    };
    let r = broker
        .groups
        .consumer_heartbeat(req, ctx.client_id.clone(), ctx.client_host())
        .await;
    ConsumerGroupHeartbeatResponse::default()
        .with_error_code(r.error_code)
        .with_error_message(r.error_message.as_deref().map(str_bytes))
        .with_member_id(r.member_id.as_deref().map(str_bytes))
        .with_member_epoch(r.member_epoch)
        .with_heartbeat_interval_ms(r.heartbeat_interval_ms)
        .with_assignment(r.assignment.map(|tps| {
            Assignment::default().with_topic_partitions(
                tps.into_iter()
                    .map(|(topic_id, partitions)| {
                        TopicPartitions::default()
                            .with_topic_id(topic_id)
                            .with_partitions(partitions)
                    })
                    .collect(),
            )
        }))
}

fn described(
    parts: &[runnel_group::consumer_group::DescribedTopicPartitions],
) -> describe::Assignment {
    describe::Assignment::default().with_topic_partitions(
        parts
            .iter()
            .map(|p| {
                describe::TopicPartitions::default()
                    .with_topic_id(p.topic_id)
                    .with_topic_name(topic_name(&p.topic_name))
                    .with_partitions(p.partitions.clone())
            })
            .collect(),
    )
}

pub async fn describe(
    broker: &Arc<Broker>,
    request: ConsumerGroupDescribeRequest,
    version: i16,
) -> ConsumerGroupDescribeResponse {
    // v1 (KIP-1099): each member's protocol; every member of a consumer group here joined
    // with ConsumerGroupHeartbeat (1 = consumer; 0 would be a classic member).
    let member_type: i8 = if version >= 1 { 1 } else { -1 };
    let ids = request.group_ids.iter().map(|g| g.0.to_string()).collect();
    let groups = broker
        .groups
        .consumer_describe(ids)
        .await
        .into_iter()
        .map(|g| {
            let members = g
                .members
                .iter()
                .map(|m| {
                    Member::default()
                        .with_member_id(str_bytes(&m.member_id))
                        .with_instance_id(m.instance_id.as_deref().map(str_bytes))
                        .with_rack_id(m.rack_id.as_deref().map(str_bytes))
                        .with_member_epoch(m.member_epoch)
                        .with_client_id(str_bytes(&m.client_id))
                        .with_client_host(str_bytes(&m.client_host))
                        .with_subscribed_topic_names(
                            m.subscribed_topic_names
                                .iter()
                                .map(|t| topic_name(t))
                                .collect(),
                        )
                        .with_subscribed_topic_regex(
                            m.subscribed_topic_regex.as_deref().map(str_bytes),
                        )
                        .with_assignment(described(&m.assignment))
                        .with_target_assignment(described(&m.target_assignment))
                        .with_member_type(member_type)
                })
                .collect();
            DescribedGroup::default()
                .with_error_code(g.error_code)
                .with_error_message(g.error_message.as_deref().map(str_bytes))
                .with_group_id(GroupId(str_bytes(&g.group_id)))
                .with_group_state(str_bytes(&g.state))
                .with_group_epoch(g.group_epoch)
                .with_assignment_epoch(g.assignment_epoch)
                .with_assignor_name(str_bytes(&g.assignor_name))
                .with_members(members)
        })
        .collect();
    ConsumerGroupDescribeResponse::default().with_groups(groups)
}
