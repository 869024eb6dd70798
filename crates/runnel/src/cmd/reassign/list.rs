//! `--list`: the partition reassignments running in the cluster.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;
use runnel_client::admin::PartitionReassignment;
use runnel_client::{Admin, TopicPartition};

fn join(ids: &[i32]) -> String {
    ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

/// kafka-reassign-partitions.sh's `--list` text.
pub fn format_reassignments(ongoing: &BTreeMap<TopicPartition, PartitionReassignment>) -> String {
    if ongoing.is_empty() {
        return "No partition reassignments found.".to_string();
    }
    let lines: Vec<String> = ongoing
        .iter()
        .map(|(tp, r)| {
            let mut line = format!("{tp}: replicas: {}.", join(&r.replicas));
            if !r.adding_replicas.is_empty() {
                line.push_str(&format!(" adding: {}.", join(&r.adding_replicas)));
            }
            if !r.removing_replicas.is_empty() {
                line.push_str(&format!(" removing: {}.", join(&r.removing_replicas)));
            }
            line
        })
        .collect();
    format!("Current partition reassignments:\n{}", lines.join("\n"))
}

/// Runs `--list`.
pub async fn list(admin: &Admin) -> Result<()> {
    let ongoing = admin
        .list_partition_reassignments(None, Duration::from_secs(30))
        .await?;
    println!("{}", format_reassignments(&ongoing));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text() {
        let mut ongoing = BTreeMap::new();
        assert_eq!(
            format_reassignments(&ongoing),
            "No partition reassignments found."
        );
        ongoing.insert(
            TopicPartition::new("t", 0),
            PartitionReassignment {
                replicas: vec![1, 2, 3],
                adding_replicas: vec![3],
                removing_replicas: vec![1],
            },
        );
        ongoing.insert(
            TopicPartition::new("t", 1),
            PartitionReassignment {
                replicas: vec![2, 3],
                ..PartitionReassignment::default()
            },
        );
        assert_eq!(
            format_reassignments(&ongoing),
            "Current partition reassignments:\n\
             t-0: replicas: 1,2,3. adding: 3. removing: 1.\n\
             t-1: replicas: 2,3."
        );
    }
}
