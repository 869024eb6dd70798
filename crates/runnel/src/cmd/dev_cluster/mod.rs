//! `runnel dev-cluster`: a local cluster in one command. Starts N combined nodes (broker and
//! controller) as child processes of this same binary, prints the bootstrap address once all
//! of them listen, and stops them all on Ctrl-C / SIGTERM, or as soon as one dies (its last
//! stderr lines are printed, since a node that dies early usually says why there).

mod child;
mod plan;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use tokio::sync::watch;

use child::{stop_all, NodeProcess};
use plan::{check_racks, fixed_ports, free_ports, parse_ports_file, ClusterPlan, HOST, PORTS_FILE};

/// How often the supervisor looks at its children.
const POLL: Duration = Duration::from_millis(100);

/// Flags of `runnel dev-cluster`.
#[derive(Debug, Args)]
pub struct DevClusterArgs {
    /// Number of nodes, each both broker and controller.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=100))]
    pub brokers: u16,
    /// Racks, assigned to nodes in turn (node i gets the ((i-1) mod len)-th).
    #[arg(long, value_delimiter = ',', value_name = "RACK,...")]
    pub racks: Vec<String>,
    /// Parent directory of the nodes' data dirs (node-1, node-2, ...) and logs (node-1.log, ...).
    #[arg(long, default_value = "./runnel-dev-cluster")]
    pub data_dir: PathBuf,
    /// Kafka ports P..P+N-1 and controller ports P+100..P+100+N-1; without it, the ports of
    /// the previous run in --data-dir, or free ones.
    #[arg(long, value_name = "P")]
    pub base_port: Option<u16>,
    /// Kafka property override for every node, `key=value` (repeatable).
    #[arg(long = "override", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Seconds to wait for every node to listen.
    #[arg(long, default_value_t = 60, value_name = "SECS")]
    pub startup_timeout: u64,
    /// Seconds a node gets to stop after SIGTERM before it is killed.
    #[arg(long, default_value_t = 10, value_name = "SECS")]
    pub stop_timeout: u64,
}

pub async fn run(args: DevClusterArgs) -> Result<()> {
    check_racks(&args.racks)?;
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("creating {}", args.data_dir.display()))?;
    let ports = choose_ports(&args)?;
    let plan = ClusterPlan::new(&args.data_dir, &ports, &args.racks);
    let ports_path = args.data_dir.join(PORTS_FILE);
    std::fs::write(&ports_path, plan.ports_file_text())
        .with_context(|| format!("writing {}", ports_path.display()))?;
    let exe = std::env::current_exe().context("locating the runnel binary")?;
    let shutdown = shutdown_signal()?;
    let grace = Duration::from_secs(args.stop_timeout);

    let mut nodes = Vec::with_capacity(plan.nodes.len());
    for node in &plan.nodes {
        let log = args.data_dir.join(format!("node-{}.log", node.id));
        let argv = plan.broker_args(node, &args.overrides);
        match NodeProcess::spawn(&exe, argv, node.clone(), log).await {
            Ok(process) => nodes.push(process),
            Err(e) => {
                stop_all(&mut nodes, grace).await;
                return Err(e);
            }
        }
    }
    eprintln!(
        "Starting {} nodes in {} ...",
        nodes.len(),
        args.data_dir.display()
    );

    let deadline = tokio::time::Instant::now() + Duration::from_secs(args.startup_timeout);
    loop {
        let exited = match first_exit(&mut nodes).await {
            Ok(exited) => exited,
            Err(e) => {
                stop_all(&mut nodes, grace).await;
                return Err(e);
            }
        };
        if let Some(exit) = exited {
            return after_exit(&mut nodes, exit, &shutdown, grace).await;
        }
        if nodes.iter().all(NodeProcess::is_ready) {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            let waiting: Vec<String> = nodes
                .iter()
                .filter(|n| !n.is_ready())
                .map(|n| format!("{} (log {})", n.plan.id, n.log_path.display()))
                .collect();
            stop_all(&mut nodes, grace).await;
            bail!(
                "nodes {} did not start listening within {} s",
                waiting.join(", "),
                args.startup_timeout
            );
        }
        if wait_tick(&shutdown).await {
            eprintln!("Interrupted; stopping the nodes.");
            stop_all(&mut nodes, grace).await;
            return Ok(());
        }
    }

    println!("Bootstrap: {}", plan.bootstrap());
    for n in &nodes {
        println!("{}", node_line(n));
    }
    eprintln!("Press Ctrl-C to stop the cluster.");

    loop {
        let exited = match first_exit(&mut nodes).await {
            Ok(exited) => exited,
            Err(e) => {
                stop_all(&mut nodes, grace).await;
                return Err(e);
            }
        };
        if let Some(exit) = exited {
            return after_exit(&mut nodes, exit, &shutdown, grace).await;
        }
        if wait_tick(&shutdown).await {
            break;
        }
    }
    eprintln!("Stopping {} nodes ...", nodes.len());
    stop_all(&mut nodes, grace).await;
    eprintln!("Stopped.");
    Ok(())
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

/// `Node 1: 127.0.0.1:9092 (controller 127.0.0.1:9192, rack a, pid 4242, data D/node-1, log D/node-1.log)`.
fn node_line(n: &NodeProcess) -> String {
    let p = &n.plan;
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
        n.pid,
        p.data_dir.display(),
        n.log_path.display()
    )
}

/// A node that exited on its own.
struct EarlyExit {
    id: u16,
    status: std::process::ExitStatus,
    tail: Vec<String>,
    log_path: PathBuf,
}

impl EarlyExit {
    /// Prints the node's last stderr lines and turns the exit into the command's error.
    fn report(self) -> anyhow::Error {
        eprintln!(
            "Node {} exited early ({}); last lines of its stderr (full output in {}):",
            self.id,
            self.status,
            self.log_path.display()
        );
        for line in &self.tail {
            eprintln!("  {line}");
        }
        anyhow::anyhow!("node {} exited early ({})", self.id, self.status)
    }
}

/// The first node found to have exited, with its last stderr lines.
async fn first_exit(nodes: &mut [NodeProcess]) -> Result<Option<EarlyExit>> {
    for n in nodes.iter_mut() {
        if let Some(status) = n.exited()? {
            return Ok(Some(EarlyExit {
                id: n.plan.id,
                status,
                tail: n.stderr_tail().await,
                log_path: n.log_path.clone(),
            }));
        }
    }
    Ok(None)
}

/// Stops all nodes after one exited. Ctrl-C in a terminal reaches the nodes too (same process
/// group), so a node may exit before the supervisor sees the signal: that is a normal stop.
async fn after_exit(
    nodes: &mut [NodeProcess],
    exit: EarlyExit,
    shutdown: &watch::Receiver<bool>,
    grace: Duration,
) -> Result<()> {
    // Give a concurrent signal a moment to be seen before calling the exit a failure.
    tokio::time::sleep(POLL).await;
    let interrupted = *shutdown.borrow();
    if !interrupted {
        let err = exit.report();
        stop_all(nodes, grace).await;
        return Err(err);
    }
    stop_all(nodes, grace).await;
    Ok(())
}

/// Sleeps one poll interval; true when a shutdown signal has arrived.
async fn wait_tick(shutdown: &watch::Receiver<bool>) -> bool {
    let mut rx = shutdown.clone();
    if *rx.borrow_and_update() {
        return true;
    }
    tokio::select! {
        _ = rx.changed() => true,
        _ = tokio::time::sleep(POLL) => *rx.borrow(),
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
