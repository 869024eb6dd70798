//! `runnel dev-cluster` as a user runs it: a real supervisor process with three real nodes.
//! Once up, a node that dies is reported and the others keep running; `kill --node N
//! [--signal KILL|TERM|STOP|CONT]`, `start --node N` and `status` act on the running cluster
//! from other processes through its data dir; SIGINT (Ctrl-C) stops every node.

#![cfg(target_os = "linux")]

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::cluster::QUIET_RAFT;
use support::{wait_until, DEADLINE};

/// The supervisor process, its output lines, and a guard that stops everything it started.
struct DevCluster {
    child: Option<Child>,
    dir: tempfile::TempDir,
    stdout: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<String>>>,
}

fn collect(pipe: impl std::io::Read + Send + 'static, into: Arc<Mutex<Vec<String>>>) {
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            into.lock().unwrap().push(line);
        }
    });
}

impl DevCluster {
    fn start() -> DevCluster {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut child = Command::new(env!("CARGO_BIN_EXE_runnel"))
            .args(["dev-cluster", "--brokers", "3", "--data-dir"])
            .arg(dir.path())
            .args([
                "--override",
                "broker.session.timeout.ms=2000",
                "--override",
                "broker.heartbeat.interval.ms=300",
            ])
            .env("RUST_LOG", QUIET_RAFT)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn runnel dev-cluster");
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        collect(child.stdout.take().expect("stdout"), stdout.clone());
        collect(child.stderr.take().expect("stderr"), stderr.clone());
        let cluster = DevCluster {
            child: Some(child),
            dir,
            stdout,
            stderr,
        };
        cluster.wait_output("the bootstrap line", |out, _| {
            out.iter().any(|l| l.starts_with("Bootstrap: "))
        });
        cluster
    }

    fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    fn wait_output(&self, what: &str, f: impl Fn(&[String], &[String]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if f(&self.stdout.lock().unwrap(), &self.stderr.lock().unwrap()) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; stderr so far:\n{}",
                self.stderr.lock().unwrap().join("\n")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn stderr_has(&self, needle: &str) -> bool {
        self.stderr
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains(needle))
    }

    /// `runnel dev-cluster <args> --data-dir D`.
    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_runnel"))
            .arg("dev-cluster")
            .args(args)
            .arg("--data-dir")
            .arg(self.data_dir())
            .output()
            .expect("run runnel dev-cluster")
    }

    /// Runs a subcommand that must succeed; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "dev-cluster {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs a subcommand that must fail; its stderr.
    fn refused(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(!out.status.success(), "dev-cluster {args:?} succeeded");
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    fn status(&self) -> Status {
        Status::parse(&self.ok(&["status"]))
    }

    fn supervisor_pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }
}

impl Drop for DevCluster {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // The supervisor stops its nodes on SIGTERM; if it cannot, kill what it started.
        signal(child.id(), "-TERM");
        let deadline = Instant::now() + DEADLINE;
        while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(50));
        }
        if matches!(child.try_wait(), Ok(None)) {
            for pid in node_pids(self.dir.path()) {
                signal(pid, "-KILL");
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!(
                "supervisor stderr:\n{}",
                self.stderr.lock().unwrap().join("\n")
            );
        }
    }
}

fn signal(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .arg(signal)
        .arg(pid.to_string())
        .stderr(Stdio::null())
        .status();
}

