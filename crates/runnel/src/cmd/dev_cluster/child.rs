//! One node of a dev cluster as a child process: spawned from this same binary, its output
//! drained into `<data-dir>/node-<id>.log` (an undrained pipe would eventually block the
//! broker), readiness taken from the broker's `listening on` line, the last stderr lines kept
//! for the report when it dies, and stopped by pid: SIGTERM first so it shuts down cleanly
//! (flush, checkpoints, clean-shutdown marker), SIGKILL only after a deadline. Signals are only
//! sent to a child that has not been reaped, so its pid cannot belong to another process.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use super::plan::NodePlan;
use super::NodeSignal;

/// The line `runnel broker` prints once its listener is bound.
const READY_MARKER: &str = "listening on";

/// How many stderr lines are kept for the early-death report.
const TAIL_LINES: usize = 20;

/// A running (or exited) node.
pub struct NodeProcess {
    /// What the node was started as.
    pub plan: NodePlan,
    /// Its pid at spawn time.
    pub pid: u32,
    child: Child,
    ready: Arc<AtomicBool>,
    tail: Arc<Mutex<VecDeque<String>>>,
    readers: Vec<JoinHandle<()>>,
}

type SharedLog = Arc<tokio::sync::Mutex<tokio::fs::File>>;

impl NodeProcess {
    /// Starts `exe args...` for `plan`, output to `log_path`: a fresh log for the cluster's
    /// first start, appended to (after a marker line) when `restart`, so the output of the
    /// process that died is kept.
    pub async fn spawn(
        exe: &Path,
        args: &[OsString],
        plan: NodePlan,
        log_path: &Path,
        restart: bool,
    ) -> Result<Self> {
        let log = open_log(log_path, restart)
            .await
            .with_context(|| format!("opening {}", log_path.display()))?;
        let log: SharedLog = Arc::new(tokio::sync::Mutex::new(log));
        let mut child = Command::new(exe)
            .args(args)
            // The output goes to a log file and into error reports, not to a terminal:
            // no ANSI colour codes (honoured by tracing-subscriber).
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // A safety net only: if this process unwinds without stopping its nodes, they
            // are killed rather than left running.
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting node {} ({})", plan.id, exe.display()))?;
        let pid = child.id().unwrap_or_default();
        let ready = Arc::new(AtomicBool::new(false));
        let tail = Arc::new(Mutex::new(VecDeque::with_capacity(TAIL_LINES)));
        let mut readers = Vec::new();
        if let Some(stdout) = child.stdout.take() {
            let ready = ready.clone();
            readers.push(tokio::spawn(drain(stdout, log.clone(), move |line| {
                if line.contains(READY_MARKER) {
                    ready.store(true, Ordering::Release);
                }
            })));
        }
        if let Some(stderr) = child.stderr.take() {
            let tail = tail.clone();
            readers.push(tokio::spawn(drain(stderr, log, move |line| {
                let mut tail = tail.lock().unwrap_or_else(|p| p.into_inner());
                if tail.len() == TAIL_LINES {
                    tail.pop_front();
                }
                tail.push_back(line.to_owned());
            })));
        }
        Ok(Self {
            plan,
            pid,
            child,
            ready,
            tail,
            readers,
        })
    }

    /// Whether the node has printed its `listening on` line.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// The flag behind [`NodeProcess::is_ready`], for waiting elsewhere.
    pub fn ready_flag(&self) -> Arc<AtomicBool> {
        self.ready.clone()
    }

    /// The exit status if the node has exited.
    pub fn exited(&mut self) -> Result<Option<ExitStatus>> {
        self.child
            .try_wait()
            .with_context(|| format!("checking node {}", self.plan.id))
    }

    /// The last stderr lines, after giving the readers a moment to drain what the process
    /// wrote just before exiting.
    pub async fn stderr_tail(&mut self) -> Vec<String> {
        for reader in self.readers.drain(..) {
            let _ = tokio::time::timeout(Duration::from_secs(1), reader).await;
        }
        self.tail
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    /// Sends `signal` to the node; false when it has already exited (nothing is sent then).
    pub fn signal(&mut self, signal: NodeSignal) -> bool {
        if !matches!(self.child.try_wait(), Ok(None)) {
            return false;
        }
        if signal == NodeSignal::Kill {
            return self.child.start_kill().is_ok();
        }
        self.child.id().is_some_and(|pid| send_signal(pid, signal))
    }

    /// Asks the node to shut down cleanly: SIGTERM, then SIGCONT so that a STOPped node acts
    /// on it.
    pub fn terminate(&mut self) {
        if self.signal(NodeSignal::Term) {
            self.signal(NodeSignal::Cont);
        }
    }

    /// Kills the node (SIGKILL) if it is still running.
    pub fn kill(&mut self) {
        let _ = self.child.start_kill();
    }

    /// Waits for the node to exit.
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        self.child.wait().await
    }
}

