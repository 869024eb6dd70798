//! `runnel dump-log --cluster-metadata-decoder`: kafka-dump-log.sh's decoder of the cluster
//! metadata log, on Runnel's own metadata storage (offline).
//!
//! A node keeps its metadata in its data directory, in one of two forms (see runnel-raft's
//! `storage` and runnel-broker's `metadata_log`):
//! * `metadata-quorum/raft.log`: the Raft log, one checksummed frame per Raft entry (a batch of
//!   metadata records, a leader's blank entry, a membership change, or the marker of a purge),
//!   and `metadata-quorum/snapshot.checkpoint`: the image as the records that rebuild it;
//! * `metadata/metadata.log`: the single-node log, one checksummed line per batch.
//!
//! Every entry prints a batch line and every record a `| ... payload: {...}` line whose
//! payload is Kafka's `{"type":"TOPIC_RECORD","version":N,"data":{...}}` shape: the KRaft
//! record type, the record's stored format version (`runnel_metadata::record_format`) and its
//! fields (Runnel's, in camelCase, in name order). A record this build cannot decode prints Kafka's
//! `Error at <offset>, skipping. <why>` as its payload; the frames are checked by the node's own
//! readers (`runnel_raft::storage::dump`, `metadata_log::read_raw_lines`), and the first bad
//! frame ends the dump with Kafka's `Found N invalid bytes at the end of <file>` line, plus a
//! line on stderr when valid frames follow it (damage the node refuses to start on, not a torn
//! tail). Raft log entries are numbered by Raft index (`index: I record: R`): record offsets
//! are assigned when a batch is applied (a rejected batch gets none) and cannot be told from
//! the log alone; the single-node log and a snapshot number their records by offset.
//!
//! A directory argument (a data directory, or its `metadata-quorum` / `metadata` directory)
//! dumps every metadata file found in it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use runnel_metadata::MetadataRecord;
use runnel_raft::storage::dump::{self, RawLogRecord, RawPayload};
use serde_json::Value;

use super::dump_log::{read_small, Dump, DumpLogArgs};

/// The metadata files of `path`: itself if it is a file, else those found in it.
pub fn files_of(path: &Path) -> Vec<PathBuf> {
    if !path.is_dir() {
        return vec![path.to_path_buf()];
    }
    let candidates = [
        "metadata-quorum/snapshot.checkpoint",
        "metadata-quorum/raft.log",
        "metadata/metadata.log",
        "snapshot.checkpoint",
        "raft.log",
        "metadata.log",
    ];
    candidates
        .iter()
        .map(|c| path.join(c))
        .filter(|p| p.is_file())
        .collect()
}

/// Dumps one metadata file by its name.
pub fn dump_file(path: &Path, args: &DumpLogArgs, dump: &mut Dump) -> std::io::Result<()> {
    let _ = writeln!(dump.out, "Dumping {}", path.display());
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if name == "metadata.log" {
        dump_file_log(path, &read_small(path)?, args, dump);
    } else if name.ends_with(".checkpoint") {
        dump_snapshot(&read_small(path)?, args, dump);
    } else if name.ends_with(".log") {
        dump_raft_log(path, &read_small(path)?, args, dump);
    } else {
        let _ = writeln!(dump.err, "Ignoring unknown file {}", path.display());
    }
    Ok(())
}

