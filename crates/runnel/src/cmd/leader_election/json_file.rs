//! kafka-leader-election.sh's `--path-to-json-file` format:
//! `{"partitions": [{"topic": "foo", "partition": 1}, ...]}`.

use std::collections::BTreeSet;

use anyhow::{bail, Context, Result};
use runnel_client::TopicPartition;
use serde_json::Value;

/// Parses the election data, rejecting duplicates with Kafka's messages. Partitions come
/// back sorted.
pub fn parse_election_data(text: &str) -> Result<Vec<TopicPartition>> {
    // Kafka's `Json.parseFull` yields nothing for unparsable input.
    let Ok(js) = serde_json::from_str::<Value>(text) else {
        bail!("Replica election data is empty");
    };
    let Some(obj) = js.as_object() else {
        bail!("Replica election data is not a JSON object");
    };
    let Some(list) = obj.get("partitions") else {
        bail!("Replica election data is missing \"partitions\" field");
    };
    let items = list
        .as_array()
        .context("Replica election data: \"partitions\" is not an array")?;
    let mut seen = BTreeSet::new();
    let mut duplicates = BTreeSet::new();
    for (i, item) in items.iter().enumerate() {
        let topic = item
            .get("topic")
            .and_then(Value::as_str)
            .with_context(|| format!("Replica election data: entry {i} has no string \"topic\""))?;
        let partition = item
            .get("partition")
            .and_then(Value::as_i64)
            .and_then(|p| i32::try_from(p).ok())
            .with_context(|| {
                format!("Replica election data: entry {i} has no integer \"partition\"")
            })?;
        let tp = TopicPartition::new(topic, partition);
        if !seen.insert(tp.clone()) {
            duplicates.insert(tp);
        }
    }
    if !duplicates.is_empty() {
        let list: Vec<String> = duplicates.iter().map(ToString::to_string).collect();
        bail!(
            "Replica election data contains duplicate partitions: [{}]",
            list.join(", ")
        );
    }
    Ok(seen.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kafkas_example() {
        let parts = parse_election_data(
            "{\"partitions\":\n\t[{\"topic\": \"foo\", \"partition\": 1},\n\t {\"topic\": \"foobar\", \"partition\": 2}]\n}",
        )
        .unwrap_or_default();
        assert_eq!(
            parts,
            vec![
                TopicPartition::new("foo", 1),
                TopicPartition::new("foobar", 2)
            ]
        );
    }

    fn err(text: &str) -> String {
        parse_election_data(text)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn rejects_bad_files_with_kafkas_messages() {
        assert_eq!(err("not json"), "Replica election data is empty");
        assert_eq!(
            err("{\"topics\": []}"),
            "Replica election data is missing \"partitions\" field"
        );
        assert_eq!(
            err("{\"partitions\":[{\"topic\":\"t\",\"partition\":0},{\"topic\":\"t\",\"partition\":0}]}"),
            "Replica election data contains duplicate partitions: [t-0]"
        );
        assert!(err("{\"partitions\":[{\"topic\":\"t\"}]}").contains("\"partition\""));
        assert!(err("{\"partitions\":[{\"topic\":1,\"partition\":0}]}").contains("\"topic\""));
        assert!(err("{\"partitions\":[{\"topic\":\"t\",\"partition\":1e99}]}").contains("integer"));
        assert_eq!(
            parse_election_data("{\"partitions\":[]}")
                .map(|v| v.len())
                .ok(),
            Some(0)
        );
    }
}
