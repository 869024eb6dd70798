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
use runnel_metadata::{
    validate_topic_name, BrokerRegistration, CreateTopicRequest, MetadataImage, TopicImage,
};

use super::partition_view::{partition_view, ViewRules};
use super::{str_bytes, topic_name};
use crate::context::{Broker, RequestContext};
use crate::errors::code;

pub async fn handle(
    broker: &Arc<Broker>,
    request: MetadataRequest,
    version: i16,
    ctx: &RequestContext,
) -> MetadataResponse {
    let requested = requested_names(&request, version);
    let allow_auto_create = (version < 4 || request.allow_auto_topic_creation)
        && broker.settings.auto_create_topics_enable;
    if let (Some(names), true) = (&requested, allow_auto_create) {
        auto_create(broker, &authz::may_auto_create(broker, ctx, names)).await;
    }
    let image = broker.image();
    let topics = described_topics(broker, &image, &request, version, ctx, requested.as_deref());
    let response = MetadataResponse::default()
        .with_brokers(brokers(&image, broker, &ctx.listener))
        .with_cluster_id(Some(str_bytes(&broker.cluster_id)))
        .with_controller_id(BrokerId(broker.controller_id()))
        .with_cluster_authorized_operations(authorized_operations::cluster_operations(
            request.include_cluster_authorized_operations,
        ))
        .with_topics(topics);
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

/// The topic names asked for; `None`: all topics. v1+: null = all topics, empty = none; v0 has
/// no null and asks for all with an empty list (Kafka's `MetadataRequest.isAllTopics`).
fn requested_names(request: &MetadataRequest, version: i16) -> Option<Vec<String>> {
    let topics = request.topics.as_ref()?;
    if version == 0 && topics.is_empty() {
        return None;
    }
    Some(
        topics
            .iter()
            .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
            .collect(),
    )
}

/// The topics of the response: those asked by name (or all), then those asked by id alone (v10+
/// clients, KIP-848 consumers, may), with their authorized operations when asked for.
fn described_topics(
    broker: &Broker,
    image: &MetadataImage,
    request: &MetadataRequest,
    version: i16,
    ctx: &RequestContext,
    requested: Option<&[String]>,
) -> Vec<MetadataResponseTopic> {
    let by_id = request
        .topics
        .iter()
        .flatten()
        .filter(|t| t.name.is_none() && !t.topic_id.is_nil())
        .map(|t| t.topic_id);
    let on_listener = |b: &BrokerRegistration| broker.endpoint_of(b, &ctx.listener).is_some();
    let rules = ViewRules::metadata(version);
    let describe = |t: &TopicImage| describe_topic(image, t, rules, &on_listener);
    let mut topics = requested_topics(image, requested, &describe);
    // Kafka reports operations for every topic asked by name (also unknown ones: no
    // authorizer hides them) and for topics found by id, not for unknown ids.
    let topic_operations =
        authorized_operations::topic_operations(request.include_topic_authorized_operations);
    for topic in &mut topics {
        topic.topic_authorized_operations = topic_operations;
    }
    for id in by_id {
        topics.push(match image.topic_by_id(&id) {
            Some(t) => describe(t).with_topic_authorized_operations(topic_operations),
            None => MetadataResponseTopic::default()
                .with_error_code(code::UNKNOWN_TOPIC_ID)
                .with_topic_id(id),
        });
    }
    topics
}

/// The topics asked for by name (`None`: all of them); an unknown name is
/// UNKNOWN_TOPIC_OR_PARTITION, an invalid one INVALID_TOPIC_EXCEPTION.
fn requested_topics(
    image: &MetadataImage,
    requested: Option<&[String]>,
    describe: &dyn Fn(&TopicImage) -> MetadataResponseTopic,
) -> Vec<MetadataResponseTopic> {
    let Some(names) = requested else {
        return image.topics.values().map(|t| describe(t)).collect();
    };
    names
        .iter()
        .map(|name| match image.topic(name) {
            Some(t) => describe(t),
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

/// A topic as this client may see it: every partition through
/// [`partition_view`] (a leader named is one of the listed brokers).
fn describe_topic(
    image: &MetadataImage,
    topic: &TopicImage,
    rules: ViewRules,
    on_listener: &dyn Fn(&BrokerRegistration) -> bool,
) -> MetadataResponseTopic {
    let ids = |v: &[i32]| v.iter().copied().map(BrokerId).collect::<Vec<_>>();
    let partitions = topic
        .partitions
        .values()
        .map(|p| {
            let view = partition_view(image, topic.id, p, rules, on_listener);
            MetadataResponsePartition::default()
                .with_error_code(view.error)
                .with_partition_index(p.partition)
                .with_leader_id(BrokerId(view.leader))
                .with_leader_epoch(p.leader_epoch)
                .with_replica_nodes(ids(&view.replicas))
                .with_isr_nodes(ids(&view.isr))
                .with_offline_replicas(ids(&view.offline))
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(topic_name(&topic.name)))
        .with_topic_id(topic.id)
        .with_is_internal(topic.name.starts_with("__"))
        .with_partitions(partitions)
}

#[cfg(test)]
mod tests {
    use runnel_metadata::MetadataRecord;
    use uuid::Uuid;

    use super::*;
    use crate::errors::code;

    /// Brokers 1 (live) and 2 (fenced); topic "t" with one partition led by `leader`.
    fn cluster(leader: i32) -> (MetadataImage, Arc<TopicImage>) {
        let mut records = crate::handlers::test_images::live_1_fenced_2();
        let topic_id = Uuid::from_u128(7);
        records.push(MetadataRecord::Topic {
            name: "t".into(),
            topic_id,
        });
        records.push(MetadataRecord::Partition {
            topic_id,
            partition_id: 0,
            replicas: vec![2, 1],
            isr: vec![2, 1],
            leader,
            leader_epoch: 4,
            partition_epoch: 0,
            adding_replicas: vec![],
            removing_replicas: vec![],
        });
        let image = crate::handlers::test_images::image_of(records);
        let topic = image.topic("t").cloned().expect("topic t");
        (image, topic)
    }

    /// Known case 7 (docs/faults.md): the fenced leader 2 is not among the live brokers a
    /// Metadata response lists, so the partition has no leader for the client.
    #[test]
    fn a_fenced_leader_is_reported_as_no_leader() {
        let (image, topic) = cluster(2);
        let t = describe_topic(&image, &topic, ViewRules::metadata(12), &|_| true);
        let p = &t.partitions[0];
        assert_eq!(p.leader_id, BrokerId(-1));
        assert_eq!(p.error_code, code::LEADER_NOT_AVAILABLE);
        assert_eq!(p.leader_epoch, 4);
        assert_eq!(p.replica_nodes, vec![BrokerId(2), BrokerId(1)]);
        assert_eq!(p.offline_replicas, vec![BrokerId(2)]);
        let (image, topic) = cluster(1);
        let t = describe_topic(&image, &topic, ViewRules::metadata(12), &|_| true);
        assert_eq!(t.partitions[0].leader_id, BrokerId(1));
        assert_eq!(t.partitions[0].error_code, code::NONE);
    }
}
