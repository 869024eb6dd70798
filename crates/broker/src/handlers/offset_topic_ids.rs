//! OffsetCommit v10 / OffsetFetch v10 (KIP-848): topics are named by their id, not their name.
//! As Kafka's `KafkaApis` does, the ids are resolved to names against the metadata image
//! before anything else looks at the request, so authorization and the group coordinator work
//! on names as for v9; a topic whose id the image does not have (deleted, never existed, or the
//! zero id of a client that sent no id) is taken out of the request and each of its
//! partitions is answered UNKNOWN_TOPIC_ID. On the way out every topic of an OffsetFetch
//! answer is given the id the image has for its name; an offset kept for a topic that no
//! longer exists has no id to be named by and is left out (it can only be listed by a
//! request for all topics, since a requested id always resolves to a live topic).

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopics;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartitions, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::*;
use runnel_metadata::image::MetadataImage;

use super::topic_name;
use crate::errors::code;

/// The first version that names topics by id.
pub const TOPIC_ID_VERSION: i16 = 10;

/// Names each topic of a v10 commit after its id; returns the answers for the topics whose id
/// is unknown (removed from the request).
pub fn resolve_commit(
    request: &mut OffsetCommitRequest,
    image: &MetadataImage,
) -> Vec<OffsetCommitResponseTopic> {
    let (known, unknown) = split_by_id(std::mem::take(&mut request.topics), image, |t| {
        (t.topic_id, &mut t.name)
    });
    request.topics = known;
    unknown
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code::UNKNOWN_TOPIC_ID)
                })
                .collect();
            OffsetCommitResponseTopic::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions)
        })
        .collect()
}

/// Names each requested topic of every group of a v10 fetch after its id; returns, per group
/// (in request order), the topics whose id is unknown (removed from the request).
pub fn resolve_fetch(
    request: &mut OffsetFetchRequest,
    image: &MetadataImage,
) -> Vec<Vec<OffsetFetchRequestTopics>> {
    request
        .groups
        .iter_mut()
        .map(|g| match g.topics.take() {
            None => Vec::new(),
            Some(topics) => {
                let (known, unknown) = split_by_id(topics, image, |t| (t.topic_id, &mut t.name));
                g.topics = Some(known);
                unknown
            }
        })
        .collect()
}

/// Gives every topic of a v10 fetch answer its id, drops those the image has no id for, and
/// answers each group's unknown ids (unless the group itself failed: then it lists nothing).
pub fn finish_fetch(
    response: &mut OffsetFetchResponse,
    unknown: Vec<Vec<OffsetFetchRequestTopics>>,
    image: &MetadataImage,
) {
    for (group, unknown) in response
        .groups
        .iter_mut()
        .zip(unknown.into_iter().chain(std::iter::repeat_with(Vec::new)))
    {
        group
            .topics
            .retain_mut(|t| match image.topic(t.name.0.as_str()) {
                Some(topic) => {
                    t.topic_id = topic.id;
                    true
                }
                None => false,
            });
        if group.error_code != code::NONE {
            continue;
        }
        group.topics.extend(unknown.iter().map(|t| {
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&p| {
                    OffsetFetchResponsePartitions::default()
                        .with_partition_index(p)
                        .with_committed_offset(-1)
                        .with_committed_leader_epoch(-1)
                        .with_metadata(Some(Default::default()))
                        .with_error_code(code::UNKNOWN_TOPIC_ID)
                })
                .collect();
            OffsetFetchResponseTopics::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions)
        }));
    }
}

/// Splits topics into those whose id the image knows (their name set from it) and the rest.
fn split_by_id<T>(
    topics: Vec<T>,
    image: &MetadataImage,
    fields: impl Fn(&mut T) -> (uuid::Uuid, &mut TopicName),
) -> (Vec<T>, Vec<T>) {
    let mut known = Vec::with_capacity(topics.len());
    let mut unknown = Vec::new();
    for mut t in topics {
        let (id, name) = fields(&mut t);
        match image.topic_by_id(&id) {
            Some(topic) if !id.is_nil() => {
                *name = topic_name(&topic.name);
                known.push(t);
            }
            _ => unknown.push(t),
        }
    }
    (known, unknown)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };

    fn image_with(topic: &str, id: uuid::Uuid) -> MetadataImage {
        use runnel_metadata::records::MetadataRecord;
        let records = vec![
            MetadataRecord::Topic {
                name: topic.into(),
                topic_id: id,
            },
            MetadataRecord::Partition {
                topic_id: id,
                partition_id: 0,
                replicas: vec![1],
                isr: vec![1],
                leader: 1,
                leader_epoch: 0,
                partition_epoch: 0,
                adding_replicas: vec![],
                removing_replicas: vec![],
            },
        ];
        crate::handlers::test_images::image_of(records)
    }

    fn commit_topic(id: uuid::Uuid) -> OffsetCommitRequestTopic {
        OffsetCommitRequestTopic::default()
            .with_topic_id(id)
            .with_partitions(vec![
                OffsetCommitRequestPartition::default().with_partition_index(0)
            ])
    }

    #[test]
    fn commit_ids_resolve_to_names_and_unknown_ones_are_answered() {
        let id = uuid::Uuid::from_u128(7);
        let image = image_with("t", id);
        let mut request = OffsetCommitRequest::default().with_topics(vec![
            commit_topic(id),
            commit_topic(uuid::Uuid::from_u128(8)),
            commit_topic(uuid::Uuid::nil()),
        ]);
        let unknown = resolve_commit(&mut request, &image);
        assert_eq!(request.topics.len(), 1);
        assert_eq!(request.topics[0].name.0.as_str(), "t");
        let codes: Vec<(uuid::Uuid, i16)> = unknown
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, p.error_code)))
            .collect();
        assert_eq!(
            codes,
            vec![
                (uuid::Uuid::from_u128(8), code::UNKNOWN_TOPIC_ID),
                (uuid::Uuid::nil(), code::UNKNOWN_TOPIC_ID),
            ]
        );
    }
}
