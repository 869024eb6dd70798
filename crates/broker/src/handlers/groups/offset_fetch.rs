//! OffsetFetch (9): a group's committed offsets, one group per request before v8, a list of
//! groups from v8 on.

use std::sync::Arc;

use kafka_protocol::messages::*;

use super::opt;
use crate::context::Broker;
use crate::group_manager::FetchMember;
use crate::handlers::{str_bytes, topic_name};

type Requested = Option<Vec<(String, Vec<i32>)>>;
/// (partition, committed offset, leader epoch, metadata, error code)
type FetchedPartition = (i32, i64, i32, String, i16);
type FetchedTopics = Vec<(String, Vec<FetchedPartition>)>;

/// One group's committed offsets: (top-level code, per topic: [(partition, offset, epoch, metadata, code)]).
async fn fetch_group(
    broker: &Arc<Broker>,
    group: String,
    requested: Requested,
    require_stable: bool,
    member: Option<FetchMember>,
) -> (i16, FetchedTopics) {
    let (code, found) = broker
        .groups
        .fetch(group, requested.clone(), require_stable, member)
        .await;
    if code != 0 {
        return (code, Vec::new());
    }
    let mut topics: FetchedTopics = Vec::new();
    for (topic, partition, committed, pcode) in found {
        let entry = match committed {
            Some(c) => (partition, c.offset, c.leader_epoch, c.metadata, pcode),
            None => (partition, -1, -1, String::new(), pcode),
        };
        match topics.iter_mut().find(|(t, _)| *t == topic) {
            Some((_, list)) => list.push(entry),
            None => topics.push((topic, vec![entry])),
        }
    }
    (0, topics)
}

pub async fn offset_fetch(
    broker: &Arc<Broker>,
    request: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    if version >= 8 {
        let mut groups = Vec::with_capacity(request.groups.len());
        for g in &request.groups {
            groups.push(fetch_listed_group(broker, g, request.require_stable, version).await);
        }
        return OffsetFetchResponse::default().with_groups(groups);
    }
    fetch_single_group(broker, request, version).await
}

/// v8+: one of the request's groups.
async fn fetch_listed_group(
    broker: &Arc<Broker>,
    g: &offset_fetch_request::OffsetFetchRequestGroup,
    require_stable: bool,
    version: i16,
) -> offset_fetch_response::OffsetFetchResponseGroup {
    let requested: Requested = g.topics.as_ref().map(|topics| {
        topics
            .iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
            .collect()
    });
    // v9: KIP-848 members fetch with their member id and epoch.
    let member = (version >= 9).then(|| (opt(&g.member_id), g.member_epoch));
    let (code, topics) = fetch_group(
        broker,
        g.group_id.0.to_string(),
        requested,
        require_stable,
        member,
    )
    .await;
    let topics = topics
        .into_iter()
        .map(|(name, partitions)| {
            offset_fetch_response::OffsetFetchResponseTopics::default()
                .with_name(topic_name(&name))
                .with_partitions(
                    partitions
                        .into_iter()
                        .map(|(p, offset, epoch, metadata, code)| {
                            offset_fetch_response::OffsetFetchResponsePartitions::default()
                                .with_partition_index(p)
                                .with_committed_offset(offset)
                                .with_committed_leader_epoch(epoch)
                                .with_metadata(Some(str_bytes(&metadata)))
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    offset_fetch_response::OffsetFetchResponseGroup::default()
        .with_group_id(g.group_id.clone())
        .with_error_code(code)
        .with_topics(topics)
}

/// v1-7: the request's one group, its topics at the top level.
async fn fetch_single_group(
    broker: &Arc<Broker>,
    request: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    let requested: Requested = request.topics.as_ref().map(|topics| {
        topics
            .iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
            .collect()
    });
    // require_stable exists from v7 (it decodes as false before).
    let (code, topics) = fetch_group(
        broker,
        request.group_id.0.to_string(),
        requested,
        request.require_stable,
        None,
    )
    .await;
    let topics = topics
        .into_iter()
        .map(|(name, partitions)| {
            offset_fetch_response::OffsetFetchResponseTopic::default()
                .with_name(topic_name(&name))
                .with_partitions(
                    partitions
                        .into_iter()
                        .map(|(p, offset, epoch, metadata, pcode)| {
                            offset_fetch_response::OffsetFetchResponsePartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(offset)
                                .with_committed_leader_epoch(if version >= 5 { epoch } else { -1 })
                                .with_metadata(Some(str_bytes(&metadata)))
                                .with_error_code(pcode)
                        })
                        .collect(),
                )
        })
        .collect();
    let response = OffsetFetchResponse::default().with_topics(topics);
    if version >= 2 {
        response.with_error_code(code)
    } else if code != 0 {
        response.with_topics(group_error_on_partitions(request.topics, code))
    } else {
        response
    }
}

/// v0-1 have no top-level code: a group's error goes on every requested partition.
fn group_error_on_partitions(
    requested: Option<Vec<offset_fetch_request::OffsetFetchRequestTopic>>,
    code: i16,
) -> Vec<offset_fetch_response::OffsetFetchResponseTopic> {
    requested
        .unwrap_or_default()
        .into_iter()
        .map(|t| {
            offset_fetch_response::OffsetFetchResponseTopic::default()
                .with_name(t.name)
                .with_partitions(
                    t.partition_indexes
                        .into_iter()
                        .map(|p| {
                            offset_fetch_response::OffsetFetchResponsePartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(-1)
                                .with_metadata(Some(str_bytes("")))
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect()
}
