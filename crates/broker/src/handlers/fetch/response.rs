//! The answer's assembly: per-partition errors, the topics in the request's order (by name
//! or, v13+, by id), and the KIP-951 leader hints of v16+.

use kafka_protocol::messages::fetch_response::{
    FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint, PartitionData,
};
use kafka_protocol::messages::{BrokerId, FetchResponse};

use super::plan::Plan;
use crate::context::Broker;
use crate::errors::code;

pub(in crate::handlers) fn partition_error(index: i32, code: i16) -> PartitionData {
    PartitionData::default()
        .with_partition_index(index)
        .with_error_code(code)
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1)
        .with_preferred_read_replica(BrokerId(-1))
        .with_records(Some(Default::default()))
}

/// The response of one pass: each topic's partitions (`by_topic`, in `plan.topics` order),
/// topics with no partition left out.
pub(super) fn assemble(plan: &Plan, by_topic: Vec<Vec<PartitionData>>) -> FetchResponse {
    let mut topics = Vec::with_capacity(plan.topics.len());
    for (t, mut partitions) in plan.topics.iter().zip(by_topic) {
        if partitions.is_empty() {
            continue;
        }
        if plan.version < 5 {
            // log_start_offset exists from v5 on.
            for p in &mut partitions {
                p.log_start_offset = -1;
            }
        }
        let mut out = FetchableTopicResponse::default().with_partitions(partitions);
        if plan.version >= 13 {
            out.topic_id = t.topic_id;
        } else {
            out.topic = t.name.clone();
        }
        topics.push(out);
    }
    FetchResponse::default().with_responses(topics)
}

/// KIP-951 (v16+): a partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names
/// the current leader and epoch; the response carries each such leader's endpoint once.
pub(super) fn add_leader_hints(
    broker: &Broker,
    response: &mut FetchResponse,
    version: i16,
    listener: &str,
) {
    let image = broker.image();
    let mut endpoints: Vec<NodeEndpoint> = Vec::new();
    for t in &mut response.responses {
        let name = if version >= 13 {
            match image.topic_by_id(&t.topic_id) {
                Some(ti) => ti.name.clone(),
                None => continue,
            }
        } else {
            t.topic.0.to_string()
        };
        for p in &mut t.partitions {
            if p.error_code != code::NOT_LEADER_OR_FOLLOWER
                && p.error_code != code::FENCED_LEADER_EPOCH
            {
                continue;
            }
            let Some(hint) =
                crate::handlers::leader_hint(broker, &image, &name, p.partition_index, listener)
            else {
                continue;
            };
            p.current_leader = LeaderIdAndEpoch::default()
                .with_leader_id(BrokerId(hint.leader_id))
                .with_leader_epoch(hint.leader_epoch);
            if !endpoints.iter().any(|e| e.node_id.0 == hint.leader_id) {
                endpoints.push(
                    NodeEndpoint::default()
                        .with_node_id(BrokerId(hint.leader_id))
                        .with_host(crate::handlers::str_bytes(&hint.host))
                        .with_port(hint.port)
                        .with_rack(hint.rack.as_deref().map(crate::handlers::str_bytes)),
                );
            }
        }
    }
    response.node_endpoints = endpoints;
}
