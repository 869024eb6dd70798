//! `runnel topics`: kafka-topics.sh's actions and output format.

use runnel_codes::{TOPIC_ALREADY_EXISTS, UNKNOWN_TOPIC_OR_PARTITION};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{ArgGroup, Args};
use runnel_client::admin::{ConfigResource, NewPartitions, NewTopic, PartitionReassignment};
use runnel_client::{Admin, ClientError, PartitionInfo, TopicInfo, TopicPartition};

use super::args::{parse_kvs, parse_replica_assignment};
use super::topic_filter::{replication_factor, FilterContext, PartitionFilters};
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
    /// With --describe: only partitions whose ISR is smaller than their replica set.
    #[arg(long)]
    pub under_replicated_partitions: bool,
    /// With --describe: only partitions without a leader, or whose leader is not live.
    #[arg(long)]
    pub unavailable_partitions: bool,
    /// With --describe: only partitions whose ISR is smaller than min.insync.replicas.
    #[arg(long)]
    pub under_min_isr_partitions: bool,
    /// With --describe: only partitions whose ISR size equals min.insync.replicas.
    #[arg(long)]
    pub at_min_isr_partitions: bool,
}

impl TopicsArgs {
    /// The `--describe` partition filters that were given.
    pub fn partition_filters(&self) -> PartitionFilters {
        PartitionFilters {
            under_replicated: self.under_replicated_partitions,
            unavailable: self.unavailable_partitions,
            under_min_isr: self.under_min_isr_partitions,
            at_min_isr: self.at_min_isr_partitions,
        }
    }

    /// kafka-topics' check that report options go with `--describe` only.
    pub fn check_filters(&self) -> Result<()> {
        let given = [
            (
                self.under_replicated_partitions,
                "under-replicated-partitions",
            ),
            (self.unavailable_partitions, "unavailable-partitions"),
            (self.under_min_isr_partitions, "under-min-isr-partitions"),
            (self.at_min_isr_partitions, "at-min-isr-partitions"),
        ];
        let action = [
            (self.create, "create"),
            (self.list, "list"),
            (self.delete, "delete"),
            (self.alter, "alter"),
        ]
        .into_iter()
        .find(|(set, _)| *set);
        if let (Some((_, flag)), Some((_, action))) =
            (given.into_iter().find(|(set, _)| *set), action)
        {
            bail!("Option \"[{flag}]\" can't be used with option \"[{action}]\"");
        }
        if self.by_broker && self.partition_filters().any() {
            bail!("--by-broker cannot be combined with the partition filters");
        }
        Ok(())
    }
}

/// Kafka's warning for names that may collide in metric names.
pub const COLLISION_WARNING: &str = "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could collide. To avoid issues it is best to use either, but not both.";

pub async fn run(args: TopicsArgs) -> Result<()> {
    args.check_filters()?;
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
            Err(e) if args.if_not_exists && e.code() == Some(TOPIC_ALREADY_EXISTS) => {}
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
            Err(e) if args.if_exists && e.code() == Some(UNKNOWN_TOPIC_OR_PARTITION) => {}
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
        Err(e) if args.if_exists && e.code() == Some(UNKNOWN_TOPIC_OR_PARTITION) => return Ok(()),
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
        Err(e) if args.if_exists && e.code() == Some(UNKNOWN_TOPIC_OR_PARTITION) => return Ok(()),
        Err(ClientError::Kafka {
            code: UNKNOWN_TOPIC_OR_PARTITION,
            ..
        }) => {
            bail!(
                "Topic '{}' does not exist as expected",
                args.topic.as_deref().unwrap_or("")
            )
        }
        Err(e) => return Err(e.into()),
    };
    let filters = args.partition_filters();
    let live_brokers: BTreeSet<i32> = if filters.unavailable {
        admin
            .describe_cluster()
            .await?
            .brokers
            .iter()
            .map(|b| b.id)
            .collect()
    } else {
        BTreeSet::new()
    };
    let reassignments = ongoing_reassignments(admin, &topics).await;
    let mut out = String::new();
    for topic in topics
        .iter()
        .filter(|t| !(args.exclude_internal && t.internal))
    {
        if args.by_broker {
            let brokers: Vec<i32> = admin.client().metadata().brokers.keys().copied().collect();
            out.push_str(&format_by_broker(topic, &brokers));
        } else if filters.any() {
            let min_isr = if filters.needs_min_isr() {
                Some(min_insync_replicas(admin, &topic.name).await?)
            } else {
                None
            };
            let ctx = FilterContext {
                live_brokers: &live_brokers,
                min_isr,
            };
            out.push_str(&format_matching_partitions(
                topic,
                &filters,
                &reassignments,
                ctx,
            ));
        } else {
            let configs = topic_configs(admin, &topic.name).await;
            out.push_str(&format_describe(topic, &configs, &reassignments));
        }
    }
    print!("{out}");
    Ok(())
}

