//! The running `runnel dev-cluster` process: starts every node, waits until all listen (a node
//! dying then is a setup problem: all stop and its last stderr lines are shown), then keeps
//! them running: a node that dies is reported and the others go on; `kill` / `start` /
//! `status` requests arrive on the control port; Ctrl-C / SIGTERM stops them all.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};

use super::child::{stop_all, NodeProcess};
use super::control::{self, Command, Request, Response};
use super::plan::{
    check_racks, fixed_ports, free_ports, parse_ports_file, ClusterPlan, NodePlan, HOST, PORTS_FILE,
};
use super::state::{self, ClusterState, NodeState, Phase};
use super::{DevClusterArgs, NodeSignal};

/// How often the supervisor looks at its children.
const POLL: Duration = Duration::from_millis(100);

/// A control request on its way to the main loop, with where its answer goes.
type Asked = (Command, oneshot::Sender<Reply>);

/// The main loop's answer to a control request.
enum Reply {
    Done(Response),
    /// A node was spawned; the connection waits (off the main loop) until it listens.
    Spawned {
        node: u16,
        pid: u32,
        ready: Arc<AtomicBool>,
        timeout: Duration,
    },
}

/// One node's place in the cluster, whether or not a process runs for it.
struct Slot {
    plan: NodePlan,
    args: Vec<OsString>,
    log_path: PathBuf,
    process: Option<NodeProcess>,
    /// SIGSTOPped (and not SIGCONTed since).
    stopped: bool,
    /// Its listening has been reported (restarts are announced once they listen).
    announced: bool,
    last_exit: Option<String>,
}

impl Slot {
    fn phase(&self) -> Phase {
        match &self.process {
            None => Phase::Down,
            Some(_) if self.stopped => Phase::Stopped,
            Some(p) if p.is_ready() => Phase::Running,
            Some(_) => Phase::Starting,
        }
    }

    fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(|p| p.pid)
    }
}

/// A node whose process exited.
struct Exit {
    id: u16,
    pid: u32,
    status: std::process::ExitStatus,
    tail: Vec<String>,
    log_path: PathBuf,
}

struct Supervisor {
    data_dir: PathBuf,
    exe: PathBuf,
    bootstrap: String,
    control: String,
    token: String,
    grace: Duration,
    slots: Vec<Slot>,
}

pub async fn run(args: &DevClusterArgs) -> Result<()> {
    check_racks(&args.racks)?;
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("creating {}", args.data_dir.display()))?;
    refuse_if_running(&args.data_dir).await?;
    let ports = choose_ports(args)?;
    let plan = ClusterPlan::new(&args.data_dir, &ports, &args.racks);
    let ports_path = args.data_dir.join(PORTS_FILE);
    std::fs::write(&ports_path, plan.ports_file_text())
        .with_context(|| format!("writing {}", ports_path.display()))?;
    let shutdown = shutdown_signal()?;
    let listener = TcpListener::bind((HOST, 0))
        .await
        .context("binding the dev cluster's control port on 127.0.0.1")?;
    let mut sup = Supervisor {
        data_dir: args.data_dir.clone(),
        exe: std::env::current_exe().context("locating the runnel binary")?,
        bootstrap: plan.bootstrap(),
        control: listener.local_addr()?.to_string(),
        token: format!("{:032x}", rand::random::<u128>()),
        grace: Duration::from_secs(args.stop_timeout),
        slots: plan
            .nodes
            .iter()
            .map(|node| Slot {
                args: plan.broker_args(node, &args.overrides),
                log_path: args.data_dir.join(format!("node-{}.log", node.id)),
                plan: node.clone(),
                process: None,
                stopped: false,
                announced: false,
                last_exit: None,
            })
            .collect(),
    };
    let (tx, mut asked) = mpsc::channel(16);
    tokio::spawn(serve_control(listener, sup.token.clone(), tx));
    let outcome = sup.start_all(&shutdown, &mut asked, args).await;
    if let Ok(true) = outcome {
        sup.announce_cluster();
        let supervised = sup.supervise(&shutdown, &mut asked).await;
        eprintln!("Stopping {} nodes ...", sup.running());
        sup.stop_all().await;
        eprintln!("Stopped.");
        return supervised;
    }
    sup.stop_all().await;
    outcome.map(|_| ())
}

