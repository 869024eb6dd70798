//! `runnel log-dirs --describe`: kafka-log-dirs.sh. Asks each broker (every live one, or
//! `--broker-list`) for its log directories and prints Kafka's JSON: per broker, per directory,
//! the error (null when online) and each replica's size, offset lag and future flag.

use std::collections::BTreeSet;

use anyhow::{bail, Context, Result};
use clap::Args;
use runnel_client::admin::LogDirInfo;
use runnel_client::Admin;
use serde_json::{json, Value};

/// Flags of kafka-log-dirs.sh.
#[derive(Debug, Args)]
pub struct LogDirsArgs {
    /// Broker to bootstrap from (host:port[,host:port...]).
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap_server: String,
    /// Describe the log directories (the only action, required as by Kafka's tool).
    #[arg(long)]
    pub describe: bool,
    /// Comma-separated broker ids; every live broker when omitted.
    #[arg(long, value_name = "IDS")]
    pub broker_list: Option<String>,
    /// Comma-separated topics; every replica when omitted.
    #[arg(long, value_name = "TOPICS")]
    pub topic_list: Option<String>,
}

pub async fn run(args: LogDirsArgs) -> Result<()> {
    if !args.describe {
        bail!("Command must include exactly one action: --describe");
    }
    let admin = Admin::new(super::connect(&args.bootstrap_server).await?);
    let live: Vec<i32> = admin
        .describe_cluster()
        .await?
        .brokers
        .iter()
        .map(|b| b.id)
        .collect();
    let brokers = match &args.broker_list {
        Some(list) => parse_ids(list)?,
        None => live.clone(),
    };
    let unknown: Vec<String> = brokers
        .iter()
        .filter(|b| !live.contains(b))
        .map(i32::to_string)
        .collect();
    if !unknown.is_empty() {
        bail!("ERROR: The given brokers do not exist from --broker-list: {}. Current existent brokers: {}",
            unknown.join(","), join(&live));
    }
    let topics: Option<BTreeSet<String>> = args.topic_list.as_deref().map(|l| {
        l.split(',')
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .collect()
    });
    println!("Querying brokers for log directories information");
    let described = admin.describe_log_dirs(&brokers, None).await?;
    let mut out = Vec::with_capacity(described.len());
    for (broker, result) in described {
        let dirs = result.with_context(|| format!("describing the log dirs of broker {broker}"))?;
        out.push((broker, dirs));
    }
    println!(
        "Received log directory information from brokers {}",
        join(&brokers)
    );
    println!("{}", render(&out, topics.as_ref()));
    Ok(())
}

/// Kafka's JSON document for the described brokers, keeping only `topics` when given.
pub fn render(brokers: &[(i32, Vec<LogDirInfo>)], topics: Option<&BTreeSet<String>>) -> Value {
    let brokers: Vec<Value> = brokers
        .iter()
        .map(|(id, dirs)| {
            let dirs: Vec<Value> = dirs
                .iter()
                .map(|d| {
                    let partitions: Vec<Value> = d
                        .replicas
                        .iter()
                        .filter(|r| topics.is_none_or(|t| t.contains(&r.topic)))
                        .map(|r| {
                            json!({
                                "partition": format!("{}-{}", r.topic, r.partition),
                                "size": r.size_bytes,
                                "offsetLag": r.offset_lag,
                                "isFuture": r.is_future,
                            })
                        })
                        .collect();
                    json!({"logDir": d.path, "error": d.error, "partitions": partitions})
                })
                .collect();
            json!({"broker": id, "logDirs": dirs})
        })
        .collect();
    json!({"version": 1, "brokers": brokers})
}

fn parse_ids(list: &str) -> Result<Vec<i32>> {
    list.split(',')
        .map(|s| {
            s.trim()
                .parse::<i32>()
                .with_context(|| format!("--broker-list: '{s}' is not a broker id"))
        })
        .collect()
}

fn join(ids: &[i32]) -> String {
    ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use runnel_client::admin::ReplicaLogInfo;

    use super::*;

    #[test]
    fn renders_kafkas_json_filtered_by_topic() {
        let replica = |topic: &str, partition| ReplicaLogInfo {
            topic: topic.into(),
            partition,
            size_bytes: 7,
            offset_lag: 0,
            is_future: false,
        };
        let dir = LogDirInfo {
            path: "/d".into(),
            error: None,
            total_bytes: Some(10),
            usable_bytes: Some(5),
            replicas: vec![replica("a", 0), replica("b", 1)],
        };
        let only_b: BTreeSet<String> = ["b".to_string()].into();
        assert_eq!(
            render(&[(1, vec![dir])], Some(&only_b)),
            json!({"version": 1, "brokers": [{"broker": 1, "logDirs": [{"logDir": "/d",
                "error": null, "partitions": [{"partition": "b-1", "size": 7, "offsetLag": 0,
                "isFuture": false}]}]}]})
        );
    }
}
