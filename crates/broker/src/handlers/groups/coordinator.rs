//! FindCoordinator (10): which broker coordinates a group or a transactional id, creating the
//! coordinator's internal topic (`__consumer_offsets`, `__transaction_state`) on first use.

use std::sync::Arc;

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::*;
use runnel_metadata::CreateTopicRequest;

use super::INVALID_REQUEST;
use crate::context::{Broker, RequestContext};
use crate::group_manager::{COORDINATOR_NOT_AVAILABLE, OFFSETS_TOPIC};
use crate::handlers::str_bytes;
use crate::txn_manager::TXN_TOPIC;

/// An internal topic a coordinator keeps its state in.
struct InternalTopic {
    name: &'static str,
    partitions_key: &'static str,
    replication_key: &'static str,
    configs: Vec<(String, Option<String>)>,
}

fn offsets_topic() -> InternalTopic {
    InternalTopic {
        name: OFFSETS_TOPIC,
        partitions_key: "offsets.topic.num.partitions",
        replication_key: "offsets.topic.replication.factor",
        configs: vec![
            ("cleanup.policy".into(), Some("compact".into())),
            ("segment.bytes".into(), Some("104857600".into())),
            ("compression.type".into(), Some("producer".into())),
        ],
    }
}

/// `__transaction_state` as Kafka creates it: compacted, with
/// `transaction.state.log.min.isr` (at most its replication factor, so a small cluster's
/// smaller RF can still take acks=all writes) and `transaction.state.log.segment.bytes`.
fn transaction_topic(broker: &Broker) -> InternalTopic {
    let rf = broker
        .config
        .internal_topic_replication_factor("transaction.state.log.replication.factor");
    let min_isr = broker
        .config
        .get_i64("transaction.state.log.min.isr", 2)
        .clamp(1, i64::from(rf));
    let segment = broker
        .config
        .get_i64("transaction.state.log.segment.bytes", 104_857_600);
    InternalTopic {
        name: TXN_TOPIC,
        partitions_key: "transaction.state.log.num.partitions",
        replication_key: "transaction.state.log.replication.factor",
        configs: vec![
            ("cleanup.policy".into(), Some("compact".into())),
            ("segment.bytes".into(), Some(segment.to_string())),
            ("min.insync.replicas".into(), Some(min_isr.to_string())),
            ("compression.type".into(), Some("uncompressed".into())),
            (
                "unclean.leader.election.enable".into(),
                Some("false".into()),
            ),
        ],
    }
}

/// Creates a coordinator's internal topic on first use, with its replication-factor
/// property's replicas. Like Kafka, not before that many brokers are registered and unfenced:
/// a topic created while the cluster is still starting would keep a smaller RF for good.
/// Meanwhile FindCoordinator answers COORDINATOR_NOT_AVAILABLE and clients retry.
async fn ensure_internal_topic(broker: &Arc<Broker>, topic: InternalTopic) {
    let image = broker.image();
    if image.topic(topic.name).is_some() {
        return;
    }
    let rf = broker
        .config
        .internal_topic_replication_factor(topic.replication_key);
    let live = image.live_brokers().count();
    if live < usize::try_from(rf).unwrap_or(usize::MAX) {
        tracing::info!(
            live,
            required = rf,
            topic = topic.name,
            "not creating the internal topic yet: fewer live brokers than its replication factor"
        );
        return;
    }
    let partitions =
        i32::try_from(broker.config.get_i64(topic.partitions_key, 50).max(1)).unwrap_or(i32::MAX);
    let request = CreateTopicRequest {
        name: topic.name.to_string(),
        num_partitions: partitions,
        replication_factor: rf,
        assignment: Vec::new(),
        configs: topic.configs,
    };
    match broker
        .controller
        .run(runnel_metadata::controller::CreateTopics {
            requests: vec![request],
            validate_only: false,
        })
        .await
    {
        Ok(outcomes) => {
            for o in outcomes {
                if let Err(e) = o.result {
                    if e.code != crate::errors::code::TOPIC_ALREADY_EXISTS {
                        tracing::warn!(error = %e.message, topic = topic.name, "cannot create internal topic");
                    }
                }
            }
        }
        Err(e) => {
            tracing::warn!(error = %e.message, topic = topic.name, "cannot create internal topic")
        }
    }
}

/// (error, node id, host, port on the client's `listener`) of the coordinator for `key`: the
/// leader of its partition of `__consumer_offsets` (key type 0, a group) or
/// `__transaction_state` (1, a transactional id).
async fn locate(
    broker: &Arc<Broker>,
    key: &str,
    key_type: i8,
    listener: &str,
) -> (i16, i32, String, i32) {
    let topic = match key_type {
        0 => offsets_topic(),
        1 => transaction_topic(broker),
        _ => return (INVALID_REQUEST, -1, String::new(), -1),
    };
    let name = topic.name;
    ensure_internal_topic(broker, topic).await;
    let image = broker.image();
    let Some(topic) = image.topic(name) else {
        return (COORDINATOR_NOT_AVAILABLE, -1, String::new(), -1);
    };
    let p = runnel_group::partition_for_group(
        key,
        i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX),
    );
    let leader = topic.partitions.get(&p).map(|p| p.leader).unwrap_or(-1);
    // A coordinator without an endpoint on the client's listener is not available to it,
    // as Kafka's `getAliveBrokerNode(id, listenerName)`.
    let found = image
        .brokers
        .get(&leader)
        .filter(|b| !b.fenced)
        .and_then(|b| Some((b.id, broker.endpoint_of(b, listener)?)));
    match found {
        Some((id, (host, port))) => (0, id, host, i32::from(port)),
        None => (COORDINATOR_NOT_AVAILABLE, -1, String::new(), -1),
    }
}

pub async fn find_coordinator(
    broker: &Arc<Broker>,
    request: FindCoordinatorRequest,
    version: i16,
    ctx: &RequestContext,
) -> FindCoordinatorResponse {
    if version >= 4 {
        let mut coordinators = Vec::with_capacity(request.coordinator_keys.len());
        for key in &request.coordinator_keys {
            let (code, node, host, port) =
                locate(broker, key.as_str(), request.key_type, &ctx.listener).await;
            coordinators.push(
                Coordinator::default()
                    .with_key(key.clone())
                    .with_node_id(BrokerId(node))
                    .with_host(str_bytes(&host))
                    .with_port(port)
                    .with_error_code(code)
                    .with_error_message(None),
            );
        }
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let (code, node, host, port) = locate(
        broker,
        request.key.as_str(),
        request.key_type,
        &ctx.listener,
    )
    .await;
    let response = FindCoordinatorResponse::default()
        .with_error_code(code)
        .with_node_id(BrokerId(node))
        .with_host(str_bytes(&host))
        .with_port(port);
    if version >= 1 {
        response.with_error_message(None)
    } else {
        response
    }
}
