//! kafka-dump-log.sh's line formats (`DumpLogSegments.printBatchLevel` and its record loop),
//! filled from Runnel's metadata frames, and the `--cluster-metadata-decoder` payload.

use runnel_metadata::MetadataRecord;
use serde_json::Value;

use super::kafka_json::kafka_json;
use crate::cmd::dump_log::DumpLogArgs;

/// One frame as a batch: its offsets, Raft term, kind and the frame's bytes on disk.
pub struct Batch {
    /// The first record's offset (-1: not known, or the batch takes none).
    pub base: i64,
    pub count: usize,
    /// The Raft term (-1 where there is none: the single-node log).
    pub epoch: i64,
    pub control: bool,
    pub position: u64,
    pub size: u64,
    pub crc: u32,
}

/// `printBatchLevel`'s v2 line.
pub fn batch_line(b: &Batch) -> String {
    let count = i64::try_from(b.count).unwrap_or(i64::MAX);
    let last = if b.base < 0 {
        -1
    } else {
        b.base.saturating_add(count) - 1
    };
    format!(
        "baseOffset: {} lastOffset: {last} count: {} baseSequence: -1 lastSequence: -1 \
         producerId: -1 producerEpoch: -1 partitionLeaderEpoch: {} isTransactional: false \
         isControl: {} deleteHorizonMs: OptionalLong.empty position: {} CreateTime: -1 size: {} \
         magic: 2 compresscodec: none crc: {} isvalid: true",
        b.base, b.count, b.epoch, b.control, b.position, b.size, b.crc
    )
}

/// Kafka's `MetadataRecordType` name of a record type (`TopicRecord` -> `TOPIC_RECORD`).
pub fn kafka_type_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// The payload of one stored record: Kafka's `{"type":..,"version":..,"data":..}`, or its
/// `Error at <at>, skipping. <why>` for a record this build cannot decode.
pub fn payload(stored: &Value, at: &str) -> String {
    let record: MetadataRecord = match serde_json::from_value(stored.clone()) {
        Ok(r) => r,
        Err(e) => return format!("Error at {at}, skipping. {e}"),
    };
    let (version, data) = kafka_json(&record);
    format!(
        r#"{{"type":"{}","version":{version},"data":{data}}}"#,
        kafka_type_name(record.type_name())
    )
}

/// One record's line: `| offset: O CreateTime: -1 keySize: -1 valueSize: V sequence: -1
/// headerKeys: [] payload: ...` (metadata records have no key; the value is the stored
/// record). With --skip-record-metadata Kafka prints only ` payload: ...`.
pub fn record_line(offset: i64, stored: &Value, args: &DumpLogArgs) -> String {
    let at = offset.to_string();
    let payload = payload(stored, &at);
    if args.skip_record_metadata {
        return format!(" payload: {payload}");
    }
    let size = serde_json::to_string(stored).map_or(0, |s| s.len());
    format!(
        "| offset: {offset} CreateTime: -1 keySize: -1 valueSize: {size} sequence: -1 \
         headerKeys: [] payload: {payload}"
    )
}

/// A control frame's line (`| <what>`), left out with --skip-record-metadata: Kafka prints a
/// control record's type only among the record metadata (an empty line without it), and
/// Runnel's control batches hold no record (`count: 0`).
pub fn control_line(what: &str, args: &DumpLogArgs) -> Option<String> {
    (!args.skip_record_metadata).then(|| format!("| {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(skip: bool) -> DumpLogArgs {
        DumpLogArgs {
            files: vec![],
            print_data_log: false,
            deep_iteration: false,
            verify_index_only: false,
            skip_record_metadata: skip,
            max_bytes: i32::MAX,
            max_message_size: 5 << 20,
            cluster_metadata_decoder: true,
        }
    }

    #[test]
    fn payloads_are_kafkas_json() {
        let stored: Value = serde_json::from_str(
            r#"{"v":1,"r":{"PartitionChange":{"topic_id":"00000000-0000-0000-0000-000000000007","partition_id":0,"leader":1,"isr":null,"replicas":null,"adding_replicas":null,"removing_replicas":null}}}"#,
        )
        .unwrap();
        assert_eq!(
            payload(&stored, "0"),
            r#"{"type":"PARTITION_CHANGE_RECORD","version":0,"data":{"partitionId":0,"topicId":"AAAAAAAAAAAAAAAAAAAABw","leader":1}}"#
        );
        // Before the envelope the record reads the same; a record without fields has empty data.
        assert_eq!(
            payload(&Value::String("NoOp".into()), "3"),
            r#"{"type":"NO_OP_RECORD","version":0,"data":{}}"#
        );
        let newer: Value = serde_json::from_str(r#"{"v":9,"r":{"ShareGroupRecord":{}}}"#).unwrap();
        let text = payload(&newer, "17");
        assert!(
            text.starts_with("Error at 17, skipping. a metadata record has format version 9"),
            "{text}"
        );
        assert!(payload(&Value::from(17), "5").starts_with("Error at 5, skipping."));
    }

    #[test]
    fn lines_have_kafkas_fields() {
        let b = Batch {
            base: 4,
            count: 2,
            epoch: 3,
            control: false,
            position: 10,
            size: 20,
            crc: 7,
        };
        assert_eq!(
            batch_line(&b),
            "baseOffset: 4 lastOffset: 5 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 \
             producerEpoch: -1 partitionLeaderEpoch: 3 isTransactional: false isControl: false \
             deleteHorizonMs: OptionalLong.empty position: 10 CreateTime: -1 size: 20 magic: 2 \
             compresscodec: none crc: 7 isvalid: true"
        );
        let unknown = Batch { base: -1, ..b };
        assert!(batch_line(&unknown).starts_with("baseOffset: -1 lastOffset: -1 count: 2 "));
        let noop = Value::String("NoOp".into());
        assert_eq!(
            record_line(9, &noop, &args(false)),
            r#"| offset: 9 CreateTime: -1 keySize: -1 valueSize: 6 sequence: -1 headerKeys: [] payload: {"type":"NO_OP_RECORD","version":0,"data":{}}"#
        );
        assert_eq!(
            record_line(9, &noop, &args(true)),
            r#" payload: {"type":"NO_OP_RECORD","version":0,"data":{}}"#
        );
        assert_eq!(control_line("x", &args(true)), None);
        assert_eq!(control_line("x", &args(false)).as_deref(), Some("| x"));
    }

    #[test]
    fn kafka_names() {
        assert_eq!(kafka_type_name("NoOpRecord"), "NO_OP_RECORD");
        assert_eq!(
            kafka_type_name("UserScramCredentialRecord"),
            "USER_SCRAM_CREDENTIAL_RECORD"
        );
    }
}
