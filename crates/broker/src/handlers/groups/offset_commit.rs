//! OffsetCommit (8): a group's committed offsets, for the partitions the metadata knows.

use std::sync::Arc;

use kafka_protocol::messages::*;
use runnel_group::CommitOffset;

use super::opt;
use crate::context::Broker;
use crate::errors::code;

/// OffsetCommit. As in Kafka's `KafkaApis.handleOffsetCommitRequest`, a partition the
/// metadata image does not have (unknown topic, or a partition index past its count) gets
/// UNKNOWN_TOPIC_OR_PARTITION before the group coordinator is asked, and only the others are
/// committed; if none is left the coordinator is not consulted at all.
pub async fn offset_commit(
    broker: &Arc<Broker>,
    request: OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    let image = broker.image();
    let exists = |topic: &str, partition: i32| image.partition(topic, partition).is_some();
    let offsets = offsets_to_commit(&request, version, &exists);
    let (top, codes) = if offsets.is_empty() {
        (code::NONE, Vec::new())
    } else {
        let req = runnel_group::OffsetCommitRequest {
            group_id: request.group_id.0.to_string(),
            generation_id: request.generation_id_or_member_epoch,
            member_id: request.member_id.to_string(),
            group_instance_id: opt(&request.group_instance_id),
            offsets,
        };
        broker.groups.commit(req).await
    };
    let topics = request
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let error_code = if !exists(t.name.0.as_str(), p.partition_index) {
                        code::UNKNOWN_TOPIC_OR_PARTITION
                    } else if top != code::NONE {
                        top
                    } else {
                        codes
                            .iter()
                            .find(|(topic, partition, _)| {
                                topic == t.name.0.as_str() && *partition == p.partition_index
                            })
                            .map_or(top, |c| c.2)
                    };
                    offset_commit_response::OffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(error_code)
                })
                .collect();
            offset_commit_response::OffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_topic_id(t.topic_id)
                .with_partitions(partitions)
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}

/// The request's offsets of partitions the metadata image has (`exists`), as the group
/// coordinator takes them.
fn offsets_to_commit(
    request: &OffsetCommitRequest,
    version: i16,
    exists: &impl Fn(&str, i32) -> bool,
) -> Vec<CommitOffset> {
    request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .filter(|p| exists(t.name.0.as_str(), p.partition_index))
                .map(move |p| CommitOffset {
                    topic: t.name.0.to_string(),
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: if version >= 6 {
                        p.committed_leader_epoch
                    } else {
                        -1
                    },
                    metadata: opt(&p.committed_metadata),
                })
        })
        .collect()
}