/// Ongoing reassignments of the described partitions; none when the broker cannot list
/// them (kafka-topics ignores UNSUPPORTED_VERSION and authorization failures the same way).
async fn ongoing_reassignments(
    admin: &Admin,
    topics: &[TopicInfo],
) -> BTreeMap<TopicPartition, PartitionReassignment> {
    let parts: Vec<TopicPartition> = topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| TopicPartition::new(t.name.clone(), p.partition))
        })
        .collect();
    if parts.is_empty() {
        return BTreeMap::new();
    }
    match admin
        .list_partition_reassignments(Some(&parts), Duration::from_secs(30))
        .await
    {
        Ok(map) => map,
        Err(e) => {
            tracing::debug!(error = %e, "listing partition reassignments failed");
            BTreeMap::new()
        }
    }
}

/// The topic's `min.insync.replicas` (DescribeConfigs), for the min-ISR filters.
async fn min_insync_replicas(admin: &Admin, topic: &str) -> Result<i32> {
    let key = "min.insync.replicas".to_string();
    let entries = admin
        .describe_configs(
            &ConfigResource::topic(topic),
            Some(std::slice::from_ref(&key)),
        )
        .await
        .with_context(|| format!("describing the configs of topic '{topic}'"))?;
    let value = entries
        .into_iter()
        .find(|e| e.name == key)
        .and_then(|e| e.value)
        .with_context(|| format!("topic '{topic}' reports no {key}"))?;
    value
        .trim()
        .parse()
        .with_context(|| format!("topic '{topic}': {key}={value} is not a number"))
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

/// kafka-topics `--describe` text for one topic. During a reassignment the replication
/// factor excludes the replicas being added, and partition lines show the moving replicas.
pub fn format_describe(
    topic: &TopicInfo,
    configs: &[(String, String)],
    reassignments: &BTreeMap<TopicPartition, PartitionReassignment>,
) -> String {
    let mut out = String::new();
    let reassignment = |p: i32| reassignments.get(&TopicPartition::new(topic.name.clone(), p));
    let rf = topic
        .partitions
        .first()
        .map_or(0, |p| replication_factor(p, reassignment(p.partition)));
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
        out.push_str(&format_partition(&topic.name, p, reassignment(p.partition)));
    }
    out
}

/// `--describe` with partition filters: only the matching partition lines, no topic header.
pub fn format_matching_partitions(
    topic: &TopicInfo,
    filters: &PartitionFilters,
    reassignments: &BTreeMap<TopicPartition, PartitionReassignment>,
    ctx: FilterContext<'_>,
) -> String {
    let mut out = String::new();
    for p in &topic.partitions {
        let r = reassignments.get(&TopicPartition::new(topic.name.clone(), p.partition));
        if filters.matches(p, r, ctx) {
            out.push_str(&format_partition(&topic.name, p, r));
        }
    }
    out
}

