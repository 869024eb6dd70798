//! Metadata (API 3): brokers, controller and topic layout from the current image, with topic
//! auto-creation when `auto.create.topics.enable` and the request allow it. The controller id
//! is a live broker that forwards, as with KRaft brokers (see `Broker::controller_id`); the
//! authorized operations, when asked for, are all of them (no authorizer).

pub mod authorized_operations;
mod authz;

use std::sync::Arc;

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse};
use runnel_metadata::{validate_topic_name, CreateTopicRequest, MetadataImage, TopicImage};

use super::{str_bytes, topic_name};
use crate::context::{Broker, RequestContext};
use crate::errors::code;

pub async fn handle(
    broker: &Arc<Broker>,
    request: MetadataRequest,
    version: i16,
    ctx: &RequestContext,
) -> MetadataResponse {
    // v1+: null = all topics, empty = none; v0 has no null and asks for all with an empty
    // list (Kafka's `MetadataRequest.isAllTopics`).
    let all_topics = request
        .topics
        .as_ref()
        .is_none_or(|topics| version == 0 && topics.is_empty());
    let requested: Option<Vec<String>> =
        request
            .topics
            .as_ref()
            .filter(|_| !all_topics)
            .map(|topics| {
                topics
                    .iter()
                    .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
                    .collect()
            });
    let allow_auto_create = (version < 4 || request.allow_auto_topic_creation)
        && broker.settings.auto_create_topics_enable;
    if let (Some(names), true) = (&requested, allow_auto_create) {
        auto_create(broker, &authz::may_auto_create(broker, ctx, names)).await;
    }
    let image = broker.image();
    // v10+ clients (KIP-848 consumers) may ask by topic id alone.
    let by_id: Vec<uuid::Uuid> = request
        .topics
        .iter()
        .flatten()
        .filter(|t| t.name.is_none() && !t.topic_id.is_nil())
        .map(|t| t.topic_id)
        .collect();
    let mut topics = requested_topics(&image, requested.as_deref());
    // Kafka reports operations for every topic asked by name (also unknown ones: no
    // authorizer hides them) and for topics found by id, not for unknown ids.
    let topic_operations =
        authorized_operations::topic_operations(request.include_topic_authorized_operations);
    for topic in &mut topics {
        topic.topic_authorized_operations = topic_operations;
    }
    for id in by_id {
        topics.push(match image.topic_by_id(&id) {
            Some(t) => describe_topic(&image, t).with_topic_authorized_operations(topic_operations),
            None => MetadataResponseTopic::default()
                .with_error_code(code::UNKNOWN_TOPIC_ID)
                .with_topic_id(id),
        });
    }
    let response = MetadataResponse::default()
        .with_brokers(brokers(&image, broker, &ctx.listener))
        .with_cluster_id(Some(str_bytes(&broker.cluster_id)))
        .with_controller_id(BrokerId(broker.controller_id()))
        .with_cluster_authorized_operations(authorized_operations::cluster_operations(
            request.include_cluster_authorized_operations,
        ))
        .with_topics(hide_leaders_off_listener(
            topics,
            &image,
            broker,
            &ctx.listener,
            version,
        ));
    let response = authz::restrict(
        broker,
        ctx,
        response,
        requested.is_none(),
        request.include_topic_authorized_operations,
        request.include_cluster_authorized_operations,
    );
    fit_to_version(response, version)
}

/// The topics asked for by name (`None`: all of them); an unknown name is
/// UNKNOWN_TOPIC_OR_PARTITION, an invalid one INVALID_TOPIC_EXCEPTION.
fn requested_topics(
    image: &MetadataImage,
    requested: Option<&[String]>,
) -> Vec<MetadataResponseTopic> {
    let Some(names) = requested else {
        return image
            .topics
            .values()
            .map(|t| describe_topic(image, t))
            .collect();
    };
    names
        .iter()
        .map(|name| match image.topic(name) {
            Some(t) => describe_topic(image, t),
            None => {
                let error = if validate_topic_name(name).is_err() {
                    code::INVALID_TOPIC_EXCEPTION
                } else {
                    code::UNKNOWN_TOPIC_OR_PARTITION
                };
                MetadataResponseTopic::default()
                    .with_error_code(error)
                    .with_name(Some(topic_name(name)))
            }
        })
        .collect()
}

