//! The client's view of the cluster (brokers, topics, partition leaders), built from Metadata
//! responses. Immutable snapshots behind an `Arc` so readers (the producer's hot path) never
//! block a refresh.

use std::collections::BTreeMap;

use kafka_protocol::messages::metadata_response::MetadataResponsePartition;
use kafka_protocol::messages::MetadataResponse;
use uuid::Uuid;

/// One broker as advertised in Metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerInfo {
    /// `node.id`.
    pub id: i32,
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: i32,
    /// `broker.rack`, when set.
    pub rack: Option<String>,
}

impl BrokerInfo {
    /// `host:port`, for connecting.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// One partition's placement and leadership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    /// Partition index.
    pub partition: i32,
    /// Current leader, `None` when there is none (offline / electing).
    pub leader: Option<i32>,
    /// Leader epoch (-1 when the broker does not report it).
    pub leader_epoch: i32,
    /// Assigned replicas, preferred leader first.
    pub replicas: Vec<i32>,
    /// In-sync replicas.
    pub isr: Vec<i32>,
    /// Replicas on offline brokers / log dirs.
    pub offline: Vec<i32>,
    /// Per-partition error code from Metadata (e.g. LEADER_NOT_AVAILABLE).
    pub error_code: i16,
}

/// One topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// Topic name.
    pub name: String,
    /// Topic id (nil when the broker predates topic ids).
    pub id: Uuid,
    /// Whether Kafka marks it internal (`__consumer_offsets`, ...).
    pub internal: bool,
    /// Partitions sorted by index.
    pub partitions: Vec<PartitionInfo>,
}

impl TopicInfo {
    /// Number of partitions.
    pub fn partition_count(&self) -> usize {
        self.partitions.len()
    }

    /// Looks a partition up by index.
    pub fn partition(&self, index: i32) -> Option<&PartitionInfo> {
        self.partitions
            .get(usize::try_from(index).ok()?)
            .filter(|p| p.partition == index)
            .or_else(|| self.partitions.iter().find(|p| p.partition == index))
    }
}

/// A snapshot of cluster metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterMetadata {
    /// Cluster id, when the broker reports one.
    pub cluster_id: Option<String>,
    /// Controller node id, when known.
    pub controller_id: Option<i32>,
    /// Live brokers by id.
    pub brokers: BTreeMap<i32, BrokerInfo>,
    /// Known topics by name.
    pub topics: BTreeMap<String, TopicInfo>,
}

/// A topic the Metadata response reported with an error instead of data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicError {
    /// The topic name.
    pub name: String,
    /// The error code.
    pub error_code: i16,
}

impl PartitionInfo {
    /// A partition as a Metadata response describes it (a negative leader id: none).
    fn from_response(p: &MetadataResponsePartition) -> PartitionInfo {
        PartitionInfo {
            partition: p.partition_index,
            leader: (p.leader_id.0 >= 0).then_some(p.leader_id.0),
            leader_epoch: p.leader_epoch,
            replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
            isr: p.isr_nodes.iter().map(|b| b.0).collect(),
            offline: p.offline_replicas.iter().map(|b| b.0).collect(),
            error_code: p.error_code,
        }
    }
}

impl ClusterMetadata {
    /// Builds a snapshot from `resp`, keeping topics of `previous` that the response did not
    /// mention (a refresh for some topics must not forget the others). Returns topic errors
    /// separately so callers can report them.
    pub fn merge(
        previous: &ClusterMetadata,
        resp: &MetadataResponse,
        full: bool,
    ) -> (Self, Vec<TopicError>) {
        let brokers = resp
            .brokers
            .iter()
            .map(|b| {
                let info = BrokerInfo {
                    id: b.node_id.0,
                    host: b.host.to_string(),
                    port: b.port,
                    rack: b.rack.as_ref().map(|r| r.to_string()),
                };
                (info.id, info)
            })
            .collect();
        let mut topics = if full {
            BTreeMap::new()
        } else {
            previous.topics.clone()
        };
        let mut errors = Vec::new();
        for t in &resp.topics {
            let Some(name) = t.name.as_ref().map(|n| n.0.to_string()) else {
                continue;
            };
            // LEADER_NOT_AVAILABLE at topic level still carries partitions (topic being created).
            if t.error_code != 0 && t.partitions.is_empty() {
                topics.remove(&name);
                errors.push(TopicError {
                    name,
                    error_code: t.error_code,
                });
                continue;
            }
            let mut partitions: Vec<PartitionInfo> = t
                .partitions
                .iter()
                .map(PartitionInfo::from_response)
                .collect();
            partitions.sort_by_key(|p| p.partition);
            if t.error_code != 0 {
                errors.push(TopicError {
                    name: name.clone(),
                    error_code: t.error_code,
                });
            }
            topics.insert(
                name.clone(),
                TopicInfo {
                    name,
                    id: t.topic_id,
                    internal: t.is_internal,
                    partitions,
                },
            );
        }
        let meta = ClusterMetadata {
            cluster_id: resp.cluster_id.as_ref().map(|c| c.to_string()),
            controller_id: (resp.controller_id.0 >= 0).then_some(resp.controller_id.0),
            brokers,
            topics,
        };
        (meta, errors)
    }

