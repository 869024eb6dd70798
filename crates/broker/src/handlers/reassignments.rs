//! AlterPartitionReassignments (API 45) and ListPartitionReassignments (API 46), KIP-455: what
//! kafka-reassign-partitions.sh and `runnel reassign-partitions` use. Alter is decided by the
//! active controller (forwarded from any broker); List reads this broker's metadata image,
//! which every broker applies from the same log.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, BrokerId,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};
use runnel_metadata::reassignment::in_progress;
use runnel_metadata::{PartitionImage, ReassignmentRequest};

use super::{str_bytes, topic_name, topic_str};
use crate::context::Broker;

pub async fn alter(
    broker: &Arc<Broker>,
    request: AlterPartitionReassignmentsRequest,
    version: i16,
) -> AlterPartitionReassignmentsResponse {
    // v0 has no flag and always allows a replication-factor change (KIP-860).
    let allow_rf_change = version < 1 || request.allow_replication_factor_change;
    let requests: Vec<ReassignmentRequest> = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| ReassignmentRequest {
                topic: topic_str(&t.name).to_string(),
                partition: p.partition_index,
                target: p.replicas.as_ref().map(|r| r.iter().map(|b| b.0).collect()),
            })
        })
        .collect();
    let response = AlterPartitionReassignmentsResponse::default()
        .with_allow_replication_factor_change(version >= 1 && allow_rf_change);
    let results = match broker
        .controller
        .run(runnel_metadata::controller::AlterReassignments {
            requests,
            allow_replication_factor_change: allow_rf_change,
        })
        .await
    {
        Ok(results) => results,
        Err(e) => {
            return response
                .with_error_code(e.code)
                .with_error_message(Some(str_bytes(&e.message)))
        }
    };
    let mut by_topic: BTreeMap<String, Vec<ReassignablePartitionResponse>> = BTreeMap::new();
    for (topic, partition, result) in results {
        let r = ReassignablePartitionResponse::default().with_partition_index(partition);
        let r = match result {
            Ok(()) => r.with_error_code(0).with_error_message(None),
            Err(e) => r
                .with_error_code(e.code)
                .with_error_message(Some(str_bytes(&e.message))),
        };
        by_topic.entry(topic).or_default().push(r);
    }
    response.with_responses(
        by_topic
            .into_iter()
            .map(|(topic, partitions)| {
                ReassignableTopicResponse::default()
                    .with_name(topic_name(&topic))
                    .with_partitions(partitions)
            })
            .collect(),
    )
}

pub async fn list(
    broker: &Arc<Broker>,
    request: ListPartitionReassignmentsRequest,
    _version: i16,
) -> ListPartitionReassignmentsResponse {
    let image = broker.image();
    let ongoing = |p: &PartitionImage| {
        in_progress(&p.adding_replicas, &p.removing_replicas).then(|| {
            let ids = |v: &[i32]| v.iter().map(|b| BrokerId(*b)).collect::<Vec<_>>();
            OngoingPartitionReassignment::default()
                .with_partition_index(p.partition)
                .with_replicas(ids(&p.replicas))
                .with_adding_replicas(ids(&p.adding_replicas))
                .with_removing_replicas(ids(&p.removing_replicas))
        })
    };
    let mut topics = Vec::new();
    match &request.topics {
        // Every partition being moved.
        None => {
            for (name, topic) in &image.topics {
                let partitions: Vec<_> = topic.partitions.values().filter_map(ongoing).collect();
                if !partitions.is_empty() {
                    topics.push((name.clone(), partitions));
                }
            }
        }
        // The requested ones; unknown topics and partitions are left out, as in KRaft.
        Some(requested) => {
            for t in requested {
                let name = topic_str(&t.name);
                let Some(topic) = image.topic(name) else {
                    continue;
                };
                let partitions: Vec<_> = t
                    .partition_indexes
                    .iter()
                    .filter_map(|i| topic.partitions.get(i))
                    .filter_map(ongoing)
                    .collect();
                if !partitions.is_empty() {
                    topics.push((name.to_string(), partitions));
                }
            }
        }
    }
    ListPartitionReassignmentsResponse::default()
        .with_error_code(0)
        .with_error_message(None)
        .with_topics(
            topics
                .into_iter()
                .map(|(name, partitions)| {
                    OngoingTopicReassignment::default()
                        .with_name(topic_name(&name))
                        .with_partitions(partitions)
                })
                .collect(),
        )
}
