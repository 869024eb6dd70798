//! Metadata's authorization, as Kafka's `handleTopicMetadataRequest`: a topic is shown only to
//! a principal that may DESCRIBE it. Asked for all topics, the others are left out; asked by
//! name or id, they are answered TOPIC_AUTHORIZATION_FAILED without partitions or topic id. Automatic creation needs CREATE on the cluster or the topic. The
//! authorized-operations fields carry the real set once an authorizer is configured.

use kafka_protocol::messages::MetadataResponse;
use runnel_metadata::acl::{AclOperation, ResourceType, CLUSTER_NAME};

use crate::context::{Broker, RequestContext};
use crate::errors::code;

/// The names automatic creation may create for this requester.
pub fn may_auto_create(broker: &Broker, ctx: &RequestContext, names: &[String]) -> Vec<String> {
    let cluster = broker.authorized_cluster(ctx, AclOperation::Create);
    names
        .iter()
        .filter(|n| cluster || broker.authorized_topic(ctx, AclOperation::Create, n))
        .cloned()
        .collect()
}

/// Hides or refuses the topics the requester may not describe and fills in the operations.
pub fn restrict(
    broker: &Broker,
    ctx: &RequestContext,
    mut response: MetadataResponse,
    all_topics: bool,
    include_topic_ops: bool,
    include_cluster_ops: bool,
) -> MetadataResponse {
    if broker.authorizer.is_none() {
        return response;
    }
    let describable = |name: &str| broker.authorized_topic(ctx, AclOperation::Describe, name);
    if all_topics {
        response
            .topics
            .retain(|t| t.name.as_ref().is_none_or(|n| describable(n)));
    }
    for topic in &mut response.topics {
        let Some(name) = topic.name.as_ref().map(|n| n.0.to_string()) else {
            continue;
        };
        if !describable(&name) {
            topic.error_code = code::TOPIC_AUTHORIZATION_FAILED;
            topic.partitions.clear();
            topic.is_internal = false;
            topic.topic_id = uuid::Uuid::nil();
        }
        if include_topic_ops {
            topic.topic_authorized_operations =
                broker.authorized_operations(ctx, ResourceType::Topic, &name);
        }
    }
    if include_cluster_ops {
        response.cluster_authorized_operations =
            broker.authorized_operations(ctx, ResourceType::Cluster, CLUSTER_NAME);
    }
    response
}
