//! DescribeTopicPartitions (API 75, KIP-966): the topic layout Metadata gives, paged by a
//! cursor so a cluster with many partitions is described in bounded responses. Kafka 3.9+
//! AdminClients use it for `describeTopics` when the broker advertises it.
//!
//! The paging follows Kafka's `DescribeTopicPartitionsRequestHandler` and
//! `KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse`: topics sorted by name from
//! the cursor's topic on, at most `min(response_partition_limit,
//! max.request.partition.size.limit)` partitions (at least one) per response; when the limit
//! cuts a topic, `next_cursor` names the first partition not returned. An empty topic list
//! means every topic, and then unknown names cannot occur; a named topic that does not exist
//! answers UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an invalid name).
//! Runnel has no eligible leader replicas (KIP-966 ELR), so those lists are empty.

use std::sync::Arc;

use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse,
};
use runnel_metadata::{validate_topic_name, BrokerRegistration, MetadataImage, TopicImage};

use super::metadata::authorized_operations;
use super::partition_view::{partition_view, ViewRules};
use super::topic_name;
use crate::context::Broker;
use crate::errors::code;

pub async fn handle(
    broker: &Arc<Broker>,
    request: DescribeTopicPartitionsRequest,
    _version: i16,
    listener: &str,
) -> DescribeTopicPartitionsResponse {
    let cap = i64::from(broker.settings.max_request_partition_size_limit);
    let on_listener = |b: &BrokerRegistration| broker.endpoint_of(b, listener).is_some();
    describe(&broker.image(), &request, cap, &on_listener)
}

/// The response for `request` against `image`, at most `cap` partitions (the broker's limit);
/// `on_listener(b)`: whether broker `b` has an endpoint on the client's listener.
pub fn describe(
    image: &MetadataImage,
    request: &DescribeTopicPartitionsRequest,
    cap: i64,
    on_listener: &dyn Fn(&BrokerRegistration) -> bool,
) -> DescribeTopicPartitionsResponse {
    let cursor = request
        .cursor
        .as_ref()
        .map(|c| (c.topic_name.0.to_string(), c.partition_index));
    let cursor_topic = cursor.as_ref().map(|(t, _)| t.as_str()).unwrap_or("");
    let all_topics = request.topics.is_empty();
    let mut names: Vec<String> = if all_topics {
        image.topics.values().map(|t| t.name.clone()).collect()
    } else {
        request
            .topics
            .iter()
            .map(|t| t.name.0.to_string())
            .collect()
    };
    names.retain(|n| n.as_str() >= cursor_topic);
    names.sort();
    names.dedup();
    if let Some((topic, partition)) = &cursor {
        if (!all_topics && !names.contains(topic)) || *partition < 0 {
            return invalid_request(request);
        }
    }
    let limit = i64::from(request.response_partition_limit)
        .min(cap)
        .clamp(1, i64::from(i32::MAX));
    let mut remaining = usize::try_from(limit).unwrap_or(1);
    let mut response = DescribeTopicPartitionsResponse::default();
    for name in names {
        if remaining == 0 {
            response.next_cursor = Some(cursor_at(&name, 0));
            break;
        }
        let Some(topic) = image.topic(&name) else {
            if !all_topics {
                response.topics.push(unknown_topic(&name));
            }
            continue;
        };
        let start = match &cursor {
            Some((t, p)) if *t == name => *p,
            _ => 0,
        };
        let (described, next) = describe_topic(image, topic, start, remaining, on_listener);
        remaining -= described.partitions.len();
        response.topics.push(described);
        if let Some(next) = next {
            response.next_cursor = Some(cursor_at(&name, next));
            break;
        }
    }
    response
}

