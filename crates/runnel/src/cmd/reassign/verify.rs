//! `--verify`: the state of each reassignment of a reassignment file (still in progress,
//! completed, or not running with another replica set), then, once no reassignment is
//! running anywhere, clearing the replication throttles as kafka-reassign-partitions.sh does.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::Result;
use runnel_client::admin::{AlterConfigOp, ConfigOpType, ConfigResource, PartitionReassignment};
use runnel_client::{Admin, TopicPartition};

use super::current::current_assignment;
use super::json::parse_reassignment;

const TIMEOUT: Duration = Duration::from_secs(30);

/// Broker configs the tool clears.
pub const BROKER_LEVEL_THROTTLES: [&str; 3] = [
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
];

/// Topic configs the tool clears.
pub const TOPIC_LEVEL_THROTTLES: [&str; 2] = [
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
];

/// One partition's reassignment state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReassignmentState {
    /// The replicas now (during a move: old and new).
    pub current: Vec<i32>,
    /// The replicas the file asks for.
    pub target: Vec<i32>,
    /// Whether no reassignment of the partition is running.
    pub done: bool,
}

/// States of `targets`: running reassignments from `ongoing`, the others from the current
/// replica sets (a partition that does not exist has an empty replica set).
pub fn reassignment_states(
    targets: &[(TopicPartition, Vec<i32>)],
    ongoing: &BTreeMap<TopicPartition, PartitionReassignment>,
    current: &BTreeMap<TopicPartition, Vec<i32>>,
) -> BTreeMap<TopicPartition, ReassignmentState> {
    targets
        .iter()
        .map(|(tp, target)| {
            let state = match ongoing.get(tp) {
                Some(r) => ReassignmentState {
                    current: r.replicas.clone(),
                    target: target.clone(),
                    done: false,
                },
                None => ReassignmentState {
                    current: current.get(tp).cloned().unwrap_or_default(),
                    target: target.clone(),
                    done: true,
                },
            };
            (tp.clone(), state)
        })
        .collect()
}

