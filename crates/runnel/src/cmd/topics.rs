//! `runnel topics`: kafka-topics.sh's actions and output format.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{ArgGroup, Args};
use runnel_client::admin::{ConfigResource, NewPartitions, NewTopic};
use runnel_client::{Admin, ClientError, TopicInfo};

use super::args::{parse_kvs, parse_replica_assignment};
use super::topic_id::topic_id_string;

/// Flags of kafka-topics.sh that Runnel implements.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("action").required(true).args(["create", "list", "describe", "delete", "alter"])))]
pub struct TopicsArgs {
    /// Broker to bootstrap from (host:port[,host:port...]).
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap_server: String,
    /// Create a topic.
    #[arg(long)]
    pub create: bool,
    /// List topic names.
    #[arg(long)]
    pub list: bool,
    /// Describe topics.
    #[arg(long)]
    pub describe: bool,
    /// Delete a topic.
    #[arg(long)]
    pub delete: bool,
    /// Add partitions to a topic.
    #[arg(long)]
    pub alter: bool,
    /// The topic.
    #[arg(long)]
    pub topic: Option<String>,
    /// Partition count (create: broker default if omitted; alter: the new total).
    #[arg(long)]
    pub partitions: Option<i32>,
    /// Replication factor (broker default if omitted).
    #[arg(long)]
    pub replication_factor: Option<i16>,
    /// Manual placement: `b0:b1,b0:b1,...`, one replica list per partition.
    #[arg(long, value_name = "LIST")]
    pub replica_assignment: Option<String>,
    /// Topic config `key=value` (repeatable).
    #[arg(long = "config", value_name = "KEY=VALUE")]
    pub configs: Vec<String>,
    /// With --create: succeed if the topic already exists.
    #[arg(long)]
    pub if_not_exists: bool,
    /// With --delete / --alter / --describe: succeed if the topic does not exist.
    #[arg(long)]
    pub if_exists: bool,
    /// With --describe: a table per topic with one column per broker.
    #[arg(long)]
    pub by_broker: bool,
    /// With --list / --describe: hide internal topics.
    #[arg(long)]
    pub exclude_internal: bool,
}

/// Kafka's warning for names that may collide in metric names.
pub const COLLISION_WARNING: &str = "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could collide. To avoid issues it is best to use either, but not both.";

pub async fn run(args: TopicsArgs) -> Result<()> {
    let client = super::connect(&args.bootstrap_server).await?;
    let admin = Admin::new(client);
    if args.create {
        create(&admin, &args).await
    } else if args.list {
        for name in admin.list_topics(!args.exclude_internal).await? {
            println!("{name}");
        }
        Ok(())
    } else if args.describe {
        describe(&admin, &args).await
    } else if args.delete {
        delete(&admin, &args).await
    } else {
        alter(&admin, &args).await
    }
}

fn required_topic(args: &TopicsArgs) -> Result<&str> {
    args.topic
        .as_deref()
        .context("--topic is required for this action")
}