/// A second supervisor on the same data dir would fight the first over ports and logs.
async fn refuse_if_running(data_dir: &Path) -> Result<()> {
    let Ok(Some(existing)) = state::read(data_dir) else {
        return Ok(());
    };
    let probe = tokio::time::timeout(
        Duration::from_secs(2),
        TcpStream::connect(&existing.control),
    );
    if let Ok(Ok(_)) = probe.await {
        bail!(
            "a dev cluster is already running in {} (supervisor pid {}); stop it with Ctrl-C first",
            data_dir.display(),
            existing.supervisor_pid
        );
    }
    Ok(())
}

impl Supervisor {
    /// Spawns every node and waits until all listen: Ok(true) then, Ok(false) when
    /// interrupted, the error when a node dies or does not listen in time.
    async fn start_all(
        &mut self,
        shutdown: &watch::Receiver<bool>,
        asked: &mut mpsc::Receiver<Asked>,
        args: &DevClusterArgs,
    ) -> Result<bool> {
        for i in 0..self.slots.len() {
            self.spawn(i, false).await?;
        }
        self.save();
        eprintln!(
            "Starting {} nodes in {} ...",
            self.slots.len(),
            self.data_dir.display()
        );
        let deadline = tokio::time::Instant::now() + Duration::from_secs(args.startup_timeout);
        loop {
            if let Some(exit) = self.reap().await?.into_iter().next() {
                if interrupted_meanwhile(shutdown).await {
                    return Ok(false);
                }
                return Err(early_exit(exit));
            }
            if self.slots.iter().all(|s| s.phase() == Phase::Running) {
                for s in &mut self.slots {
                    s.announced = true;
                }
                self.save();
                return Ok(true);
            }
            if tokio::time::Instant::now() >= deadline {
                let waiting: Vec<String> = self
                    .slots
                    .iter()
                    .filter(|s| s.phase() != Phase::Running)
                    .map(|s| format!("{} (log {})", s.plan.id, s.log_path.display()))
                    .collect();
                bail!(
                    "nodes {} did not start listening within {} s",
                    waiting.join(", "),
                    args.startup_timeout
                );
            }
            match next_event(shutdown, asked).await {
                Event::Shutdown => {
                    eprintln!("Interrupted; stopping the nodes.");
                    return Ok(false);
                }
                Event::Asked((Command::Status, reply)) => {
                    let _ = reply.send(Reply::Done(self.done(String::new())));
                }
                Event::Asked((_, reply)) => {
                    let _ = reply.send(refused("the dev cluster is still starting"));
                }
                Event::Tick => {}
            }
        }
    }

    /// Runs until Ctrl-C / SIGTERM: reports exits, announces restarted nodes, answers requests.
    async fn supervise(
        &mut self,
        shutdown: &watch::Receiver<bool>,
        asked: &mut mpsc::Receiver<Asked>,
    ) -> Result<()> {
        loop {
            let exits = self.reap().await?;
            if !exits.is_empty() {
                if interrupted_meanwhile(shutdown).await {
                    return Ok(());
                }
                for exit in exits {
                    self.report_exit(exit);
                }
                self.save();
            }
            self.announce_restarts();
            match next_event(shutdown, asked).await {
                Event::Shutdown => return Ok(()),
                Event::Asked((command, reply)) => {
                    let answer = self.handle(command).await;
                    self.save();
                    let _ = reply.send(answer);
                }
                Event::Tick => {}
            }
        }
    }

    async fn handle(&mut self, command: Command) -> Reply {
        match command {
            Command::Status => Reply::Done(self.done(String::new())),
            Command::Kill { node, signal } => self.kill(node, signal),
            Command::Start { node, timeout_ms } => {
                self.start(node, Duration::from_millis(timeout_ms)).await
            }
        }
    }

    fn slot_index(&self, node: u16) -> Option<usize> {
        self.slots.iter().position(|s| s.plan.id == node)
    }

    fn no_such_node(&self, node: u16) -> Reply {
        refused(&format!(
            "there is no node {node}: this dev cluster has nodes 1..={}",
            self.slots.len()
        ))
    }

