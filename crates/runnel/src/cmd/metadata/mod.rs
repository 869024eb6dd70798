//! `runnel metadata --tree | --events [--follow] | --security`: the controller's view of the
//! cluster as the seed's ZooKeeper tree, its partition / replica state-change log, and a
//! broker's authentication counters (Kafka's metric names, which Kafka shows over JMX). All
//! come from Runnel's own RunnelDescribeMetadata request (Kafka has no equivalent API), so
//! they only work against Runnel brokers.

mod events;
mod iso_time;
mod tree;

use std::io::Write;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use runnel_client::Admin;

/// How often `--events --follow` asks for new events.
const FOLLOW_INTERVAL: Duration = Duration::from_millis(500);

/// Flags of `runnel metadata`.
#[derive(Debug, Args)]
pub struct MetadataArgs {
    /// Broker to bootstrap from (host:port[,host:port...]).
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap_server: String,
    /// Print the metadata image as ZooKeeper's tree (/controller, /brokers/ids, /brokers/topics).
    #[arg(long)]
    pub tree: bool,
    /// Print the partition and replica state-change log.
    #[arg(long)]
    pub events: bool,
    /// Print the answering broker's authentication counters (`failed-authentication-total`,
    /// `successful-authentication-total`, re-authentications, expired sessions), one
    /// `name=value` per line.
    #[arg(long)]
    pub security: bool,
    /// With --events: keep printing new events (polling every 500 ms) until Ctrl-C.
    #[arg(long)]
    pub follow: bool,
    /// With --events: start at this sequence number instead of the oldest event kept.
    #[arg(long, value_name = "SEQ", default_value_t = 0)]
    pub since: i64,
}

pub async fn run(args: MetadataArgs) -> Result<()> {
    if [args.tree, args.events, args.security]
        .iter()
        .filter(|a| **a)
        .count()
        != 1
    {
        bail!("Command must include exactly one action: --tree, --events, --security")
    }
    if args.follow && !args.events {
        bail!("--follow is only supported along with --events")
    }
    let admin = Admin::new(super::connect(&args.bootstrap_server).await?);
    if args.security {
        let counters = admin.security_counters().await?;
        return emit(&security_text(&counters));
    }
    if args.tree {
        let tree = admin.describe_metadata_tree().await?;
        return emit(&tree::tree_text(&tree)?);
    }
    if args.follow {
        follow(&admin, args.since).await
    } else {
        print_all(&admin, args.since).await
    }
}

/// `name=value` lines, sorted by name.
fn security_text(counters: &runnel_client::admin::SecurityCounters) -> String {
    counters
        .iter()
        .map(|(name, value)| format!("{name}={value}\n"))
        .collect()
}

/// Prints every event from `since` on, asking again while the broker hands out more (it may
/// cap the events per answer).
async fn print_all(admin: &Admin, mut since: i64) -> Result<()> {
    loop {
        let batch = admin.metadata_events(since).await?;
        print_events(&batch.events)?;
        if batch.events.is_empty() || batch.next <= since {
            return Ok(());
        }
        since = batch.next;
    }
}

/// Polls for new events until Ctrl-C. Transient failures (a broker restarting, a controller
/// election) are reported once on stderr and retried, so a long-running `--follow` survives
/// the failovers it is typically used to watch.
async fn follow(admin: &Admin, mut since: i64) -> Result<()> {
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut failing = false;
    loop {
        match admin.metadata_events(since).await {
            Ok(batch) => {
                if failing {
                    eprintln!("Reconnected.");
                    failing = false;
                }
                print_events(&batch.events)?;
                since = batch.next;
            }
            Err(e) if e.is_retriable() => {
                if !failing {
                    eprintln!("{}; retrying", runnel_client::render_error(&e));
                    failing = true;
                }
            }
            Err(e) => return Err(e.into()),
        }
        tokio::select! {
            _ = &mut ctrl_c => return Ok(()),
            _ = tokio::time::sleep(FOLLOW_INTERVAL) => {}
        }
    }
}

fn print_events(batch: &[runnel_client::admin::StateChangeEvent]) -> Result<()> {
    let mut text = String::new();
    for e in batch {
        text.push_str(&events::event_line(e));
        text.push('\n');
    }
    emit(&text)
}

/// Writes to stdout, returning an error (instead of panicking like `print!`) when stdout is
/// closed, e.g. `runnel metadata --events --follow | head`.
fn emit(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}