/// `topic`'s partitions from `start`, at most `max`; the index of the first one left out.
/// Leaders and offline replicas as Metadata tells them ([`partition_view`]; Kafka sets no
/// partition error here, only leader -1).
fn describe_topic(
    image: &MetadataImage,
    topic: &TopicImage,
    start: i32,
    max: usize,
    on_listener: &dyn Fn(&BrokerRegistration) -> bool,
) -> (DescribeTopicPartitionsResponseTopic, Option<i32>) {
    let rules = ViewRules {
        filter_unavailable_replicas: false,
        listener_not_found_error: true,
    };
    let mut partitions = Vec::new();
    let mut next = None;
    for p in topic.partitions.range(start..).map(|(_, p)| p) {
        if partitions.len() == max {
            next = Some(p.partition);
            break;
        }
        let ids = |v: &[i32]| v.iter().copied().map(BrokerId).collect::<Vec<_>>();
        let view = partition_view(image, topic.id, p, rules, on_listener);
        partitions.push(
            DescribeTopicPartitionsResponsePartition::default()
                .with_partition_index(p.partition)
                .with_leader_id(BrokerId(view.leader))
                .with_leader_epoch(p.leader_epoch)
                .with_replica_nodes(ids(&view.replicas))
                .with_isr_nodes(ids(&view.isr))
                .with_offline_replicas(ids(&view.offline))
                // Kafka always sends lists here (its 3.9 client dereferences them).
                .with_eligible_leader_replicas(Some(Vec::new()))
                .with_last_known_elr(Some(Vec::new())),
        );
    }
    let described = DescribeTopicPartitionsResponseTopic::default()
        .with_name(Some(topic_name(&topic.name)))
        .with_topic_id(topic.id)
        .with_is_internal(topic.name.starts_with("__"))
        .with_topic_authorized_operations(authorized_operations::topic_operations(true))
        .with_partitions(partitions);
    (described, next)
}

fn unknown_topic(name: &str) -> DescribeTopicPartitionsResponseTopic {
    let error = if validate_topic_name(name).is_err() {
        code::INVALID_TOPIC_EXCEPTION
    } else {
        code::UNKNOWN_TOPIC_OR_PARTITION
    };
    DescribeTopicPartitionsResponseTopic::default()
        .with_error_code(error)
        .with_name(Some(topic_name(name)))
}

fn cursor_at(topic: &str, partition: i32) -> Cursor {
    Cursor::default()
        .with_topic_name(topic_name(topic))
        .with_partition_index(partition)
}

