//! `runnel dev-cluster`: a local cluster in one command. Starts N combined nodes (broker and
//! controller) as child processes of this same binary, prints the bootstrap address once all
//! of them listen, and supervises them until Ctrl-C / SIGTERM stops them all.
//!
//! Once the cluster is up, a node that dies is reported on the terminal and the others keep
//! running, so a failover can be watched. Other terminals act on the running cluster through
//! its data dir: `dev-cluster kill --node N [--signal KILL|TERM|STOP|CONT]`,
//! `dev-cluster start --node N` (the supervisor starts it again with its first arguments, so
//! it stays supervised: same log file, stopped by Ctrl-C) and `dev-cluster status`. They find
//! the supervisor through the state file `<data-dir>/dev-cluster.json` it keeps up to date, and
//! ask it over a loopback control port; the supervisor owns the child processes, so a signal
//! only ever reaches a node it started and has not reaped.

mod child;
mod control;
mod plan;
mod state;
mod status;
mod supervisor;

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand, ValueEnum};

/// Flags of `runnel dev-cluster`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct DevClusterArgs {
    /// Act on a running dev cluster instead of starting one.
    #[command(subcommand)]
    pub command: Option<DevClusterCommand>,
    /// Number of nodes, each both broker and controller.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=100))]
    pub brokers: u16,
    /// Racks, assigned to nodes in turn (node i gets the ((i-1) mod len)-th).
    #[arg(long, value_delimiter = ',', value_name = "RACK,...")]
    pub racks: Vec<String>,
    /// Parent directory of the nodes' data dirs (node-1, node-2, ...) and logs (node-1.log, ...).
    #[arg(long, default_value = DEFAULT_DATA_DIR)]
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

const DEFAULT_DATA_DIR: &str = "./runnel-dev-cluster";

/// What to do with a running dev cluster.
#[derive(Debug, Subcommand)]
pub enum DevClusterCommand {
    /// Send a signal to one node: KILL (crash, the default), TERM (controlled shutdown),
    /// STOP (freeze it, sockets stay open) or CONT (resume a STOPped node).
    Kill(KillArgs),
    /// Start a node that is down again, with the arguments it was first started with; it runs
    /// under the dev-cluster process like the others. Waits until it listens.
    Start(StartArgs),
    /// The nodes: state, pid, ports, rack, roles, and who leads the metadata quorum.
    Status(StatusArgs),
}

/// The data dir of the running dev cluster.
#[derive(Debug, Args)]
pub struct ClusterDir {
    /// The --data-dir the dev cluster was started with.
    #[arg(long, default_value = DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct KillArgs {
    #[command(flatten)]
    pub dir: ClusterDir,
    /// The node id (1..=N).
    #[arg(long)]
    pub node: u16,
    /// The signal to send.
    #[arg(long, value_enum, ignore_case = true, default_value = "KILL")]
    pub signal: NodeSignal,
}

#[derive(Debug, Args)]
pub struct StartArgs {
    #[command(flatten)]
    pub dir: ClusterDir,
    /// The node id (1..=N).
    #[arg(long)]
    pub node: u16,
    /// Seconds to wait for the node to listen.
    #[arg(long, default_value_t = 60, value_name = "SECS")]
    pub timeout: u64,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub dir: ClusterDir,
}

/// The signals `dev-cluster kill` sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize, serde::Deserialize)]
#[value(rename_all = "UPPER")]
pub enum NodeSignal {
    Kill,
    Term,
    Stop,
    Cont,
}

pub async fn run(args: DevClusterArgs) -> Result<()> {
    match &args.command {
        None => supervisor::run(&args).await,
        Some(DevClusterCommand::Kill(kill)) => control::kill(kill).await,
        Some(DevClusterCommand::Start(start)) => control::start(start).await,
        Some(DevClusterCommand::Status(status)) => control::status(status).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// As `runnel` parses it (main.rs).
    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        command: Top,
    }

    #[derive(clap::Subcommand)]
    enum Top {
        DevCluster(DevClusterArgs),
    }

    fn parse(argv: &[&str]) -> Result<DevClusterArgs, clap::Error> {
        let argv = ["runnel", "dev-cluster"]
            .into_iter()
            .chain(argv.iter().copied());
        Cli::try_parse_from(argv).map(|c| match c.command {
            Top::DevCluster(args) => args,
        })
    }

    #[test]
    fn start_a_cluster_or_act_on_one() {
        let run = parse(&["--brokers", "5", "--data-dir", "d"]).unwrap();
        assert!(run.command.is_none());
        assert_eq!(run.brokers, 5);
        let Some(DevClusterCommand::Kill(kill)) =
            parse(&["kill", "--node", "2", "--data-dir", "d"])
                .unwrap()
                .command
        else {
            panic!("kill expected");
        };
        assert_eq!((kill.node, kill.signal), (2, NodeSignal::Kill));
        assert_eq!(kill.dir.data_dir, PathBuf::from("d"));
        for (given, expected) in [
            ("TERM", NodeSignal::Term),
            ("stop", NodeSignal::Stop),
            ("CONT", NodeSignal::Cont),
        ] {
            let Some(DevClusterCommand::Kill(kill)) =
                parse(&["kill", "--node", "1", "--signal", given])
                    .unwrap()
                    .command
            else {
                panic!("kill expected");
            };
            assert_eq!(kill.signal, expected);
        }
        assert!(parse(&["kill", "--node", "1", "--signal", "HUP"]).is_err());
        assert!(parse(&["kill"]).is_err(), "--node is required");
        assert!(matches!(
            parse(&["status"]).unwrap().command,
            Some(DevClusterCommand::Status(_))
        ));
        assert!(matches!(
            parse(&["start", "--node", "3"]).unwrap().command,
            Some(DevClusterCommand::Start(StartArgs { node: 3, .. }))
        ));
    }
}
