//! `runnel dev-cluster status`: the supervisor's view of each node (state, pid, ports) next to
//! the metadata quorum's (who leads, who follows), as one table.

use std::path::Path;
use std::time::Duration;

use runnel_client::Admin;

use super::plan::HOST;
use super::state::{ClusterState, NodeState, Phase};

/// The quorum as DescribeQuorum reports it, reduced to what the table shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumView {
    pub leader_id: i32,
    pub epoch: i32,
    pub voters: Vec<i32>,
    pub observers: Vec<i32>,
}

/// How long `status` waits for the quorum's answer.
const QUORUM_TIMEOUT: Duration = Duration::from_secs(10);

/// Asks a listening node for the quorum; the error text otherwise (no node up, no leader...).
pub async fn fetch_quorum(cluster: &ClusterState) -> Result<QuorumView, String> {
    let bootstrap: Vec<String> = cluster
        .nodes
        .iter()
        .filter(|n| n.phase == Phase::Running)
        .map(|n| format!("{HOST}:{}", n.kafka_port))
        .collect();
    if bootstrap.is_empty() {
        return Err("no node is running".into());
    }
    let ask = async {
        let admin = Admin::new(crate::cmd::connect(&bootstrap.join(",")).await?);
        anyhow::Ok(admin.describe_metadata_quorum().await?)
    };
    match tokio::time::timeout(QUORUM_TIMEOUT, ask).await {
        Err(_) => Err(format!("no answer within {} s", QUORUM_TIMEOUT.as_secs())),
        Ok(Err(e)) => Err(crate::cmd::error_line(&e)),
        Ok(Ok(q)) => Ok(QuorumView {
            leader_id: q.leader_id,
            epoch: q.leader_epoch,
            voters: q.voters.iter().map(|r| r.replica_id).collect(),
            observers: q.observers.iter().map(|r| r.replica_id).collect(),
        }),
    }
}

/// The node's `--process-roles`, as Kafka's `process.roles`.
fn roles(node: &NodeState) -> String {
    node.args
        .iter()
        .position(|a| a == "--process-roles")
        .and_then(|i| node.args.get(i + 1))
        .cloned()
        .unwrap_or_else(|| "broker,controller".into())
}

/// The node's place in the quorum, in kafka-metadata-quorum's words.
fn quorum_role(id: u16, quorum: &Result<QuorumView, String>) -> &'static str {
    let Ok(q) = quorum else {
        return "-";
    };
    let id = i32::from(id);
    if q.leader_id == id {
        "Leader"
    } else if q.voters.contains(&id) {
        "Follower"
    } else if q.observers.contains(&id) {
        "Observer"
    } else {
        "-"
    }
}

/// The whole output of `status`.
pub fn status_text(
    data_dir: &Path,
    cluster: &ClusterState,
    quorum: &Result<QuorumView, String>,
) -> String {
    let mut out = format!(
        "Dev cluster in {} (supervisor pid {})\nBootstrap: {}\n",
        data_dir.display(),
        cluster.supervisor_pid,
        cluster.bootstrap
    );
    let header = [
        "NODE",
        "STATE",
        "PID",
        "KAFKA",
        "CONTROLLER",
        "RACK",
        "ROLES",
        "QUORUM",
        "LAST EXIT",
    ];
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
    for n in &cluster.nodes {
        rows.push(vec![
            n.id.to_string(),
            n.phase.as_str().to_string(),
            n.pid.map_or("-".into(), |p| p.to_string()),
            format!("{HOST}:{}", n.kafka_port),
            format!("{HOST}:{}", n.controller_port),
            n.rack.clone().unwrap_or_else(|| "-".into()),
            roles(n),
            quorum_role(n.id, quorum).to_string(),
            n.last_exit.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    out.push_str(&table(&rows));
    match quorum {
        Ok(q) if q.leader_id >= 0 => out.push_str(&format!(
            "Quorum leader (active controller): node {} (epoch {})\n",
            q.leader_id, q.epoch
        )),
        Ok(_) => out.push_str("Quorum leader (active controller): none elected\n"),
        Err(why) => out.push_str(&format!(
            "Quorum leader (active controller): unknown ({why})\n"
        )),
    }
    out
}

/// Left-aligned columns two spaces apart, without trailing blanks.
fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (cell, width) in row.iter().zip(&widths) {
            line.push_str(&format!("{cell:<width$}  "));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: u16, phase: Phase, pid: Option<u32>, last_exit: Option<&str>) -> NodeState {
        NodeState {
            id,
            kafka_port: 9091 + id,
            controller_port: 9191 + id,
            rack: None,
            data_dir: format!("d/node-{id}").into(),
            log: format!("d/node-{id}.log").into(),
            pid,
            phase,
            last_exit: last_exit.map(str::to_string),
            args: vec![
                "broker".into(),
                "--process-roles".into(),
                "broker,controller".into(),
            ],
        }
    }

    fn cluster() -> ClusterState {
        ClusterState {
            supervisor_pid: 100,
            control: "127.0.0.1:1".into(),
            token: String::new(),
            bootstrap: "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094".into(),
            nodes: vec![
                node(1, Phase::Down, None, Some("signal: 9 (SIGKILL)")),
                node(2, Phase::Running, Some(201), None),
                node(3, Phase::Stopped, Some(301), None),
            ],
        }
    }

    #[test]
    fn table_with_the_quorum() {
        let quorum = Ok(QuorumView {
            leader_id: 2,
            epoch: 7,
            voters: vec![1, 2, 3],
            observers: vec![],
        });
        assert_eq!(
            status_text(Path::new("d"), &cluster(), &quorum),
            "Dev cluster in d (supervisor pid 100)
Bootstrap: 127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094
NODE  STATE    PID  KAFKA           CONTROLLER      RACK  ROLES              QUORUM    LAST EXIT
1     down     -    127.0.0.1:9092  127.0.0.1:9192  -     broker,controller  Follower  signal: 9 (SIGKILL)
2     running  201  127.0.0.1:9093  127.0.0.1:9193  -     broker,controller  Leader    -
3     stopped  301  127.0.0.1:9094  127.0.0.1:9194  -     broker,controller  Follower  -
Quorum leader (active controller): node 2 (epoch 7)
"
        );
    }

    #[test]
    fn without_the_quorum() {
        let text = status_text(
            Path::new("d"),
            &cluster(),
            &Err("no node is running".into()),
        );
        assert!(text.ends_with("Quorum leader (active controller): unknown (no node is running)\n"));
        let none = Ok(QuorumView {
            leader_id: -1,
            epoch: 3,
            voters: vec![1, 2, 3],
            observers: vec![4],
        });
        let text = status_text(Path::new("d"), &cluster(), &none);
        assert!(text.ends_with("none elected\n"), "{text}");
        assert_eq!(quorum_role(4, &none), "Observer");
        assert_eq!(quorum_role(9, &none), "-");
    }
}
