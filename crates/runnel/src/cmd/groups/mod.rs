//! `runnel groups`: kafka-consumer-groups.sh. The actions (`--list`, `--describe`,
//! `--reset-offsets`, `--delete`, `--delete-offsets`) print Kafka's tables and messages, so
//! scripts written for the Kafka tool keep working.

mod datetime;
mod delete;
mod describe;
mod reset;

use anyhow::{bail, Result};
use clap::Args;
use runnel_client::Admin;

/// Flags of kafka-consumer-groups.sh that Runnel implements.
#[derive(Debug, Args)]
pub struct GroupsArgs {
    /// Broker to bootstrap from (host:port[,host:port...]).
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap_server: String,
    /// List all consumer groups.
    #[arg(long)]
    pub list: bool,
    /// Describe groups: offsets and lag (default), --members or --state.
    #[arg(long)]
    pub describe: bool,
    /// Delete groups (only inactive groups can be deleted).
    #[arg(long)]
    pub delete: bool,
    /// Reset the committed offsets of an inactive group.
    #[arg(long)]
    pub reset_offsets: bool,
    /// Delete the committed offsets of a group for --topic.
    #[arg(long)]
    pub delete_offsets: bool,
    /// The group (repeatable).
    #[arg(long)]
    pub group: Vec<String>,
    /// Apply to every group.
    #[arg(long)]
    pub all_groups: bool,
    /// With --describe: one row per member.
    #[arg(long)]
    pub members: bool,
    /// With --describe --members: also the assigned partitions.
    #[arg(long)]
    pub verbose: bool,
    /// With --describe: the offsets table (the default).
    #[arg(long)]
    pub offsets: bool,
    /// With --list: show states, optionally only these (comma-separated); with --describe:
    /// the group's state.
    #[arg(long, num_args = 0..=1, default_missing_value = "", value_name = "STATES")]
    pub state: Option<String>,
    /// Topic (repeatable), `T` or `T:p1,p2` with --reset-offsets.
    #[arg(long)]
    pub topic: Vec<String>,
    /// With --reset-offsets: every topic the group has committed offsets for.
    #[arg(long)]
    pub all_topics: bool,
    /// Reset to the earliest offset.
    #[arg(long)]
    pub to_earliest: bool,
    /// Reset to the latest offset.
    #[arg(long)]
    pub to_latest: bool,
    /// Reset to the current committed offset (no change).
    #[arg(long)]
    pub to_current: bool,
    /// Reset to this offset (clamped to the partition's range).
    #[arg(long, value_name = "OFFSET")]
    pub to_offset: Option<i64>,
    /// Reset to the first offset at or after this time: YYYY-MM-DDTHH:mm:SS.sss, optionally
    /// followed by Z or +HH:MM (no zone = UTC).
    #[arg(long, value_name = "DATETIME")]
    pub to_datetime: Option<String>,
    /// Shift the committed offsets by N (may be negative).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub shift_by: Option<i64>,
    /// Apply the reset.
    #[arg(long)]
    pub execute: bool,
    /// Only show the result of the reset (the default).
    #[arg(long)]
    pub dry_run: bool,
}

impl GroupsArgs {
    fn groups(&self) -> Result<&[String]> {
        if self.group.is_empty() {
            bail!("Option [--group] is required with this action.");
        }
        Ok(&self.group)
    }
}

pub async fn run(args: GroupsArgs) -> Result<()> {
    let actions = [
        args.list,
        args.describe,
        args.delete,
        args.reset_offsets,
        args.delete_offsets,
    ]
    .iter()
    .filter(|a| **a)
    .count();
    if actions != 1 {
        bail!(
            "Command must include exactly one action: --list, --describe, --delete, --reset-offsets, --delete-offsets"
        );
    }
    let admin = Admin::new(super::connect(&args.bootstrap_server).await?);
    if args.list {
        return list(&admin, args.state.as_deref()).await;
    }
    let groups: Vec<String> = if args.all_groups && (args.describe || args.delete) {
        admin
            .list_groups(&[])
            .await?
            .into_iter()
            .filter(|g| g.protocol_type.is_empty() || g.protocol_type == "consumer")
            .map(|g| g.group_id)
            .collect()
    } else {
        args.groups()?.to_vec()
    };
    if args.describe {
        describe::run(&admin, &args, &groups).await
    } else if args.delete {
        delete::delete_groups(&admin, &groups).await
    } else if args.reset_offsets {
        reset::run(&admin, &args, &groups).await
    } else {
        let [group] = groups.as_slice() else {
            bail!("Option [delete-offsets] takes exactly one --group");
        };
        delete::delete_offsets(&admin, group, &args.topic).await
    }
}

/// `--list [--state [S,...]]`: consumer groups only (protocol type "consumer", or "" for
/// groups that only have offsets), sorted.
async fn list(admin: &Admin, state: Option<&str>) -> Result<()> {
    let filter: Vec<String> = state
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    let mut groups = admin.list_groups(&filter).await?;
    groups.retain(|g| g.protocol_type.is_empty() || g.protocol_type == "consumer");
    if state.is_none() {
        for g in groups {
            println!("{}", g.group_id);
        }
        return Ok(());
    }
    if groups.iter().any(|g| g.state.is_none()) {
        let ids: Vec<String> = groups.iter().map(|g| g.group_id.clone()).collect();
        for (g, (_, d)) in groups.iter_mut().zip(admin.describe_groups(&ids).await?) {
            g.state = d.ok().map(|d| d.state);
        }
    }
    let width = groups
        .iter()
        .map(|g| g.group_id.len())
        .max()
        .unwrap_or(0)
        .max(15);
    println!("{:<width$} STATE", "GROUP");
    for g in groups {
        println!(
            "{:<width$} {}",
            g.group_id,
            g.state.as_deref().unwrap_or("Unknown")
        );
    }
    Ok(())
}