fn join(ids: &[i32]) -> String {
    ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

/// "Status of partition reassignment:" and one line per partition, sorted.
pub fn format_states(states: &BTreeMap<TopicPartition, ReassignmentState>) -> String {
    let mut lines = vec!["Status of partition reassignment:".to_string()];
    for (tp, s) in states {
        lines.push(if !s.done {
            format!("Reassignment of partition {tp} is still in progress.")
        } else if s.current == s.target {
            format!("Reassignment of partition {tp} is completed.")
        } else {
            format!(
                "There is no active reassignment of partition {tp}, but replica set is {} rather than {}.",
                join(&s.current),
                join(&s.target)
            )
        });
    }
    lines.join("\n")
}

/// "Clearing broker-level throttles on broker(s) ..." / "... topic(s) ...".
pub fn format_clearing(level: &str, noun: &str, items: &[String]) -> String {
    format!(
        "Clearing {level}-level throttles on {noun}{} {}",
        if items.len() == 1 { "" } else { "s" },
        items.join(",")
    )
}

pub async fn clear_throttles(admin: &Admin, targets: &[(TopicPartition, Vec<i32>)]) -> Result<()> {
    let mut brokers: BTreeSet<i32> = admin
        .describe_cluster()
        .await?
        .brokers
        .iter()
        .map(|b| b.id)
        .collect();
    brokers.extend(targets.iter().flat_map(|(_, r)| r.iter().copied()));
    let brokers: Vec<String> = brokers.iter().map(i32::to_string).collect();
    println!("{}", format_clearing("broker", "broker", &brokers));
    clear(
        admin,
        brokers.iter().map(ConfigResource::broker),
        &BROKER_LEVEL_THROTTLES,
    )
    .await;
    let topics: Vec<String> = targets
        .iter()
        .map(|(tp, _)| tp.topic.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    println!("{}", format_clearing("topic", "topic", &topics));
    clear(
        admin,
        topics.iter().map(ConfigResource::topic),
        &TOPIC_LEVEL_THROTTLES,
    )
    .await;
    Ok(())
}

/// Deletes `keys` on each resource. A broker that refuses (one that has no dynamic broker
/// configs, or a topic deleted meanwhile) gets a warning: the verification itself is done.
async fn clear(admin: &Admin, resources: impl Iterator<Item = ConfigResource>, keys: &[&str]) {
    let ops: Vec<AlterConfigOp> = keys
        .iter()
        .map(|k| AlterConfigOp {
            name: (*k).to_owned(),
            op: ConfigOpType::Delete,
            value: None,
        })
        .collect();
    for resource in resources {
        if let Err(e) = admin
            .incremental_alter_configs(&resource, &ops, false)
            .await
        {
            eprintln!(
                "WARNING: could not clear the throttles of {:?} {}: {}",
                resource.kind,
                resource.name,
                runnel_client::render_error(&e)
            );
        }
    }
}

/// `--wait-ms`: polls until no reassignment of the file runs, with a progress line per second
/// on stderr (`super::super::progress`); fails once the timeout passes.
pub async fn wait_done(admin: &Admin, json: &str, wait: super::Wait) -> Result<()> {
    use super::super::progress::{reassignment_line, Progress};
    let targets: BTreeSet<TopicPartition> = parse_reassignment(json)?
        .into_iter()
        .map(|e| e.partition)
        .collect();
    let start = std::time::Instant::now();
    let mut progress = Progress::new(wait.progress, start);
    loop {
        let ongoing = admin.list_partition_reassignments(None, TIMEOUT).await?;
        let moving = targets
            .iter()
            .filter(|tp| ongoing.contains_key(*tp))
            .count();
        let now = std::time::Instant::now();
        let done = targets.len() - moving;
        let line = |elapsed| reassignment_line(done, targets.len(), elapsed);
        if moving == 0 {
            progress.finish(now, line);
            return Ok(());
        }
        progress.report(now, line);
        if now.duration_since(start) >= wait.timeout {
            anyhow::bail!(
                "{moving} of {} reassignments still running after --wait-ms {}",
                targets.len(),
                wait.timeout.as_millis()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Runs `--verify`.
pub async fn verify(admin: &Admin, json: &str, preserve_throttles: bool) -> Result<()> {
    let targets: Vec<(TopicPartition, Vec<i32>)> = parse_reassignment(json)?
        .into_iter()
        .map(|e| (e.partition, e.replicas))
        .collect();
    let ongoing = admin.list_partition_reassignments(None, TIMEOUT).await?;
    let topics: Vec<String> = targets
        .iter()
        .filter(|(tp, _)| !ongoing.contains_key(tp))
        .map(|(tp, _)| tp.topic.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let current = if topics.is_empty() {
        BTreeMap::new()
    } else {
        current_assignment(admin, &topics).await?.replicas
    };
    let states = reassignment_states(&targets, &ongoing, &current);
    println!("{}", format_states(&states));
    // Kafka prints the (here always empty) log-dir move states next.
    println!();
    if ongoing.is_empty() && !preserve_throttles {
        clear_throttles(admin, &targets).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_and_lines() {
        let tp = |p| TopicPartition::new("t", p);
        let targets = vec![
            (tp(2), vec![2, 3]),
            (tp(0), vec![1, 2]),
            (tp(1), vec![3, 1]),
            (TopicPartition::new("gone", 0), vec![1]),
        ];
        let mut ongoing = BTreeMap::new();
        ongoing.insert(
            tp(1),
            PartitionReassignment {
                replicas: vec![1, 2, 3],
                adding_replicas: vec![3],
                removing_replicas: vec![2],
            },
        );
        let mut current = BTreeMap::new();
        current.insert(tp(0), vec![1, 2]);
        current.insert(tp(2), vec![1, 2]);
        let states = reassignment_states(&targets, &ongoing, &current);
        assert!(!states[&tp(1)].done);
        assert_eq!(
            format_states(&states),
            "Status of partition reassignment:\n\
             There is no active reassignment of partition gone-0, but replica set is  rather than 1.\n\
             Reassignment of partition t-0 is completed.\n\
             Reassignment of partition t-1 is still in progress.\n\
             There is no active reassignment of partition t-2, but replica set is 1,2 rather than 2,3."
        );
    }

    #[test]
    fn clearing_lines() {
        assert_eq!(
            format_clearing("broker", "broker", &["1".into(), "2".into(), "3".into()]),
            "Clearing broker-level throttles on brokers 1,2,3"
        );
        assert_eq!(
            format_clearing("topic", "topic", &["t".into()]),
            "Clearing topic-level throttles on topic t"
        );
    }
}
