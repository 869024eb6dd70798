//! OffsetForLeaderEpoch (API 23): the end offset of the requested epoch from the leader-epoch
//! cache, so followers and consumers can detect and cut a divergent tail (spec E.5).

use std::sync::Arc;

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use super::check_leader_epoch;
use crate::context::Broker;
use crate::errors::code;

fn failed(index: i32, code: i16) -> EpochEndOffset {
    EpochEndOffset::default()
        .with_partition(index)
        .with_error_code(code)
        .with_leader_epoch(-1)
        .with_end_offset(-1)
}

pub async fn handle(
    broker: &Arc<Broker>,
    request: OffsetForLeaderEpochRequest,
    _version: i16,
) -> OffsetForLeaderEpochResponse {
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let name = topic.topic.0.as_str();
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let partition = match super::led_partition(broker, name, p.partition) {
                        Ok(partition) => partition,
                        Err(code) => return failed(p.partition, code),
                    };
                    let role = partition.role();
                    let epoch_error = check_leader_epoch(p.current_leader_epoch, role.leader_epoch);
                    if epoch_error != code::NONE {
                        return failed(p.partition, epoch_error);
                    }
                    let (epoch, end_offset) =
                        partition.lock_log().end_offset_for_epoch(p.leader_epoch);
                    EpochEndOffset::default()
                        .with_partition(p.partition)
                        .with_leader_epoch(epoch)
                        .with_end_offset(end_offset)
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(topic.topic.clone())
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}
