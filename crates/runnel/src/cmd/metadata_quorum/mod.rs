//! `runnel metadata-quorum`: kafka-metadata-quorum.sh's `describe --status | --replication`,
//! from DescribeQuorum (API 55). Kafka's spelling (`describe` as a word) is accepted next to
//! `--describe`, so commands copied from Kafka's documentation work unchanged.

pub(crate) mod format;

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Result};
use clap::Args;
use runnel_client::Admin;

/// Flags of kafka-metadata-quorum.sh that Runnel implements.
#[derive(Debug, Args)]
pub struct MetadataQuorumArgs {
    /// Broker to bootstrap from (host:port[,host:port...]).
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap_server: String,
    /// Kafka's `describe` sub-command word (same as --describe).
    #[arg(value_parser = ["describe"], hide = true)]
    pub command: Option<String>,
    /// Describe the metadata quorum (with --status or --replication).
    #[arg(long)]
    pub describe: bool,
    /// A short summary of the quorum status.
    #[arg(long)]
    pub status: bool,
    /// Detailed information about the status of replication.
    #[arg(long)]
    pub replication: bool,
    /// With --replication: timestamps as "N ms ago".
    #[arg(long)]
    pub human_readable: bool,
}

/// What to print, once the flags are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum View {
    Status,
    Replication { human_readable: bool },
}

/// Kafka's flag rules and messages.
fn view(args: &MetadataQuorumArgs) -> Result<View> {
    if !args.describe && args.command.is_none() {
        bail!("Command must include --describe (kafka-metadata-quorum's `describe`) with --status or --replication");
    }
    match (args.status, args.replication) {
        (true, true) => {
            bail!("Only one of --status or --replication should be specified with describe sub-command")
        }
        (false, false) => {
            bail!("One of --status or --replication must be specified with describe sub-command")
        }
        (true, false) if args.human_readable => {
            bail!("The option --human-readable is only supported along with --replication")
        }
        (true, false) => Ok(View::Status),
        (false, true) => Ok(View::Replication {
            human_readable: args.human_readable,
        }),
    }
}

pub async fn run(args: MetadataQuorumArgs) -> Result<()> {
    let view = view(&args)?;
    let admin = Admin::new(super::connect(&args.bootstrap_server).await?);
    let text = match view {
        View::Status => {
            // Kafka takes the cluster id from DescribeCluster, not from the quorum.
            let cluster = admin.describe_cluster().await?;
            let quorum = admin.describe_metadata_quorum().await?;
            format::status_text(cluster.cluster_id.as_deref(), &quorum)?
        }
        View::Replication { human_readable } => {
            let quorum = admin.describe_metadata_quorum().await?;
            let now_ms = human_readable.then(now_ms);
            format::replication_text(&quorum, now_ms)?
        }
    };
    print!("{text}");
    Ok(())
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: MetadataQuorumArgs,
    }

    fn parse(argv: &[&str]) -> Result<View> {
        let cli = Cli::try_parse_from(
            ["runnel", "--bootstrap-server", "h:1"]
                .iter()
                .chain(argv)
                .copied(),
        )?;
        view(&cli.args)
    }

    #[test]
    fn flag_rules() {
        assert_eq!(parse(&["--describe", "--status"]).unwrap(), View::Status);
        assert_eq!(parse(&["describe", "--status"]).unwrap(), View::Status);
        assert_eq!(
            parse(&["describe", "--replication", "--human-readable"]).unwrap(),
            View::Replication {
                human_readable: true
            }
        );
        assert!(parse(&["--status"]).is_err());
        assert!(parse(&["--describe"]).is_err());
        assert!(parse(&["--describe", "--status", "--replication"]).is_err());
        assert!(parse(&["--describe", "--status", "--human-readable"]).is_err());
        assert!(parse(&["list", "--status"]).is_err());
    }
}
