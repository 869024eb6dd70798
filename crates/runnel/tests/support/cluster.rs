//! A cluster of real `runnel broker` processes on 127.0.0.1 (every node broker and controller),
//! with ports fixed at creation (see [`free_port`]) so a restarted node keeps its addresses (the
//! Raft membership stores controller addresses), and the metadata probes the cluster tests wait
//! on.
//!
//! Each node's output goes to `<tempdir>/node-<id>.log` (appended across restarts; level from
//! `RUNNEL_TEST_LOG`, default [`QUIET_RAFT`]). When a test panics, the cluster keeps its
//! directory and prints where the logs are, with their last lines.

use std::collections::BTreeSet;
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::{Wire, DEADLINE};

/// The nodes' default log filter: `info` without openraft's replication chatter (a line per
/// 500 ms per unreachable peer while a node is down).
pub const QUIET_RAFT: &str = "info,openraft=warn,openraft::replication=off,\
     openraft::engine::handler::replication_handler=off";

/// A port on 127.0.0.1 that is free now and likely to stay free while its node is down (a
/// restarted node binds the same ports). A port the kernel hands out (bind to port 0) is not:
/// once released it is back in the ephemeral range, where outgoing connections and other
/// tests' listeners take it. So the port is drawn at random *below* the kernel's ephemeral range
/// (`net.ipv4.ip_local_port_range`), checked by binding, and never handed out twice by this
/// process (clusters of tests running in parallel threads).
pub fn free_port() -> u16 {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let (from, to) = (10_000u16, ephemeral_low);
    let mut given = GIVEN.lock().unwrap_or_else(|p| p.into_inner());
    if to > from + 1000 {
        for _ in 0..200 {
            let port = rand::random::<u16>() % (to - from) + from;
            if !given.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
                given.insert(port);
                return port;
            }
        }
    }
    // No room below the ephemeral range: let the kernel choose.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    given.insert(port);
    port
}

pub struct Node {
    pub id: i32,
    pub kafka_port: u16,
    pub data_dir: PathBuf,
    pub log_path: PathBuf,
    child: Option<Child>,
    starts: u32,
}

pub struct Cluster {
    dir: Option<tempfile::TempDir>,
    pub voters: String,
    pub nodes: Vec<Node>,
    overrides: Vec<String>,
    /// Extra environment variables of every node (test hooks).
    env: Vec<(String, String)>,
}

impl Cluster {
    /// Starts `n` nodes (ids 1..=n) with the given `--override key=value`s and waits until each
    /// listens.
    pub fn start(n: i32, overrides: &[&str]) -> Cluster {
        Self::start_with_env(n, overrides, &[])
    }

    /// [`Cluster::start`] with extra environment variables for every node.
    pub fn start_with_env(n: i32, overrides: &[&str], env: &[(&str, &str)]) -> Cluster {
        let mut cluster = Self::prepare(n, overrides, env);
        cluster.launch();
        cluster
    }

    /// The cluster with its directories and ports chosen but no node started yet, so a test can
    /// prepare a node's directories (e.g. mount a tmpfs) first; [`Cluster::launch`] starts it.
    /// In an override, `{data_dir}` stands for the node's data directory.
    pub fn prepare(n: i32, overrides: &[&str], env: &[(&str, &str)]) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let controller_ports: Vec<u16> = (0..n).map(|_| free_port()).collect();
        let voters = (1..=n)
            .map(|i| format!("{i}@127.0.0.1:{}", controller_ports[(i - 1) as usize]))
            .collect::<Vec<_>>()
            .join(",");
        let nodes = (1..=n)
            .map(|i| Node {
                id: i,
                kafka_port: free_port(),
                data_dir: dir.path().join(format!("node-{i}")),
                log_path: dir.path().join(format!("node-{i}.log")),
                child: None,
                starts: 0,
            })
            .collect();
        Cluster {
            dir: Some(dir),
            voters,
            nodes,
            overrides: overrides.iter().map(|s| s.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    /// Starts every node of a [`Cluster::prepare`]d cluster and waits until each listens.
    pub fn launch(&mut self) {
        // Start all at once: the quorum only forms when a majority is up.
        let waits: Vec<_> = (0..self.nodes.len()).map(|i| self.spawn(i)).collect();
        for (i, rx) in waits.into_iter().enumerate() {
            rx.recv_timeout(DEADLINE)
                .unwrap_or_else(|_| panic!("node {} did not start listening", i + 1));
        }
    }

    /// Spawns node `index` (not waiting); the receiver gets `()` once it listens.
    pub fn spawn(&mut self, index: usize) -> mpsc::Receiver<()> {
        let node = &mut self.nodes[index];
        node.starts += 1;
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&node.log_path)
            .expect("open node log");
        let _ = writeln!(log, "===== start #{} of node {}", node.starts, node.id);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_runnel"));
        cmd.arg("broker")
            .arg("--node-id")
            .arg(node.id.to_string())
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", node.kafka_port))
            .arg("--controller-quorum-voters")
            .arg(&self.voters)
            .arg("--data-dir")
            .arg(&node.data_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .env("NO_COLOR", "1")
            .env(
                "RUST_LOG",
                std::env::var("RUNNEL_TEST_LOG").unwrap_or_else(|_| QUIET_RAFT.into()),
            );
        let data_dir = node.data_dir.display().to_string();
        for o in &self.overrides {
            cmd.arg("--override")
                .arg(o.replace("{data_dir}", &data_dir));
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let mut child = cmd.spawn().expect("spawn runnel broker");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.contains("listening on") {
                    let _ = tx.send(());
                }
            }
        });
        node.child = Some(child);
        rx
    }

