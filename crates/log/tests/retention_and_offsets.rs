//! Retention, DeleteRecords, truncation, timestamp lookups and leader epochs through the log.

mod common;

use std::fs;

use common::*;
use kafka_protocol::records::Compression;
use runnel_log::{LogError, PartitionLog};

fn log_files(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains(".log"))
        .collect();
    v.sort();
    v
}

#[test]
fn retention_by_size_deletes_whole_oldest_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = small_config(1000);
    cfg.retention_ms = -1;
    let mut log = open(dir.path(), cfg.clone());
    fill(&mut log, 40, 2, 100, 0);
    log.set_high_watermark(i64::MAX);
    let bases = log.segment_base_offsets();
    let total = log.size_bytes();
    assert_eq!(log.enforce_retention(0).unwrap(), 0, "unlimited by default");
    cfg.retention_bytes = (total / 2) as i64;
    log.update_config(cfg.clone());
    let deleted = log.enforce_retention(0).unwrap();
    assert!(deleted > 0);
    assert!(log.size_bytes() <= total / 2 + 1000);
    assert!(
        log.size_bytes() + 1000 > cfg.retention_bytes as u64,
        "no more than needed"
    );
    assert_eq!(log.segment_base_offsets(), bases[deleted..].to_vec());
    assert_eq!(log.log_start_offset(), bases[deleted]);
    assert_eq!(
        log_files(dir.path()).len(),
        bases.len() - deleted,
        "files removed (delay 0)"
    );
    assert!(matches!(
        log.read(0, 100, i64::MAX, false),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    assert!(!log
        .read(log.log_start_offset(), 100, i64::MAX, true)
        .unwrap()
        .records
        .is_empty());
}

#[test]
fn retention_never_passes_the_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = small_config(1000);
    cfg.retention_ms = 0;
    let mut log = open(dir.path(), cfg);
    fill(&mut log, 40, 2, 100, 0);
    let bases = log.segment_base_offsets();
    log.set_high_watermark(bases[2]);
    assert_eq!(log.enforce_retention(1_000_000).unwrap(), 2);
    assert_eq!(log.log_start_offset(), bases[2]);
}

#[test]
fn retention_by_time_uses_the_largest_timestamp_and_rolls_when_all_qualify() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = small_config(1000);
    cfg.retention_ms = 1000;
    let mut log = open(dir.path(), cfg);
    // Old data (ts ~ 0..400), then newer data (ts ~ 10_000..).
    fill(&mut log, 20, 2, 100, 0);
    let old_end = log.log_end_offset();
    fill(&mut log, 20, 2, 100, 10_000);
    log.set_high_watermark(i64::MAX);
    let deleted = log.enforce_retention(10_500).unwrap();
    assert!(deleted > 0);
    // Everything left holds some record at or after the old data's end.
    let first = log.segment_base_offsets()[0];
    assert!(
        first <= old_end,
        "the segment spanning old and new data stays"
    );
    assert!(log.log_start_offset() == first);
    // Much later, everything qualifies: a new empty active segment is rolled first.
    let leo = log.log_end_offset();
    let n = log.num_segments();
    assert_eq!(log.enforce_retention(1_000_000).unwrap(), n);
    assert_eq!(log.segment_base_offsets(), vec![leo]);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (leo, leo));
    // The empty active segment is never deleted, and appends continue.
    assert_eq!(log.enforce_retention(2_000_000).unwrap(), 0);
    assert_eq!(append(&mut log, &batch(1, 10, 5), 0).first_offset, leo);
}

#[test]
fn deleted_files_wait_for_the_delay() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = small_config(1000);
    cfg.retention_ms = 0;
    cfg.file_delete_delay_ms = 60_000;
    let mut log = open(dir.path(), cfg.clone());
    fill(&mut log, 20, 2, 100, 0);
    log.set_high_watermark(i64::MAX);
    let deleted = log.enforce_retention(1_000_000).unwrap();
    assert!(deleted > 0);
    let names = log_files(dir.path());
    assert_eq!(
        names.iter().filter(|n| n.ends_with(".log.deleted")).count(),
        deleted
    );
    cfg.file_delete_delay_ms = 0;
    log.update_config(cfg);
    log.enforce_retention(1_000_000).unwrap();
    assert!(!log_files(dir.path())
        .iter()
        .any(|n| n.ends_with(".deleted")));
}