/// Clears fields the negotiated version does not carry (the encoder rejects them).
fn fit_to_version(mut response: MetadataResponse, version: i16) -> MetadataResponse {
    if version < 2 {
        response.cluster_id = None;
    }
    // v8-v10 carry the cluster's operations (KIP-430; v11 moved them to DescribeCluster).
    if !(8..=10).contains(&version) {
        response.cluster_authorized_operations = authorized_operations::NOT_REQUESTED;
    }
    for topic in &mut response.topics {
        if version < 10 {
            topic.topic_id = uuid::Uuid::nil();
        }
        if version < 8 {
            topic.topic_authorized_operations = authorized_operations::NOT_REQUESTED;
        }
        for p in &mut topic.partitions {
            if version < 7 {
                p.leader_epoch = -1;
            }
            if version < 5 {
                p.offline_replicas.clear();
            }
        }
    }
    response
}

/// Creates the missing, validly named, non-internal topics with the broker defaults.
async fn auto_create(broker: &Arc<Broker>, names: &[String]) {
    let image = broker.image();
    let missing: Vec<CreateTopicRequest> = names
        .iter()
        .filter(|n| {
            image.topic(n).is_none() && validate_topic_name(n).is_ok() && !n.starts_with("__")
        })
        .map(|n| CreateTopicRequest {
            name: n.clone(),
            num_partitions: -1,
            replication_factor: -1,
            assignment: Vec::new(),
            configs: Vec::new(),
        })
        .collect();
    if missing.is_empty() {
        return;
    }
    match broker
        .controller
        .run(runnel_metadata::controller::CreateTopics {
            requests: missing,
            validate_only: false,
        })
        .await
    {
        Ok(outcomes) => {
            for o in outcomes {
                match o.result {
                    Ok(_) => tracing::info!(topic = %o.name, "auto-created topic"),
                    Err(e) => {
                        tracing::warn!(topic = %o.name, error = %e.message, "auto-creation failed")
                    }
                }
            }
        }
        Err(e) => tracing::warn!(error = %e.message, "auto-creation failed"),
    }
}

/// The live brokers, at the endpoints of the listener the client used; a broker without that
/// listener is left out (Kafka's `getAliveBrokerNodes(listenerName)`).
pub fn brokers(image: &MetadataImage, me: &Broker, listener: &str) -> Vec<MetadataResponseBroker> {
    image
        .live_brokers()
        .filter_map(|b| {
            let (host, port) = me.endpoint_of(b, listener)?;
            Some(
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(b.id))
                    .with_host(str_bytes(&host))
                    .with_port(i32::from(port))
                    .with_rack(b.rack.as_deref().map(str_bytes)),
            )
        })
        .collect()
}

/// A partition whose live leader has no endpoint on the client's listener has no leader for
/// that client: leader -1 with LISTENER_NOT_FOUND (v6+; LEADER_NOT_AVAILABLE before), as
/// Kafka's `KRaftMetadataCache.getPartitionMetadata`.
fn hide_leaders_off_listener(
    mut topics: Vec<MetadataResponseTopic>,
    image: &MetadataImage,
    me: &Broker,
    listener: &str,
    version: i16,
) -> Vec<MetadataResponseTopic> {
    let error = if version >= 6 {
        code::LISTENER_NOT_FOUND
    } else {
        code::LEADER_NOT_AVAILABLE
    };
    for p in topics.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
        let off_listener = image
            .brokers
            .get(&p.leader_id.0)
            .is_some_and(|b| !b.fenced && me.endpoint_of(b, listener).is_none());
        if off_listener {
            p.leader_id = BrokerId(-1);
            p.error_code = error;
        }
    }
    topics
}

fn describe_topic(image: &MetadataImage, topic: &TopicImage) -> MetadataResponseTopic {
    let live = |id: &i32| image.brokers.get(id).is_some_and(|b| !b.fenced);
    let partitions = topic
        .partitions
        .values()
        .map(|p| {
            let error = if p.leader < 0 {
                code::LEADER_NOT_AVAILABLE
            } else {
                code::NONE
            };
            MetadataResponsePartition::default()
                .with_error_code(error)
                .with_partition_index(p.partition)
                .with_leader_id(BrokerId(p.leader))
                .with_leader_epoch(p.leader_epoch)
                .with_replica_nodes(p.replicas.iter().copied().map(BrokerId).collect())
                .with_isr_nodes(p.isr.iter().copied().map(BrokerId).collect())
                .with_offline_replicas(
                    p.replicas
                        .iter()
                        .filter(|r| !live(r))
                        .copied()
                        .map(BrokerId)
                        .collect(),
                )
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(topic_name(&topic.name)))
        .with_topic_id(topic.id)
        .with_is_internal(topic.name.starts_with("__"))
        .with_partitions(partitions)
}