    pub fn addr(&self, index: usize) -> String {
        format!("127.0.0.1:{}", self.nodes[index].kafka_port)
    }

    /// Every node's client address, comma-separated (a bootstrap list).
    pub fn bootstrap(&self) -> String {
        (0..self.nodes.len())
            .map(|i| self.addr(i))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The index of the node with this id.
    pub fn index_of(&self, id: i32) -> usize {
        self.nodes
            .iter()
            .position(|n| n.id == id)
            .unwrap_or_else(|| panic!("no node {id}"))
    }

    /// The pid of node `index`, if it runs.
    pub fn pid(&self, index: usize) -> Option<u32> {
        self.nodes[index].child.as_ref().map(Child::id)
    }

    /// SIGKILL (by pid, through `Child::kill`) and reap.
    pub fn kill9(&mut self, index: usize) {
        if let Some(mut child) = self.nodes[index].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM and wait (bounded) for the process to exit; returns whether it exited cleanly.
    pub fn stop(&mut self, index: usize) -> bool {
        let Some(mut child) = self.nodes[index].child.take() else {
            return false;
        };
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let deadline = Instant::now() + DEADLINE;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    /// SIGSTOP node `index` (by pid): the process is frozen, its sockets stay open.
    pub fn pause(&self, index: usize) {
        self.signal(index, "-STOP");
    }

    /// SIGCONT node `index` (by pid) after [`Cluster::pause`].
    pub fn resume(&self, index: usize) {
        self.signal(index, "-CONT");
    }

    fn signal(&self, index: usize, signal: &str) {
        let pid = self.pid(index).expect("the node runs");
        let status = Command::new("kill")
            .arg(signal)
            .arg(pid.to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal} {pid}");
    }

    /// `kill -9` (if running), then start again on the same data dir and ports.
    pub fn restart(&mut self, index: usize) {
        self.kill9(index);
        let rx = self.spawn(index);
        rx.recv_timeout(DEADLINE).expect("restarted node listening");
    }

    /// Waits (bounded by [`DEADLINE`]) for node `index`'s process to exit on its own: its exit
    /// status, or `None` if it is still running (it is left running) or was not started.
    pub fn wait_exit(&mut self, index: usize) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + DEADLINE;
        while Instant::now() < deadline {
            let child = self.nodes[index].child.as_mut()?;
            if let Ok(Some(status)) = child.try_wait() {
                self.nodes[index].child = None;
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Indexes of the nodes that run.
    pub fn alive(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|i| self.nodes[*i].child.is_some())
            .collect()
    }

    /// The last `lines` lines of node `index`'s log.
    pub fn log_tail(&self, index: usize, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.nodes[index].log_path).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill9(i);
        }
        if std::thread::panicking() {
            if let Some(dir) = self.dir.take() {
                let kept = dir.keep();
                eprintln!("cluster data and logs kept in {}", kept.display());
                for i in 0..self.nodes.len() {
                    eprintln!(
                        "----- last lines of {} -----\n{}",
                        self.nodes[i].log_path.display(),
                        self.log_tail(i, 40)
                    );
                }
            }
        }
    }
}

/// The command line of a broker-only node `node_id` of the cluster with `voters`, on `data`.
pub fn broker_only_command(
    node_id: i32,
    voters: &str,
    data: &std::path::Path,
    overrides: &[&str],
) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_runnel"));
    cmd.arg("broker")
        .arg("--node-id")
        .arg(node_id.to_string())
        .args(["--process-roles", "broker", "--listen", "127.0.0.1:0"])
        .arg("--controller-quorum-voters")
        .arg(voters)
        .arg("--data-dir")
        .arg(data)
        .env("RUST_LOG", "warn");
    for o in overrides {
        cmd.arg("--override").arg(o);
    }
    cmd
}

pub fn metadata(addr: &str) -> Option<MetadataResponse> {
    let mut wire = Wire::try_connect(addr)?;
    wire.try_call(
        ApiKey::Metadata,
        9,
        &MetadataRequest::default().with_topics(None),
    )
}

/// (leader id, epoch, voters) from DescribeQuorum sent to `addr`.
pub fn quorum(addr: &str) -> Option<(i32, i32, Vec<i32>)> {
    let mut wire = Wire::try_connect(addr)?;
    let req = DescribeQuorumRequest::default().with_topics(vec![
        describe_quorum_request::TopicData::default()
            .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
            .with_partitions(vec![
                describe_quorum_request::PartitionData::default().with_partition_index(0)
            ]),
    ]);
    let resp: DescribeQuorumResponse = wire.try_call(ApiKey::DescribeQuorum, 1, &req)?;
    let p = resp.topics.first()?.partitions.first()?;
    (p.error_code == 0 && p.leader_id.0 >= 0).then(|| {
        (
            p.leader_id.0,
            p.leader_epoch,
            p.current_voters.iter().map(|v| v.replica_id.0).collect(),
        )
    })
}

pub fn live_broker_ids(addr: &str) -> Option<Vec<i32>> {
    let mut ids: Vec<i32> = metadata(addr)?
        .brokers
        .iter()
        .map(|b| b.node_id.0)
        .collect();
    ids.sort();
    Some(ids)
}

/// (leader, replicas) per partition of `topic`, sorted.
pub fn topic_partitions(addr: &str, topic: &str) -> Option<Vec<(i32, Vec<i32>)>> {
    let mut parts: Vec<(i32, Vec<i32>)> = partition_states(addr, topic)?
        .into_iter()
        .map(|p| (p.leader, p.replicas))
        .collect();
    parts.sort();
    Some(parts)
}

/// One partition as a broker's Metadata shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    pub partition: i32,
    pub leader: i32,
    pub leader_epoch: i32,
    /// Assigned replicas, preferred first.
    pub replicas: Vec<i32>,
    /// In-sync replicas, sorted.
    pub isr: Vec<i32>,
}

