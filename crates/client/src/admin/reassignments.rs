//! AlterPartitionReassignments (API 45) and ListPartitionReassignments (API 46), KIP-455:
//! the requests behind kafka-reassign-partitions.sh `--execute`, `--verify` and `--cancel`.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, BrokerId,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::{Admin, ItemResults};
use crate::error::{ClientError, Result};
use crate::group::TopicPartition;

/// An ongoing reassignment of one partition, as ListPartitionReassignments reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionReassignment {
    /// The full replica set during the move (old and new replicas).
    pub replicas: Vec<i32>,
    /// Replicas being added.
    pub adding_replicas: Vec<i32>,
    /// Replicas being removed.
    pub removing_replicas: Vec<i32>,
}

fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

fn timeout_ms(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}

/// Groups `(partition, value)` pairs by topic, keeping first-seen topic order.
fn by_topic<'a, T>(
    items: impl IntoIterator<Item = (&'a TopicPartition, T)>,
) -> Vec<(String, Vec<(i32, T)>)> {
    let mut out: Vec<(String, Vec<(i32, T)>)> = Vec::new();
    for (tp, value) in items {
        match out.iter_mut().find(|(t, _)| *t == tp.topic) {
            Some((_, parts)) => parts.push((tp.partition, value)),
            None => out.push((tp.topic.clone(), vec![(tp.partition, value)])),
        }
    }
    out
}

/// The request moving each partition to its target replicas (`None` cancels its ongoing
/// reassignment).
pub fn alter_reassignments_request(
    targets: &[(TopicPartition, Option<Vec<i32>>)],
    timeout: Duration,
) -> AlterPartitionReassignmentsRequest {
    let mut req = AlterPartitionReassignmentsRequest::default();
    req.timeout_ms = timeout_ms(timeout);
    req.topics = by_topic(targets.iter().map(|(tp, r)| (tp, r)))
        .into_iter()
        .map(|(name, parts)| {
            let mut t = ReassignableTopic::default();
            t.name = topic_name(&name);
            t.partitions = parts
                .into_iter()
                .map(|(index, replicas)| {
                    let mut p = ReassignablePartition::default();
                    p.partition_index = index;
                    p.replicas = replicas
                        .as_ref()
                        .map(|ids| ids.iter().map(|&b| BrokerId(b)).collect());
                    p
                })
                .collect();
            t
        })
        .collect();
    req
}