/// Kafka's `getErrorResponse` for an invalid request: every named topic carries the error.
fn invalid_request(request: &DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse {
    DescribeTopicPartitionsResponse::default().with_topics(
        request
            .topics
            .iter()
            .map(|t| {
                DescribeTopicPartitionsResponseTopic::default()
                    .with_error_code(code::INVALID_REQUEST)
                    .with_name(Some(t.name.clone()))
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::describe_topic_partitions_request::{
        Cursor as RequestCursor, TopicRequest,
    };
    use runnel_metadata::MetadataRecord;
    use uuid::Uuid;

    use super::*;

    /// Broker 1 live, broker 2 fenced; topics "a" (3 partitions) and "b" (2), replicas [1, 2].
    fn image() -> MetadataImage {
        let mut records = crate::handlers::test_images::live_1_fenced_2();
        for (n, (name, partitions)) in [("a", 3), ("b", 2)].into_iter().enumerate() {
            let topic_id = Uuid::from_u128(100 + n as u128);
            records.push(MetadataRecord::Topic {
                name: name.into(),
                topic_id,
            });
            for p in 0..partitions {
                records.push(MetadataRecord::Partition {
                    topic_id,
                    partition_id: p,
                    replicas: vec![1, 2],
                    isr: vec![1],
                    leader: 1,
                    leader_epoch: 0,
                    partition_epoch: 0,
                    adding_replicas: vec![],
                    removing_replicas: vec![],
                });
            }
        }
        crate::handlers::test_images::image_of(records)
    }

    fn request(
        topics: &[&str],
        limit: i32,
        cursor: Option<(&str, i32)>,
    ) -> DescribeTopicPartitionsRequest {
        DescribeTopicPartitionsRequest::default()
            .with_topics(
                topics
                    .iter()
                    .map(|t| TopicRequest::default().with_name(topic_name(t)))
                    .collect(),
            )
            .with_response_partition_limit(limit)
            .with_cursor(cursor.map(|(t, p)| {
                RequestCursor::default()
                    .with_topic_name(topic_name(t))
                    .with_partition_index(p)
            }))
    }

    /// (topic, error, partition indexes).
    type TopicSummary = (String, i16, Vec<i32>);
    /// A cursor as (topic, partition).
    type At = Option<(String, i32)>;

    /// The topics' summaries and the next cursor.
    fn summary(r: &DescribeTopicPartitionsResponse) -> (Vec<TopicSummary>, At) {
        let topics = r
            .topics
            .iter()
            .map(|t| {
                let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
                let parts = t.partitions.iter().map(|p| p.partition_index).collect();
                (name, t.error_code, parts)
            })
            .collect();
        let next = r
            .next_cursor
            .as_ref()
            .map(|c| (c.topic_name.0.to_string(), c.partition_index));
        (topics, next)
    }

    fn t(name: &str, error: i16, parts: &[i32]) -> TopicSummary {
        (name.to_string(), error, parts.to_vec())
    }

    #[test]
    fn pages_through_every_topic_by_cursor() {
        let image = image();
        #[allow(clippy::type_complexity)]
        let cases: &[(
            i32,
            Option<(&str, i32)>,
            Vec<TopicSummary>,
            Option<(&str, i32)>,
        )] = &[
            (
                2000,
                None,
                vec![t("a", 0, &[0, 1, 2]), t("b", 0, &[0, 1])],
                None,
            ),
            (2, None, vec![t("a", 0, &[0, 1])], Some(("a", 2))),
            (
                2,
                Some(("a", 2)),
                vec![t("a", 0, &[2]), t("b", 0, &[0])],
                Some(("b", 1)),
            ),
            (2, Some(("b", 1)), vec![t("b", 0, &[1])], None),
            // The limit exactly used up by "a": the cursor points at the start of "b".
            (3, None, vec![t("a", 0, &[0, 1, 2])], Some(("b", 0))),
            // A limit of 0 or less still returns one partition (Kafka's max(.., 1)).
            (0, None, vec![t("a", 0, &[0])], Some(("a", 1))),
        ];
        for (limit, cursor, topics, next) in cases {
            let got = summary(&describe(
                &image,
                &request(&[], *limit, *cursor),
                2000,
                &|_| true,
            ));
            let want_next = next.map(|(t, p)| (t.to_string(), p));
            assert_eq!(
                got,
                (topics.clone(), want_next),
                "limit {limit} cursor {cursor:?}"
            );
        }
    }

    #[test]
    fn the_broker_cap_bounds_the_clients_limit() {
        let got = summary(&describe(&image(), &request(&[], 2000, None), 1, &|_| true));
        assert_eq!(got, (vec![t("a", 0, &[0])], Some(("a".into(), 1))));
    }

    #[test]
    fn named_topics_sorted_with_unknown_and_invalid_names_reported() {
        let got = summary(&describe(
            &image(),
            &request(&["b", "zz", "a", "bad/name"], 2000, None),
            2000,
            &|_| true,
        ));
        assert_eq!(
            got.0,
            vec![
                t("a", 0, &[0, 1, 2]),
                t("b", 0, &[0, 1]),
                t("bad/name", code::INVALID_TOPIC_EXCEPTION, &[]),
                t("zz", code::UNKNOWN_TOPIC_OR_PARTITION, &[]),
            ]
        );
    }

    #[test]
    fn a_cursor_outside_the_named_topics_or_negative_is_invalid() {
        for (topics, cursor) in [(vec!["a"], ("b", 0)), (vec!["a"], ("a", -1))] {
            let got = summary(&describe(
                &image(),
                &request(&topics, 10, Some(cursor)),
                2000,
                &|_| true,
            ));
            assert_eq!(
                got.0,
                vec![t("a", code::INVALID_REQUEST, &[])],
                "{cursor:?}"
            );
        }
    }

    #[test]
    fn a_fenced_replica_is_offline_and_elr_lists_are_empty_not_null() {
        let r = describe(&image(), &request(&["a"], 1, None), 2000, &|_| true);
        let p = &r.topics[0].partitions[0];
        assert_eq!(p.eligible_leader_replicas, Some(vec![]));
        assert_eq!(p.last_known_elr, Some(vec![]));
        assert_eq!(p.offline_replicas, vec![BrokerId(2)]);
        assert_eq!(p.isr_nodes, vec![BrokerId(1)]);
        assert_eq!(r.topics[0].topic_id, Uuid::from_u128(100));
    }

    /// Known case 7 (docs/faults.md): a leader the response cannot name among live brokers
    /// with an endpoint on the client's listener is leader -1, never the fenced id.
    #[test]
    fn a_fenced_or_off_listener_leader_is_no_leader() {
        let mut image = image();
        if let Some(b) = image.brokers.get_mut(&1) {
            b.fenced = true;
        }
        let r = describe(&image, &request(&["a"], 1, None), 2000, &|_| true);
        let p = &r.topics[0].partitions[0];
        assert_eq!(p.leader_id, BrokerId(-1));
        assert_eq!(p.leader_epoch, 0);
        assert_eq!(p.offline_replicas, vec![BrokerId(1), BrokerId(2)]);
        assert_eq!(p.replica_nodes, vec![BrokerId(1), BrokerId(2)]);
        let r = describe(&self::image(), &request(&["a"], 1, None), 2000, &|b| {
            b.id != 1
        });
        assert_eq!(r.topics[0].partitions[0].leader_id, BrokerId(-1));
    }
}
