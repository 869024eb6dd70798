//! DescribeProducers (API 61, KIP-664): the producer state of partitions this broker hosts,
//! as leader or follower (producer id, epoch, last sequence, last timestamp, coordinator
//! epoch, start offset of the open transaction), as Kafka's
//! `ReplicaManager.activeProducerState` / `Partition.activeProducerState`: a follower keeps
//! the producer state of what it replicated, and `find-hanging --broker-id` asks that broker
//! about every partition it holds a replica of. Per partition: READ on its topic
//! (TOPIC_AUTHORIZATION_FAILED, decided by the caller), UNKNOWN_TOPIC_OR_PARTITION,
//! NOT_LEADER_OR_FOLLOWER (a partition of the cluster this broker holds no replica of). Used by `runnel transactions describe-producers` / `find-hanging`
//! and by Kafka's `kafka-transactions.sh`.

use std::sync::Arc;

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};

use crate::context::Broker;

/// `refused_topic(name)`: the code for a topic the caller's authorization refuses, if any.
pub async fn handle(
    broker: &Arc<Broker>,
    request: DescribeProducersRequest,
    _version: i16,
    refused_topic: impl Fn(&str) -> Option<i16>,
) -> DescribeProducersResponse {
    let topics = request
        .topics
        .iter()
        .map(|t| {
            let name = t.name.0.as_str();
            let refused = refused_topic(name);
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&index| {
                    let answer = PartitionResponse::default().with_partition_index(index);
                    if let Some(code) = refused {
                        return answer.with_error_code(code);
                    }
                    match hosted_partition(broker, name, index) {
                        Err(code) => answer.with_error_code(code),
                        Ok(p) => answer.with_active_producers(
                            p.describe_producers()
                                .into_iter()
                                .map(|v| {
                                    ProducerState::default()
                                        .with_producer_id(ProducerId(v.producer_id))
                                        .with_producer_epoch(i32::from(v.producer_epoch))
                                        .with_last_sequence(v.last_sequence)
                                        .with_last_timestamp(v.last_timestamp)
                                        .with_coordinator_epoch(v.coordinator_epoch)
                                        .with_current_txn_start_offset(v.current_txn_start_offset)
                                })
                                .collect(),
                        ),
                    }
                })
                .collect();
            TopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}

/// The replica of `topic`-`index` this broker holds, leader or follower.
fn hosted_partition(
    broker: &Broker,
    topic: &str,
    index: i32,
) -> Result<Arc<crate::replica::partition::Partition>, i16> {
    use crate::errors::code;
    match broker.replicas.get(topic, index) {
        Some(p) => Ok(p),
        None if broker.image().partition(topic, index).is_some() => {
            Err(code::NOT_LEADER_OR_FOLLOWER)
        }
        None => Err(code::UNKNOWN_TOPIC_OR_PARTITION),
    }
}
