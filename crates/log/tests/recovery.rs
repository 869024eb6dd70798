//! Reopening after clean and unclean shutdowns (spec J.5).

mod common;

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;

use common::*;
use runnel_log::{PartitionLog, RecoveryHint};

fn seg_path(dir: &Path, base: i64, ext: &str) -> std::path::PathBuf {
    dir.join(format!("{base:020}.{ext}"))
}

/// Every offset below `leo` is readable and the data decodes to dense offsets.
fn assert_readable(log: &PartitionLog) {
    let leo = log.log_end_offset();
    for o in log.log_start_offset()..leo {
        let r = log.read(o, 1, i64::MAX, true).unwrap();
        let recs = decode(&r.records);
        assert!(recs.iter().any(|r| r.0 == o), "offset {o} missing");
    }
    assert!(log
        .read(leo, 100, i64::MAX, false)
        .unwrap()
        .records
        .is_empty());
}

#[test]
fn reopen_after_clean_close_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = small_config(2000);
    cfg.index_interval_bytes = 700; // an entry every few batches
    let mut log = open(dir.path(), cfg);
    fill(&mut log, 50, 3, 80, 1000);
    log.set_high_watermark(120);
    let before: Vec<_> = (0..150)
        .map(|o| log.read(o, 1, i64::MAX, true).unwrap().records)
        .collect();
    let bases = log.segment_base_offsets();
    let cfg = log.config().clone();
    log.close().unwrap();
    let first = snapshot(dir.path());
    // The index files hold exactly the in-memory entries: sizes are multiples of the entry size.
    for b in &bases {
        assert_eq!(
            fs::metadata(seg_path(dir.path(), *b, "index"))
                .unwrap()
                .len()
                % 8,
            0
        );
        assert_eq!(
            fs::metadata(seg_path(dir.path(), *b, "timeindex"))
                .unwrap()
                .len()
                % 12,
            0
        );
    }
    let log = PartitionLog::open(
        dir.path().to_path_buf(),
        cfg.clone(),
        clean_hint(0, 120, 150),
    )
    .unwrap();
    assert_eq!(log.log_end_offset(), 150);
    assert_eq!(log.high_watermark(), 120);
    assert_eq!(log.recovery_point(), 150);
    assert_eq!(log.segment_base_offsets(), bases);
    for (o, r) in before.iter().enumerate() {
        assert_eq!(&log.read(o as i64, 1, i64::MAX, true).unwrap().records, r);
    }
    assert_eq!(log.max_timestamp(), Some((1000 + 490 + 2, 149)));
    // A clean reopen and close changes no index byte (the active segment's tail is re-derived
    // exactly), and neither does a second one.
    log.close().unwrap();
    assert_eq!(snapshot(dir.path()), first);
    let log = PartitionLog::open(dir.path().to_path_buf(), cfg, clean_hint(0, 120, 150)).unwrap();
    log.close().unwrap();
    assert_eq!(snapshot(dir.path()), first);
}

fn snapshot(d: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_str().unwrap().contains("index"))
        .map(|e| {
            (
                e.file_name().into_string().unwrap(),
                fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn crash_with_garbage_appended_recovers_to_last_whole_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(1 << 20));
    fill(&mut log, 10, 2, 50, 0);
    log.flush().unwrap();
    let cfg = log.config().clone();
    let active = *log.segment_base_offsets().last().unwrap();
    drop(log); // no close: a crash
    let path = seg_path(dir.path(), active, "log");
    let good_len = fs::metadata(&path).unwrap().len();
    OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(&[0xAB; 100])
        .unwrap();
    let mut log =
        PartitionLog::open(dir.path().to_path_buf(), cfg.clone(), unclean_hint(0)).unwrap();
    assert_eq!(log.log_end_offset(), 20);
    assert_eq!(fs::metadata(&path).unwrap().len(), good_len);
    assert_readable(&log);
    // The log keeps working after recovery.
    let info = append(&mut log, &batch(2, 50, 0), 0);
    assert_eq!(info.first_offset, 20);
    assert_readable(&log);
}

#[test]
fn crash_with_torn_last_batch_is_truncated_never_served() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(1 << 20));
    fill(&mut log, 10, 2, 50, 0);
    let cfg = log.config().clone();
    drop(log);
    let path = seg_path(dir.path(), 0, "log");
    let len = fs::metadata(&path).unwrap().len();
    // Cut the last batch in half.
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 40)
        .unwrap();
    let log = PartitionLog::open(dir.path().to_path_buf(), cfg.clone(), unclean_hint(0)).unwrap();
    assert_eq!(log.log_end_offset(), 18);
    assert_readable(&log);
    // A flipped byte inside a batch (CRC-covered) also cuts the log there.
    drop(log);
    let mut bytes = fs::read(&path).unwrap();
    let one = bytes.len() / 9;
    let pos = one * 5 + 30; // inside the 6th batch, all batches have the same size
    bytes[pos] ^= 0x01;
    fs::write(&path, &bytes).unwrap();
    let log = PartitionLog::open(dir.path().to_path_buf(), cfg, unclean_hint(0)).unwrap();
    assert_eq!(log.log_end_offset(), 10);
    assert_readable(&log);
}

