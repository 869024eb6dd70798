//! DescribeQuorum (API 55): the state of the KRaft metadata quorum, for
//! kafka-metadata-quorum.sh. Any broker answers it (a Runnel or KRaft broker forwards it to the
//! controllers), so it goes to the bootstrap connection rather than to a known controller.

use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::{DescribeQuorumRequest, DescribeQuorumResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::Admin;
use crate::error::{ClientError, Result};

/// The metadata log's topic, the one partition DescribeQuorum is asked about.
pub const CLUSTER_METADATA_TOPIC: &str = "__cluster_metadata";

/// One voter or observer as the quorum leader sees it (Kafka's `QuorumInfo.ReplicaState`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumReplica {
    /// The node id.
    pub replica_id: i32,
    /// The end offset of its copy of the metadata log, as last reported to the leader.
    pub log_end_offset: i64,
    /// When it last fetched from the leader (ms since the epoch); `None` when unknown,
    /// including every replica at DescribeQuorum v0, which lacks the field.
    pub last_fetch_timestamp: Option<i64>,
    /// When it last had caught up with the leader's end offset; `None` when unknown.
    pub last_caught_up_timestamp: Option<i64>,
}

/// The quorum as DescribeQuorum reports it (Kafka's `QuorumInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumInfo {
    /// The active controller's node id, -1 when no leader is elected.
    pub leader_id: i32,
    /// The Raft term of the current leader (the controller epoch).
    pub leader_epoch: i32,
    /// The committed end of the metadata log.
    pub high_watermark: i64,
    /// The voters, in the order the leader listed them.
    pub voters: Vec<QuorumReplica>,
    /// Nodes that replicate the log without voting (brokers that are not controllers).
    pub observers: Vec<QuorumReplica>,
}

impl QuorumInfo {
    /// Checks and converts a DescribeQuorum response exactly as Kafka's admin client does:
    /// a top-level error, anything but the one `__cluster_metadata` partition 0, or a partition
    /// error is an error, so a malformed answer is never printed as a quorum.
    pub fn from_response(resp: &DescribeQuorumResponse) -> Result<Self> {
        ClientError::check(resp.error_code, resp.error_message.as_deref())?;
        let unexpected =
            |what: String| ClientError::kafka(runnel_codes::UNKNOWN_SERVER_ERROR, Some(what));
        let [topic] = resp.topics.as_slice() else {
            return Err(unexpected(format!(
                "DescribeMetadataQuorum received {} topics when 1 was expected",
                resp.topics.len()
            )));
        };
        if topic.topic_name.0.as_str() != CLUSTER_METADATA_TOPIC {
            return Err(unexpected(format!(
                "DescribeMetadataQuorum received a topic with name {} when {CLUSTER_METADATA_TOPIC} was expected",
                topic.topic_name.0.as_str()
            )));
        }
        let [partition] = topic.partitions.as_slice() else {
            return Err(unexpected(format!(
                "DescribeMetadataQuorum received a topic {} with {} partitions when 1 was expected",
                topic.topic_name.0.as_str(),
                topic.partitions.len()
            )));
        };
        if partition.partition_index != 0 {
            return Err(unexpected(format!(
                "DescribeMetadataQuorum received a single partition with index {} when 0 was expected",
                partition.partition_index
            )));
        }
        ClientError::check(partition.error_code, partition.error_message.as_deref())?;
        let replicas =
            |states: &[kafka_protocol::messages::describe_quorum_response::ReplicaState]| {
                states
                    .iter()
                    .map(|r| QuorumReplica {
                        replica_id: r.replica_id.0,
                        log_end_offset: r.log_end_offset,
                        last_fetch_timestamp: known(r.last_fetch_timestamp),
                        last_caught_up_timestamp: known(r.last_caught_up_timestamp),
                    })
                    .collect()
            };
        Ok(QuorumInfo {
            leader_id: partition.leader_id.0,
            leader_epoch: partition.leader_epoch,
            high_watermark: partition.high_watermark,
            voters: replicas(&partition.current_voters),
            observers: replicas(&partition.observers),
        })
    }

    /// The leader's own entry among the voters, if a leader is elected and listed.
    pub fn leader(&self) -> Option<&QuorumReplica> {
        self.voters.iter().find(|v| v.replica_id == self.leader_id)
    }
}