#[test]
fn delete_records_moves_log_start_and_deletes_segments_below() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(1000));
    fill(&mut log, 30, 2, 100, 0);
    log.set_high_watermark(50);
    let bases = log.segment_base_offsets();
    let target = bases[2] + 1; // inside segment 2
    assert_eq!(log.delete_records_before(target).unwrap(), target);
    assert_eq!(log.log_start_offset(), target);
    assert_eq!(log.segment_base_offsets(), bases[2..].to_vec());
    let e = log.read(target - 1, 100, i64::MAX, false).unwrap_err();
    assert!(matches!(e, LogError::OffsetOutOfRange { .. }));
    // Reading at the new start returns the batch containing it.
    let r = log.read(target, 1, i64::MAX, true).unwrap();
    assert!(batches_of(&r.records)[0].base_offset <= target);
    // Beyond the HW is refused; below the start is a no-op.
    assert!(matches!(
        log.delete_records_before(51),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    assert_eq!(log.delete_records_before(3).unwrap(), target);
    // Survives a reopen through the hint.
    let (cfg, hw) = (log.config().clone(), log.high_watermark());
    log.close().unwrap();
    let log =
        PartitionLog::open(dir.path().to_path_buf(), cfg, clean_hint(target, hw, 60)).unwrap();
    assert_eq!(log.log_start_offset(), target);
}

#[test]
fn truncate_to_removes_the_tail_at_batch_granularity() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(1000));
    append(&mut log, &batch(3, 100, 0), 0);
    fill(&mut log, 20, 2, 100, 100);
    append(&mut log, &batch(2, 100, 0), 2);
    log.set_high_watermark(i64::MAX);
    let leo = log.log_end_offset();
    assert_eq!(leo, 45);
    assert_eq!(log.epoch_entries(), vec![(0, 0), (2, 43)]);
    let bases = log.segment_base_offsets();
    // Exactly at a batch boundary.
    log.truncate_to(21).unwrap();
    assert_eq!(log.log_end_offset(), 21);
    assert_eq!(log.high_watermark(), 21);
    assert_eq!(log.epoch_entries(), vec![(0, 0)]);
    assert!(log.segment_base_offsets().len() < bases.len());
    assert!(log.segment_base_offsets().iter().all(|b| *b <= 21));
    // Inside a batch (19..=20): the whole batch goes.
    log.truncate_to(20).unwrap();
    assert_eq!(log.log_end_offset(), 19);
    let r = log.read(0, 1 << 20, i64::MAX, false).unwrap();
    let last = batches_of(&r.records).last().unwrap().last_offset();
    assert!(last <= 18);
    // Appends continue densely, and reads see the new data.
    let info = append(&mut log, &batch(4, 10, 7), 3);
    assert_eq!(info.first_offset, 19);
    assert_eq!(log.epoch_entries(), vec![(0, 0), (3, 19)]);
    for o in 0..23 {
        let r = log.read(o, 1, i64::MAX, true).unwrap();
        assert!(decode(&r.records).iter().any(|x| x.0 == o));
    }
    // Below the first segment: emptied and restarted there.
    log.delete_records_before(5).unwrap_or(5);
    log.truncate_to(0).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
    // Truncation survives a crash-free reopen.
    append(&mut log, &batch(2, 10, 0), 4);
    let cfg = log.config().clone();
    log.close().unwrap();
    let log = PartitionLog::open(dir.path().to_path_buf(), cfg, clean_hint(0, 2, 2)).unwrap();
    assert_eq!(log.log_end_offset(), 2);
}

#[test]
fn truncate_then_reopen_uncleanly_does_not_resurrect_data() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(1000));
    fill(&mut log, 30, 2, 100, 0);
    log.truncate_to(10).unwrap();
    let cfg = log.config().clone();
    drop(log);
    let log = PartitionLog::open(dir.path().to_path_buf(), cfg, unclean_hint(0)).unwrap();
    assert_eq!(log.log_end_offset(), 10);
}

#[test]
fn offset_for_timestamp_finds_the_first_record_at_or_after() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(1500));
    // Batch i: 3 records, timestamps 1000 + 10*i + {0,1,2}; offsets 3i..3i+2.
    fill(&mut log, 40, 3, 60, 1000);
    assert!(log.num_segments() > 3);
    assert_eq!(log.offset_for_timestamp(0).unwrap(), Some((0, 1000, 0)));
    assert_eq!(log.offset_for_timestamp(1000).unwrap(), Some((0, 1000, 0)));
    // Exact record inside an uncompressed batch.
    assert_eq!(log.offset_for_timestamp(1201).unwrap(), Some((61, 1201, 0)));
    assert_eq!(log.offset_for_timestamp(1203).unwrap(), Some((63, 1210, 0)));
    for i in 0..40i64 {
        for k in 0..3 {
            let ts = 1000 + 10 * i + k;
            assert_eq!(
                log.offset_for_timestamp(ts).unwrap().map(|x| (x.0, x.1)),
                Some((3 * i + k, ts))
            );
        }
    }
    assert_eq!(log.offset_for_timestamp(1000 + 10 * 39 + 3).unwrap(), None);
    assert_eq!(log.max_timestamp(), Some((1392, 119)));
    // After DeleteRecords, the answer is never below the log start.
    log.set_high_watermark(i64::MAX);
    log.delete_records_before(50).unwrap();
    assert_eq!(log.offset_for_timestamp(0).unwrap().map(|x| x.0), Some(50));
}