/// One partition line of `--describe`, with the moving replicas while it is reassigned.
pub fn format_partition(
    topic: &str,
    p: &PartitionInfo,
    reassignment: Option<&PartitionReassignment>,
) -> String {
    let leader = p
        .leader
        .map_or_else(|| "none".to_string(), |l| l.to_string());
    let mut line = format!(
        "\tTopic: {topic}\tPartition: {}\tLeader: {leader}\tReplicas: {}\tIsr: {}",
        p.partition,
        join_ids(&p.replicas),
        join_ids(&p.isr)
    );
    if let Some(r) = reassignment {
        let _ = write!(
            line,
            "\tAdding Replicas: {}\tRemoving Replicas: {}",
            join_ids(&r.adding_replicas),
            join_ids(&r.removing_replicas)
        );
    }
    line.push('\n');
    line
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
            &BTreeMap::new(),
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
        let text = format_describe(&t, &[], &BTreeMap::new());
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
    fn filtered_describe_prints_only_matching_partition_lines() {
        let mut t = topic();
        t.partitions[1].isr = vec![1001];
        t.partitions[2].leader = None;
        t.partitions[2].isr = vec![];
        let live: BTreeSet<i32> = [1000, 1001, 1002].into_iter().collect();
        let ctx = FilterContext {
            live_brokers: &live,
            min_isr: Some(2),
        };
        let under_replicated = PartitionFilters {
            under_replicated: true,
            ..PartitionFilters::default()
        };
        assert_eq!(
            format_matching_partitions(&t, &under_replicated, &BTreeMap::new(), ctx),
            "\tTopic: meuTopico\tPartition: 1\tLeader: 1001\tReplicas: 1001,1002\tIsr: 1001\n\
             \tTopic: meuTopico\tPartition: 2\tLeader: none\tReplicas: 1002,1000\tIsr: \n"
        );
        let unavailable = PartitionFilters {
            unavailable: true,
            ..PartitionFilters::default()
        };
        assert_eq!(
            format_matching_partitions(&t, &unavailable, &BTreeMap::new(), ctx),
            "\tTopic: meuTopico\tPartition: 2\tLeader: none\tReplicas: 1002,1000\tIsr: \n"
        );
        let at_min_isr = PartitionFilters {
            at_min_isr: true,
            ..PartitionFilters::default()
        };
        let text = format_matching_partitions(&t, &at_min_isr, &BTreeMap::new(), ctx);
        assert_eq!(
            text,
            "\tTopic: meuTopico\tPartition: 0\tLeader: 1000\tReplicas: 1000,1001\tIsr: 1000,1001\n"
        );
        let healthy = topic();
        assert_eq!(
            format_matching_partitions(&healthy, &under_replicated, &BTreeMap::new(), ctx),
            ""
        );
    }

    #[test]
    fn reassigning_partitions_show_moving_replicas() {
        let mut t = topic();
        t.partitions[0].replicas = vec![1000, 1001, 1002];
        let mut r = BTreeMap::new();
        r.insert(
            TopicPartition::new("meuTopico", 0),
            PartitionReassignment {
                replicas: vec![1000, 1001, 1002],
                adding_replicas: vec![1002],
                removing_replicas: vec![1000],
            },
        );
        let text = format_describe(&t, &[], &r);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].contains("ReplicationFactor: 2"), "{text}");
        assert_eq!(
            lines[1],
            "\tTopic: meuTopico\tPartition: 0\tLeader: 1000\tReplicas: 1000,1001,1002\tIsr: 1000,1001\tAdding Replicas: 1002\tRemoving Replicas: 1000"
        );
    }

    #[test]
    fn filter_flags_go_with_describe_only() {
        use clap::Parser;
        #[derive(Debug, Parser)]
        struct Cli {
            #[command(flatten)]
            args: TopicsArgs,
        }
        let parse = |extra: &[&str]| {
            let mut argv = vec!["runnel", "--bootstrap-server", "h:1"];
            argv.extend_from_slice(extra);
            Cli::try_parse_from(argv).map(|c| c.args)
        };
        let args = parse(&[
            "--describe",
            "--under-replicated-partitions",
            "--at-min-isr-partitions",
        ]);
        let args = args.map_err(|e| e.to_string());
        let Ok(args) = args else {
            panic!("{args:?}");
        };
        assert!(args.check_filters().is_ok());
        let f = args.partition_filters();
        assert!(f.under_replicated && f.at_min_isr && !f.unavailable && !f.under_min_isr);
        let Ok(list) = parse(&["--list", "--unavailable-partitions"]) else {
            panic!("parse failed");
        };
        assert_eq!(
            list.check_filters()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default(),
            "Option \"[unavailable-partitions]\" can't be used with option \"[list]\""
        );
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
