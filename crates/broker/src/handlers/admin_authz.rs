//! Authorization of the config, log-dir, topic-partition and SCRAM APIs, as Kafka's
//! `KafkaApis` / `ConfigAdminManager` check them, as a filter in front of their unchanged
//! handlers:
//!
//! * DescribeConfigs: DESCRIBE_CONFIGS, AlterConfigs and IncrementalAlterConfigs:
//!   ALTER_CONFIGS, per resource: on the topic (TOPIC_AUTHORIZATION_FAILED), on the group
//!   (GROUP_AUTHORIZATION_FAILED), on the cluster for broker, broker-logger and
//!   client-metrics resources (CLUSTER_AUTHORIZATION_FAILED);
//! * DescribeLogDirs: DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED, no results);
//! * DescribeTopicPartitions: DESCRIBE on each topic; listing every topic hides the others,
//!   a named one answers TOPIC_AUTHORIZATION_FAILED with the zero topic id;
//! * DescribeUserScramCredentials: DESCRIBE on the cluster; AlterUserScramCredentials: ALTER
//!   on the cluster (CLUSTER_AUTHORIZATION_FAILED for the request / every user).

use std::sync::Arc;

use kafka_protocol::messages::describe_topic_partitions_response::DescribeTopicPartitionsResponseTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use runnel_metadata::acl::{AclOperation, ResourceType, CLUSTER_NAME};

use super::{
    alter_replica_log_dirs, configs, describe_log_dirs, describe_topic_partitions,
    scram_credentials,
};
use crate::context::{Broker, RequestContext};
use crate::errors::code;

/// The ACL resource a config resource is authorized on, and the error a refusal answers.
/// `None`: a resource type the handler itself refuses.
pub fn config_resource(resource_type: i8, name: &str) -> Option<(ResourceType, String, i16)> {
    match resource_type {
        2 => Some((
            ResourceType::Topic,
            name.to_string(),
            code::TOPIC_AUTHORIZATION_FAILED,
        )),
        32 => Some((
            ResourceType::Group,
            name.to_string(),
            code::GROUP_AUTHORIZATION_FAILED,
        )),
        4 | 8 | 16 => Some((
            ResourceType::Cluster,
            CLUSTER_NAME.to_string(),
            code::CLUSTER_AUTHORIZATION_FAILED,
        )),
        _ => None,
    }
}

/// The refusal code for `op` on the config resource, if refused.
fn config_refusal(
    broker: &Broker,
    ctx: &RequestContext,
    op: AclOperation,
    resource_type: i8,
    name: &str,
) -> Option<i16> {
    let (resource, name, denied) = config_resource(resource_type, name)?;
    (!broker.authorized(ctx, op, resource, &name)).then_some(denied)
}

/// Splits off the config resources `op` is refused on: (type, name, refusal code) of each.
fn take_refused<R>(
    broker: &Broker,
    ctx: &RequestContext,
    op: AclOperation,
    resources: &mut Vec<R>,
    key: impl Fn(&R) -> (i8, &StrBytes),
) -> Vec<(i8, StrBytes, i16)> {
    let mut refused = Vec::new();
    resources.retain(|r| {
        let (resource_type, name) = key(r);
        match config_refusal(broker, ctx, op, resource_type, name) {
            Some(denied) => {
                refused.push((resource_type, name.clone(), denied));
                false
            }
            None => true,
        }
    });
    refused
}

pub async fn describe_configs(
    broker: &Arc<Broker>,
    mut request: DescribeConfigsRequest,
    version: i16,
    ctx: &RequestContext,
) -> DescribeConfigsResponse {
    let op = AclOperation::DescribeConfigs;
    let refused = take_refused(broker, ctx, op, &mut request.resources, |r| {
        (r.resource_type, &r.resource_name)
    });
    let mut response = configs::describe(broker, request, version).await;
    response
        .results
        .extend(refused.into_iter().map(|(t, name, denied)| {
            describe_configs_response::DescribeConfigsResult::default()
                .with_error_code(denied)
                .with_resource_type(t)
                .with_resource_name(name)
        }));
    response
}

pub async fn alter_configs(
    broker: &Arc<Broker>,
    mut request: AlterConfigsRequest,
    version: i16,
    ctx: &RequestContext,
) -> AlterConfigsResponse {
    let op = AclOperation::AlterConfigs;
    let refused = take_refused(broker, ctx, op, &mut request.resources, |r| {
        (r.resource_type, &r.resource_name)
    });
    let mut response = configs::alter(broker, request, version).await;
    response
        .responses
        .extend(refused.into_iter().map(|(t, name, denied)| {
            alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(denied)
                .with_resource_type(t)
                .with_resource_name(name)
        }));
    response
}

pub async fn incremental_alter_configs(
    broker: &Arc<Broker>,
    mut request: IncrementalAlterConfigsRequest,
    version: i16,
    ctx: &RequestContext,
) -> IncrementalAlterConfigsResponse {
    let op = AclOperation::AlterConfigs;
    let refused = take_refused(broker, ctx, op, &mut request.resources, |r| {
        (r.resource_type, &r.resource_name)
    });
    let mut response = configs::incremental_alter(broker, request, version).await;
    response
        .responses
        .extend(refused.into_iter().map(|(t, name, denied)| {
            incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(denied)
                .with_resource_type(t)
                .with_resource_name(name)
        }));
    response
}