/// Kafka's `MetadataRecordType` name of a record type (`TopicRecord` -> `TOPIC_RECORD`).
fn kafka_type_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// `snake_case` -> `camelCase`, the style of Kafka's record JSON.
fn camel(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut upper = false;
    for c in key.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

fn camel_keys(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (camel(&k), camel_keys(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(camel_keys).collect()),
        other => other,
    }
}

/// The payload of one stored record: Kafka's `{"type":..,"version":..,"data":..}`, or its
/// `Error at <at>, skipping. <why>` for a record this build cannot decode.
pub fn payload(stored: &Value, at: &str) -> String {
    let record: MetadataRecord = match serde_json::from_value(stored.clone()) {
        Ok(r) => r,
        Err(e) => return format!("Error at {at}, skipping. {e}"),
    };
    // Records from before the envelope are format version 0 (record_format).
    let version = stored.get("v").and_then(Value::as_u64).unwrap_or(0);
    // The envelope's body: {"Type": {fields}}, or "Type" for a record without fields.
    let data = match serde_json::to_value(&record)
        .ok()
        .and_then(|mut v| v.get_mut("r").map(Value::take))
    {
        Some(Value::Object(map)) => map.into_iter().next().map_or(Value::Null, |(_, v)| v),
        _ => Value::Object(Default::default()),
    };
    // Kafka's member order (type, version, data); the fields come in name order.
    format!(
        r#"{{"type":"{}","version":{version},"data":{}}}"#,
        kafka_type_name(record.type_name()),
        camel_keys(data)
    )
}

/// One record's line: `| <metadata> payload: ...` (`| payload: ...` with
/// --skip-record-metadata, as the segment dump prints it).
fn record_line(metadata: &str, stored: &Value, at: &str, args: &DumpLogArgs) -> String {
    let shown = if args.skip_record_metadata {
        String::new()
    } else {
        format!(" {metadata}")
    };
    format!("|{shown} payload: {}", payload(stored, at))
}

fn invalid_tail(
    path: &Path,
    position: u64,
    trailing: u64,
    damaged: bool,
    unit: &'static str,
    number: u64,
    dump: &mut Dump,
) {
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let _ = writeln!(
        dump.out,
        "Found {trailing} invalid bytes at the end of {name}"
    );
    if damaged {
        let err = runnel_raft::storage::damage::Damage {
            offset: position,
            number,
        }
        .in_file(
            path,
            unit,
            "Dumped the valid records before it; a node does not start on this file.",
        );
        let _ = writeln!(dump.err, "{err}");
    }
}

/// `raft.log`: a line per frame, a line per record of a batch.
fn dump_raft_log(path: &Path, bytes: &[u8], args: &DumpLogArgs, dump: &mut Dump) {
    let log = dump::read_log(bytes);
    for frame in &log.frames {
        let tail = format!(
            "position: {} size: {} crc: {} isvalid: true",
            frame.position, frame.size, frame.crc
        );
        let entry = match &frame.body {
            RawLogRecord::Purged(id) => {
                let _ = writeln!(
                    dump.out,
                    "purgedUpToIndex: {} term: {} leaderId: {} {tail}",
                    id.index, id.leader_id.term, id.leader_id.node_id
                );
                continue;
            }
            RawLogRecord::Entry(e) => e,
        };
        let (kind, count) = match &entry.payload {
            RawPayload::Blank => ("Blank", 0),
            RawPayload::Normal(records) => ("Normal", records.len()),
            RawPayload::Membership(_) => ("Membership", 0),
        };
        let _ = writeln!(
            dump.out,
            "index: {} term: {} leaderId: {} entryType: {kind} count: {count} {tail}",
            entry.log_id.index, entry.log_id.leader_id.term, entry.log_id.leader_id.node_id
        );
        match &entry.payload {
            RawPayload::Normal(records) => {
                for (i, stored) in records.iter().enumerate() {
                    let at = format!("index {} record {i}", entry.log_id.index);
                    let metadata = format!("index: {} record: {i}", entry.log_id.index);
                    let _ = writeln!(dump.out, "{}", record_line(&metadata, stored, &at, args));
                }
            }
            RawPayload::Membership(m) => {
                let _ = writeln!(dump.out, "| Membership {m}");
            }
            RawPayload::Blank => {}
        }
    }
    if let Some(bad) = log.invalid {
        let number = log.frames.len() as u64 + 1;
        invalid_tail(
            path,
            bad.position,
            bad.trailing,
            bad.damaged,
            "record",
            number,
            dump,
        );
    }
}

/// `snapshot.checkpoint`: Kafka's `Snapshot end offset` line, openraft's metadata, then the
/// image's records numbered from the snapshot's first record.
fn dump_snapshot(bytes: &[u8], args: &DumpLogArgs, dump: &mut Dump) {
    let snap = match dump::read_snapshot(bytes) {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(dump.err, "{e}");
            return;
        }
    };
    let (index, term, leader) = snap.meta.last_log_id.map_or((-1, 0, 0), |l| {
        (
            i64::try_from(l.index).unwrap_or(i64::MAX),
            l.leader_id.term,
            l.leader_id.node_id,
        )
    });
    let _ = writeln!(
        dump.out,
        "Snapshot end offset: {}, epoch: {term}",
        snap.last_offset.saturating_add(1)
    );
    let membership = serde_json::to_string(&snap.meta.last_membership).unwrap_or_default();
    let _ = writeln!(
        dump.out,
        "snapshotId: {} lastIncludedIndex: {index} term: {term} leaderId: {leader} count: {} size: {} crc: {} isvalid: true",
        snap.meta.snapshot_id,
        snap.records.len(),
        snap.frames[0].0 + snap.frames[1].0,
        snap.frames[1].1,
    );
    let _ = writeln!(dump.out, "| Membership {membership}");
    for (i, stored) in snap.records.iter().enumerate() {
        let metadata = format!("offset: {i}");
        let at = i.to_string();
        let _ = writeln!(dump.out, "{}", record_line(&metadata, stored, &at, args));
    }
}