#[test]
fn corruption_in_a_middle_segment_deletes_later_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(1500));
    fill(&mut log, 40, 2, 100, 0);
    let bases = log.segment_base_offsets();
    assert!(bases.len() >= 4);
    let cfg = log.config().clone();
    drop(log);
    let victim = bases[2];
    let path = seg_path(dir.path(), victim, "log");
    let mut bytes = fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n - 3] ^= 0xff; // corrupt the last batch of segment 2
    fs::write(&path, &bytes).unwrap();
    // Recovery point at segment 1's base: segments 0 is trusted, 1.. are verified.
    let log = PartitionLog::open(dir.path().to_path_buf(), cfg, unclean_hint(bases[1])).unwrap();
    assert_eq!(log.segment_base_offsets(), bases[..3].to_vec());
    assert!(log.log_end_offset() > victim && log.log_end_offset() < bases[3]);
    for later in &bases[3..] {
        assert!(!seg_path(dir.path(), *later, "log").exists());
    }
    assert_readable(&log);
}

#[test]
fn trusted_segments_below_the_recovery_point_are_not_rescanned() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(1500));
    fill(&mut log, 20, 2, 100, 0);
    let bases = log.segment_base_offsets();
    let cfg = log.config().clone();
    drop(log);
    // Corrupt a byte in segment 0 that only a CRC check would notice.
    let path = seg_path(dir.path(), 0, "log");
    let mut bytes = fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n - 3] ^= 0xff;
    fs::write(&path, &bytes).unwrap();
    let log = PartitionLog::open(
        dir.path().to_path_buf(),
        cfg.clone(),
        unclean_hint(bases[1]),
    )
    .unwrap();
    assert_eq!(log.log_end_offset(), 40, "segment 0 is trusted: not cut");
    drop(log);
    // With the recovery point at 0 the same corruption is found and everything after is cut.
    let log = PartitionLog::open(dir.path().to_path_buf(), cfg, unclean_hint(0)).unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0]);
    assert!(log.log_end_offset() < bases[1]);
}

#[test]
fn deleted_or_corrupt_index_files_are_rebuilt_even_on_clean_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = small_config(8000);
    cfg.index_interval_bytes = 1000; // sparse: the final time entry of a segment is its own
    let mut log = open(dir.path(), cfg);
    fill(&mut log, 60, 3, 60, 5000);
    let bases = log.segment_base_offsets();
    assert!(bases.len() >= 3);
    let cfg = log.config().clone();
    log.close().unwrap();
    let idx0 = fs::read(seg_path(dir.path(), 0, "index")).unwrap();
    let tidx0 = fs::read(seg_path(dir.path(), 0, "timeindex")).unwrap();
    assert!(idx0.len() >= 16, "expected several index entries");
    fs::remove_file(seg_path(dir.path(), 0, "index")).unwrap();
    fs::write(seg_path(dir.path(), bases[2], "timeindex"), [1, 2, 3]).unwrap();
    let mut garbage = fs::read(seg_path(dir.path(), bases[1], "index")).unwrap();
    garbage.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]); // out of order entry
    fs::write(seg_path(dir.path(), bases[1], "index"), &garbage).unwrap();
    let log = PartitionLog::open(dir.path().to_path_buf(), cfg, clean_hint(0, 180, 180)).unwrap();
    assert_eq!(log.log_end_offset(), 180);
    assert_eq!(
        fs::read(seg_path(dir.path(), 0, "index")).unwrap(),
        idx0,
        "rebuilt identically"
    );
    assert_eq!(
        fs::read(seg_path(dir.path(), 0, "timeindex")).unwrap(),
        tidx0,
        "rebuilt identically"
    );
    assert_readable(&log);
    assert_eq!(
        log.offset_for_timestamp(5000 + 10 * 30)
            .unwrap()
            .map(|x| x.0),
        Some(90)
    );
    log.close().unwrap();
}