    fn kill(&mut self, node: u16, signal: NodeSignal) -> Reply {
        let Some(i) = self.slot_index(node) else {
            return self.no_such_node(node);
        };
        let slot = &mut self.slots[i];
        let Some(process) = slot.process.as_mut() else {
            return refused(&format!(
                "node {node} is not running{}; start it with `runnel dev-cluster start --node {node} --data-dir {}`",
                slot.last_exit.as_deref().map(|e| format!(" (it exited: {e})")).unwrap_or_default(),
                self.data_dir.display()
            ));
        };
        let pid = process.pid;
        if !process.signal(signal) {
            return refused(&format!(
                "node {node} (pid {pid}) has just exited; no signal sent"
            ));
        }
        match signal {
            NodeSignal::Stop => slot.stopped = true,
            NodeSignal::Cont => slot.stopped = false,
            NodeSignal::Kill | NodeSignal::Term => {}
        }
        let message = format!(
            "Sent SIG{} to node {node} (pid {pid}).",
            signal_name(signal)
        );
        eprintln!("{message}");
        Reply::Done(self.done(message))
    }

    async fn start(&mut self, node: u16, timeout: Duration) -> Reply {
        let Some(i) = self.slot_index(node) else {
            return self.no_such_node(node);
        };
        if let Some(pid) = self.slots[i].pid() {
            return refused(&format!("node {node} is already running (pid {pid})"));
        }
        if let Err(e) = self.spawn(i, true).await {
            return refused(&format!("{e:#}"));
        }
        let slot = &self.slots[i];
        let Some(process) = slot.process.as_ref() else {
            return refused("the node did not start");
        };
        eprintln!(
            "Starting node {node} again (pid {}, log {}) ...",
            process.pid,
            slot.log_path.display()
        );
        Reply::Spawned {
            node,
            pid: process.pid,
            ready: process.ready_flag(),
            timeout,
        }
    }

    async fn spawn(&mut self, i: usize, restart: bool) -> Result<()> {
        let slot = &mut self.slots[i];
        let process = NodeProcess::spawn(
            &self.exe,
            &slot.args,
            slot.plan.clone(),
            &slot.log_path,
            restart,
        )
        .await?;
        slot.process = Some(process);
        slot.stopped = false;
        slot.announced = !restart;
        Ok(())
    }

    /// Takes every exited process out of its slot.
    async fn reap(&mut self) -> Result<Vec<Exit>> {
        let mut exits = Vec::new();
        for slot in &mut self.slots {
            let Some(process) = slot.process.as_mut() else {
                continue;
            };
            if let Some(status) = process.exited()? {
                let pid = process.pid;
                let tail = process.stderr_tail().await;
                slot.process = None;
                slot.stopped = false;
                slot.last_exit = Some(status.to_string());
                exits.push(Exit {
                    id: slot.plan.id,
                    pid,
                    status,
                    tail,
                    log_path: slot.log_path.clone(),
                });
            }
        }
        Ok(exits)
    }

    fn report_exit(&self, exit: Exit) {
        let others: Vec<String> = self
            .slots
            .iter()
            .filter(|s| s.process.is_some())
            .map(|s| s.plan.id.to_string())
            .collect();
        let going_on = match others.as_slice() {
            [] => "no node is running now; Ctrl-C exits".to_string(),
            [one] => format!("node {one} keeps running"),
            many => format!("nodes {} keep running", many.join(", ")),
        };
        eprintln!(
            "Node {} (pid {}) exited ({}); {going_on}. Start it again with: runnel dev-cluster start --node {} --data-dir {}",
            exit.id,
            exit.pid,
            exit.status,
            exit.id,
            self.data_dir.display()
        );
        // A crash says why on stderr; a signal says nothing worth repeating.
        if exit.status.code().is_some_and(|c| c != 0) {
            eprintln!(
                "Last lines of node {}'s stderr (full output in {}):",
                exit.id,
                exit.log_path.display()
            );
            for line in &exit.tail {
                eprintln!("  {line}");
            }
        }
    }

    fn announce_restarts(&mut self) {
        let mut changed = false;
        for slot in &mut self.slots {
            if !slot.announced && slot.phase() == Phase::Running {
                slot.announced = true;
                changed = true;
                eprintln!(
                    "Node {} (pid {}) is listening again on {HOST}:{}.",
                    slot.plan.id,
                    slot.pid().unwrap_or_default(),
                    slot.plan.kafka_port
                );
            }
        }
        if changed {
            self.save();
        }
    }

    fn announce_cluster(&self) {
        println!("Bootstrap: {}", self.bootstrap);
        for slot in &self.slots {
            println!("{}", node_line(slot));
        }
        eprintln!(
            "Press Ctrl-C to stop the cluster. Other terminals: runnel dev-cluster status | kill --node N | start --node N --data-dir {}",
            self.data_dir.display()
        );
    }