/// Every partition of `topic` as broker `addr` sees it, by partition index.
pub fn partition_states(addr: &str, topic: &str) -> Option<Vec<PartitionState>> {
    let meta = metadata(addr)?;
    let t = meta
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.0.as_str()) == Some(topic) && t.error_code == 0)?;
    let mut parts: Vec<PartitionState> = t
        .partitions
        .iter()
        .map(|p| {
            let mut isr: Vec<i32> = p.isr_nodes.iter().map(|b| b.0).collect();
            isr.sort();
            PartitionState {
                partition: p.partition_index,
                leader: p.leader_id.0,
                leader_epoch: p.leader_epoch,
                replicas: p.replica_nodes.iter().map(|r| r.0).collect(),
                isr,
            }
        })
        .collect();
    parts.sort_by_key(|p| p.partition);
    Some(parts)
}

/// (leader, isr) of partition 0 of `topic` as broker `addr` sees it.
pub fn leader_and_isr(addr: &str, topic: &str) -> Option<(i32, Vec<i32>)> {
    let p = partition_states(addr, topic)?
        .into_iter()
        .find(|p| p.partition == 0)?;
    Some((p.leader, p.isr))
}

/// CreateTopics sent to `addr`; returns the topic's error code.
pub fn create(addr: &str, topic: &str, partitions: i32, rf: i16) -> i16 {
    let mut wire = Wire::connect(addr);
    wire.create_topic(topic, partitions, rf, &[]).0
}