pub async fn describe_log_dirs(
    broker: &Arc<Broker>,
    request: DescribeLogDirsRequest,
    version: i16,
    ctx: &RequestContext,
) -> DescribeLogDirsResponse {
    if !broker.authorized_cluster(ctx, AclOperation::Describe) {
        // v0-v2 have no top-level error: Kafka answers an empty result list there.
        return DescribeLogDirsResponse::default().with_error_code(if version >= 3 {
            code::CLUSTER_AUTHORIZATION_FAILED
        } else {
            code::NONE
        });
    }
    describe_log_dirs::handle(broker, request, version).await
}

/// AlterReplicaLogDirs needs ALTER on the cluster, else every partition answers
/// CLUSTER_AUTHORIZATION_FAILED (Kafka's `handleAlterReplicaLogDirsRequest`).
pub async fn alter_replica_log_dirs(
    broker: &Arc<Broker>,
    request: AlterReplicaLogDirsRequest,
    _version: i16,
    ctx: &RequestContext,
) -> AlterReplicaLogDirsResponse {
    if !broker.authorized_cluster(ctx, AclOperation::Alter) {
        return alter_replica_log_dirs::refuse_all(&request, code::CLUSTER_AUTHORIZATION_FAILED);
    }
    alter_replica_log_dirs::handle(broker, request).await
}

pub async fn describe_topic_partitions(
    broker: &Arc<Broker>,
    mut request: DescribeTopicPartitionsRequest,
    version: i16,
    ctx: &RequestContext,
) -> DescribeTopicPartitionsResponse {
    let describable = |t: &str| broker.authorized_topic(ctx, AclOperation::Describe, t);
    let all_topics = request.topics.is_empty();
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut request.topics)
        .into_iter()
        .partition(|t| describable(&t.name.0));
    if !all_topics && allowed.is_empty() {
        // Nothing left to describe (an empty list would mean every topic).
        return DescribeTopicPartitionsResponse::default()
            .with_topics(refused.into_iter().map(|t| refused_topic(t.name)).collect());
    }
    request.topics = allowed;
    let mut response =
        describe_topic_partitions::handle(broker, request, version, &ctx.listener).await;
    if all_topics {
        response
            .topics
            .retain(|t| t.name.as_ref().is_some_and(|n| describable(n.0.as_str())));
    }
    for t in &mut response.topics {
        if let Some(name) = &t.name {
            t.topic_authorized_operations =
                broker.authorized_operations(ctx, ResourceType::Topic, &name.0);
        }
    }
    response
        .topics
        .extend(refused.into_iter().map(|t| refused_topic(t.name)));
    response
}

fn refused_topic(name: TopicName) -> DescribeTopicPartitionsResponseTopic {
    DescribeTopicPartitionsResponseTopic::default()
        .with_error_code(code::TOPIC_AUTHORIZATION_FAILED)
        .with_name(Some(name))
}

pub async fn describe_user_scram_credentials(
    broker: &Arc<Broker>,
    request: DescribeUserScramCredentialsRequest,
    version: i16,
    ctx: &RequestContext,
) -> DescribeUserScramCredentialsResponse {
    if !broker.authorized_cluster(ctx, AclOperation::Describe) {
        return DescribeUserScramCredentialsResponse::default()
            .with_error_code(code::CLUSTER_AUTHORIZATION_FAILED);
    }
    scram_credentials::describe(broker, request, version).await
}

pub async fn alter_user_scram_credentials(
    broker: &Arc<Broker>,
    request: AlterUserScramCredentialsRequest,
    version: i16,
    ctx: &RequestContext,
) -> AlterUserScramCredentialsResponse {
    if broker.authorized_cluster(ctx, AclOperation::Alter) {
        return scram_credentials::alter(broker, request, version).await;
    }
    let mut users: Vec<StrBytes> = request
        .deletions
        .iter()
        .map(|d| d.name.clone())
        .chain(request.upsertions.iter().map(|u| u.name.clone()))
        .collect();
    users.sort();
    users.dedup();
    AlterUserScramCredentialsResponse::default().with_results(
        users
            .into_iter()
            .map(|user| {
                alter_user_scram_credentials_response::AlterUserScramCredentialsResult::default()
                    .with_user(user)
                    .with_error_code(code::CLUSTER_AUTHORIZATION_FAILED)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_resources_map_to_kafkas_acl_resources() {
        let topic = config_resource(2, "t").expect("topic");
        assert_eq!(
            (topic.0, topic.2),
            (ResourceType::Topic, code::TOPIC_AUTHORIZATION_FAILED)
        );
        let group = config_resource(32, "g").expect("group");
        assert_eq!(
            (group.0, group.2),
            (ResourceType::Group, code::GROUP_AUTHORIZATION_FAILED)
        );
        for broker_like in [4, 8, 16] {
            let (resource, name, denied) = config_resource(broker_like, "1").expect("cluster");
            assert_eq!(resource, ResourceType::Cluster);
            assert_eq!(name, CLUSTER_NAME);
            assert_eq!(denied, code::CLUSTER_AUTHORIZATION_FAILED);
        }
        assert_eq!(config_resource(99, "x"), None);
    }
}