#[test]
fn stale_leftovers_are_cleaned_and_empty_dir_starts_at_log_start() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("00000000000000000000.log.deleted"), b"x").unwrap();
    fs::write(dir.path().join("00000000000000000007.index"), b"orphan!!").unwrap();
    fs::write(dir.path().join("00000000000000000000.log.swap"), b"x").unwrap();
    let hint = RecoveryHint {
        recovery_point: 0,
        log_start_offset: 42,
        high_watermark: 50,
        clean_shutdown: true,
    };
    let log = PartitionLog::open(dir.path().to_path_buf(), small_config(1 << 20), hint).unwrap();
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.high_watermark()
        ),
        (42, 42, 42)
    );
    let names: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        !names.iter().any(|n| n.ends_with(".deleted")
            || n.ends_with(".swap")
            || n.starts_with("00000000000000000007")),
        "{names:?}"
    );
    assert!(seg_path(dir.path(), 42, "log").exists());
}

#[test]
fn epochs_are_replayed_from_batches_when_the_checkpoint_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(1 << 20));
    append(&mut log, &batch(5, 10, 0), 0);
    append(&mut log, &batch(5, 10, 0), 3);
    append(&mut log, &batch(5, 10, 0), 7);
    let cfg = log.config().clone();
    drop(log);
    fs::remove_file(dir.path().join("leader-epoch-checkpoint")).unwrap();
    let log = PartitionLog::open(dir.path().to_path_buf(), cfg, unclean_hint(0)).unwrap();
    assert_eq!(log.epoch_entries(), vec![(0, 0), (3, 5), (7, 10)]);
    assert_eq!(log.end_offset_for_epoch(3), (3, 10));
}

#[test]
fn random_corruption_never_panics() {
    // Flip bytes at many positions of a closed log's files and reopen uncleanly and cleanly.
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(3000));
    fill(&mut log, 30, 2, 80, 0);
    let cfg = log.config().clone();
    log.close().unwrap();
    let pristine: Vec<(std::path::PathBuf, Vec<u8>)> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            let b = fs::read(&p).unwrap();
            (p, b)
        })
        .collect();
    for (i, (path, bytes)) in pristine.iter().enumerate() {
        for step in [1usize, 7, 13, 61] {
            let mut b = bytes.clone();
            let mut k = (i * 31) % b.len().max(1);
            while k < b.len() {
                b[k] = b[k].wrapping_add(0x5a);
                k += step * 37;
            }
            fs::write(path, &b).unwrap();
            for clean in [true, false] {
                let hint = RecoveryHint {
                    recovery_point: 0,
                    log_start_offset: 0,
                    high_watermark: 60,
                    clean_shutdown: clean,
                };
                if let Ok(log) = PartitionLog::open(dir.path().to_path_buf(), cfg.clone(), hint) {
                    for o in 0..log.log_end_offset() {
                        let _ = log.read(o, 1000, i64::MAX, true);
                    }
                    let _ = log.offset_for_timestamp(100);
                    let _ = log.max_timestamp();
                }
            }
            // Restore everything for the next round.
            for (p, orig) in &pristine {
                fs::write(p, orig).unwrap();
            }
            for e in fs::read_dir(dir.path()).unwrap() {
                let p = e.unwrap().path();
                if !pristine.iter().any(|(q, _)| *q == p) {
                    let _ = fs::remove_file(p);
                }
            }
        }
    }
}

/// A log of three segments written in epochs 0, 3 and 7 (a leader change in each), closed cleanly.
fn three_epoch_log(dir: &Path) -> runnel_log::LogConfig {
    let mut log = open(dir, small_config(1 << 20));
    append(&mut log, &batch(5, 10, 0), 0);
    log.roll().unwrap();
    append(&mut log, &batch(5, 10, 0), 3);
    log.roll().unwrap();
    append(&mut log, &batch(5, 10, 0), 7);
    append(&mut log, &batch(5, 10, 0), 7);
    assert_eq!(log.epoch_entries(), vec![(0, 0), (3, 5), (7, 10)]);
    let cfg = log.config().clone();
    log.close().unwrap();
    cfg
}