    fn running(&self) -> usize {
        self.slots.iter().filter(|s| s.process.is_some()).count()
    }

    async fn stop_all(&mut self) {
        let mut processes: Vec<NodeProcess> = self
            .slots
            .iter_mut()
            .filter_map(|s| s.process.take())
            .collect();
        stop_all(&mut processes, self.grace).await;
        state::remove(&self.data_dir);
    }

    fn state(&self) -> ClusterState {
        ClusterState {
            supervisor_pid: std::process::id(),
            control: self.control.clone(),
            token: self.token.clone(),
            bootstrap: self.bootstrap.clone(),
            nodes: self
                .slots
                .iter()
                .map(|s| NodeState {
                    id: s.plan.id,
                    kafka_port: s.plan.kafka_port,
                    controller_port: s.plan.controller_port,
                    rack: s.plan.rack.clone(),
                    data_dir: s.plan.data_dir.clone(),
                    log: s.log_path.clone(),
                    pid: s.pid(),
                    phase: s.phase(),
                    last_exit: s.last_exit.clone(),
                    args: s
                        .args
                        .iter()
                        .map(|a| a.to_string_lossy().into_owned())
                        .collect(),
                })
                .collect(),
        }
    }

    /// The answer to a request: the cluster as it is, without the token.
    fn done(&self, message: String) -> Response {
        let mut state = self.state();
        state.token.clear();
        Response::Done { message, state }
    }

    /// Rewrites the state file; a failure is reported, not fatal (the nodes matter more).
    fn save(&self) {
        if let Err(e) = state::write(&self.data_dir, &self.state()) {
            eprintln!("Warning: {e:#}");
        }
    }
}

fn refused(message: &str) -> Reply {
    Reply::Done(Response::Refused {
        message: message.to_string(),
    })
}

fn signal_name(signal: NodeSignal) -> &'static str {
    match signal {
        NodeSignal::Kill => "KILL",
        NodeSignal::Term => "TERM",
        NodeSignal::Stop => "STOP",
        NodeSignal::Cont => "CONT",
    }
}

enum Event {
    Shutdown,
    Asked(Asked),
    Tick,
}

/// The next thing to act on: a shutdown signal, a control request, or one poll interval gone.
async fn next_event(shutdown: &watch::Receiver<bool>, asked: &mut mpsc::Receiver<Asked>) -> Event {
    let mut shutdown = shutdown.clone();
    if *shutdown.borrow_and_update() {
        return Event::Shutdown;
    }
    tokio::select! {
        _ = shutdown.changed() => Event::Shutdown,
        Some(request) = asked.recv() => Event::Asked(request),
        _ = tokio::time::sleep(POLL) => Event::Tick,
    }
}

/// Ctrl-C in a terminal reaches the nodes too (same process group), so a node may exit just
/// before the supervisor sees the signal: that is a normal stop, not a death to report.
async fn interrupted_meanwhile(shutdown: &watch::Receiver<bool>) -> bool {
    tokio::time::sleep(POLL).await;
    *shutdown.borrow()
}

/// A node died before the cluster was up: its last stderr lines and the command's error.
fn early_exit(exit: Exit) -> anyhow::Error {
    eprintln!(
        "Node {} exited early ({}); last lines of its stderr (full output in {}):",
        exit.id,
        exit.status,
        exit.log_path.display()
    );
    for line in &exit.tail {
        eprintln!("  {line}");
    }
    anyhow::anyhow!("node {} exited early ({})", exit.id, exit.status)
}

/// `Node 1: 127.0.0.1:9092 (controller 127.0.0.1:9192, rack a, pid 4242, data D/node-1, log D/node-1.log)`.
fn node_line(slot: &Slot) -> String {
    let p = &slot.plan;
    let rack = p
        .rack
        .as_deref()
        .map(|r| format!(", rack {r}"))
        .unwrap_or_default();
    format!(
        "Node {}: {HOST}:{} (controller {HOST}:{}{rack}, pid {}, data {}, log {})",
        p.id,
        p.kafka_port,
        p.controller_port,
        slot.pid().unwrap_or_default(),
        p.data_dir.display(),
        slot.log_path.display()
    )
}

