//! DescribeQuorum (API 55): the metadata quorum as kafka-metadata-quorum.sh shows it. Brokers
//! ask the active controller (only the quorum leader knows every replica's progress); a single
//! node describes itself as a one-voter quorum.

use std::sync::Arc;

use kafka_protocol::messages::describe_quorum_response::{PartitionData, ReplicaState, TopicData};
use kafka_protocol::messages::{BrokerId, DescribeQuorumRequest, DescribeQuorumResponse};

use super::{str_bytes, topic_name};
use crate::clock::now_ms;
use crate::context::Broker;

const METADATA_TOPIC: &str = "__cluster_metadata";

fn replica(id: i32, log_end_offset: i64, version: i16) -> ReplicaState {
    let r = ReplicaState::default()
        .with_replica_id(BrokerId(id))
        .with_log_end_offset(log_end_offset);
    if version >= 1 {
        let now = now_ms();
        r.with_last_fetch_timestamp(now)
            .with_last_caught_up_timestamp(now)
    } else {
        r
    }
}

pub async fn handle(
    broker: &Arc<Broker>,
    request: DescribeQuorumRequest,
    version: i16,
) -> DescribeQuorumResponse {
    let wants_metadata = request.topics.iter().any(|t| {
        t.topic_name.0.as_str() == METADATA_TOPIC
            && t.partitions.iter().any(|p| p.partition_index == 0)
    });
    if !wants_metadata {
        return DescribeQuorumResponse::default().with_error_code(3);
    }
    let partition = match broker.controller.quorum_status().await {
        Ok(Some(status)) => {
            let hw = status.high_watermark as i64;
            let voters = status
                .voters
                .iter()
                .map(|r| {
                    replica(
                        r.node_id,
                        r.log_end_offset.map_or(-1, |o| o as i64),
                        version,
                    )
                })
                .collect();
            let observers = status
                .observers
                .iter()
                .map(|r| {
                    replica(
                        r.node_id,
                        r.log_end_offset.map_or(-1, |o| o as i64),
                        version,
                    )
                })
                .collect();
            PartitionData::default()
                .with_leader_id(BrokerId(status.leader_id.unwrap_or(-1)))
                .with_leader_epoch(status.leader_epoch.min(i32::MAX as u64) as i32)
                .with_high_watermark(hw)
                .with_current_voters(voters)
                .with_observers(observers)
        }
        Ok(None) => {
            // A single node is its own one-voter quorum.
            let end = broker.image().offset + 1;
            PartitionData::default()
                .with_leader_id(BrokerId(broker.node_id))
                .with_leader_epoch(1)
                .with_high_watermark(end)
                .with_current_voters(vec![replica(broker.node_id, end, version)])
        }
        Err(e) => {
            let p = PartitionData::default().with_error_code(e.code);
            if version >= 2 {
                p.with_error_message(Some(str_bytes(&e.message)))
            } else {
                p
            }
        }
    };
    DescribeQuorumResponse::default().with_topics(vec![TopicData::default()
        .with_topic_name(topic_name(METADATA_TOPIC))
        .with_partitions(vec![partition.with_partition_index(0)])])
}
