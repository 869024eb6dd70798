//! `--execute`'s log dir moves (Kafka's `ReassignPartitionsCommand.executeMoves`): every
//! replica whose `log_dirs` entry names a directory is moved there with AlterReplicaLogDirs.
//! A replica the reassignment is still adding answers REPLICA_NOT_AVAILABLE (the broker
//! remembers the dir for when it arrives); those are asked again every 100 ms until the
//! timeout.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use runnel_client::admin::ReplicaLogDirMove;
use runnel_client::{Admin, ClientError, TopicPartition};

/// Kafka's `TopicPartitionReplica.toString`: `topic-partition-broker`, sorted as the tool
/// sorts them (topic, partition, broker).
fn names(moves: &[&ReplicaLogDirMove]) -> String {
    let mut keys: Vec<(&str, i32, i32)> = moves
        .iter()
        .map(|m| (m.topic.as_str(), m.partition, m.broker))
        .collect();
    keys.sort();
    keys.iter()
        .map(|(t, p, b)| format!("{t}-{p}-{b}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// "Successfully started log directory move(s) for: t-0-1,...".
pub fn format_started(moves: &[&ReplicaLogDirMove]) -> String {
    format!(
        "Successfully started log directory move{} for: {}",
        if moves.len() == 1 { "" } else { "s" },
        names(moves)
    )
}

fn is_replica_not_available(e: &ClientError) -> bool {
    e.code() == Some(runnel_codes::REPLICA_NOT_AVAILABLE)
}

/// Starts every move, retrying the replicas that do not exist yet until `timeout`.
pub async fn execute_moves(
    admin: &Admin,
    moves: &[(TopicPartition, i32, String)],
    timeout: Duration,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let mut pending: BTreeMap<(String, i32, i32), ReplicaLogDirMove> = moves
        .iter()
        .map(|(tp, broker, path)| {
            let m = ReplicaLogDirMove {
                topic: tp.topic.clone(),
                partition: tp.partition,
                broker: *broker,
                path: path.clone(),
            };
            ((tp.topic.clone(), tp.partition, *broker), m)
        })
        .collect();
    loop {
        let asked: Vec<ReplicaLogDirMove> = pending.values().cloned().collect();
        let mut started = Vec::new();
        for (m, result) in admin.alter_replica_log_dirs(&asked).await? {
            match result {
                Ok(()) => started.push(m),
                Err(e) if is_replica_not_available(&e) => {}
                Err(e) => bail!(
                    "Failed to alter dir for {}-{}-{}: {e}",
                    m.topic,
                    m.partition,
                    m.broker
                ),
            }
        }
        if !started.is_empty() {
            println!("{}", format_started(&started.iter().collect::<Vec<_>>()));
        }
        for m in &started {
            pending.remove(&(m.topic.clone(), m.partition, m.broker));
        }
        if pending.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            let left: Vec<&ReplicaLogDirMove> = pending.values().collect();
            bail!(
                "Timed out before log directory move{} could be started for: {}",
                if left.len() == 1 { "" } else { "s" },
                names(&left)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn started_lines_name_replicas_as_kafka_does() {
        let m = |t: &str, p, b| ReplicaLogDirMove {
            topic: t.into(),
            partition: p,
            broker: b,
            path: "/d".into(),
        };
        let (a, b) = (m("t", 1, 2), m("t", 0, 3));
        assert_eq!(
            format_started(&[&a]),
            "Successfully started log directory move for: t-1-2"
        );
        assert_eq!(
            format_started(&[&a, &b]),
            "Successfully started log directory moves for: t-0-3,t-1-2"
        );
    }
}