async fn create(admin: &Admin, args: &TopicsArgs) -> Result<()> {
    let name = required_topic(args)?;
    let mut topic = NewTopic::new(
        name,
        args.partitions.unwrap_or(-1),
        args.replication_factor.unwrap_or(-1),
    );
    if let Some(spec) = &args.replica_assignment {
        topic.assignments = parse_replica_assignment(spec)?;
        if let Some(p) = args.partitions {
            if p as usize != topic.assignments.len() {
                bail!(
                    "--partitions {p} disagrees with --replica-assignment ({} partitions)",
                    topic.assignments.len()
                );
            }
        }
        if let Some(rf) = args.replication_factor {
            if rf as usize != topic.assignments[0].len() {
                bail!(
                    "--replication-factor {rf} disagrees with --replica-assignment ({} replicas)",
                    topic.assignments[0].len()
                );
            }
        }
    }
    topic.configs = parse_kvs(&args.configs)?;
    if name.contains('.') || name.contains('_') {
        println!("{COLLISION_WARNING}");
    }
    let results = admin
        .create_topics(&[topic], false, Duration::from_secs(30))
        .await?;
    for (topic, result) in results {
        match result {
            Ok(()) => println!("Created topic {topic}."),
            Err(e) if args.if_not_exists && e.code() == Some(36) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

async fn delete(admin: &Admin, args: &TopicsArgs) -> Result<()> {
    let name = required_topic(args)?.to_owned();
    let results = admin
        .delete_topics(&[name], Duration::from_secs(30))
        .await?;
    for (_, result) in results {
        match result {
            Ok(()) => {}
            Err(e) if args.if_exists && e.code() == Some(3) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

async fn alter(admin: &Admin, args: &TopicsArgs) -> Result<()> {
    let name = required_topic(args)?;
    let Some(total) = args.partitions else {
        bail!("--alter needs --partitions (the new total partition count)");
    };
    let current = match admin.describe_topics(Some(&[name.to_owned()])).await {
        Ok(topics) => topics.first().map_or(0, |t| t.partition_count()),
        Err(e) if args.if_exists && e.code() == Some(3) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    let assignments = match &args.replica_assignment {
        None => None,
        Some(spec) => {
            let all = parse_replica_assignment(spec)?;
            Some(all.into_iter().skip(current).collect())
        }
    };
    let change = NewPartitions {
        topic: name.to_owned(),
        total_count: total,
        assignments,
    };
    for (_, result) in admin
        .create_partitions(&[change], false, Duration::from_secs(30))
        .await?
    {
        result?;
    }
    Ok(())
}

async fn describe(admin: &Admin, args: &TopicsArgs) -> Result<()> {
    let names = args.topic.as_ref().map(|t| vec![t.clone()]);
    let topics = match admin.describe_topics(names.as_deref()).await {
        Ok(t) => t,
        Err(e) if args.if_exists && e.code() == Some(3) => return Ok(()),
        Err(ClientError::Kafka { code: 3, .. }) => {
            bail!(
                "Topic '{}' does not exist as expected",
                args.topic.as_deref().unwrap_or("")
            )
        }
        Err(e) => return Err(e.into()),
    };
    let mut out = String::new();
    for topic in topics
        .iter()
        .filter(|t| !(args.exclude_internal && t.internal))
    {
        if args.by_broker {
            let brokers: Vec<i32> = admin.client().metadata().brokers.keys().copied().collect();
            out.push_str(&format_by_broker(topic, &brokers));
        } else {
            let configs = topic_configs(admin, &topic.name).await;
            out.push_str(&format_describe(topic, &configs));
        }
    }
    print!("{out}");
    Ok(())
}

/// The topic's non-default configs, as kafka-topics shows them; empty if the broker cannot
/// describe configs (describe still prints the partitions).
async fn topic_configs(admin: &Admin, topic: &str) -> Vec<(String, String)> {
    match admin
        .describe_configs(&ConfigResource::topic(topic), None)
        .await
    {
        Ok(entries) => entries
            .into_iter()
            .filter(|e| !e.is_default())
            .map(|e| (e.name, e.value.unwrap_or_else(|| "null".into())))
            .collect(),
        Err(e) => {
            tracing::debug!(error = %e, "describe configs failed");
            Vec::new()
        }
    }
}

fn join_ids(ids: &[i32]) -> String {
    ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

/// kafka-topics `--describe` text for one topic.
pub fn format_describe(topic: &TopicInfo, configs: &[(String, String)]) -> String {
    let mut out = String::new();
    let rf = topic.partitions.first().map_or(0, |p| p.replicas.len());
    let configs = configs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let _ = write!(out, "Topic: {}", topic.name);
    if !topic.id.is_nil() {
        let _ = write!(out, "\tTopicId: {}", topic_id_string(topic.id.as_bytes()));
    }
    let _ = writeln!(
        out,
        "\tPartitionCount: {}\tReplicationFactor: {rf}\tConfigs: {configs}",
        topic.partitions.len()
    );
    for p in &topic.partitions {
        let leader = p
            .leader
            .map_or_else(|| "none".to_string(), |l| l.to_string());
        let _ = writeln!(
            out,
            "\tTopic: {}\tPartition: {}\tLeader: {leader}\tReplicas: {}\tIsr: {}",
            topic.name,
            p.partition,
            join_ids(&p.replicas),
            join_ids(&p.isr)
        );
    }
    out
}

/// `--describe --by-broker`: one column per broker; the `Leader` row lists the partitions the
/// broker leads, `Follower k` rows the partitions where it is the k-th other replica (in
/// replica-list order). Continuation lines hold one partition per cell.
pub fn format_by_broker(topic: &TopicInfo, live_brokers: &[i32]) -> String {
    let mut brokers: BTreeSet<i32> = live_brokers.iter().copied().collect();
    for p in &topic.partitions {
        brokers.extend(p.replicas.iter().copied());
    }
    let brokers: Vec<i32> = brokers.into_iter().collect();
    let max_followers = topic
        .partitions
        .iter()
        .map(|p| p.replicas.len().saturating_sub(1))
        .max()
        .unwrap_or(0);
    let mut rows: Vec<(String, Vec<Vec<i32>>)> = Vec::new();
    let mut leader_row = vec![Vec::new(); brokers.len()];
    let mut follower_rows = vec![vec![Vec::new(); brokers.len()]; max_followers];
    for p in &topic.partitions {
        let leader = p.leader.or_else(|| p.replicas.first().copied());
        if let Some(l) = p.leader {
            if let Some(col) = brokers.iter().position(|b| *b == l) {
                leader_row[col].push(p.partition);
            }
        }
        for (k, r) in p
            .replicas
            .iter()
            .filter(|r| Some(**r) != leader)
            .enumerate()
        {
            if let Some(col) = brokers.iter().position(|b| b == r) {
                if let Some(row) = follower_rows.get_mut(k) {
                    row[col].push(p.partition);
                }
            }
        }
    }
    rows.push(("Leader".into(), leader_row));
    for (k, row) in follower_rows.into_iter().enumerate() {
        rows.push((format!("Follower {}", k + 1), row));
    }
    let label_width = rows
        .iter()
        .map(|(l, _)| l.len())
        .max()
        .unwrap_or(6)
        .max("Broker".len());
    let col_width = brokers
        .iter()
        .map(|b| b.to_string().len())
        .max()
        .unwrap_or(1)
        .max(4);
    let mut out = format!("Topic: {}\n", topic.name);
    let mut header = format!("{:<label_width$}", "Broker");
    for b in &brokers {
        let _ = write!(header, "  {b:<col_width$}");
    }
    out.push_str(header.trim_end());
    out.push('\n');
    for (label, cells) in rows {
        let height = cells.iter().map(Vec::len).max().unwrap_or(0).max(1);
        for line in 0..height {
            let mut text = format!(
                "{:<label_width$}",
                if line == 0 { label.as_str() } else { "" }
            );
            for cell in &cells {
                let v = cell.get(line).map_or_else(
                    || {
                        if line == 0 {
                            "-".to_string()
                        } else {
                            String::new()
                        }
                    },
                    |p| p.to_string(),
                );
                let _ = write!(text, "  {v:<col_width$}");
            }
            out.push_str(text.trim_end());
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use runnel_client::PartitionInfo;

    fn topic() -> TopicInfo {
        let p = |i: i32, replicas: Vec<i32>| PartitionInfo {
            partition: i,
            leader: replicas.first().copied(),
            leader_epoch: 0,
            isr: replicas.clone(),
            replicas,
            offline: vec![],
            error_code: 0,
        };
        TopicInfo {
            name: "meuTopico".into(),
            id: Default::default(),
            internal: false,
            partitions: vec![
                p(0, vec![1000, 1001]),
                p(1, vec![1001, 1002]),
                p(2, vec![1002, 1000]),
            ],
        }
    }

    #[test]
    fn describe_matches_kafka_topics_format() {
        let mut t = topic();
        t.partitions[2].leader = None;
        t.partitions[2].isr = vec![1000];
        let text = format_describe(
            &t,
            &[
                ("retention.ms".into(), "1000".into()),
                ("cleanup.policy".into(), "compact".into()),
            ],
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "Topic: meuTopico\tPartitionCount: 3\tReplicationFactor: 2\tConfigs: retention.ms=1000,cleanup.policy=compact"
        );
        assert_eq!(
            lines[1],
            "\tTopic: meuTopico\tPartition: 0\tLeader: 1000\tReplicas: 1000,1001\tIsr: 1000,1001"
        );
        assert_eq!(
            lines[3],
            "\tTopic: meuTopico\tPartition: 2\tLeader: none\tReplicas: 1002,1000\tIsr: 1000"
        );
    }

    #[test]
    fn describe_prints_topic_id_in_base64url() {
        let mut t = topic();
        t.id = uuid_from([0u8; 15], 1);
        let text = format_describe(&t, &[]);
        assert!(
            text.starts_with(
                "Topic: meuTopico\tTopicId: AAAAAAAAAAAAAAAAAAAAAQ\tPartitionCount: 3"
            ),
            "{text}"
        );
        assert!(text.lines().next().unwrap_or("").ends_with("Configs: "));
    }

    fn uuid_from(prefix: [u8; 15], last: u8) -> uuid::Uuid {
        let mut b = [0u8; 16];
        b[..15].copy_from_slice(&prefix);
        b[15] = last;
        uuid::Uuid::from_bytes(b)
    }

    #[test]
    fn by_broker_table() {
        let text = format_by_broker(&topic(), &[1000, 1001, 1002]);
        let expected = "Topic: meuTopico\n\
                        Broker      1000  1001  1002\n\
                        Leader      0     1     2\n\
                        Follower 1  2     0     1\n";
        assert_eq!(text, expected);
    }
}
