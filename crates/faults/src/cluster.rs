//! Real `runnel broker` processes on 127.0.0.1, every one reachable only through its proxies:
//! `--advertise` (what clients and followers dial) and every `--controller-quorum-voters`
//! address are proxy ports; the brokers bind other ports (`--listen`, `--controller-listen`).

use std::collections::BTreeSet;
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener as StdListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::proxy::Network;

/// A port on 127.0.0.1 below the kernel's ephemeral range, free now, never given twice (a
/// restarted node binds the same ports; a port from the ephemeral range would be taken by
/// outgoing connections meanwhile).
pub fn free_port(given: &mut BTreeSet<u16>) -> anyhow::Result<u16> {
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    for _ in 0..500 {
        let port = 10_000 + rand::random::<u16>() % low.saturating_sub(10_000).max(1);
        if !given.contains(&port) && StdListener::bind(("127.0.0.1", port)).is_ok() {
            given.insert(port);
            return Ok(port);
        }
    }
    bail!("no free port below {low}")
}

pub struct Node {
    pub id: i32,
    pub kafka_port: u16,
    pub controller_port: u16,
    pub kafka_proxy: u16,
    pub controller_proxy: u16,
    pub data_dir: PathBuf,
    pub log_path: PathBuf,
    /// `--process-roles broker`: an observer of the metadata quorum (a Raft learner the
    /// leader dials at `--controller-advertise`, this node's controller proxy).
    pub broker_only: bool,
    child: Option<Child>,
    pub paused: bool,
    starts: u32,
}

pub struct Cluster {
    pub bin: PathBuf,
    pub nodes: Vec<Node>,
    pub voters: String,
    pub overrides: Vec<String>,
    pub net: Arc<Network>,
}

impl Cluster {
    pub fn new(
        bin: PathBuf,
        dir: &std::path::Path,
        n: i32,
        broker_only: i32,
        overrides: Vec<String>,
        net: Arc<Network>,
    ) -> anyhow::Result<Self> {
        if broker_only < 0 || n - broker_only < 1 {
            bail!("{n} nodes with {broker_only} broker-only leave no controller");
        }
        let mut given = BTreeSet::new();
        let mut nodes = Vec::new();
        for id in 1..=n {
            nodes.push(Node {
                id,
                kafka_port: free_port(&mut given)?,
                controller_port: free_port(&mut given)?,
                kafka_proxy: free_port(&mut given)?,
                controller_proxy: free_port(&mut given)?,
                data_dir: dir.join(format!("node-{id}")),
                log_path: dir.join(format!("node-{id}.log")),
                broker_only: id > n - broker_only,
                child: None,
                paused: false,
                starts: 0,
            });
        }
        let voters = nodes
            .iter()
            .filter(|n| !n.broker_only)
            .map(|n| format!("{}@127.0.0.1:{}", n.id, n.controller_proxy))
            .collect::<Vec<_>>()
            .join(",");
        Ok(Self {
            bin,
            nodes,
            voters,
            overrides,
            net,
        })
    }

    /// The bootstrap list clients use: every node's Kafka proxy.
    pub fn bootstrap(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.kafka_proxy))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn node(&mut self, id: i32) -> &mut Node {
        let i = usize::try_from(id - 1)
            .unwrap_or(0)
            .min(self.nodes.len() - 1);
        &mut self.nodes[i]
    }

    pub fn spawn(&mut self, id: i32) -> anyhow::Result<std::sync::mpsc::Receiver<()>> {
        let bin = self.bin.clone();
        let voters = self.voters.clone();
        let overrides = self.overrides.clone();
        let net = self.net.clone();
        let node = self.node(id);
        node.starts += 1;
        std::fs::create_dir_all(&node.data_dir)?;
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&node.log_path)?;
        writeln!(log, "===== start #{} of node {}", node.starts, node.id)?;
        let mut cmd = Command::new(bin);
        cmd.arg("broker")
            .args(["--node-id", &node.id.to_string()])
            .args(["--listen", &format!("127.0.0.1:{}", node.kafka_port)])
            .args(["--advertise", &format!("127.0.0.1:{}", node.kafka_proxy)])
            .args([
                "--controller-listen",
                &format!("127.0.0.1:{}", node.controller_port),
            ])
            .args(["--controller-quorum-voters", &voters]);
        if node.broker_only {
            cmd.args(["--process-roles", "broker"]).args([
                "--controller-advertise",
                &format!("127.0.0.1:{}", node.controller_proxy),
            ]);
        }
        cmd.arg("--data-dir")
            .arg(&node.data_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .env("NO_COLOR", "1")
            .env(
                "RUST_LOG",
                std::env::var("RUNNEL_FAULTS_LOG").unwrap_or_else(|_| {
                    "info,openraft=warn,openraft::replication=off,\
                     openraft::engine::handler::replication_handler=off"
                        .into()
                }),
            );
        for o in &overrides {
            cmd.arg("--override").arg(o);
        }
        let mut child = cmd.spawn().context("spawn runnel broker")?;
        net.set_pid(node.id, Some(child.id()));
        let stdout = child.stdout.take().context("broker stdout")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.contains("listening on") {
                    let _ = tx.send(());
                }
            }
        });
        node.child = Some(child);
        node.paused = false;
        Ok(rx)
    }

    pub fn pid(&self, id: i32) -> Option<u32> {
        self.nodes
            .iter()
            .find(|n| n.id == id)?
            .child
            .as_ref()
            .map(Child::id)
    }

    pub fn running(&mut self, id: i32) -> bool {
        let node = self.node(id);
        match node.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    fn signal(&self, id: i32, sig: i32) {
        if let Some(pid) = self.pid(id) {
            if let Ok(pid) = i32::try_from(pid) {
                // SAFETY: kill(2) on a pid this harness spawned and has not reaped.
                unsafe {
                    libc::kill(pid, sig);
                }
            }
        }
    }

    pub fn kill9(&mut self, id: i32) {
        let net = self.net.clone();
        let node = self.node(id);
        if let Some(mut child) = node.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        node.paused = false;
        net.set_pid(id, None);
    }

    /// SIGTERM (controlled shutdown), waiting up to `grace` before `kill -9`; whether it
    /// exited on its own.
    pub fn terminate(&mut self, id: i32, grace: Duration) -> bool {
        if self.node(id).paused {
            self.resume(id);
        }
        self.signal(id, libc::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            let node = self.node(id);
            if let Some(c) = node.child.as_mut() {
                if let Ok(Some(_)) = c.try_wait() {
                    node.child = None;
                    self.net.set_pid(id, None);
                    return true;
                }
            } else {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill9(id);
        false
    }

    pub fn pause(&mut self, id: i32) {
        self.signal(id, libc::SIGSTOP);
        self.node(id).paused = true;
    }

    pub fn resume(&mut self, id: i32) {
        self.signal(id, libc::SIGCONT);
        self.node(id).paused = false;
    }

    /// Stops every node (SIGCONT first for paused ones), kill -9: the run is over.
    pub fn stop_all(&mut self) {
        let ids: Vec<i32> = self.nodes.iter().map(|n| n.id).collect();
        for id in ids {
            if self.node(id).paused {
                self.resume(id);
            }
            self.kill9(id);
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop_all();
    }
}
