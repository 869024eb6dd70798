//! `<data-dir>/dev-cluster.json`: what a running dev cluster looks like, written by its
//! supervisor whenever a node starts, stops or is signalled, and removed when it exits. Other
//! `runnel dev-cluster` commands read it to find the supervisor's control port (and the token
//! that proves they can read the data dir); people read it to see each node's exact command.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// The state file's name in the data dir.
pub const STATE_FILE: &str = "dev-cluster.json";

/// The whole file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterState {
    /// The supervising `runnel dev-cluster` process.
    pub supervisor_pid: u32,
    /// Its control listener, `127.0.0.1:PORT`.
    pub control: String,
    /// Sent with every control request: only who can read this file may act on the cluster.
    pub token: String,
    /// The clients' bootstrap list.
    pub bootstrap: String,
    /// Every node, in id order.
    pub nodes: Vec<NodeState>,
}

/// One node as the supervisor sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeState {
    pub id: u16,
    pub kafka_port: u16,
    pub controller_port: u16,
    pub rack: Option<String>,
    pub data_dir: PathBuf,
    pub log: PathBuf,
    /// The process's pid while it runs (or is stopped), else None.
    pub pid: Option<u32>,
    pub phase: Phase,
    /// How its last process ended, e.g. `signal: 9 (SIGKILL)`.
    pub last_exit: Option<String>,
    /// The command line after the program name; `start` reuses it.
    pub args: Vec<String>,
}

/// Where a node is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Spawned, not yet listening.
    Starting,
    /// Listening.
    Running,
    /// Frozen by SIGSTOP (until SIGCONT).
    Stopped,
    /// Its process has exited.
    Down,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Starting => "starting",
            Phase::Running => "running",
            Phase::Stopped => "stopped",
            Phase::Down => "down",
        }
    }
}

pub fn state_path(data_dir: &Path) -> PathBuf {
    data_dir.join(STATE_FILE)
}

/// Writes the file atomically (a reader never sees half of it), readable by its owner only
/// (it holds the control token).
pub fn write(data_dir: &Path, state: &ClusterState) -> Result<()> {
    let path = state_path(data_dir);
    let tmp = data_dir.join(format!("{STATE_FILE}.tmp"));
    let text = serde_json::to_string_pretty(state).context("encoding the dev-cluster state")?;
    write_private(&tmp, text.as_bytes()).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("replacing {}", path.display()))
}

#[cfg(unix)]
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)
}

#[cfg(not(unix))]
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::write(path, bytes)
}

/// Reads the file; `Ok(None)` when there is none (no dev cluster ran here, or it stopped).
pub fn read(data_dir: &Path) -> Result<Option<ClusterState>> {
    let path = state_path(data_dir);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    serde_json::from_str(&text)
        .map(Some)
        .with_context(|| format!("{} is not a dev-cluster state file", path.display()))
}

/// Removes the file when the supervisor exits.
pub fn remove(data_dir: &Path) {
    let _ = std::fs::remove_file(state_path(data_dir));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ClusterState {
        ClusterState {
            supervisor_pid: 42,
            control: "127.0.0.1:5000".into(),
            token: "t".into(),
            bootstrap: "127.0.0.1:9092".into(),
            nodes: vec![NodeState {
                id: 1,
                kafka_port: 9092,
                controller_port: 9192,
                rack: Some("a".into()),
                data_dir: "d/node-1".into(),
                log: "d/node-1.log".into(),
                pid: None,
                phase: Phase::Down,
                last_exit: Some("signal: 9 (SIGKILL)".into()),
                args: vec!["broker".into(), "--node-id".into(), "1".into()],
            }],
        }
    }

    #[test]
    fn round_trip_and_absence() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        write(dir.path(), &sample()).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Some(sample()));
        let text = std::fs::read_to_string(state_path(dir.path())).unwrap();
        assert!(text.contains("\"phase\": \"down\""), "{text}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(state_path(dir.path()))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        remove(dir.path());
        assert_eq!(read(dir.path()).unwrap(), None);
        std::fs::write(state_path(dir.path()), "not json").unwrap();
        assert!(read(dir.path()).is_err());
    }
}