/// The single-node `metadata.log`: a batch line per line of the file, its records numbered by
/// offset as the broker replays them.
fn dump_file_log(path: &Path, bytes: &[u8], args: &DumpLogArgs, dump: &mut Dump) {
    let _ = writeln!(dump.out, "Log starting offset: 0");
    let (lines, invalid) = runnel_broker::metadata_log::read_raw_lines(bytes);
    let mut offset: i64 = 0;
    for line in &lines {
        let count = i64::try_from(line.records.len()).unwrap_or(i64::MAX);
        let _ = writeln!(
            dump.out,
            "baseOffset: {offset} lastOffset: {} count: {count} position: {} size: {} crc: {} isvalid: true",
            offset.saturating_add(count) - 1,
            line.position,
            line.size,
            line.crc
        );
        for stored in &line.records {
            let metadata = format!("offset: {offset}");
            let _ = writeln!(
                dump.out,
                "{}",
                record_line(&metadata, stored, &offset.to_string(), args)
            );
            offset = offset.saturating_add(1);
        }
    }
    if let Some((position, damaged)) = invalid {
        let trailing = (bytes.len() as u64).saturating_sub(position);
        let number = lines.len() as u64 + 1;
        invalid_tail(path, position, trailing, damaged, "line", number, dump);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_kafkas_shape() {
        let stored: Value = serde_json::from_str(
            r#"{"v":1,"r":{"PartitionChange":{"topic_id":"00000000-0000-0000-0000-000000000007","partition_id":0,"leader":1,"isr":null,"replicas":null,"adding_replicas":null,"removing_replicas":null}}}"#,
        )
        .unwrap();
        assert_eq!(
            payload(&stored, "0"),
            r#"{"type":"PARTITION_CHANGE_RECORD","version":1,"data":{"addingReplicas":null,"isr":null,"leader":1,"partitionId":0,"removingReplicas":null,"replicas":null,"topicId":"00000000-0000-0000-0000-000000000007"}}"#
        );
        // Before the envelope: version 0; a record without fields has empty data.
        assert_eq!(
            payload(&Value::String("NoOp".into()), "3"),
            r#"{"type":"NO_OP_RECORD","version":0,"data":{}}"#
        );
        let newer: Value = serde_json::from_str(r#"{"v":9,"r":{"ShareGroupRecord":{}}}"#).unwrap();
        let text = payload(&newer, "index 4 record 1");
        assert!(
            text.starts_with(
                "Error at index 4 record 1, skipping. a metadata record has format version 9"
            ),
            "{text}"
        );
        assert!(payload(&Value::from(17), "5").starts_with("Error at 5, skipping."));
    }

    #[test]
    fn kafka_names() {
        assert_eq!(kafka_type_name("NoOpRecord"), "NO_OP_RECORD");
        assert_eq!(
            kafka_type_name("UserScramCredentialRecord"),
            "USER_SCRAM_CREDENTIAL_RECORD"
        );
        assert_eq!(camel("next_producer_id"), "nextProducerId");
        assert_eq!(camel("Topic"), "Topic");
    }
}
