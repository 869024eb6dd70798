//! ElectLeaders (API 43): preferred or unclean leader election, as kafka-leader-election.sh
//! drives it through `Admin.electLeaders`.

use std::time::Duration;

use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::{Admin, ItemResults};
use crate::error::{ClientError, Result};
use crate::group::TopicPartition;

/// Which leader to elect (Kafka's `ElectionType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElectionType {
    /// Move leadership to the preferred (first assigned) replica when it is in the ISR.
    Preferred,
    /// Elect any live replica for a partition without a leader, even outside the ISR.
    Unclean,
}

impl ElectionType {
    /// The wire value (`0` preferred, `1` unclean).
    pub fn code(self) -> i8 {
        match self {
            ElectionType::Preferred => 0,
            ElectionType::Unclean => 1,
        }
    }

    /// Kafka's enum name, as the tool prints it (`PREFERRED`, `UNCLEAN`).
    pub fn name(self) -> &'static str {
        match self {
            ElectionType::Preferred => "PREFERRED",
            ElectionType::Unclean => "UNCLEAN",
        }
    }
}

impl std::fmt::Display for ElectionType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The request for `partitions` (`None` = every partition). Partitions are grouped by topic
/// in first-seen order.
pub fn elect_leaders_request(
    election_type: ElectionType,
    partitions: Option<&[TopicPartition]>,
    timeout: Duration,
) -> ElectLeadersRequest {
    let mut req = ElectLeadersRequest::default();
    req.election_type = election_type.code();
    req.timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    req.topic_partitions = partitions.map(|parts| {
        let mut topics: Vec<TopicPartitions> = Vec::new();
        for tp in parts {
            let pos = topics.iter().position(|t| t.topic.0.as_str() == tp.topic);
            let entry = match pos {
                Some(i) => &mut topics[i],
                None => {
                    let mut t = TopicPartitions::default();
                    t.topic = TopicName(StrBytes::from_string(tp.topic.clone()));
                    topics.push(t);
                    let last = topics.len() - 1;
                    &mut topics[last]
                }
            };
            if !entry.partitions.contains(&tp.partition) {
                entry.partitions.push(tp.partition);
            }
        }
        topics
    });
    req
}

/// Per-partition outcomes, sorted by topic and partition. A top-level error (v1+) fails the
/// whole call, as Kafka's admin client does.
pub fn elect_leaders_results(resp: ElectLeadersResponse) -> Result<ItemResults<TopicPartition>> {
    ClientError::check(resp.error_code, None)?;
    let mut out: ItemResults<TopicPartition> = resp
        .replica_election_results
        .into_iter()
        .flat_map(|topic| {
            let name = topic.topic.0.to_string();
            topic.partition_result.into_iter().map(move |p| {
                let result = ClientError::check(p.error_code, p.error_message.as_deref());
                (TopicPartition::new(name.clone(), p.partition_id), result)
            })
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

impl Admin {
    /// Elects leaders for `partitions` (`None` = all partitions the election applies to).
    /// The outer `Result` is the transport or a whole-request error (UNSUPPORTED_VERSION when
    /// the broker lacks ElectLeaders, or lacks v1+ for an unclean election); each partition
    /// has its own result: ELECTION_NOT_NEEDED (84), PREFERRED_LEADER_NOT_AVAILABLE (80),
    /// ELIGIBLE_LEADERS_NOT_AVAILABLE (83), UNKNOWN_TOPIC_OR_PARTITION (3), ...
    pub async fn elect_leaders(
        &self,
        election_type: ElectionType,
        partitions: Option<&[TopicPartition]>,
        timeout: Duration,
    ) -> Result<ItemResults<TopicPartition>> {
        let req = elect_leaders_request(election_type, partitions, timeout);
        let rpc_timeout = timeout + self.client.config().connection.request_timeout;
        self.client
            .retry("ElectLeaders", || async {
                let conn = self.client.controller_connection().await?;
                let version = conn.negotiated::<ElectLeadersRequest>()?;
                if version == 0 && election_type != ElectionType::Preferred {
                    return Err(ClientError::kafka(
                        35,
                        Some(format!(
                            "the broker supports only ElectLeaders v0, which has no {election_type} election"
                        )),
                    ));
                }
                let resp = conn.send_at(&req, version, rpc_timeout).await?;
                if resp.error_code == runnel_codes::NOT_CONTROLLER {
                    return Err(ClientError::kafka(runnel_codes::NOT_CONTROLLER, None));
                }
                elect_leaders_results(resp)
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::elect_leaders_response::{
        PartitionResult, ReplicaElectionResult,
    };

    #[test]
    fn request_groups_partitions_by_topic() {
        let parts = [
            TopicPartition::new("a", 1),
            TopicPartition::new("b", 0),
            TopicPartition::new("a", 0),
            TopicPartition::new("a", 1),
        ];
        let req =
            elect_leaders_request(ElectionType::Unclean, Some(&parts), Duration::from_secs(30));
        assert_eq!(req.election_type, 1);
        assert_eq!(req.timeout_ms, 30_000);
        let topics = req.topic_partitions.unwrap_or_default();
        assert_eq!(topics.len(), 2);
        assert_eq!(topics[0].topic.0.as_str(), "a");
        assert_eq!(topics[0].partitions, vec![1, 0]);
        assert_eq!(topics[1].partitions, vec![0]);
        let all = elect_leaders_request(ElectionType::Preferred, None, Duration::ZERO);
        assert!(all.topic_partitions.is_none());
        assert_eq!(all.election_type, 0);
    }

    fn result(topic: &str, parts: &[(i32, i16, Option<&str>)]) -> ReplicaElectionResult {
        let mut r = ReplicaElectionResult::default();
        r.topic = TopicName(StrBytes::from_string(topic.into()));
        r.partition_result = parts
            .iter()
            .map(|(p, code, msg)| {
                let mut pr = PartitionResult::default();
                pr.partition_id = *p;
                pr.error_code = *code;
                pr.error_message = msg.map(|m| StrBytes::from_string(m.into()));
                pr
            })
            .collect();
        r
    }

    #[test]
    fn results_are_per_partition_and_sorted() {
        let mut resp = ElectLeadersResponse::default();
        resp.replica_election_results = vec![
            result("t", &[(1, 80, Some("no preferred")), (0, 0, None)]),
            result("a", &[(0, 84, None)]),
        ];
        let results = elect_leaders_results(resp).unwrap_or_default();
        let summary: Vec<(String, Option<i16>)> = results
            .iter()
            .map(|(tp, r)| (tp.to_string(), r.as_ref().err().and_then(|e| e.code())))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("a-0".to_string(), Some(84)),
                ("t-0".to_string(), None),
                ("t-1".to_string(), Some(80)),
            ]
        );
    }

    #[test]
    fn top_level_error_fails_the_call() {
        let mut resp = ElectLeadersResponse::default();
        resp.error_code = 29;
        let err = elect_leaders_results(resp).err().and_then(|e| e.code());
        assert_eq!(err, Some(29));
    }
}
