//! kafka-reassign-partitions.sh's file formats: the topics-to-move file of `--generate`
//! (`{"topics": [{"topic": "foo"}], "version": 1}`), the reassignment file of `--execute` /
//! `--verify` (`{"version": 1, "partitions": [{"topic": "foo", "partition": 0, "replicas":
//! [1, 2], "log_dirs": ["any", "any"]}]}`), and the compact JSON the tool prints.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, Context, Result};
use runnel_client::TopicPartition;
use serde::Serialize;
use serde_json::Value;

/// `log_dirs` entry meaning "wherever the broker likes".
pub const ANY_LOG_DIR: &str = "any";

/// One entry of a reassignment file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReassignmentEntry {
    /// The partition.
    pub partition: TopicPartition,
    /// Target replicas, preferred leader first.
    pub replicas: Vec<i32>,
    /// Target log dir per replica (`any` when not given).
    pub log_dirs: Vec<String>,
}

fn parse_json(text: &str, what: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| anyhow::anyhow!("{what} is not a valid JSON: {e}"))
}

fn version(js: &Value) -> Result<i64> {
    match js.get("version") {
        None => Ok(1),
        Some(v) => v
            .as_i64()
            .with_context(|| format!("the \"version\" field {v} is not an integer")),
    }
}

fn array<'a>(js: &'a Value, field: &str) -> Result<&'a [Value]> {
    match js.get(field) {
        None | Some(Value::Null) => Ok(&[]),
        Some(v) => v
            .as_array()
            .map(Vec::as_slice)
            .with_context(|| format!("the \"{field}\" field is not an array")),
    }
}

fn string_field(item: &Value, field: &str, i: usize) -> Result<String> {
    item.get(field)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .with_context(|| format!("entry {i} has no string \"{field}\""))
}

fn int(v: &Value) -> Option<i32> {
    v.as_i64().and_then(|n| i32::try_from(n).ok())
}

/// The topics of a `--topics-to-move-json-file`, in file order.
pub fn parse_topics_to_move(text: &str) -> Result<Vec<String>> {
    let Ok(js) = serde_json::from_str::<Value>(text) else {
        bail!("The input string is not a valid JSON");
    };
    let v = version(&js)?;
    if v != 1 {
        bail!("Not supported version field value {v}");
    }
    array(&js, "topics")?
        .iter()
        .enumerate()
        .map(|(i, item)| string_field(item, "topic", i))
        .collect()
}

/// The entries of a `--reassignment-json-file`, in file order, without deduplication (the
/// checks of `--execute` come after).
pub fn parse_reassignment(text: &str) -> Result<Vec<ReassignmentEntry>> {
    let js = parse_json(text, "the reassignment file")?;
    let v = version(&js)?;
    if v != 1 {
        bail!("Not supported version field value {v}");
    }
    let mut out = Vec::new();
    for (i, item) in array(&js, "partitions")?.iter().enumerate() {
        let topic = string_field(item, "topic", i)?;
        let partition = item
            .get("partition")
            .and_then(int)
            .with_context(|| format!("entry {i} has no integer \"partition\""))?;
        let partition = TopicPartition::new(topic, partition);
        let replicas = item
            .get("replicas")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().map(int).collect::<Option<Vec<i32>>>())
            .with_context(|| format!("{partition}: \"replicas\" is not a list of broker ids"))?;
        let log_dirs = match item.get("log_dirs") {
            None | Some(Value::Null) => vec![ANY_LOG_DIR.to_owned(); replicas.len()],
            Some(v) => v
                .as_array()
                .and_then(|a| {
                    a.iter()
                        .map(|d| d.as_str().map(str::to_owned))
                        .collect::<Option<Vec<String>>>()
                })
                .with_context(|| format!("{partition}: \"log_dirs\" is not a list of strings"))?,
        };
        if log_dirs.len() != replicas.len() {
            bail!(
                "Size of replicas list {} is different from size of log dirs list {} for partition {partition}",
                java_list(&replicas),
                java_list(&log_dirs)
            );
        }
        out.push(ReassignmentEntry {
            partition,
            replicas,
            log_dirs,
        });
    }
    Ok(out)
}

