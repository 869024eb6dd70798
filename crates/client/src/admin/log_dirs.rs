//! DescribeLogDirs (kafka-log-dirs.sh) and AlterReplicaLogDirs (kafka-reassign-partitions.sh's
//! `log_dirs`, AdminClient `alterReplicaLogDirs`): asked of each broker in turn, since each
//! answers only for its own directories.

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_replica_log_dirs_request::{
    AlterReplicaLogDir, AlterReplicaLogDirTopic,
};
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::{AlterReplicaLogDirsRequest, DescribeLogDirsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::{Admin, ItemResults};
use crate::error::{ClientError, Result};

/// One log directory of a broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDirInfo {
    /// Its absolute path.
    pub path: String,
    /// Kafka's error name for an offline directory, None when online.
    pub error: Option<String>,
    /// The filesystem's size and free bytes (DescribeLogDirs v4), when reported.
    pub total_bytes: Option<i64>,
    pub usable_bytes: Option<i64>,
    /// Replicas in the directory, sorted by (topic, partition).
    pub replicas: Vec<ReplicaLogInfo>,
}

/// One replica's log in a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaLogInfo {
    pub topic: String,
    pub partition: i32,
    pub size_bytes: i64,
    pub offset_lag: i64,
    pub is_future: bool,
}

impl Admin {
    /// The log directories of each broker in `brokers`; `partitions` None = every replica.
    pub async fn describe_log_dirs(
        &self,
        brokers: &[i32],
        partitions: Option<&[(String, i32)]>,
    ) -> Result<ItemResults<i32, Vec<LogDirInfo>>> {
        let request = DescribeLogDirsRequest::default().with_topics(partitions.map(topics));
        let mut out = Vec::with_capacity(brokers.len());
        for &broker in brokers {
            let answer = async {
                let conn = self.client.broker_connection(broker).await?;
                let resp = conn.send(&request).await?;
                ClientError::check(resp.error_code, None)?;
                Ok(resp.results.into_iter().map(log_dir).collect())
            };
            out.push((broker, answer.await));
        }
        Ok(out)
    }
}

/// One replica to move: partition (topic, index) on `broker`, into its log dir `path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaLogDirMove {
    pub topic: String,
    pub partition: i32,
    pub broker: i32,
    pub path: String,
}

impl Admin {
    /// AlterReplicaLogDirs for every move, one request per broker (as Kafka's
    /// `KafkaAdminClient.alterReplicaLogDirs`); each move's outcome, in the order given.
    /// The broker answers once the move started: DescribeLogDirs shows its future replica
    /// until it completes.
    pub async fn alter_replica_log_dirs(
        &self,
        moves: &[ReplicaLogDirMove],
    ) -> Result<Vec<(ReplicaLogDirMove, Result<()>)>> {
        let mut by_broker: BTreeMap<i32, Vec<&ReplicaLogDirMove>> = BTreeMap::new();
        for m in moves {
            by_broker.entry(m.broker).or_default().push(m);
        }
        let mut outcome: BTreeMap<(i32, String, i32), Result<()>> = BTreeMap::new();
        for (broker, list) in by_broker {
            let answer = async {
                let conn = self.client.broker_connection(broker).await?;
                conn.send(&alter_request(&list)).await
            }
            .await;
            for m in &list {
                let key = (broker, m.topic.clone(), m.partition);
                let result = match &answer {
                    Err(e) => Err(ClientError::Protocol(e.to_string())),
                    Ok(resp) => partition_error(resp, &m.topic, m.partition),
                };
                outcome.insert(key, result);
            }
        }
        Ok(moves
            .iter()
            .map(|m| {
                let key = (m.broker, m.topic.clone(), m.partition);
                let result = outcome.remove(&key).unwrap_or_else(|| {
                    Err(ClientError::Protocol(format!(
                        "{}-{} was named twice",
                        m.topic, m.partition
                    )))
                });
                (m.clone(), result)
            })
            .collect())
    }
}

fn alter_request(moves: &[&ReplicaLogDirMove]) -> AlterReplicaLogDirsRequest {
    let mut by_dir: BTreeMap<&str, BTreeMap<&str, Vec<i32>>> = BTreeMap::new();
    for m in moves {
        by_dir
            .entry(&m.path)
            .or_default()
            .entry(&m.topic)
            .or_default()
            .push(m.partition);
    }
    AlterReplicaLogDirsRequest::default().with_dirs(
        by_dir
            .into_iter()
            .map(|(path, topics)| {
                AlterReplicaLogDir::default()
                    .with_path(StrBytes::from_string(path.to_string()))
                    .with_topics(
                        topics
                            .into_iter()
                            .map(|(t, partitions)| {
                                AlterReplicaLogDirTopic::default()
                                    .with_name(TopicName(StrBytes::from_string(t.to_string())))
                                    .with_partitions(partitions)
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

fn partition_error(
    resp: &kafka_protocol::messages::AlterReplicaLogDirsResponse,
    topic: &str,
    partition: i32,
) -> Result<()> {
    let found = resp
        .results
        .iter()
        .filter(|t| t.topic_name.0.as_str() == topic)
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.partition_index == partition);
    match found {
        Some(p) => ClientError::check(p.error_code, None),
        None => Err(ClientError::Protocol(format!(
            "the broker did not answer for {topic}-{partition}"
        ))),
    }
}

fn topics(partitions: &[(String, i32)]) -> Vec<DescribableLogDirTopic> {
    let mut by_topic: std::collections::BTreeMap<&str, Vec<i32>> = Default::default();
    for (topic, partition) in partitions {
        by_topic.entry(topic).or_default().push(*partition);
    }
    by_topic
        .into_iter()
        .map(|(topic, partitions)| {
            DescribableLogDirTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(partitions)
        })
        .collect()
}

fn log_dir(
    result: kafka_protocol::messages::describe_log_dirs_response::DescribeLogDirsResult,
) -> LogDirInfo {
    let mut replicas: Vec<ReplicaLogInfo> = result
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| ReplicaLogInfo {
                topic: t.name.0.to_string(),
                partition: p.partition_index,
                size_bytes: p.partition_size,
                offset_lag: p.offset_lag,
                is_future: p.is_future_key,
            })
        })
        .collect();
    replicas.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    let known = |v: i64| (v >= 0).then_some(v);
    LogDirInfo {
        path: result.log_dir.to_string(),
        error: ClientError::check(result.error_code, None)
            .err()
            .map(|e| e.to_string()),
        total_bytes: known(result.total_bytes),
        usable_bytes: known(result.usable_bytes),
        replicas,
    }
}