/// The node pids the state file lists (empty once the supervisor removed it).
fn node_pids(dir: &Path) -> Vec<u32> {
    let Ok(text) = std::fs::read_to_string(dir.join("dev-cluster.json")) else {
        return Vec::new();
    };
    let state: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    state["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n["pid"].as_u64())
        .filter_map(|p| u32::try_from(p).ok())
        .collect()
}

/// The process state letter from /proc (R, S, T for stopped, ...), None once it is gone.
fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) S ...`: the state follows the last ')'.
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// `dev-cluster status` parsed: per node (state, pid, quorum role), and the quorum leader.
#[derive(Debug)]
struct Status {
    nodes: Vec<(u16, String, Option<u32>, String)>,
    leader: Option<u16>,
}

impl Status {
    fn parse(text: &str) -> Status {
        let mut nodes = Vec::new();
        let mut leader = None;
        for line in text.lines() {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if let (Some(id), Some(state), Some(pid), Some(role)) =
                (cols.first(), cols.get(1), cols.get(2), cols.get(7))
            {
                if let Ok(id) = id.parse::<u16>() {
                    nodes.push((id, state.to_string(), pid.parse().ok(), role.to_string()));
                }
            }
            if let Some(rest) = line.strip_prefix("Quorum leader (active controller): node ") {
                leader = rest.split_whitespace().next().and_then(|n| n.parse().ok());
            }
        }
        Status { nodes, leader }
    }

    fn node(&self, id: u16) -> (String, Option<u32>, String) {
        let (_, state, pid, role) = self
            .nodes
            .iter()
            .find(|n| n.0 == id)
            .unwrap_or_else(|| panic!("node {id} in {self:?}"));
        (state.clone(), *pid, role.clone())
    }
}

#[test]
fn dev_cluster_keeps_running_and_is_driven_by_kill_start_status() {
    let cluster = DevCluster::start();
    let mut status = cluster.status();
    wait_until("a quorum leader in dev-cluster status", || {
        status = cluster.status();
        status.leader.is_some() && status.nodes.iter().all(|n| n.1 == "running")
    });
    let leader = status.leader.unwrap();
    let (_, leader_pid, role) = status.node(leader);
    assert_eq!(role, "Leader");
    let leader_pid = leader_pid.expect("the leader's pid");

    // kill -9 of the quorum leader: reported, the other two keep running and elect.
    let said = cluster.ok(&["kill", "--node", &leader.to_string()]);
    assert!(
        said.contains(&format!("Sent SIGKILL to node {leader} (pid {leader_pid})")),
        "{said}"
    );
    cluster.wait_output("the supervisor reporting the death", |_, err| {
        err.iter().any(|l| {
            l.contains(&format!(
                "Node {leader} (pid {leader_pid}) exited (signal: 9"
            )) && l.contains("keep running")
        })
    });
    wait_until("the killed process gone", || {
        proc_state(leader_pid).is_none()
    });
    wait_until("a new quorum leader", || {
        status = cluster.status();
        status.leader.is_some_and(|l| l != leader)
    });
    assert_eq!(status.node(leader).0, "down");
    assert!(status.node(leader).1.is_none());
    let supervisor = cluster.supervisor_pid();
    assert!(
        proc_state(supervisor).is_some(),
        "the supervisor still runs"
    );

    // Start it again: same arguments, supervised, listening when `start` returns.
    let said = cluster.ok(&["start", "--node", &leader.to_string()]);
    assert!(
        said.contains(&format!("Node {leader} started (pid")),
        "{said}"
    );
    let (state, restarted_pid, _) = cluster.status().node(leader);
    assert_eq!(state, "running");
    let restarted_pid = restarted_pid.expect("pid");
    assert_ne!(restarted_pid, leader_pid);
    wait_until("the restart announced on the supervisor's terminal", || {
        cluster.stderr_has(&format!(
            "Node {leader} (pid {restarted_pid}) is listening again"
        ))
    });
    let refusal = cluster.refused(&["start", "--node", &leader.to_string()]);
    assert!(refusal.contains("already running"), "{refusal}");

    // STOP freezes a node, CONT resumes it.
    let other = (1..=3).find(|&n| n != leader).unwrap();
    let (_, other_pid, _) = cluster.status().node(other);
    let other_pid = other_pid.expect("pid");
    cluster.ok(&["kill", "--node", &other.to_string(), "--signal", "STOP"]);
    wait_until("the process stopped", || proc_state(other_pid) == Some('T'));
    assert_eq!(cluster.status().node(other).0, "stopped");
    cluster.ok(&["kill", "--node", &other.to_string(), "--signal", "cont"]);
    wait_until("the process running again", || {
        proc_state(other_pid).is_some_and(|s| s != 'T')
    });
    assert_eq!(cluster.status().node(other).0, "running");

    // TERM is a controlled shutdown: a clean exit, reported as such.
    cluster.ok(&["kill", "--node", &other.to_string(), "--signal", "TERM"]);
    cluster.wait_output("the clean exit reported", |_, err| {
        err.iter().any(|l| {
            l.contains(&format!(
                "Node {other} (pid {other_pid}) exited (exit status: 0)"
            ))
        })
    });
    let refusal = cluster.refused(&["kill", "--node", &other.to_string()]);
    assert!(refusal.contains("is not running"), "{refusal}");
    let refusal = cluster.refused(&["kill", "--node", "9"]);
    assert!(refusal.contains("there is no node 9"), "{refusal}");

    // Ctrl-C (SIGINT to the supervisor only, here): every node stops, the state file goes.
    let pids = node_pids(cluster.data_dir());
    assert_eq!(pids.len(), 2, "two nodes run: {pids:?}");
    let mut cluster = cluster;
    signal(supervisor, "-INT");
    let mut child = cluster.child.take().expect("supervisor");
    let deadline = Instant::now() + DEADLINE;
    let exit = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "the supervisor did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "{exit}");
    for pid in pids {
        assert_eq!(proc_state(pid), None, "node pid {pid} stopped");
    }
    assert!(!cluster.data_dir().join("dev-cluster.json").exists());
    let refusal = cluster.refused(&["status"]);
    assert!(refusal.contains("no dev cluster is running"), "{refusal}");
}

#[test]
fn a_stale_state_file_is_reported_not_obeyed() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A state file left by a supervisor that was killed: its control port answers nothing.
    let port = support::cluster::free_port();
    let state = serde_json::json!({
        "supervisor_pid": 1,
        "control": format!("127.0.0.1:{port}"),
        "token": "x",
        "bootstrap": "127.0.0.1:1",
        "nodes": [],
    });
    std::fs::write(dir.path().join("dev-cluster.json"), state.to_string()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_runnel"))
        .args(["dev-cluster", "kill", "--node", "1", "--data-dir"])
        .arg(dir.path())
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not answer"), "{err}");
}