/// Java's `List.toString()`: `[a, b]`.
pub fn java_list<T: ToString>(items: &[T]) -> String {
    let parts: Vec<String> = items.iter().map(ToString::to_string).collect();
    format!("[{}]", parts.join(", "))
}

/// `--execute`'s checks, with Kafka's messages; the target replicas by partition.
pub fn validate_for_execute(
    entries: &[ReassignmentEntry],
) -> Result<BTreeMap<TopicPartition, Vec<i32>>> {
    if entries.is_empty() {
        bail!("Partition reassignment list cannot be empty");
    }
    if entries.iter().any(|e| e.replicas.is_empty()) {
        bail!("Partition replica list cannot be empty");
    }
    let mut targets = BTreeMap::new();
    let mut duplicate_parts = BTreeSet::new();
    for e in entries {
        if targets
            .insert(e.partition.clone(), e.replicas.clone())
            .is_some()
        {
            duplicate_parts.insert(e.partition.to_string());
        }
    }
    if !duplicate_parts.is_empty() {
        bail!(
            "Partition reassignment contains duplicate topic partitions: {}",
            duplicate_parts.into_iter().collect::<Vec<_>>().join(",")
        );
    }
    let duplicate_replicas: Vec<String> = entries
        .iter()
        .filter_map(|e| {
            let dups = duplicates(&e.replicas);
            (!dups.is_empty()).then(|| {
                let ids: Vec<String> = dups.iter().map(i32::to_string).collect();
                format!(
                    "{} contains multiple entries for {}",
                    e.partition,
                    ids.join(",")
                )
            })
        })
        .collect();
    if !duplicate_replicas.is_empty() {
        bail!(
            "Partition replica lists may not contain duplicate entries: {}",
            duplicate_replicas.join(". ")
        );
    }
    Ok(targets)
}

/// The replicas whose `log_dirs` entry names a directory (not `any`): (partition, broker,
/// path), which `--execute` moves with AlterReplicaLogDirs (Kafka's `proposedReplicas`).
pub fn log_dir_moves(entries: &[ReassignmentEntry]) -> Vec<(TopicPartition, i32, String)> {
    entries
        .iter()
        .flat_map(|e| {
            e.replicas
                .iter()
                .zip(&e.log_dirs)
                .filter(|(_, dir)| dir.as_str() != ANY_LOG_DIR)
                .map(|(b, dir)| (e.partition.clone(), *b, dir.clone()))
        })
        .collect()
}

/// The values that occur more than once, sorted.
pub fn duplicates<T: Ord + Clone>(items: &[T]) -> BTreeSet<T> {
    let mut seen = BTreeSet::new();
    items
        .iter()
        .filter(|i| !seen.insert((*i).clone()))
        .cloned()
        .collect()
}

#[derive(Serialize)]
struct JsonPartition<'a> {
    topic: &'a str,
    partition: i32,
    replicas: &'a [i32],
    log_dirs: Vec<&'a str>,
}

#[derive(Serialize)]
struct JsonReassignment<'a> {
    version: i32,
    partitions: Vec<JsonPartition<'a>>,
}