    /// The leader of a partition, if known and among the live brokers. A leader missing from
    /// the broker list (fenced or stopped since the topic's metadata was fetched, while a later
    /// brokers-only refresh already dropped it) counts as no leader: callers refresh the topic
    /// and retry instead of failing with BROKER_NOT_AVAILABLE, as the Java client's
    /// `Cluster.leaderFor` treats an unknown leader node as unavailable.
    pub fn leader_for(&self, topic: &str, partition: i32) -> Option<i32> {
        let leader = self.topics.get(topic)?.partition(partition)?.leader?;
        self.brokers.contains_key(&leader).then_some(leader)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    use kafka_protocol::messages::{BrokerId, TopicName};
    use kafka_protocol::protocol::StrBytes;

    fn response() -> MetadataResponse {
        let mut broker = MetadataResponseBroker::default();
        broker.node_id = BrokerId(1);
        broker.host = StrBytes::from_static_str("localhost");
        broker.port = 9092;
        let mut p1 = MetadataResponsePartition::default();
        p1.partition_index = 1;
        p1.leader_id = BrokerId(-1);
        p1.replica_nodes = vec![BrokerId(1)];
        let mut p0 = MetadataResponsePartition::default();
        p0.partition_index = 0;
        p0.leader_id = BrokerId(1);
        p0.replica_nodes = vec![BrokerId(1)];
        p0.isr_nodes = vec![BrokerId(1)];
        let mut topic = MetadataResponseTopic::default();
        topic.name = Some(TopicName(StrBytes::from_static_str("t")));
        topic.partitions = vec![p1, p0];
        let mut missing = MetadataResponseTopic::default();
        missing.name = Some(TopicName(StrBytes::from_static_str("gone")));
        missing.error_code = 3;
        let mut resp = MetadataResponse::default();
        resp.brokers = vec![broker];
        resp.controller_id = BrokerId(1);
        resp.topics = vec![topic, missing];
        resp
    }

    #[test]
    fn merge_sorts_partitions_and_reports_errors() {
        let (meta, errors) =
            ClusterMetadata::merge(&ClusterMetadata::default(), &response(), false);
        assert_eq!(meta.brokers[&1].addr(), "localhost:9092");
        let t = &meta.topics["t"];
        assert_eq!(t.partitions[0].partition, 0);
        assert_eq!(t.partition(1).and_then(|p| p.leader), None);
        assert_eq!(meta.leader_for("t", 0), Some(1));
        assert_eq!(
            errors,
            vec![TopicError {
                name: "gone".into(),
                error_code: 3
            }]
        );
        assert_eq!(meta.controller_id, Some(1));
    }

    #[test]
    fn a_leader_missing_from_the_brokers_is_no_leader() {
        let (meta, _) = ClusterMetadata::merge(&ClusterMetadata::default(), &response(), false);
        // A brokers-only refresh after broker 1 was fenced keeps the topic but drops the broker.
        let mut brokers_only = MetadataResponse::default();
        brokers_only.controller_id = BrokerId(2);
        let (meta, _) = ClusterMetadata::merge(&meta, &brokers_only, false);
        assert_eq!(meta.topics["t"].partitions[0].leader, Some(1));
        assert_eq!(meta.leader_for("t", 0), None);
    }
}
