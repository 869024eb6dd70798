//! `runnel delete-records`: kafka-delete-records.sh. Reads Kafka's offset JSON file
//! (`{"partitions": [{"topic": "t", "partition": 0, "offset": 5}], "version": 1}`; offset -1 =
//! up to the high watermark), deletes the records before each offset and prints every
//! partition's new low watermark or its error, in Kafka's words.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use runnel_client::Admin;
use serde::Deserialize;

/// Flags of kafka-delete-records.sh.
#[derive(Debug, Args)]
pub struct DeleteRecordsArgs {
    /// Broker to bootstrap from (host:port[,host:port...]).
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap_server: String,
    /// The JSON file with the partitions and the offsets to delete before.
    #[arg(long, value_name = "FILE")]
    pub offset_json_file: std::path::PathBuf,
}

#[derive(Debug, Deserialize)]
struct OffsetFile {
    partitions: Vec<PartitionOffset>,
    #[serde(default = "version_one")]
    version: i32,
}

fn version_one() -> i32 {
    1
}

#[derive(Debug, Deserialize)]
struct PartitionOffset {
    topic: String,
    partition: i32,
    offset: i64,
}

/// The (topic, partition, offset) triples of an offset JSON file, refusing what Kafka refuses.
pub fn parse_offset_json(text: &str) -> Result<Vec<(String, i32, i64)>> {
    let file: OffsetFile = serde_json::from_str(text).context("the offset JSON file")?;
    if file.version != 1 {
        bail!("Not supported version field value {}", file.version);
    }
    let mut seen = BTreeSet::new();
    let duplicates: Vec<String> = file
        .partitions
        .iter()
        .filter(|p| !seen.insert((p.topic.clone(), p.partition)))
        .map(|p| format!("{}-{}", p.topic, p.partition))
        .collect();
    if !duplicates.is_empty() {
        bail!(
            "Offset json file contains duplicate topic partitions: {}",
            duplicates.join(",")
        );
    }
    Ok(file
        .partitions
        .into_iter()
        .map(|p| (p.topic, p.partition, p.offset))
        .collect())
}

pub async fn run(args: DeleteRecordsArgs) -> Result<()> {
    let text = std::fs::read_to_string(&args.offset_json_file)
        .with_context(|| format!("reading {}", args.offset_json_file.display()))?;
    let requests = parse_offset_json(&text)?;
    let admin = Admin::new(super::connect(&args.bootstrap_server).await?);
    println!("Executing records delete operation");
    let results = admin
        .delete_records(&requests, Duration::from_secs(30))
        .await?;
    println!("Records delete operation completed:");
    for ((topic, partition), result) in results {
        match result {
            Ok(low_watermark) => {
                println!("partition: {topic}-{partition}\tlow_watermark: {low_watermark}")
            }
            Err(e) => println!(
                "partition: {topic}-{partition}\terror: {}",
                runnel_client::render_error(&e)
            ),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kafkas_offset_file() {
        let text = r#"{"partitions":[{"topic":"a","partition":0,"offset":5},
            {"topic":"a","partition":1,"offset":-1}],"version":1}"#;
        assert_eq!(
            parse_offset_json(text).expect("valid"),
            vec![("a".into(), 0, 5), ("a".into(), 1, -1)]
        );
    }

    #[test]
    fn refuses_duplicates_other_versions_and_bad_json() {
        let dup = r#"{"partitions":[{"topic":"a","partition":0,"offset":5},
            {"topic":"a","partition":0,"offset":6}],"version":1}"#;
        let err = parse_offset_json(dup).expect_err("duplicate").to_string();
        assert!(err.contains("duplicate topic partitions: a-0"), "{err}");
        let v2 = r#"{"partitions":[],"version":2}"#;
        assert!(parse_offset_json(v2).is_err());
        assert!(parse_offset_json("{").is_err());
    }
}