#[test]
fn a_lost_or_damaged_epoch_checkpoint_is_rebuilt_from_the_batches() {
    // Without its epoch history a follower sends no LastFetchedEpoch and a divergent tail
    // goes undetected; a leader answers OffsetForLeaderEpoch with nothing. The batches carry
    // the history, so a checkpoint that is gone or unreadable is rebuilt from them, also after
    // a clean shutdown (no segment is recovered) and below the recovery point.
    let checkpoint = |d: &Path| d.join("leader-epoch-checkpoint");
    type Damage = (&'static str, fn(&Path));
    let damages: [Damage; 3] = [
        ("removed", |p| fs::remove_file(p).unwrap()),
        ("zero-filled", |p| {
            let len = fs::metadata(p).unwrap().len() as usize;
            fs::write(p, vec![0u8; len]).unwrap()
        }),
        ("torn", |p| {
            let text = fs::read(p).unwrap();
            fs::write(p, &text[..text.len() - 5]).unwrap()
        }),
    ];
    for (what, damage) in damages {
        for hint in [clean_hint(0, 20, 20), unclean_hint(15)] {
            let dir = tempfile::tempdir().unwrap();
            let cfg = three_epoch_log(dir.path());
            damage(&checkpoint(dir.path()));
            let log = PartitionLog::open(dir.path().to_path_buf(), cfg.clone(), hint).unwrap();
            assert_eq!(
                log.epoch_entries(),
                vec![(0, 0), (3, 5), (7, 10)],
                "{what}, {hint:?}"
            );
            assert_eq!(log.end_offset_for_epoch(3), (3, 10), "{what}");
            drop(log);
            // And the rebuilt history is on disk again.
            let text = fs::read_to_string(checkpoint(dir.path())).unwrap();
            assert_eq!(text, "0\n3\n0 0\n3 5\n7 10\n", "{what}");
        }
    }
}

#[test]
fn recovering_a_segment_that_starts_mid_epoch_keeps_the_epoch_start() {
    // Epoch 3 starts at 5 and its batches go on in the next segment (from 8). Recovering only
    // that last segment sees epoch 3 first at 8: taking that as epoch 3's start (as `assign`
    // would) moves epoch 0's end from 5 to 8, and a follower with a divergent epoch-0 tail in
    // 5..8 would not be told to truncate it. Kafka's segment recovery only assigns an epoch
    // newer than the cache's latest.
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(1 << 20));
    append(&mut log, &batch(5, 10, 0), 0);
    append(&mut log, &batch(3, 10, 0), 3);
    log.roll().unwrap();
    append(&mut log, &batch(2, 10, 0), 3);
    append(&mut log, &batch(5, 10, 0), 7);
    assert_eq!(log.epoch_entries(), vec![(0, 0), (3, 5), (7, 10)]);
    let cfg = log.config().clone();
    drop(log);
    let log = PartitionLog::open(dir.path().to_path_buf(), cfg, unclean_hint(8)).unwrap();
    assert_eq!(log.epoch_entries(), vec![(0, 0), (3, 5), (7, 10)]);
    assert_eq!(log.end_offset_for_epoch(0), (0, 5));
}

#[test]
fn a_log_start_checkpoint_past_the_first_epoch_is_damaged_and_not_taken() {
    // One changed digit in `log-start-offset-checkpoint` (0 -> 12) would hide offsets 0..12,
    // and retention (and every follower, following the leader's log start) would then delete
    // them. DeleteRecords and retention move the first epoch's start with the log start, so
    // the epoch history bounds what the checkpoint can legitimately say.
    let dir = tempfile::tempdir().unwrap();
    let cfg = three_epoch_log(dir.path());
    let log = PartitionLog::open(
        dir.path().to_path_buf(),
        cfg.clone(),
        clean_hint(12, 20, 20),
    )
    .unwrap();
    assert_eq!(log.log_start_offset(), 0);
    assert_eq!(log.epoch_entries(), vec![(0, 0), (3, 5), (7, 10)]);
    assert_readable(&log);
    // A real DeleteRecords is kept: it moved the epoch history first.
    let mut log = log;
    log.delete_records_before(7).unwrap();
    assert_eq!(log.epoch_entries(), vec![(3, 7), (7, 10)]);
    log.close().unwrap();
    let log = PartitionLog::open(dir.path().to_path_buf(), cfg, clean_hint(7, 20, 20)).unwrap();
    assert_eq!(log.log_start_offset(), 7);
}

#[test]
fn a_damaged_time_index_entry_cannot_date_a_segment_for_deletion() {
    // A rolled segment of one batch has one time-index entry, its largest timestamp: nothing
    // to be out of order with. Damaged to an old time, time retention would delete the
    // segment with its records; the entry is checked against the batch header and rebuilt.
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = small_config(1 << 20);
    cfg.retention_ms = 1000;
    let mut log = open(dir.path(), cfg);
    for _ in 0..3 {
        append(&mut log, &batch(3, 10, 10_000), 0);
        log.roll().unwrap();
    }
    let cfg = log.config().clone();
    log.close().unwrap();
    let index = seg_path(dir.path(), 0, "timeindex");
    let mut bytes = fs::read(&index).unwrap();
    assert_eq!(bytes.len(), 12, "one entry");
    bytes[..8].copy_from_slice(&5i64.to_be_bytes());
    fs::write(&index, bytes).unwrap();
    let mut log = PartitionLog::open(dir.path().to_path_buf(), cfg, clean_hint(0, 9, 9)).unwrap();
    assert_eq!(log.enforce_retention(10_500).unwrap(), 0);
    assert_eq!(log.log_start_offset(), 0);
    assert_readable(&log);
}
