//! ElectLeaders (API 43): preferred or unclean elections on request, decided by the active
//! controller (forwarded from any broker). Used by kafka-leader-election.sh and
//! `runnel leader-election`.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse};
use runnel_metadata::ElectionType;

use super::{str_bytes, topic_name};
use crate::context::Broker;

pub async fn handle(
    broker: &Arc<Broker>,
    request: ElectLeadersRequest,
    version: i16,
) -> ElectLeadersResponse {
    let election = if version >= 1 && request.election_type == 1 {
        ElectionType::Unclean
    } else {
        ElectionType::Preferred
    };
    let partitions: Option<Vec<(String, i32)>> = request.topic_partitions.as_ref().map(|tps| {
        tps.iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |p| (t.topic.0.to_string(), *p))
            })
            .collect()
    });
    let results = match broker
        .controller
        .run(runnel_metadata::controller::ElectLeaders {
            election,
            partitions: partitions.clone(),
        })
        .await
    {
        Ok(results) => results,
        Err(e) => {
            let response = ElectLeadersResponse::default();
            return if version >= 1 {
                response.with_error_code(e.code)
            } else {
                // v0 has no top-level code: report it per partition.
                let failed = partitions
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(t, p)| (t, p, Err(e.clone())))
                    .collect();
                response.with_replica_election_results(group(failed))
            };
        }
    };
    ElectLeadersResponse::default().with_replica_election_results(group(results))
}

fn group(results: Vec<runnel_metadata::ElectionResult>) -> Vec<ReplicaElectionResult> {
    let mut by_topic: BTreeMap<String, Vec<PartitionResult>> = BTreeMap::new();
    for (topic, partition, result) in results {
        let r = PartitionResult::default().with_partition_id(partition);
        let r = match result {
            Ok(()) => r.with_error_code(0).with_error_message(None),
            Err(e) => r
                .with_error_code(e.code)
                .with_error_message(Some(str_bytes(&e.message))),
        };
        by_topic.entry(topic).or_default().push(r);
    }
    by_topic
        .into_iter()
        .map(|(topic, partition_result)| {
            ReplicaElectionResult::default()
                .with_topic(topic_name(&topic))
                .with_partition_result(partition_result)
        })
        .collect()
}
