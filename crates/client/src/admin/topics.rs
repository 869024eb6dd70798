//! CreateTopics, DeleteTopics, CreatePartitions, and topic listing / description via Metadata.

use std::time::Duration;

use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::{
    BrokerId, CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::{Admin, ItemResults};
use crate::error::{ClientError, Result};
use crate::metadata::TopicInfo;

/// A topic to create.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewTopic {
    /// Topic name.
    pub name: String,
    /// Partition count; -1 lets the broker use `num.partitions`.
    pub num_partitions: i32,
    /// Replication factor; -1 lets the broker use `default.replication.factor`.
    pub replication_factor: i16,
    /// Manual placement: replica lists for partitions 0, 1, ... (overrides the two above).
    pub assignments: Vec<Vec<i32>>,
    /// Topic configs (`retention.ms` = `1000`, ...).
    pub configs: Vec<(String, String)>,
}

impl NewTopic {
    /// A topic with `partitions` partitions and replication factor `rf`.
    pub fn new(name: impl Into<String>, partitions: i32, rf: i16) -> Self {
        Self {
            name: name.into(),
            num_partitions: partitions,
            replication_factor: rf,
            ..Self::default()
        }
    }
}

/// Growth of one topic's partition count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewPartitions {
    /// Topic name.
    pub topic: String,
    /// The new total partition count (must exceed the current one).
    pub total_count: i32,
    /// Replica lists for the new partitions only, or `None` to let the controller place them.
    pub assignments: Option<Vec<Vec<i32>>>,
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

fn broker_ids(ids: &[i32]) -> Vec<BrokerId> {
    ids.iter().map(|&b| BrokerId(b)).collect()
}

fn timeout_ms(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}

/// NOT_CONTROLLER on every item means the request went to the wrong node: retry it whole.
fn all_not_controller<K, T>(results: &ItemResults<K, T>) -> bool {
    !results.is_empty()
        && results
            .iter()
            .all(|(_, r)| matches!(r, Err(e) if e.code() == Some(runnel_codes::NOT_CONTROLLER)))
}

impl Admin {
    /// Creates topics. The outer `Result` is the transport; each topic has its own result
    /// (TOPIC_ALREADY_EXISTS, INVALID_REPLICATION_FACTOR, ...).
    pub async fn create_topics(
        &self,
        topics: &[NewTopic],
        validate_only: bool,
        timeout: Duration,
    ) -> Result<ItemResults<String>> {
        let mut req = CreateTopicsRequest::default();
        req.timeout_ms = timeout_ms(timeout);
        req.validate_only = validate_only;
        for t in topics {
            let mut ct = CreatableTopic::default();
            ct.name = name(&t.name);
            if t.assignments.is_empty() {
                ct.num_partitions = t.num_partitions;
                ct.replication_factor = t.replication_factor;
            } else {
                ct.num_partitions = -1;
                ct.replication_factor = -1;
                ct.assignments = t
                    .assignments
                    .iter()
                    .enumerate()
                    .map(|(i, replicas)| {
                        let mut a = CreatableReplicaAssignment::default();
                        a.partition_index = i as i32;
                        a.broker_ids = broker_ids(replicas);
                        a
                    })
                    .collect();
            }
            ct.configs = t
                .configs
                .iter()
                .map(|(k, v)| {
                    let mut c = CreatableTopicConfig::default();
                    c.name = StrBytes::from_string(k.clone());
                    c.value = Some(StrBytes::from_string(v.clone()));
                    c
                })
                .collect();
            req.topics.push(ct);
        }
        let rpc_timeout = timeout + self.client.config().connection.request_timeout;
        self.client
            .retry("CreateTopics", || async {
                let conn = self.client.controller_connection().await?;
                let version = conn.negotiated::<CreateTopicsRequest>()?;
                let resp = conn.send_at(&req, version, rpc_timeout).await?;
                let results: ItemResults<String> = resp
                    .topics
                    .into_iter()
                    .map(|t| {
                        let r = ClientError::check(t.error_code, t.error_message.as_deref());
                        (t.name.0.to_string(), r)
                    })
                    .collect();
                if all_not_controller(&results) {
                    return Err(ClientError::kafka(runnel_codes::NOT_CONTROLLER, None));
                }
                Ok(results)
            })
            .await
    }