/// The tool's compact reassignment JSON, partitions sorted by topic and partition, every
/// log dir `any`.
pub fn format_reassignment_json(assignment: &BTreeMap<TopicPartition, Vec<i32>>) -> String {
    let doc = JsonReassignment {
        version: 1,
        partitions: assignment
            .iter()
            .map(|(tp, replicas)| JsonPartition {
                topic: &tp.topic,
                partition: tp.partition,
                replicas,
                log_dirs: vec![ANY_LOG_DIR; replicas.len()],
            })
            .collect(),
    };
    // Serialising plain strings and integers cannot fail.
    serde_json::to_string(&doc).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err<T: std::fmt::Debug>(r: Result<T>) -> String {
        r.err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn topics_to_move() {
        assert_eq!(
            parse_topics_to_move(
                "{\"topics\": [{\"topic\": \"foo\"}, {\"topic\": \"bar\"}], \"version\": 1}"
            )
            .unwrap_or_default(),
            vec!["foo", "bar"]
        );
        assert_eq!(
            parse_topics_to_move("{\"topics\": [{\"topic\": \"foo\"}]}").unwrap_or_default(),
            vec!["foo"]
        );
        assert_eq!(
            err(parse_topics_to_move("{")),
            "The input string is not a valid JSON"
        );
        assert_eq!(
            err(parse_topics_to_move("{\"version\": 2, \"topics\": []}")),
            "Not supported version field value 2"
        );
        assert!(
            err(parse_topics_to_move("{\"topics\": [{\"name\": \"foo\"}]}")).contains("\"topic\"")
        );
    }

    #[test]
    fn reassignment_file() {
        let text = r#"{"version":1,"partitions":[
            {"topic":"foo","partition":1,"replicas":[2,3]},
            {"topic":"foo","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}"#;
        let entries = parse_reassignment(text).unwrap_or_default();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].partition, TopicPartition::new("foo", 1));
        assert_eq!(entries[0].log_dirs, vec!["any", "any"]);
        let targets = validate_for_execute(&entries).unwrap_or_default();
        assert_eq!(
            targets.keys().map(ToString::to_string).collect::<Vec<_>>(),
            vec!["foo-0", "foo-1"]
        );
        assert_eq!(
            err(parse_reassignment(r#"{"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}"#)),
            "Size of replicas list [1, 2] is different from size of log dirs list [any] for partition t-0"
        );
        assert!(err(parse_reassignment(
            r#"{"partitions":[{"topic":"t","partition":0,"replicas":["x"]}]}"#
        ))
        .contains("replicas"));
        assert!(err(parse_reassignment("[")).contains("not a valid JSON"));
    }

    #[test]
    fn execute_checks() {
        let entry = |t: &str, p: i32, r: &[i32]| ReassignmentEntry {
            partition: TopicPartition::new(t, p),
            replicas: r.to_vec(),
            log_dirs: vec![ANY_LOG_DIR.into(); r.len()],
        };
        assert_eq!(
            err(validate_for_execute(&[])),
            "Partition reassignment list cannot be empty"
        );
        assert_eq!(
            err(validate_for_execute(&[entry("t", 0, &[])])),
            "Partition replica list cannot be empty"
        );
        assert_eq!(
            err(validate_for_execute(&[
                entry("t", 0, &[1]),
                entry("t", 0, &[2])
            ])),
            "Partition reassignment contains duplicate topic partitions: t-0"
        );
        assert_eq!(
            err(validate_for_execute(&[entry("t", 0, &[1, 1, 2]), entry("t", 1, &[3, 3])])),
            "Partition replica lists may not contain duplicate entries: t-0 contains multiple entries for 1. t-1 contains multiple entries for 3"
        );
        // A named log dir is a move the tool starts after the reassignment.
        let mut moved = entry("t", 0, &[1, 2]);
        moved.log_dirs = vec!["/data/a".into(), ANY_LOG_DIR.into()];
        assert!(validate_for_execute(std::slice::from_ref(&moved)).is_ok());
        assert_eq!(
            log_dir_moves(&[moved, entry("t", 1, &[3])]),
            vec![(TopicPartition::new("t", 0), 1, "/data/a".to_string())]
        );
    }

    #[test]
    fn output_json_matches_the_tool() {
        let mut a = BTreeMap::new();
        a.insert(TopicPartition::new("foo", 1), vec![2, 3]);
        a.insert(TopicPartition::new("bar", 0), vec![1]);
        a.insert(TopicPartition::new("foo", 0), vec![3, 1]);
        assert_eq!(
            format_reassignment_json(&a),
            r#"{"version":1,"partitions":[{"topic":"bar","partition":0,"replicas":[1],"log_dirs":["any"]},{"topic":"foo","partition":0,"replicas":[3,1],"log_dirs":["any","any"]},{"topic":"foo","partition":1,"replicas":[2,3],"log_dirs":["any","any"]}]}"#
        );
        assert_eq!(
            format_reassignment_json(&BTreeMap::new()),
            r#"{"version":1,"partitions":[]}"#
        );
    }
}