#[test]
fn offset_for_timestamp_in_compressed_batches_is_batch_level() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(1 << 20));
    append(&mut log, &batch_with(10, 20, 100, Compression::Gzip), 2);
    append(&mut log, &batch_with(10, 20, 200, Compression::Zstd), 3);
    assert_eq!(log.offset_for_timestamp(150).unwrap(), Some((10, 209, 3)));
    assert_eq!(log.offset_for_timestamp(105).unwrap(), Some((0, 109, 2)));
    assert_eq!(log.max_timestamp(), Some((209, 19)));
}

#[test]
fn epoch_cache_through_the_log_spec_example() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(1 << 20));
    // Leader epochs {0->0, 1->100, 2->150}, LEO 200.
    for (epoch, n) in [(0, 100), (1, 50), (2, 50)] {
        for _ in 0..n / 10 {
            append(&mut log, &batch(10, 1, 0), epoch);
        }
    }
    assert_eq!(log.epoch_entries(), vec![(0, 0), (1, 100), (2, 150)]);
    assert_eq!(log.end_offset_for_epoch(1), (1, 150));
    assert_eq!(log.end_offset_for_epoch(2), (2, 200));
    assert_eq!(log.end_offset_for_epoch(0), (0, 100));
    assert_eq!(log.end_offset_for_epoch(5), (-1, -1));
    assert_eq!(log.latest_epoch(), Some(2));
    // The old leader {0->0, 1->100}, LEO 170 truncates to min(150, 170) = 150.
    let dir2 = tempfile::tempdir().unwrap();
    let mut old = open(dir2.path(), small_config(1 << 20));
    for (epoch, n) in [(0, 100), (1, 70)] {
        for _ in 0..n / 10 {
            append(&mut old, &batch(10, 1, 0), epoch);
        }
    }
    let (e, leader_end) = log.end_offset_for_epoch(old.latest_epoch().unwrap());
    let (_, own_end) = old.end_offset_for_epoch(e);
    old.truncate_to(leader_end.min(own_end)).unwrap();
    assert_eq!(old.log_end_offset(), 150);
    // Then it replicates the leader's epoch-2 data.
    let rest = log.read(150, 1 << 20, i64::MAX, false).unwrap().records;
    old.append_as_follower(&rest).unwrap();
    assert_eq!(old.epoch_entries(), log.epoch_entries());
    assert_eq!(
        old.read(0, 1 << 20, i64::MAX, false).unwrap().records,
        log.read(0, 1 << 20, i64::MAX, false).unwrap().records
    );
    // Retention moves the first epoch's start.
    log.set_high_watermark(200);
    log.delete_records_before(120).unwrap();
    assert_eq!(log.epoch_entries(), vec![(1, 120), (2, 150)]);
}

#[test]
fn a_new_leaders_epoch_is_recorded_before_its_first_append_and_dropped_by_truncation_at_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(1 << 20));
    append(&mut log, &batch(3, 10, 0), 0);
    // Becoming leader in epoch 4 at the LEO, before appending anything.
    log.assign_leader_epoch(4).unwrap();
    assert_eq!(log.epoch_entries(), vec![(0, 0), (4, 3)]);
    assert_eq!(log.end_offset_for_epoch(0), (0, 3));
    // Deposed before its first append: a truncation at the LEO drops the empty epoch (the new
    // leader never had it), so the next fetch names epoch 0 again.
    log.truncate_to(3).unwrap();
    assert_eq!(log.log_end_offset(), 3);
    assert_eq!(log.epoch_entries(), vec![(0, 0)]);
    // A follower below its leader's log start restarts the log there.
    log.truncate_fully_and_start_at(100).unwrap();
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.high_watermark()
        ),
        (100, 100, 100)
    );
    assert!(log.epoch_entries().is_empty());
    let info = append(&mut log, &batch(2, 10, 0), 5);
    assert_eq!(info.first_offset, 100);
}
