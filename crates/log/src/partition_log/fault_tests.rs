//! Disk faults and forged offsets against a real partition directory: injected write, index
//! and fsync failures (through [`crate::fault`]) and appends that would overflow a segment's
//! 32-bit relative offsets.

use super::*;
use crate::batch::{validate_batches, BatchHeader, RECORD_BATCH_OVERHEAD};
use crate::fault::{self, Fault};
use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

pub(crate) fn batch(n: usize, tag: u8) -> Vec<u8> {
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: i as i32 - 1,
            timestamp: 1_000 + i as i64,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(vec![tag; 100])),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, records.iter(), &options).unwrap();
    buf.to_vec()
}

/// The forged batch of issue 9 item 1: a 61-byte header claiming `i32::MAX` records.
fn forged() -> Vec<u8> {
    let mut b = vec![0u8; RECORD_BATCH_OVERHEAD];
    b[8..12].copy_from_slice(&49i32.to_be_bytes());
    b[16] = 2;
    b[23..27].copy_from_slice(&(i32::MAX - 1).to_be_bytes());
    b[43..51].copy_from_slice(&(-1i64).to_be_bytes());
    b[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

fn config() -> LogConfig {
    LogConfig {
        index_interval_bytes: 1, // an index entry for (almost) every batch
        file_delete_delay_ms: 0,
        ..LogConfig::default()
    }
}

pub(crate) fn append(log: &mut PartitionLog, b: &[u8]) -> Result<AppendInfo, LogError> {
    let h: Vec<BatchHeader> = validate_batches(b, usize::MAX).unwrap();
    log.append(b, &h, 0)
}

fn unclean(dir: &std::path::Path) -> PartitionLog {
    PartitionLog::open(dir.to_path_buf(), config(), RecoveryHint::new_log()).unwrap()
}

/// Every record value tag in offset order, read back through the log.
fn tags(log: &PartitionLog) -> Vec<(i64, u8)> {
    let r = log.read(0, usize::MAX, i64::MAX, true).unwrap();
    let mut bytes = r.records;
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let set = RecordBatchDecoder::decode(&mut bytes).unwrap();
        out.extend(
            set.records
                .iter()
                .map(|r| (r.offset, r.value.as_ref().unwrap()[0])),
        );
    }
    out
}

fn file_len(dir: &std::path::Path, ext: &str) -> u64 {
    std::fs::metadata(dir.join(format!("{:020}.{ext}", 0)))
        .unwrap()
        .len()
}

/// Caught (issue 9 item 6): a failed `.log` write answered an error but the bytes could stay
/// (only a best-effort cut), and an index write failing after the data write left the batch
/// in the log, so a producer's retry stored it twice. Now the append is all or nothing.
#[test]
fn a_failed_data_or_index_write_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = unclean(dir.path());
    append(&mut log, &batch(2, b'a')).unwrap();
    append(&mut log, &batch(2, b'b')).unwrap();
    let sizes = |d| {
        (
            file_len(d, "log"),
            file_len(d, "index"),
            file_len(d, "timeindex"),
        )
    };
    let before = sizes(dir.path());

    for f in [Fault::LogWrite, Fault::IndexWrite] {
        fault::arm(f);
        let e = append(&mut log, &batch(2, b'x')).unwrap_err();
        assert_eq!(e.kafka_error_code(), 56, "{f:?}: {e}");
        assert_eq!(sizes(dir.path()), before, "{f:?} left bytes behind");
        assert_eq!(log.log_end_offset(), 4);
        // Kafka takes the log directory offline on an I/O error: the broker stops and the
        // in-sync replicas take over (known case 3 of the fault campaign, docs/faults.md).
        assert!(log.failure().is_some(), "{f:?}: an I/O error fails the log");
        assert!(append(&mut log, &batch(2, b'y')).is_err(), "{f:?}");
        drop(log);
        log = unclean(dir.path());
        assert_eq!(
            log.log_end_offset(),
            4,
            "{f:?}: the restart finds what was acknowledged"
        );
    }
    // The producer's retry lands once, right after what was acknowledged.
    let info = append(&mut log, &batch(2, b'c')).unwrap();
    assert_eq!(info.first_offset, 4);
    let expect: Vec<(i64, u8)> = [b'a', b'a', b'b', b'b', b'c', b'c']
        .iter()
        .enumerate()
        .map(|(i, t)| (i as i64, *t))
        .collect();
    assert_eq!(tags(&log), expect);
    drop(log);
    let log = unclean(dir.path());
    assert_eq!(
        tags(&log),
        expect,
        "recovery finds exactly the acknowledged batches"
    );
}

/// Caught (issue 9 item 6, fsyncgate): a failed fsync was simply retried by the next flush,
/// which can "succeed" after the kernel dropped the dirty pages, and the recovery point then
/// moved past data that never reached the disk. Now the log fails for good.
#[test]
fn a_failed_fsync_fails_the_log_for_good() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = unclean(dir.path());
    append(&mut log, &batch(3, b'a')).unwrap();
    log.flush().unwrap();
    assert_eq!(log.recovery_point(), 3);
    append(&mut log, &batch(3, b'b')).unwrap();

    fault::arm(Fault::Sync);
    let e = log.flush().unwrap_err();
    assert!(matches!(e, LogError::Failed(_)), "{e:?}");
    assert_eq!(e.kafka_error_code(), 56);
    assert!(log.failure().is_some());
    assert_eq!(
        log.recovery_point(),
        3,
        "nothing beyond the last good fsync"
    );

    // No file is fsynced again: the next target fails before reaching the (re-armed) hook.
    fault::arm(Fault::Sync);
    let target = log.flush_target();
    assert!(target.sync().is_err());
    assert!(
        fault::check(Fault::Sync).is_err(),
        "the armed fault is still there: no fsync was attempted"
    );
    log.mark_flushed(target.up_to_offset());
    assert_eq!(log.recovery_point(), 3);

    for e in [
        append(&mut log, &batch(1, b'c')).unwrap_err(),
        log.read(0, 100, i64::MAX, true).unwrap_err(),
        log.roll().unwrap_err(),
        log.flush().unwrap_err(),
    ] {
        assert_eq!(e.kafka_error_code(), 56, "{e}");
    }
}

/// Caught (issue 9 item 1): one append of two forged batches spanning 2^32-2 offsets was
/// stored in one segment; its index entries wrapped and the next (even clean) open cut the
/// segment and deleted every later one. Now such an append is refused before any write, a
/// batch that fits only a fresh segment rolls first, and recovery keeps everything.
#[test]
fn appends_beyond_32_bit_relative_offsets_roll_or_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = unclean(dir.path());
    append(&mut log, &batch(2, b'a')).unwrap();
    let mut two = forged();
    two.extend_from_slice(&forged());
    let e = append(&mut log, &two).unwrap_err();
    assert!(matches!(e, LogError::OffsetOverflow { .. }), "{e:?}");
    assert_eq!(log.log_end_offset(), 2);
    // One forged batch fits a segment of its own: the log rolls before it.
    let info = append(&mut log, &forged()).unwrap();
    assert_eq!(info.first_offset, 2);
    assert_eq!(log.segment_base_offsets(), vec![0, 2]);
    append(&mut log, &batch(2, b'b')).unwrap();
    let leo = log.log_end_offset();
    assert_eq!(log.segment_base_offsets(), vec![0, 2, leo - 2]);
    drop(log);
    let log = unclean(dir.path());
    assert_eq!(log.log_end_offset(), leo, "recovery cut nothing");
    assert_eq!(log.segment_base_offsets().len(), 3);
}
