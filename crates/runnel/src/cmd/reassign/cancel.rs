//! `--cancel`: stop the running reassignments of a reassignment file's partitions (the
//! controller restores their original replicas), then clear the replication throttles unless
//! `--preserve-throttles`, as kafka-reassign-partitions.sh does.

use std::time::Duration;

use anyhow::{bail, Result};
use runnel_client::{Admin, TopicPartition};

use super::execute::format_failures;
use super::json::parse_reassignment;
use super::verify::clear_throttles;

const TIMEOUT: Duration = Duration::from_secs(30);

/// "Successfully cancelled partition reassignment(s) for: t-0,t-1".
pub fn format_cancelled(partitions: &[TopicPartition]) -> String {
    let list: Vec<String> = partitions.iter().map(ToString::to_string).collect();
    format!(
        "Successfully cancelled partition reassignment{} for: {}",
        if partitions.len() == 1 { "" } else { "s" },
        list.join(",")
    )
}

pub const NONE_ACTIVE: &str = "None of the specified partition reassignments are active.";

pub async fn cancel(admin: &Admin, json: &str, preserve_throttles: bool) -> Result<()> {
    let entries = parse_reassignment(json)?;
    let targets: Vec<(TopicPartition, Vec<i32>)> = entries
        .iter()
        .map(|e| (e.partition.clone(), e.replicas.clone()))
        .collect();
    let wanted: Vec<TopicPartition> = targets.iter().map(|(tp, _)| tp.clone()).collect();
    let ongoing = admin
        .list_partition_reassignments(Some(&wanted), TIMEOUT)
        .await?;
    let running: Vec<TopicPartition> = wanted
        .into_iter()
        .filter(|tp| ongoing.contains_key(tp))
        .collect();
    if running.is_empty() {
        println!("{NONE_ACTIVE}");
    } else {
        let request: Vec<(TopicPartition, Option<Vec<i32>>)> =
            running.iter().map(|tp| (tp.clone(), None)).collect();
        let results = admin
            .alter_partition_reassignments(&request, TIMEOUT)
            .await?;
        if let Some(text) = format_failures(&results) {
            println!("{}", text.replace("reassigning", "cancelling"));
            let failed = results.iter().filter(|(_, r)| r.is_err()).count();
            bail!("{failed} partition reassignment(s) could not be cancelled");
        }
        println!("{}", format_cancelled(&running));
    }
    if !preserve_throttles {
        clear_throttles(admin, &targets).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancelled_line() {
        assert_eq!(
            format_cancelled(&[TopicPartition::new("t", 0)]),
            "Successfully cancelled partition reassignment for: t-0"
        );
        assert_eq!(
            format_cancelled(&[TopicPartition::new("t", 0), TopicPartition::new("u", 2)]),
            "Successfully cancelled partition reassignments for: t-0,u-2"
        );
    }
}