/// `--base-port` wins; else the previous run's ports, so a restarted dev cluster keeps the
/// addresses its quorum and its clients know; else free ports.
fn choose_ports(args: &DevClusterArgs) -> Result<Vec<(u16, u16)>> {
    if let Some(base) = args.base_port {
        return fixed_ports(base, args.brokers);
    }
    let remembered = std::fs::read_to_string(args.data_dir.join(PORTS_FILE))
        .ok()
        .and_then(|text| parse_ports_file(&text, args.brokers));
    match remembered {
        Some(ports) => Ok(ports),
        None => free_ports(args.brokers),
    }
}

/// Accepts control connections for the life of the process.
async fn serve_control(listener: TcpListener, token: String, main: mpsc::Sender<Asked>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(answer(stream, token.clone(), main.clone()));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// One control connection: one request, one answer.
async fn answer(stream: TcpStream, token: String, main: mpsc::Sender<Asked>) {
    let (reader, mut writer) = stream.into_split();
    let response = match tokio::time::timeout(
        Duration::from_secs(10),
        control::read_message::<Request, _>(reader),
    )
    .await
    {
        Err(_) => Response::Refused {
            message: "no request within 10 s".into(),
        },
        Ok(Err(e)) => Response::Refused {
            message: format!("{e:#}"),
        },
        Ok(Ok(request)) if request.token != token => Response::Refused {
            message: "wrong control token: read it from the dev cluster's state file".into(),
        },
        Ok(Ok(request)) => match ask_main(&main, request.command).await {
            Some(Reply::Done(response)) => response,
            Some(Reply::Spawned {
                node,
                pid,
                ready,
                timeout,
            }) => until_listening(&main, node, pid, &ready, timeout).await,
            None => Response::Refused {
                message: "the dev cluster is stopping".into(),
            },
        },
    };
    if let Ok(line) = control::encode_line(&response) {
        use tokio::io::AsyncWriteExt;
        let _ = writer.write_all(&line).await;
    }
}

async fn ask_main(main: &mpsc::Sender<Asked>, command: Command) -> Option<Reply> {
    let (tx, rx) = oneshot::channel();
    main.send((command, tx)).await.ok()?;
    rx.await.ok()
}

/// Waits until a started node listens, exits, or `timeout` passes.
async fn until_listening(
    main: &mpsc::Sender<Asked>,
    node: u16,
    pid: u32,
    ready: &AtomicBool,
    timeout: Duration,
) -> Response {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let Some(Reply::Done(Response::Done { state, .. })) = ask_main(main, Command::Status).await
        else {
            return Response::Refused {
                message: "the dev cluster is stopping".into(),
            };
        };
        let Some(n) = state.nodes.iter().find(|n| n.id == node) else {
            return Response::Refused {
                message: format!("node {node} vanished"),
            };
        };
        if ready.load(Ordering::Acquire) && n.pid == Some(pid) {
            let message = format!(
                "Node {node} started (pid {pid}), listening on {HOST}:{}; log {}",
                n.kafka_port,
                n.log.display()
            );
            return Response::Done { message, state };
        }
        if n.pid != Some(pid) {
            return Response::Refused {
                message: format!(
                    "node {node} (pid {pid}) exited before listening ({}); see {}",
                    n.last_exit.as_deref().unwrap_or("unknown status"),
                    n.log.display()
                ),
            };
        }
        if tokio::time::Instant::now() >= deadline {
            return Response::Refused {
                message: format!(
                    "node {node} (pid {pid}) started but does not listen after {} s; see {}",
                    timeout.as_secs(),
                    n.log.display()
                ),
            };
        }
        tokio::time::sleep(POLL).await;
    }
}

/// A flag that turns true on Ctrl-C (SIGINT) or SIGTERM. The handlers are installed before the
/// first child starts, so a signal during startup still stops every child instead of killing
/// this process alone.
#[cfg(unix)]
fn shutdown_signal() -> Result<watch::Receiver<bool>> {
    use tokio::signal::unix::{signal, SignalKind};
    let (tx, rx) = watch::channel(false);
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    tokio::spawn(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        let _ = tx.send(true);
    });
    Ok(rx)
}

/// Ctrl-C only where there is no SIGTERM.
#[cfg(not(unix))]
fn shutdown_signal() -> Result<watch::Receiver<bool>> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        let _ = tx.send(true);
    });
    Ok(rx)
}