    /// Deletes topics by name.
    pub async fn delete_topics(
        &self,
        names: &[String],
        timeout: Duration,
    ) -> Result<ItemResults<String>> {
        let mut req = DeleteTopicsRequest::default();
        req.timeout_ms = timeout_ms(timeout);
        req.topic_names = names.iter().map(|n| name(n)).collect();
        let rpc_timeout = timeout + self.client.config().connection.request_timeout;
        self.client
            .retry("DeleteTopics", || async {
                let conn = self.client.controller_connection().await?;
                let version = conn.negotiated::<DeleteTopicsRequest>()?;
                let resp = conn.send_at(&req, version, rpc_timeout).await?;
                let results: ItemResults<String> = resp
                    .responses
                    .into_iter()
                    .map(|t| {
                        let r = ClientError::check(t.error_code, t.error_message.as_deref());
                        (t.name.map(|n| n.0.to_string()).unwrap_or_default(), r)
                    })
                    .collect();
                if all_not_controller(&results) {
                    return Err(ClientError::kafka(runnel_codes::NOT_CONTROLLER, None));
                }
                Ok(results)
            })
            .await
    }

    /// Grows partition counts.
    pub async fn create_partitions(
        &self,
        changes: &[NewPartitions],
        validate_only: bool,
        timeout: Duration,
    ) -> Result<ItemResults<String>> {
        let mut req = CreatePartitionsRequest::default();
        req.timeout_ms = timeout_ms(timeout);
        req.validate_only = validate_only;
        for c in changes {
            let mut t = CreatePartitionsTopic::default();
            t.name = name(&c.topic);
            t.count = c.total_count;
            t.assignments = c.assignments.as_ref().map(|lists| {
                lists
                    .iter()
                    .map(|replicas| {
                        let mut a = CreatePartitionsAssignment::default();
                        a.broker_ids = broker_ids(replicas);
                        a
                    })
                    .collect()
            });
            req.topics.push(t);
        }
        let rpc_timeout = timeout + self.client.config().connection.request_timeout;
        self.client
            .retry("CreatePartitions", || async {
                let conn = self.client.controller_connection().await?;
                let version = conn.negotiated::<CreatePartitionsRequest>()?;
                let resp = conn.send_at(&req, version, rpc_timeout).await?;
                let results: ItemResults<String> = resp
                    .results
                    .into_iter()
                    .map(|t| {
                        let r = ClientError::check(t.error_code, t.error_message.as_deref());
                        (t.name.0.to_string(), r)
                    })
                    .collect();
                if all_not_controller(&results) {
                    return Err(ClientError::kafka(runnel_codes::NOT_CONTROLLER, None));
                }
                Ok(results)
            })
            .await
    }

    /// Topic names, sorted; internal topics only when `include_internal`.
    pub async fn list_topics(&self, include_internal: bool) -> Result<Vec<String>> {
        let meta = self
            .client
            .retry("Metadata", || self.client.refresh_metadata(None))
            .await?;
        Ok(meta
            .topics
            .values()
            .filter(|t| include_internal || !t.internal)
            .map(|t| t.name.clone())
            .collect())
    }

    /// Describes `names` (or every topic for `None`), sorted by name. A missing topic fails
    /// the call with UNKNOWN_TOPIC_OR_PARTITION.
    pub async fn describe_topics(&self, names: Option<&[String]>) -> Result<Vec<TopicInfo>> {
        let (meta, errors) = self
            .client
            .retry("Metadata", || {
                self.client.refresh_metadata_with_errors(names)
            })
            .await?;
        if let Some(err) = errors
            .iter()
            .find(|e| e.error_code != runnel_codes::LEADER_NOT_AVAILABLE)
        {
            return Err(ClientError::kafka(
                err.error_code,
                Some(format!("topic '{}'", err.name)),
            ));
        }
        Ok(match names {
            None => meta.topics.values().cloned().collect(),
            Some(names) => {
                let mut out: Vec<TopicInfo> = names
                    .iter()
                    .filter_map(|n| meta.topics.get(n).cloned())
                    .collect();
                out.sort_by(|a, b| a.name.cmp(&b.name));
                out
            }
        })
    }
}