/// Per-partition results of AlterPartitionReassignments, sorted. A top-level error fails the
/// whole call.
pub fn alter_reassignments_results(
    resp: AlterPartitionReassignmentsResponse,
) -> Result<ItemResults<TopicPartition>> {
    ClientError::check(resp.error_code, resp.error_message.as_deref())?;
    let mut out: ItemResults<TopicPartition> = resp
        .responses
        .into_iter()
        .flat_map(|topic| {
            let name = topic.name.0.to_string();
            topic.partitions.into_iter().map(move |p| {
                let r = ClientError::check(p.error_code, p.error_message.as_deref());
                (TopicPartition::new(name.clone(), p.partition_index), r)
            })
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// The request listing reassignments of `partitions` (`None` = all).
pub fn list_reassignments_request(
    partitions: Option<&[TopicPartition]>,
    timeout: Duration,
) -> ListPartitionReassignmentsRequest {
    let mut req = ListPartitionReassignmentsRequest::default();
    req.timeout_ms = timeout_ms(timeout);
    req.topics = partitions.map(|parts| {
        by_topic(parts.iter().map(|tp| (tp, ())))
            .into_iter()
            .map(|(name, parts)| {
                let mut t = ListPartitionReassignmentsTopics::default();
                t.name = topic_name(&name);
                t.partition_indexes = parts.into_iter().map(|(p, ())| p).collect();
                t
            })
            .collect()
    });
    req
}

/// The ongoing reassignments in a ListPartitionReassignments response.
pub fn list_reassignments_results(
    resp: ListPartitionReassignmentsResponse,
) -> Result<BTreeMap<TopicPartition, PartitionReassignment>> {
    ClientError::check(resp.error_code, resp.error_message.as_deref())?;
    let ids = |v: Vec<BrokerId>| v.into_iter().map(|b| b.0).collect::<Vec<i32>>();
    Ok(resp
        .topics
        .into_iter()
        .flat_map(|topic| {
            let name = topic.name.0.to_string();
            topic.partitions.into_iter().map(move |p| {
                (
                    TopicPartition::new(name.clone(), p.partition_index),
                    PartitionReassignment {
                        replicas: ids(p.replicas),
                        adding_replicas: ids(p.adding_replicas),
                        removing_replicas: ids(p.removing_replicas),
                    },
                )
            })
        })
        .collect())
}

impl Admin {
    /// Starts (or, for `None` targets, cancels) partition reassignments. The outer `Result`
    /// is the transport or a whole-request error (UNSUPPORTED_VERSION when the broker lacks
    /// the API); each partition has its own result (UNKNOWN_TOPIC_OR_PARTITION,
    /// INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS, ...).
    pub async fn alter_partition_reassignments(
        &self,
        targets: &[(TopicPartition, Option<Vec<i32>>)],
        timeout: Duration,
    ) -> Result<ItemResults<TopicPartition>> {
        let req = alter_reassignments_request(targets, timeout);
        let rpc_timeout = timeout + self.client.config().connection.request_timeout;
        self.client
            .retry("AlterPartitionReassignments", || async {
                let conn = self.client.controller_connection().await?;
                let version = conn.negotiated::<AlterPartitionReassignmentsRequest>()?;
                let resp = conn.send_at(&req, version, rpc_timeout).await?;
                alter_reassignments_results(resp)
            })
            .await
    }

    /// The ongoing reassignments among `partitions` (`None` = all), keyed by partition.
    pub async fn list_partition_reassignments(
        &self,
        partitions: Option<&[TopicPartition]>,
        timeout: Duration,
    ) -> Result<BTreeMap<TopicPartition, PartitionReassignment>> {
        let req = list_reassignments_request(partitions, timeout);
        let rpc_timeout = timeout + self.client.config().connection.request_timeout;
        self.client
            .retry("ListPartitionReassignments", || async {
                let conn = self.client.controller_connection().await?;
                let version = conn.negotiated::<ListPartitionReassignmentsRequest>()?;
                let resp = conn.send_at(&req, version, rpc_timeout).await?;
                list_reassignments_results(resp)
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::alter_partition_reassignments_response::{
        ReassignablePartitionResponse, ReassignableTopicResponse,
    };
    use kafka_protocol::messages::list_partition_reassignments_response::{
        OngoingPartitionReassignment, OngoingTopicReassignment,
    };

    #[test]
    fn alter_request_groups_by_topic_and_encodes_cancel_as_null() {
        let targets = vec![
            (TopicPartition::new("t", 0), Some(vec![2, 3])),
            (TopicPartition::new("u", 0), None),
            (TopicPartition::new("t", 1), Some(vec![3, 1])),
        ];
        let req = alter_reassignments_request(&targets, Duration::from_secs(5));
        assert_eq!(req.timeout_ms, 5000);
        assert_eq!(req.topics.len(), 2);
        assert_eq!(req.topics[0].name.0.as_str(), "t");
        let t: Vec<(i32, Option<Vec<i32>>)> = req.topics[0]
            .partitions
            .iter()
            .map(|p| {
                (
                    p.partition_index,
                    p.replicas.as_ref().map(|r| r.iter().map(|b| b.0).collect()),
                )
            })
            .collect();
        assert_eq!(t, vec![(0, Some(vec![2, 3])), (1, Some(vec![3, 1]))]);
        assert!(req.topics[1].partitions[0].replicas.is_none());
    }

    #[test]
    fn alter_results_and_top_level_error() {
        let mut resp = AlterPartitionReassignmentsResponse::default();
        let mut topic = ReassignableTopicResponse::default();
        topic.name = topic_name("t");
        for (i, code) in [(1, 39i16), (0, 0)] {
            let mut p = ReassignablePartitionResponse::default();
            p.partition_index = i;
            p.error_code = code;
            topic.partitions.push(p);
        }
        resp.responses.push(topic);
        let results = alter_reassignments_results(resp.clone()).unwrap_or_default();
        assert_eq!(results[0].0, TopicPartition::new("t", 0));
        assert!(results[0].1.is_ok());
        assert_eq!(results[1].1.as_ref().err().and_then(|e| e.code()), Some(39));
        resp.error_code = 29;
        let err = alter_reassignments_results(resp)
            .err()
            .and_then(|e| e.code());
        assert_eq!(err, Some(29));
    }

    #[test]
    fn list_request_and_results() {
        let parts = [TopicPartition::new("t", 2), TopicPartition::new("t", 0)];
        let req = list_reassignments_request(Some(&parts), Duration::from_secs(1));
        let topics = req.topics.unwrap_or_default();
        assert_eq!(topics[0].partition_indexes, vec![2, 0]);
        assert!(list_reassignments_request(None, Duration::ZERO)
            .topics
            .is_none());

        let mut resp = ListPartitionReassignmentsResponse::default();
        let mut topic = OngoingTopicReassignment::default();
        topic.name = topic_name("t");
        let mut p = OngoingPartitionReassignment::default();
        p.partition_index = 2;
        p.replicas = vec![BrokerId(1), BrokerId(2), BrokerId(3)];
        p.adding_replicas = vec![BrokerId(3)];
        p.removing_replicas = vec![BrokerId(1)];
        topic.partitions.push(p);
        resp.topics.push(topic);
        let map = list_reassignments_results(resp).unwrap_or_default();
        assert_eq!(
            map.get(&TopicPartition::new("t", 2)),
            Some(&PartitionReassignment {
                replicas: vec![1, 2, 3],
                adding_replicas: vec![3],
                removing_replicas: vec![1],
            })
        );
    }
}