async fn open_log(path: &Path, restart: bool) -> std::io::Result<tokio::fs::File> {
    if !restart {
        return tokio::fs::File::create(path).await;
    }
    let mut log = tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .await?;
    log.write_all(b"===== restarted by `runnel dev-cluster start` =====\n")
        .await?;
    Ok(log)
}

#[cfg(unix)]
fn send_signal(pid: u32, signal: NodeSignal) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    let signo = match signal {
        NodeSignal::Kill => libc::SIGKILL,
        NodeSignal::Term => libc::SIGTERM,
        NodeSignal::Stop => libc::SIGSTOP,
        NodeSignal::Cont => libc::SIGCONT,
    };
    // SAFETY: kill(2) has no memory-safety preconditions; `pid` is our own unreaped child.
    unsafe { libc::kill(pid, signo) == 0 }
}

#[cfg(not(unix))]
fn send_signal(_pid: u32, _signal: NodeSignal) -> bool {
    // Only KILL exists elsewhere (`Child::start_kill`); the deadline in `stop_all` falls
    // through to it.
    false
}

/// Copies `pipe` line by line into `log`, handing each line to `on_line`. Lines are read as
/// bytes, so non-UTF-8 output cannot stop the draining.
async fn drain<R, F>(pipe: R, log: SharedLog, mut on_line: F)
where
    R: AsyncRead + Unpin,
    F: FnMut(&str),
{
    let mut reader = BufReader::new(pipe);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let _ = log.lock().await.write_all(&buf).await;
        let line = String::from_utf8_lossy(&buf);
        on_line(line.trim_end_matches(['\n', '\r']));
    }
}

/// Stops every node: SIGTERM to all, then SIGKILL to those still running at `grace`.
pub async fn stop_all(nodes: &mut [NodeProcess], grace: Duration) {
    for n in nodes.iter_mut() {
        n.terminate();
    }
    let deadline = tokio::time::Instant::now() + grace;
    for n in nodes.iter_mut() {
        if tokio::time::timeout_at(deadline, n.wait()).await.is_err() {
            eprintln!(
                "Node {} (pid {}) did not stop within {} s; killing it.",
                n.plan.id,
                n.pid,
                grace.as_secs()
            );
            n.kill();
            let _ = n.wait().await;
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn plan() -> NodePlan {
        NodePlan {
            id: 1,
            kafka_port: 1,
            controller_port: 2,
            rack: None,
            data_dir: PathBuf::from("unused"),
        }
    }

    async fn sh(script: &str, dir: &Path) -> NodeProcess {
        NodeProcess::spawn(
            Path::new("/bin/sh"),
            &["-c".into(), script.into()],
            plan(),
            &dir.join("node-1.log"),
            false,
        )
        .await
        .expect("spawn sh")
    }

    #[tokio::test]
    async fn readiness_tail_and_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut node = sh(
            "echo 'Runnel broker 1 listening on 127.0.0.1:1'; echo oops >&2; exit 3",
            dir.path(),
        )
        .await;
        let status = node.wait().await.expect("wait");
        assert_eq!(status.code(), Some(3));
        assert_eq!(node.stderr_tail().await, ["oops"]);
        assert!(node.is_ready());
        // The log is written by the output reader tasks, which may finish after the exit.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let log = std::fs::read_to_string(dir.path().join("node-1.log")).unwrap_or_default();
            if log.contains("listening on") && log.contains("oops") {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "log never got both lines: {log:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn sigterm_then_sigkill() {
        let dir = tempfile::tempdir().expect("tempdir");
        let polite = sh("exec sleep 30", dir.path()).await;
        // An ignored signal stays ignored across exec, so `sleep` itself ignores SIGTERM.
        let stubborn = sh("trap '' TERM; exec sleep 30", dir.path()).await;
        let mut nodes = vec![polite, stubborn];
        tokio::time::sleep(Duration::from_millis(200)).await;
        let started = std::time::Instant::now();
        stop_all(&mut nodes, Duration::from_millis(500)).await;
        assert!(started.elapsed() < Duration::from_secs(10));
        for n in &mut nodes {
            assert!(n.exited().expect("try_wait").is_some());
        }
        assert!(!nodes[0].is_ready());
    }
}