/// Kafka sends -1 for a timestamp it does not know.
fn known(timestamp: i64) -> Option<i64> {
    (timestamp != -1).then_some(timestamp)
}

/// The request Kafka's admin client sends: the metadata topic, partition 0.
pub fn describe_quorum_request() -> DescribeQuorumRequest {
    let mut partition = PartitionData::default();
    partition.partition_index = 0;
    let mut topic = TopicData::default();
    topic.topic_name = TopicName(StrBytes::from_static_str(CLUSTER_METADATA_TOPIC));
    topic.partitions = vec![partition];
    let mut req = DescribeQuorumRequest::default();
    req.topics = vec![topic];
    req
}

impl Admin {
    /// Describes the metadata quorum (Kafka's `Admin.describeMetadataQuorum`), retrying
    /// retriable errors such as a leader election in progress.
    pub async fn describe_metadata_quorum(&self) -> Result<QuorumInfo> {
        let req = describe_quorum_request();
        self.client
            .retry("DescribeQuorum", || async {
                let conn = self.client.any_connection().await?;
                let resp = conn.send(&req).await?;
                QuorumInfo::from_response(&resp)
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::describe_quorum_response::{
        PartitionData as RespPartition, ReplicaState, TopicData as RespTopic,
    };
    use kafka_protocol::messages::BrokerId;

    fn replica(id: i32, leo: i64, fetch: i64, caught_up: i64) -> ReplicaState {
        let mut r = ReplicaState::default();
        r.replica_id = BrokerId(id);
        r.log_end_offset = leo;
        r.last_fetch_timestamp = fetch;
        r.last_caught_up_timestamp = caught_up;
        r
    }

    fn response(topic: &str, index: i32, partition_error: i16) -> DescribeQuorumResponse {
        let mut p = RespPartition::default();
        p.partition_index = index;
        p.error_code = partition_error;
        p.leader_id = BrokerId(2);
        p.leader_epoch = 7;
        p.high_watermark = 120;
        p.current_voters = vec![replica(1, 118, 1000, 900), replica(2, 120, -1, -1)];
        p.observers = vec![replica(4, 100, 1000, -1)];
        let mut t = RespTopic::default();
        t.topic_name = TopicName(StrBytes::from_string(topic.into()));
        t.partitions = vec![p];
        let mut resp = DescribeQuorumResponse::default();
        resp.topics = vec![t];
        resp
    }

    #[test]
    fn converts_the_metadata_partition() {
        let info = QuorumInfo::from_response(&response(CLUSTER_METADATA_TOPIC, 0, 0)).unwrap();
        assert_eq!(info.leader_id, 2);
        assert_eq!(info.leader_epoch, 7);
        assert_eq!(info.high_watermark, 120);
        assert_eq!(info.voters.len(), 2);
        assert_eq!(info.voters[0].last_fetch_timestamp, Some(1000));
        assert_eq!(info.voters[1].last_fetch_timestamp, None);
        assert_eq!(info.observers[0].last_caught_up_timestamp, None);
        assert_eq!(info.leader().map(|l| l.log_end_offset), Some(120));
    }

    #[test]
    fn rejects_what_kafka_rejects() {
        assert!(QuorumInfo::from_response(&response("other", 0, 0)).is_err());
        assert!(QuorumInfo::from_response(&response(CLUSTER_METADATA_TOPIC, 1, 0)).is_err());
        let err = QuorumInfo::from_response(&response(CLUSTER_METADATA_TOPIC, 0, 6)).unwrap_err();
        assert_eq!(err.code(), Some(6));
        let mut top = response(CLUSTER_METADATA_TOPIC, 0, 0);
        top.error_code = 41;
        assert_eq!(
            QuorumInfo::from_response(&top).unwrap_err().code(),
            Some(41)
        );
        let mut none = response(CLUSTER_METADATA_TOPIC, 0, 0);
        none.topics.clear();
        assert!(QuorumInfo::from_response(&none).is_err());
    }

    #[test]
    fn request_names_the_metadata_partition() {
        let req = describe_quorum_request();
        assert_eq!(req.topics.len(), 1);
        assert_eq!(req.topics[0].topic_name.0.as_str(), CLUSTER_METADATA_TOPIC);
        assert_eq!(req.topics[0].partitions[0].partition_index, 0);
    }
}
