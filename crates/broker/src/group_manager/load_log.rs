//! Reading a coordinator partition back (`__consumer_offsets`, `__transaction_state`) when
//! this broker becomes its leader: its keyed records and transaction markers, in log order.

use runnel_group::{LoadRecord, OffsetsRecord};
use runnel_log::PartitionLog;

use crate::replica::manager::ReplicaManager;

/// The keyed records of a coordinator partition hosted here (`__consumer_offsets`,
/// `__transaction_state`), in log order up to its log end: as the new leader, everything it
/// holds will be committed. Control records are skipped, and so is the transactional origin
/// of records ([`read_log`] keeps both).
pub(crate) fn read_records(
    replicas: &ReplicaManager,
    topic: &str,
    partition: i32,
) -> Vec<OffsetsRecord> {
    read_log(replicas, topic, partition)
        .into_iter()
        .filter_map(|r| match r {
            LoadRecord::Record { record, .. } => Some(record),
            LoadRecord::Marker { .. } => None,
        })
        .collect()
}

/// The control record key's type (Kafka's `ControlRecordType`): 0 ABORT, 1 COMMIT; None for
/// any other control record (or an undecodable key).
fn marker_commit(key: Option<&[u8]>) -> Option<bool> {
    let key = key?;
    let kind = i16::from_be_bytes([*key.get(2)?, *key.get(3)?]);
    match kind {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

/// [`read_records`] with transactions: records of transactional batches carry their producer
/// id and transaction markers are kept, for the group loader.
pub(crate) fn read_log(replicas: &ReplicaManager, topic: &str, partition: i32) -> Vec<LoadRecord> {
    let Some(p) = replicas.get(topic, partition) else {
        return Vec::new();
    };
    let log = p.lock_log();
    log_records(&log, topic, partition)
}

/// The records of a coordinator partition's log, from its start to its end (as the new leader,
/// everything it holds will be committed).
///
/// A batch that does not decode (its CRC, framing or compression is damaged: one bad byte in a
/// flushed segment, which recovery does not re-check) is skipped by the offsets its header
/// names, and logged: only its own records are lost. Stopping there instead, as this did,
/// silently dropped every later offset commit or transaction state of the partition (a
/// forgotten `PrepareCommit` never gets its markers and blocks read_committed consumers).
/// Kafka's loader fails the partition's load instead; Runnel serves it without the damaged
/// batch. Only a header that lies about its length (nothing after it can be found) ends the
/// read.
fn log_records(log: &PartitionLog, topic: &str, partition: i32) -> Vec<LoadRecord> {
    let mut records = Vec::new();
    let end = log.log_end_offset();
    let mut offset = log.log_start_offset();
    while offset < end {
        let read = match log.read(offset, 1 << 20, end, true) {
            Ok(read) if !read.records.is_empty() => read,
            Ok(_) => break,
            Err(e) => {
                tracing::error!(partition, error = %e, "cannot read {topic} while loading");
                break;
            }
        };
        let before = offset;
        let mut bytes = read.records;
        while !bytes.is_empty() {
            let framed = runnel_log::batch::frame(&bytes).map(|(h, b)| (h, b.len()));
            let (header, len) = match framed {
                Ok(framed) => framed,
                Err(e) => {
                    tracing::error!(partition, offset, error = %e, "unframed bytes in {topic}, the rest of the partition is not loaded");
                    return records;
                }
            };
            // Bounded decompression: a forged batch cannot inflate without limit.
            let mut batch = bytes.split_to(len);
            match runnel_log::compression::decode_batch_bounded(&mut batch) {
                Ok(set) => {
                    push_records(&mut records, set.records, before, &mut offset);
                    // A compacted batch may end with removed records.
                    offset = offset.max(header.last_offset().saturating_add(1));
                }
                Err(e) => {
                    tracing::error!(partition, base_offset = header.base_offset, last_offset = header.last_offset(), error = %e, "skipping an undecodable batch in {topic}");
                    // Its offsets may be the damaged bytes: the next batch read, when there
                    // is one, says where the log goes on; only the last one read must be
                    // stepped over by its own header.
                    if bytes.is_empty() {
                        offset = offset.max(header.last_offset().saturating_add(1));
                    }
                }
            }
        }
        if offset <= before {
            break;
        }
    }
    records
}

/// The keyed records and transaction markers of one decoded batch at or after `from`;
/// `offset` moves past them.
fn push_records(
    out: &mut Vec<LoadRecord>,
    batch: Vec<kafka_protocol::records::Record>,
    from: i64,
    offset: &mut i64,
) {
    for r in batch {
        *offset = (*offset).max(r.offset.saturating_add(1));
        if r.offset < from {
            continue;
        }
        if r.control {
            if let Some(commit) = marker_commit(r.key.as_deref()) {
                out.push(LoadRecord::Marker {
                    producer_id: r.producer_id,
                    commit,
                });
            }
            continue;
        }
        if let Some(key) = r.key {
            out.push(LoadRecord::Record {
                producer_id: r.transactional.then_some(r.producer_id),
                record: OffsetsRecord {
                    key,
                    value: r.value,
                },
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use runnel_log::{LogConfig, RecoveryHint};

    fn commit(key: &str) -> OffsetsRecord {
        OffsetsRecord {
            key: Bytes::from(key.to_string()),
            value: Some(Bytes::from(vec![b'v'; 64])),
        }
    }

    fn keys(records: &[LoadRecord]) -> Vec<String> {
        records
            .iter()
            .filter_map(|r| match r {
                LoadRecord::Record { record, .. } => {
                    Some(String::from_utf8_lossy(&record.key).into_owned())
                }
                LoadRecord::Marker { .. } => None,
            })
            .collect()
    }

    #[test]
    fn a_damaged_batch_loses_only_its_own_records() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = PartitionLog::open(
            dir.path().join("t-0"),
            LogConfig::default(),
            RecoveryHint::new_log(),
        )
        .unwrap();
        let mut positions = Vec::new();
        for batch in [["a1", "a2"], ["b1", "b2"], ["c1", "c2"]] {
            let bytes =
                super::super::encode_batch(batch.iter().map(|k| commit(k)).collect()).unwrap();
            let headers = vec![runnel_log::batch::BatchHeader::parse(&bytes).unwrap()];
            positions.push(bytes.len());
            log.append(&bytes, &headers, 0).unwrap();
        }
        assert_eq!(
            keys(&log_records(&log, "t", 0)),
            ["a1", "a2", "b1", "b2", "c1", "c2"]
        );
        // One flipped byte in the second batch's last value (a flushed segment is not
        // re-checked on open; its CRC no longer matches).
        let segment = dir.path().join("t-0").join(format!("{:020}.log", 0));
        let mut file = std::fs::read(&segment).unwrap();
        let at = positions[0] + positions[1] - 3;
        file[at] ^= 0x01;
        std::fs::write(&segment, file).unwrap();
        assert_eq!(keys(&log_records(&log, "t", 0)), ["a1", "a2", "c1", "c2"]);
    }
}
