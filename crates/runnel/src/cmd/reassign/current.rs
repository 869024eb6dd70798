//! The current replica assignment of topics, from Metadata, telling missing topics apart
//! (each action of kafka-reassign-partitions.sh treats them differently).

use runnel_codes::{LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION};
use std::collections::BTreeMap;

use anyhow::Result;
use runnel_client::{Admin, ClientError, TopicPartition};

/// Replica lists of the partitions of the topics that exist, and the topics that do not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CurrentAssignment {
    /// Replicas (preferred leader first) per partition.
    pub replicas: BTreeMap<TopicPartition, Vec<i32>>,
    /// Requested topics that do not exist, in request order.
    pub missing: Vec<String>,
}

/// Looks up `topics` (deduplicated by the caller or not; duplicates are harmless).
pub async fn current_assignment(admin: &Admin, topics: &[String]) -> Result<CurrentAssignment> {
    let client = admin.client();
    let (meta, errors) = client
        .retry("Metadata", || {
            client.refresh_metadata_with_errors(Some(topics))
        })
        .await?;
    if let Some(e) = errors.iter().find(|e| {
        e.error_code != UNKNOWN_TOPIC_OR_PARTITION && e.error_code != LEADER_NOT_AVAILABLE
    }) {
        return Err(ClientError::kafka(e.error_code, Some(format!("topic '{}'", e.name))).into());
    }
    let mut out = CurrentAssignment::default();
    for name in topics {
        match meta.topics.get(name) {
            Some(topic)
                if !errors
                    .iter()
                    .any(|e| &e.name == name && e.error_code == UNKNOWN_TOPIC_OR_PARTITION) =>
            {
                for p in &topic.partitions {
                    out.replicas.insert(
                        TopicPartition::new(name.clone(), p.partition),
                        p.replicas.clone(),
                    );
                }
            }
            _ => {
                if !out.missing.contains(name) {
                    out.missing.push(name.clone());
                }
            }
        }
    }
    Ok(out)
}
