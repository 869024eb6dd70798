//! DescribeQuorum (API 55): the metadata quorum as kafka-metadata-quorum.sh shows it. Brokers
//! ask the active controller (only the quorum leader knows every replica's progress); a single
//! node describes itself as a one-voter quorum. v2 (KIP-853) adds `nodes`: each voter's
//! endpoint from `controller.quorum.voters`, on Kafka's default controller listener name
//! `CONTROLLER` (Runnel's voters are static, so every replica directory id is the zero id).

use std::sync::Arc;

use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{BrokerId, DescribeQuorumRequest, DescribeQuorumResponse};

use super::{str_bytes, topic_name};
use crate::clock::now_ms;
use crate::context::Broker;
use crate::errors::code;

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
        return DescribeQuorumResponse::default().with_error_code(code::UNKNOWN_TOPIC_OR_PARTITION);
    }
    let partition = match broker.controller.quorum_status().await {
        Ok(Some(status)) => quorum_partition(&status, version),
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
    let response = DescribeQuorumResponse::default().with_topics(vec![TopicData::default()
        .with_topic_name(topic_name(METADATA_TOPIC))
        .with_partitions(vec![partition.with_partition_index(0)])]);
    if version >= 2 {
        response.with_nodes(voter_nodes(broker))
    } else {
        response
    }
}

/// The metadata partition as the quorum reports it: leader, epoch, HW, each voter's and
/// observer's log end offset.
fn quorum_partition(status: &runnel_raft::QuorumStatus, version: i16) -> PartitionData {
    let offset = |o: u64| i64::try_from(o).unwrap_or(i64::MAX);
    let replicas = |rs: &[runnel_raft::ReplicaStatus]| {
        rs.iter()
            .map(|r| replica(r.node_id, r.log_end_offset.map_or(-1, offset), version))
            .collect::<Vec<_>>()
    };
    PartitionData::default()
        .with_leader_id(BrokerId(status.leader_id.unwrap_or(-1)))
        .with_leader_epoch(i32::try_from(status.leader_epoch).unwrap_or(i32::MAX))
        .with_high_watermark(offset(status.high_watermark))
        .with_current_voters(replicas(&status.voters))
        .with_observers(replicas(&status.observers))
}

/// The voters' endpoints (`id@host:port`), for v2's `nodes`.
fn voter_nodes(broker: &Broker) -> Vec<Node> {
    let Some(cluster) = broker.config.cluster.as_ref() else {
        return Vec::new();
    };
    cluster
        .voters
        .iter()
        .filter_map(|(&id, addr)| {
            let (host, port) = addr.rsplit_once(':')?;
            let port: u16 = port.parse().ok()?;
            let host = host.trim_start_matches('[').trim_end_matches(']');
            Some(Node::default().with_node_id(BrokerId(id)).with_listeners(
                vec![Listener::default()
                        .with_name(str_bytes("CONTROLLER"))
                        .with_host(str_bytes(host))
                        .with_port(port)],
            ))
        })
        .collect()
}
