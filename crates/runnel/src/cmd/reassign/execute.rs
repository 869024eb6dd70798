//! `--execute`: start the reassignments of a reassignment file with
//! AlterPartitionReassignments, after printing the current assignment for rollback.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{bail, Result};
use runnel_client::admin::ItemResults;
use runnel_client::{Admin, TopicPartition};

use super::current::current_assignment;
use super::json::{
    format_reassignment_json, log_dir_moves, parse_reassignment, validate_for_execute,
};
use crate::cmd::java_exception::exception_message;

/// Kafka's refusal to start while another reassignment runs (without `--additional`).
pub const CANNOT_EXECUTE_BECAUSE_OF_EXISTING_MESSAGE: &str = "Cannot execute because there is an existing partition assignment.  Use --additional to override this and create a new partition assignment in addition to the existing one. The --additional flag can also be used to change the throttle by resubmitting the current reassignment.";

const TIMEOUT: Duration = Duration::from_secs(30);

/// The block printed before starting: the current replicas of the partitions to move.
pub fn format_current_for_rollback(
    proposed: &BTreeMap<TopicPartition, Vec<i32>>,
    current: &BTreeMap<TopicPartition, Vec<i32>>,
) -> String {
    let moving: BTreeMap<TopicPartition, Vec<i32>> = current
        .iter()
        .filter(|(tp, _)| proposed.contains_key(*tp))
        .map(|(tp, r)| (tp.clone(), r.clone()))
        .collect();
    format!(
        "Current partition replica assignment\n\n{}\n\nSave this to use as the --reassignment-json-file option during rollback",
        format_reassignment_json(&moving)
    )
}

/// "Successfully started partition reassignment(s) for t-0,t-1".
pub fn format_started(partitions: &[&TopicPartition]) -> String {
    let list: Vec<String> = partitions.iter().map(ToString::to_string).collect();
    format!(
        "Successfully started partition reassignment{} for {}",
        if partitions.len() == 1 { "" } else { "s" },
        list.join(",")
    )
}

/// The failure block: "Error reassigning partition(s):" and one `t-0: message` line each.
pub fn format_failures(results: &ItemResults<TopicPartition>) -> Option<String> {
    let lines: Vec<String> = results
        .iter()
        .filter_map(|(tp, r)| {
            r.as_ref()
                .err()
                .map(|e| format!("{tp}: {}", exception_message(e)))
        })
        .collect();
    (!lines.is_empty()).then(|| format!("Error reassigning partition(s):\n{}", lines.join("\n")))
}

/// The first target broker that is not in the cluster.
pub fn unknown_broker(
    targets: &BTreeMap<TopicPartition, Vec<i32>>,
    cluster: &BTreeSet<i32>,
) -> Option<i32> {
    targets
        .values()
        .flatten()
        .copied()
        .collect::<BTreeSet<i32>>()
        .into_iter()
        .find(|b| !cluster.contains(b))
}

/// Runs `--execute`.
pub async fn execute(admin: &Admin, json: &str, additional: bool) -> Result<()> {
    let entries = parse_reassignment(json)?;
    let targets = validate_for_execute(&entries)?;
    let ongoing = admin.list_partition_reassignments(None, TIMEOUT).await?;
    if !additional && !ongoing.is_empty() {
        bail!(CANNOT_EXECUTE_BECAUSE_OF_EXISTING_MESSAGE);
    }
    let cluster: BTreeSet<i32> = admin
        .describe_cluster()
        .await?
        .brokers
        .iter()
        .map(|b| b.id)
        .collect();
    if let Some(b) = unknown_broker(&targets, &cluster) {
        bail!("Unknown broker id {b}");
    }
    let topics: Vec<String> = targets
        .keys()
        .map(|tp| tp.topic.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let current = current_assignment(admin, &topics).await?;
    if let Some(t) = current.missing.first() {
        bail!("Topic {t} not found.");
    }
    let absent: Vec<String> = targets
        .keys()
        .filter(|tp| !current.replicas.contains_key(*tp))
        .map(ToString::to_string)
        .collect();
    if !absent.is_empty() {
        bail!("Unable to find partition: {}", absent.join(", "));
    }
    println!(
        "{}",
        format_current_for_rollback(&targets, &current.replicas)
    );
    let request: Vec<(TopicPartition, Option<Vec<i32>>)> = targets
        .iter()
        .map(|(tp, r)| (tp.clone(), Some(r.clone())))
        .collect();
    let results = admin
        .alter_partition_reassignments(&request, TIMEOUT)
        .await?;
    if let Some(text) = format_failures(&results) {
        println!("{text}");
        let failed = results.iter().filter(|(_, r)| r.is_err()).count();
        bail!("{failed} partition reassignment(s) could not be started");
    }
    let started: Vec<&TopicPartition> = targets.keys().collect();
    println!("{}", format_started(&started));
    let moves = log_dir_moves(&entries);
    if !moves.is_empty() {
        super::log_dir_moves::execute_moves(admin, &moves, MOVES_TIMEOUT).await?;
    }
    Ok(())
}

/// Kafka's `--timeout` default: how long a log dir move may wait for its replica to exist.
const MOVES_TIMEOUT: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;
    use runnel_client::ClientError;

    fn map(entries: &[(&str, i32, &[i32])]) -> BTreeMap<TopicPartition, Vec<i32>> {
        entries
            .iter()
            .map(|(t, p, r)| (TopicPartition::new(*t, *p), r.to_vec()))
            .collect()
    }

    #[test]
    fn rollback_block_lists_only_moving_partitions() {
        let proposed = map(&[("t", 0, &[2, 3])]);
        let current = map(&[("t", 0, &[1, 2]), ("t", 1, &[2, 1])]);
        assert_eq!(
            format_current_for_rollback(&proposed, &current),
            "Current partition replica assignment\n\n\
             {\"version\":1,\"partitions\":[{\"topic\":\"t\",\"partition\":0,\"replicas\":[1,2],\"log_dirs\":[\"any\",\"any\"]}]}\n\n\
             Save this to use as the --reassignment-json-file option during rollback"
        );
    }

    #[test]
    fn started_and_failed_lines() {
        let a = TopicPartition::new("t", 0);
        let b = TopicPartition::new("t", 1);
        assert_eq!(
            format_started(&[&a]),
            "Successfully started partition reassignment for t-0"
        );
        assert_eq!(
            format_started(&[&a, &b]),
            "Successfully started partition reassignments for t-0,t-1"
        );
        let results: ItemResults<TopicPartition> = vec![
            (a.clone(), Ok(())),
            (
                b.clone(),
                Err(ClientError::kafka(
                    runnel_codes::INVALID_REPLICA_ASSIGNMENT,
                    None,
                )),
            ),
        ];
        assert_eq!(
            format_failures(&results).unwrap_or_default(),
            "Error reassigning partition(s):\nt-1: Replica assignment is invalid."
        );
        assert!(format_failures(&vec![(a, Ok(()))]).is_none());
    }

    #[test]
    fn unknown_brokers() {
        let targets = map(&[("t", 0, &[5, 2]), ("t", 1, &[4])]);
        let cluster: BTreeSet<i32> = [1, 2, 3].into_iter().collect();
        assert_eq!(unknown_broker(&targets, &cluster), Some(4));
        let cluster: BTreeSet<i32> = [2, 4, 5].into_iter().collect();
        assert_eq!(unknown_broker(&targets, &cluster), None);
    }
}
