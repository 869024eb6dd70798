//! Log compaction (spec J.7): latest value per key, offsets kept, tombstones and their delete
//! horizon, compressed batches, crash safety of the swap, dirty ratio, cleaner checkpoint.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::Path;

use bytes::{Bytes, BytesMut};
use common::*;
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use proptest::prelude::*;
use runnel_log::{
    CompactionConfig, LogConfig, LogManager, PartitionLog, RecoveryHint, CLEANER_CHECKPOINT,
};

/// `(offset, key, value)` of a record as read back; `None` value = tombstone.
type Entry = (i64, Option<String>, Option<String>);

/// One batch of keyed records (`None` value = tombstone), timestamps `ts, ts+1, ...`.
fn kv_batch(entries: &[(&str, Option<&str>)], ts: i64, compression: Compression) -> Vec<u8> {
    let records: Vec<Record> = entries
        .iter()
        .enumerate()
        .map(|(i, (k, v))| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: i as i32 - 1,
            timestamp: ts + i as i64,
            key: Some(Bytes::copy_from_slice(k.as_bytes())),
            value: v.map(|v| Bytes::copy_from_slice(v.as_bytes())),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .unwrap();
    buf.to_vec()
}

fn text(b: Option<Bytes>) -> Option<String> {
    b.map(|b| String::from_utf8(b.to_vec()).unwrap())
}

/// Every record of the log from the log start to the LEO, decoded by kafka-protocol (an
/// independent decoder: CRCs, lengths and varints of rewritten batches are checked by it).
fn read_all_with_ts(log: &PartitionLog) -> Vec<(Entry, i64)> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    let leo = log.log_end_offset();
    while offset < leo {
        let r = log.read(offset, 1 << 20, leo, true).unwrap();
        if r.records.is_empty() {
            break;
        }
        let headers = batches_of(&r.records);
        let mut buf = r.records.clone();
        for set in RecordBatchDecoder::decode_all(&mut buf).unwrap() {
            for rec in set.records {
                out.push(((rec.offset, text(rec.key), text(rec.value)), rec.timestamp));
            }
        }
        offset = headers.last().unwrap().last_offset() + 1;
    }
    out
}

fn read_all(log: &PartitionLog) -> Vec<Entry> {
    read_all_with_ts(log).into_iter().map(|(e, _)| e).collect()
}

/// Kafka's rule as a model: below `clean_up_to` a record survives only if no later record
/// below `clean_up_to` has its key (tombstones are kept: tests drop them separately).
fn expected_after_clean(all: &[Entry], clean_up_to: i64) -> Vec<Entry> {
    let mut latest: HashMap<&Option<String>, i64> = HashMap::new();
    for (o, k, _) in all.iter().filter(|(o, _, _)| *o < clean_up_to) {
        latest.insert(k, *o);
    }
    all.iter()
        .filter(|(o, k, _)| *o >= clean_up_to || latest.get(k) == Some(o))
        .cloned()
        .collect()
}

/// The latest value per key (`None` = tombstone) of a list of entries.
fn latest_values(entries: &[Entry]) -> BTreeMap<String, Option<String>> {
    let mut m = BTreeMap::new();
    for (_, k, v) in entries {
        m.insert(k.clone().unwrap(), v.clone());
    }
    m
}

fn assert_strictly_increasing(entries: &[Entry]) {
    for w in entries.windows(2) {
        assert!(w[0].0 < w[1].0, "offsets not increasing: {w:?}");
    }
}

fn config(segment_bytes: u64) -> LogConfig {
    small_config(segment_bytes)
}

fn no_tombstone_expiry() -> CompactionConfig {
    CompactionConfig {
        delete_retention_ms: i64::MAX / 4,
        ..CompactionConfig::default()
    }
}

/// A log with `batches` batches of 4 records over 10 keys, many segments, ending with an
/// active segment holding a few records; HW = LEO. Deterministic for a given compression.
fn overwritten_log(dir: &Path, batches: usize, compression: Compression) -> PartitionLog {
    let mut log = open(dir, config(1500));
    for b in 0..batches {
        let entries: Vec<(String, String)> = (0..4)
            .map(|i| {
                let n = b * 4 + i;
                (format!("k{}", (n * 7) % 10), format!("v{n}"))
            })
            .collect();
        let refs: Vec<(&str, Option<&str>)> = entries
            .iter()
            .map(|(k, v)| (k.as_str(), Some(v.as_str())))
            .collect();
        append(
            &mut log,
            &kv_batch(&refs, 1000 + b as i64 * 10, compression),
            0,
        );
    }
    let leo = log.log_end_offset();
    log.set_high_watermark(leo);
    log
}

fn seg_file(dir: &Path, base: i64, ext: &str) -> std::path::PathBuf {
    dir.join(format!("{base:020}.{ext}"))
}

fn dir_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

#[test]
fn only_the_latest_value_per_key_survives_and_offsets_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = overwritten_log(dir.path(), 120, Compression::None);
    let before = read_all(&log);
    assert_eq!(before.len(), 480);
    let segments_before = log.num_segments();
    assert!(segments_before >= 10, "{segments_before}");
    let active_base = *log.segment_base_offsets().last().unwrap();
    let stats = log.compact(0, &no_tombstone_expiry()).unwrap();
    assert_eq!(stats.clean_up_to, active_base);
    let after = read_all(&log);
    let expected = expected_after_clean(&before, active_base);
    assert_eq!(after, expected);
    assert_strictly_increasing(&after);
    assert_eq!(latest_values(&after), latest_values(&before));
    assert_eq!(stats.records_removed, (before.len() - after.len()) as u64);
    assert!(stats.segments_rewritten > 0 && stats.bytes_after < stats.bytes_before);
    // Full segments cannot be grouped (Kafka groups by size before cleaning) ...
    assert_eq!(log.num_segments(), segments_before);
    assert_eq!(log.cleaner_checkpoint(), active_base);
    assert!(!dir_names(dir.path())
        .iter()
        .any(|n| n.ends_with(".cleaned") || n.ends_with(".swap")));
    // ... the next pass merges the now small neighbours, removing nothing more.
    let again = log.compact(0, &no_tombstone_expiry()).unwrap();
    assert_eq!(again.records_removed, 0);
    assert!(again.segments_rewritten > 0);
    assert!(
        log.num_segments() < segments_before,
        "{}",
        log.num_segments()
    );
    assert_eq!(read_all(&log), expected);
    // And then there is nothing left to do.
    let third = log.compact(0, &no_tombstone_expiry()).unwrap();
    assert_eq!((third.records_removed, third.segments_rewritten), (0, 0));
    assert_eq!(read_all(&log), expected);
    let cfg = log.config().clone();
    log.close().unwrap();
    for hint in [clean_hint(0, i64::MAX, i64::MAX), unclean_hint(0)] {
        let log = PartitionLog::open(dir.path().to_path_buf(), cfg.clone(), hint).unwrap();
        assert_eq!(read_all(&log), expected);
        // Every surviving offset is found by a read starting exactly there, and a read from
        // inside a gap starts at the next surviving record.
        for w in expected.windows(2).take(40) {
            let r = log.read(w[0].0, 1, i64::MAX, true).unwrap();
            assert!(batches_of(&r.records)[0].base_offset <= w[0].0);
            if w[1].0 > w[0].0 + 1 {
                let r = log.read(w[0].0 + 1, 1 << 20, i64::MAX, true).unwrap();
                let first = decode(&r.records)
                    .into_iter()
                    .map(|x| x.0)
                    .find(|&o| o > w[0].0);
                assert_eq!(first, Some(w[1].0));
            }
        }
    }
}

#[test]
fn the_active_segment_and_data_above_the_high_watermark_are_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = overwritten_log(dir.path(), 120, Compression::None);
    let before = read_all(&log);
    let bases = log.segment_base_offsets();
    // HW in the middle of the log: segments reaching past it are not cleanable.
    let hw = before[before.len() / 2].0;
    log.set_high_watermark(hw);
    let first_uncleanable = bases
        .iter()
        .copied()
        .zip(bases.iter().skip(1).copied())
        .find(|&(_, next)| next > hw)
        .map(|(b, _)| b)
        .unwrap();
    let untouched: Vec<(i64, Vec<u8>)> = bases
        .iter()
        .filter(|&&b| b >= first_uncleanable)
        .map(|&b| (b, fs::read(seg_file(dir.path(), b, "log")).unwrap()))
        .collect();
    let stats = log.compact(0, &no_tombstone_expiry()).unwrap();
    assert_eq!(stats.clean_up_to, first_uncleanable);
    for (b, bytes) in &untouched {
        assert_eq!(
            &fs::read(seg_file(dir.path(), *b, "log")).unwrap(),
            bytes,
            "segment {b}"
        );
    }
    let after = read_all(&log);
    assert_eq!(after, expected_after_clean(&before, first_uncleanable));
    assert!(after
        .iter()
        .filter(|e| e.0 >= first_uncleanable)
        .eq(before.iter().filter(|e| e.0 >= first_uncleanable)));
    // Nothing closed at all (one active segment): nothing to do.
    let dir2 = tempfile::tempdir().unwrap();
    let mut single = open(dir2.path(), config(1 << 20));
    append(
        &mut single,
        &kv_batch(&[("a", Some("1")), ("a", Some("2"))], 0, Compression::None),
        0,
    );
    single.set_high_watermark(2);
    let s = single.compact(0, &no_tombstone_expiry()).unwrap();
    assert_eq!(
        (s.segments_rewritten, s.records_removed, s.clean_up_to),
        (0, 0, 0)
    );
    assert_eq!(read_all(&single).len(), 2);
}

#[test]
fn tombstones_stay_for_delete_retention_then_go() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), config(1 << 20));
    let c = Compression::None;
    append(
        &mut log,
        &kv_batch(&[("a", Some("a1")), ("b", Some("b1"))], 100, c),
        0,
    );
    append(
        &mut log,
        &kv_batch(&[("a", None), ("c", Some("c1"))], 200, c),
        0,
    );
    append(&mut log, &kv_batch(&[("b", None)], 300, c), 0);
    log.roll().unwrap();
    append(&mut log, &kv_batch(&[("d", Some("d1"))], 400, c), 0);
    log.set_high_watermark(log.log_end_offset());
    let before = read_all_with_ts(&log);
    let cfg = CompactionConfig {
        delete_retention_ms: 1000,
        ..CompactionConfig::default()
    };
    let t0 = 10_000;
    log.compact(t0, &cfg).unwrap();
    let expected_kept: Vec<Entry> = vec![
        (2, Some("a".into()), None),
        (3, Some("c".into()), Some("c1".into())),
        (4, Some("b".into()), None),
        (5, Some("d".into()), Some("d1".into())),
    ];
    let after = read_all_with_ts(&log);
    assert_eq!(
        after.iter().map(|x| x.0.clone()).collect::<Vec<_>>(),
        expected_kept
    );
    // Record timestamps survive the delete-horizon rebase of the batch.
    for (e, ts) in &after {
        let orig = before.iter().find(|(b, _)| b.0 == e.0).unwrap();
        assert_eq!(*ts, orig.1, "timestamp of offset {}", e.0);
    }
    // The batches holding tombstones carry the delete horizon (attribute bit 6).
    let raw = log.read(0, 1 << 20, i64::MAX, true).unwrap().records;
    let hs = batches_of(&raw);
    let with_tombstone: Vec<_> = hs
        .iter()
        .filter(|h| h.base_offset == 2 || h.base_offset == 4)
        .collect();
    assert_eq!(with_tombstone.len(), 2);
    for h in with_tombstone {
        assert_ne!(h.attributes & 0x40, 0);
        assert_eq!(h.base_timestamp, t0 + 1000);
    }
    // Before the horizon: kept, and no pass is due for them.
    assert!(!log.needs_compaction(t0 + 999, &cfg));
    log.compact(t0 + 999, &cfg).unwrap();
    assert_eq!(read_all(&log), expected_kept);
    // At the horizon a pass is due even without dirty data, and drops them.
    assert!(log.needs_compaction(t0 + 1000, &cfg));
    let stats = log.compact(t0 + 1000, &cfg).unwrap();
    assert_eq!(stats.records_removed, 2);
    assert_eq!(
        read_all(&log),
        vec![
            (3, Some("c".into()), Some("c1".into())),
            (5, Some("d".into()), Some("d1".into())),
        ]
    );
    assert!(!log.needs_compaction(t0 + 5000, &cfg));
}

#[test]
fn records_without_a_key_are_dropped_and_tombstones_in_dirty_data_keep_older_values_out() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), config(1 << 20));
    // A keyless record, built by hand through kafka-protocol.
    let rec = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 5,
        key: None,
        value: Some(Bytes::from_static(b"x")),
        headers: IndexMap::new(),
    };
    let mut b = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut b,
        [&rec],
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    append(&mut log, &b, 0);
    append(
        &mut log,
        &kv_batch(&[("k", Some("1"))], 6, Compression::None),
        0,
    );
    log.roll().unwrap();
    log.set_high_watermark(2);
    let stats = log.compact(0, &no_tombstone_expiry()).unwrap();
    assert_eq!(stats.records_removed, 1);
    assert_eq!(
        read_all(&log),
        vec![(1, Some("k".into()), Some("1".into()))]
    );
}

#[test]
fn compressed_batches_compact_correctly_and_keep_their_codec() {
    for (compression, codec) in [
        (Compression::Gzip, 1u8),
        (Compression::Snappy, 2),
        (Compression::Lz4, 3),
        (Compression::Zstd, 4),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut log = overwritten_log(dir.path(), 150, compression);
        let before = read_all(&log);
        let active_base = *log.segment_base_offsets().last().unwrap();
        let stats = log.compact(0, &no_tombstone_expiry()).unwrap();
        assert!(stats.records_removed > 0, "{compression:?}");
        let after = read_all(&log);
        assert_eq!(
            after,
            expected_after_clean(&before, active_base),
            "{compression:?}"
        );
        let raw: Vec<u8> = log
            .segment_base_offsets()
            .iter()
            .flat_map(|&b| fs::read(seg_file(dir.path(), b, "log")).unwrap())
            .collect();
        let hs = batches_of(&raw);
        assert!(
            hs.iter().all(|h| h.compression() == codec),
            "{compression:?}"
        );
        // Batches that lost records were re-encoded: fewer records than offsets.
        assert!(hs
            .iter()
            .any(|h| i64::from(h.record_count) < h.offset_count()));
    }
}

#[test]
fn fully_kept_batches_are_copied_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), config(1 << 20));
    let keep = kv_batch(&[("x", Some("1")), ("y", Some("2"))], 50, Compression::Gzip);
    append(
        &mut log,
        &kv_batch(&[("a", Some("old"))], 10, Compression::Gzip),
        0,
    );
    append(&mut log, &keep, 0);
    append(
        &mut log,
        &kv_batch(&[("a", Some("new"))], 60, Compression::Gzip),
        0,
    );
    log.roll().unwrap();
    log.set_high_watermark(4);
    log.compact(0, &no_tombstone_expiry()).unwrap();
    let raw = fs::read(seg_file(dir.path(), 0, "log")).unwrap();
    let hs = batches_of(&raw);
    assert_eq!(
        hs.iter().map(|h| h.base_offset).collect::<Vec<_>>(),
        vec![1, 3]
    );
    // The kept batch is the stored one: offsets patched by the append, CRC untouched.
    let stored = &raw[..hs[0].total_size()];
    assert_eq!(&stored[16..], &keep[16..]);
}

#[test]
fn a_rebuilt_batch_keeps_headers_log_append_time_producer_fields_and_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), config(1 << 20));
    let mut headers = IndexMap::new();
    headers.insert("trace".into(), Some(Bytes::from_static(b"\xff\x00")));
    headers.insert("empty".into(), None);
    let rec = |offset: i64, key: &'static str| Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: 42,
        producer_epoch: 3,
        timestamp_type: TimestampType::Creation,
        offset,
        sequence: 10 + offset as i32,
        timestamp: 500 + offset,
        key: Some(Bytes::from_static(key.as_bytes())),
        value: Some(Bytes::from_static(b"v")),
        headers: headers.clone(),
    };
    let mut b = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut b,
        [&rec(0, "a"), &rec(1, "b"), &rec(2, "c")],
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::Zstd,
        },
    )
    .unwrap();
    // Turn it into a LogAppendTime batch (bit 3, max timestamp = append time), new CRC.
    let mut b = b.to_vec();
    b[22] |= 0x08;
    b[35..43].copy_from_slice(&777i64.to_be_bytes());
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    append(&mut log, &b, 5);
    append(
        &mut log,
        &kv_batch(&[("b", Some("newer"))], 900, Compression::None),
        5,
    );
    log.roll().unwrap();
    log.set_high_watermark(4);
    assert_eq!(
        log.compact(0, &no_tombstone_expiry())
            .unwrap()
            .records_removed,
        1
    );
    let raw = log.read(0, 1 << 20, i64::MAX, true).unwrap().records;
    let h = batches_of(&raw)[0];
    assert_eq!(
        (h.base_offset, h.last_offset_delta, h.record_count),
        (0, 2, 2)
    );
    assert!(h.timestamp_type_is_log_append());
    assert_eq!(h.compression(), 4);
    assert_eq!(h.max_timestamp, 777);
    assert_eq!(
        (h.producer_id, h.producer_epoch, h.base_sequence),
        (42, 3, 10)
    );
    assert_eq!(h.partition_leader_epoch, 5);
    let mut buf = raw.clone();
    let set = RecordBatchDecoder::decode(&mut buf).unwrap();
    let got: Vec<(i64, i32, Option<Bytes>)> = set
        .records
        .iter()
        .map(|r| (r.offset, r.sequence, r.key.clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            (0, 10, Some(Bytes::from_static(b"a"))),
            (2, 12, Some(Bytes::from_static(b"c")))
        ]
    );
    assert!(set.records.iter().all(|r| r.headers == headers));
}

/// Builds the log every crash scenario starts from, runs a pass without finishing it (as if
/// the process died right after writing the `.cleaned` files) and returns the expected data
/// before and after compaction.
fn crashed_mid_clean(dir: &Path) -> (Vec<Entry>, Vec<Entry>, Vec<i64>) {
    let log = overwritten_log(dir, 80, Compression::Lz4);
    let before = read_all(&log);
    let old_bases = log.segment_base_offsets();
    let active_base = *old_bases.last().unwrap();
    let plan = log
        .prepare_compaction(0, &no_tombstone_expiry())
        .unwrap()
        .unwrap();
    let outcome = plan.run().unwrap();
    std::mem::forget(outcome); // the crash: nothing after this runs
    drop(log);
    (
        before.clone(),
        expected_after_clean(&before, active_base),
        old_bases,
    )
}

fn rename_all(dir: &Path, from: &str, to: &str, except: &[&str]) {
    for name in dir_names(dir) {
        if let Some(stem) = name.strip_suffix(from) {
            if !except.iter().any(|e| name.ends_with(e)) {
                fs::rename(dir.join(&name), dir.join(format!("{stem}{to}"))).unwrap();
            }
        }
    }
}

#[test]
fn a_crash_at_every_step_of_the_swap_recovers_to_the_old_or_the_new_segments() {
    type Step = fn(&Path, &[i64]);
    let steps: Vec<(&str, Step, bool)> = vec![
        ("cleaned files written", |_, _| {}, false),
        (
            "indexes and marker committed, log not",
            |d, _| rename_all(d, ".cleaned", ".swap", &[".log.cleaned"]),
            false,
        ),
        (
            "committed",
            |d, _| rename_all(d, ".cleaned", ".swap", &[]),
            true,
        ),
        (
            "committed, old segments half renamed to .deleted",
            |d, bases| {
                rename_all(d, ".cleaned", ".swap", &[]);
                for b in bases.iter().take(bases.len() / 2) {
                    let p = seg_file(d, *b, "log");
                    if p.exists() {
                        fs::rename(&p, d.join(format!("{b:020}.log.deleted"))).unwrap();
                    }
                }
            },
            true,
        ),
        (
            "committed, old gone, indexes installed, log not",
            |d, bases| {
                rename_all(d, ".cleaned", ".swap", &[]);
                let swaps: Vec<i64> = dir_names(d)
                    .iter()
                    .filter_map(|n| n.strip_suffix(".log.swap").map(|s| s.parse().unwrap()))
                    .collect();
                for b in &bases[..bases.len() - 1] {
                    for ext in ["log", "index", "timeindex"] {
                        let _ = fs::remove_file(seg_file(d, *b, ext));
                    }
                }
                for b in swaps {
                    for ext in ["index", "timeindex"] {
                        fs::rename(seg_file(d, b, &format!("{ext}.swap")), seg_file(d, b, ext))
                            .unwrap();
                    }
                }
            },
            true,
        ),
        (
            "everything installed, markers left",
            |d, bases| {
                rename_all(d, ".cleaned", ".swap", &[]);
                let swaps: Vec<i64> = dir_names(d)
                    .iter()
                    .filter_map(|n| n.strip_suffix(".log.swap").map(|s| s.parse().unwrap()))
                    .collect();
                for b in &bases[..bases.len() - 1] {
                    for ext in ["log", "index", "timeindex"] {
                        let _ = fs::remove_file(seg_file(d, *b, ext));
                    }
                }
                for b in swaps {
                    for ext in ["index", "timeindex", "log"] {
                        fs::rename(seg_file(d, b, &format!("{ext}.swap")), seg_file(d, b, ext))
                            .unwrap();
                    }
                }
            },
            true,
        ),
    ];
    for (name, step, committed) in steps {
        let dir = tempfile::tempdir().unwrap();
        let (before, after, bases) = crashed_mid_clean(dir.path());
        step(dir.path(), &bases[..bases.len() - 1]);
        for hint in [unclean_hint(0), clean_hint(0, i64::MAX, i64::MAX)] {
            let log = PartitionLog::open(dir.path().to_path_buf(), config(1500), hint).unwrap();
            let got = read_all(&log);
            let want = if committed { &after } else { &before };
            assert_eq!(&got, want, "step: {name}");
            assert_eq!(latest_values(&got), latest_values(&before), "step: {name}");
            assert_strictly_increasing(&got);
            let leftovers: Vec<String> = dir_names(dir.path())
                .into_iter()
                .filter(|n| n.contains(".cleaned") || n.contains(".swap") || n.contains(".deleted"))
                .collect();
            assert!(leftovers.is_empty(), "step {name}: {leftovers:?}");
        }
    }
}

#[test]
fn a_pass_that_raced_with_truncation_is_discarded() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = overwritten_log(dir.path(), 80, Compression::None);
    let before = read_all(&log);
    let plan = log
        .prepare_compaction(0, &no_tombstone_expiry())
        .unwrap()
        .unwrap();
    let outcome = plan.run().unwrap();
    // A follower truncation into the cleaned range happens meanwhile.
    let cut = before[before.len() / 12 * 4].0; // a batch boundary (4 records per batch)
    log.truncate_to(cut).unwrap();
    let stats = log.finish_compaction(outcome).unwrap();
    assert_eq!(stats.segments_rewritten, 0);
    assert_eq!(log.cleaner_checkpoint(), 0);
    let want: Vec<Entry> = before.into_iter().filter(|e| e.0 < cut).collect();
    assert_eq!(read_all(&log), want);
    assert!(!dir_names(dir.path()).iter().any(|n| n.contains(".cleaned")));
}

#[test]
fn appends_during_an_unlocked_pass_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = overwritten_log(dir.path(), 80, Compression::None);
    let before = read_all(&log);
    let active_base = *log.segment_base_offsets().last().unwrap();
    let plan = log
        .prepare_compaction(0, &no_tombstone_expiry())
        .unwrap()
        .unwrap();
    let outcome = plan.run().unwrap();
    append(
        &mut log,
        &kv_batch(&[("k1", Some("late"))], 9_999, Compression::None),
        0,
    );
    log.roll().unwrap();
    let stats = log.finish_compaction(outcome).unwrap();
    assert!(stats.segments_rewritten > 0);
    let got = read_all(&log);
    let mut want = expected_after_clean(&before, active_base);
    want.push((
        before.last().unwrap().0 + 1,
        Some("k1".into()),
        Some("late".into()),
    ));
    assert_eq!(got, want);
}

#[test]
fn a_bounded_offset_map_cleans_in_several_passes() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = overwritten_log(dir.path(), 120, Compression::None);
    let before = read_all(&log);
    let active_base = *log.segment_base_offsets().last().unwrap();
    let cfg = no_tombstone_expiry();
    let mut passes = 0;
    while log.cleaner_checkpoint() < active_base {
        let plan = log.prepare_compaction_bounded(0, &cfg, 6).unwrap().unwrap();
        let stats = log.finish_compaction(plan.run().unwrap()).unwrap();
        assert!(stats.clean_up_to > 0);
        passes += 1;
        assert!(passes < 200);
        assert_eq!(latest_values(&read_all(&log)), latest_values(&before));
    }
    assert!(passes > 1);
    // One more full pass gives the same result as a single unbounded one.
    log.compact(0, &cfg).unwrap();
    let dir2 = tempfile::tempdir().unwrap();
    let mut reference = overwritten_log(dir2.path(), 120, Compression::None);
    reference.compact(0, &cfg).unwrap();
    let a = read_all(&log);
    assert_eq!(latest_values(&a), latest_values(&read_all(&reference)));
    assert_strictly_increasing(&a);
}

#[test]
fn dirty_ratio_and_needs_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), config(600));
    assert_eq!(log.dirty_ratio(), 0.0);
    let cfg = no_tombstone_expiry();
    assert!(!log.needs_compaction(0, &cfg));
    for i in 0..30 {
        append(
            &mut log,
            &kv_batch(
                &[("k", Some("valuevaluevalue"))],
                1_000 + i,
                Compression::None,
            ),
            0,
        );
    }
    // Nothing below the HW yet: nothing cleanable.
    assert_eq!(log.dirty_ratio(), 0.0);
    assert!(!log.needs_compaction(2_000, &cfg));
    log.set_high_watermark(log.log_end_offset());
    assert_eq!(log.dirty_ratio(), 1.0);
    assert!(log.needs_compaction(2_000, &cfg));
    // min.compaction.lag.ms: segments with records newer than the lag are not cleanable.
    let lagged = CompactionConfig {
        min_compaction_lag_ms: 10_000,
        ..cfg
    };
    assert!(!log.needs_compaction(2_000, &lagged));
    assert!(log.needs_compaction(20_000, &lagged));
    log.compact(2_000, &cfg).unwrap();
    assert_eq!(log.dirty_ratio(), 0.0);
    assert!(!log.needs_compaction(2_000, &cfg));
    // New dirty segments: ratio = dirty bytes / (clean + dirty) bytes of closed segments.
    for i in 0..30 {
        append(
            &mut log,
            &kv_batch(
                &[("k", Some("valuevaluevalue"))],
                3_000 + i,
                Compression::None,
            ),
            0,
        );
    }
    log.set_high_watermark(log.log_end_offset());
    let bases = log.segment_base_offsets();
    let size = |b: i64| fs::metadata(seg_file(dir.path(), b, "log")).unwrap().len();
    let cp = log.cleaner_checkpoint();
    let closed = &bases[..bases.len() - 1];
    let clean: u64 = closed
        .iter()
        .zip(&bases[1..])
        .filter(|(_, &n)| n <= cp)
        .map(|(&b, _)| size(b))
        .sum();
    let dirty: u64 = closed
        .iter()
        .zip(&bases[1..])
        .filter(|(_, &n)| n > cp)
        .map(|(&b, _)| size(b))
        .sum();
    assert!(clean > 0 && dirty > 0);
    let ratio = dirty as f64 / (clean + dirty) as f64;
    assert!(
        (log.dirty_ratio() - ratio).abs() < 1e-9,
        "{} vs {ratio}",
        log.dirty_ratio()
    );
    let above = CompactionConfig {
        min_cleanable_dirty_ratio: ratio + 0.01,
        ..cfg
    };
    let below = CompactionConfig {
        min_cleanable_dirty_ratio: ratio - 0.01,
        ..cfg
    };
    assert!(!log.needs_compaction(5_000, &above));
    assert!(log.needs_compaction(5_000, &below));
    // max.compaction.lag.ms: measured from the first batch of the first dirty segment.
    let oldest_dirty = read_all_with_ts(&log)
        .into_iter()
        .find(|(e, _)| e.0 >= cp)
        .unwrap()
        .1;
    let overdue = CompactionConfig {
        max_compaction_lag_ms: 1_000,
        ..above
    };
    assert!(!log.needs_compaction(oldest_dirty + 1_000, &overdue));
    assert!(log.needs_compaction(oldest_dirty + 1_001, &overdue));
}

#[test]
fn cleaner_checkpoint_round_trips_through_the_log_dir() {
    let dir = tempfile::tempdir().unwrap();
    let topic_id = uuid::Uuid::new_v4();
    let checkpoint;
    {
        let m = LogManager::open(dir.path().to_path_buf(), config(600)).unwrap();
        let log = m
            .get_or_create("compacted", 0, topic_id, config(600))
            .unwrap();
        m.get_or_create("other", 1, topic_id, config(600)).unwrap();
        {
            let mut l = log.lock();
            for i in 0..30 {
                append(
                    &mut l,
                    &kv_batch(&[("k", Some("valuevaluevalue"))], i, Compression::None),
                    0,
                );
            }
            let leo = l.log_end_offset();
            l.set_high_watermark(leo);
            checkpoint = l
                .compact(0, &CompactionConfig::default())
                .unwrap()
                .clean_up_to;
        }
        assert!(checkpoint > 0);
        assert_eq!(m.cleaner_checkpoint("compacted", 0), Some(checkpoint));
        assert_eq!(m.cleaner_checkpoint("other", 1), Some(0));
        assert_eq!(m.cleaner_checkpoint("missing", 0), None);
        m.checkpoint().unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join(CLEANER_CHECKPOINT)).unwrap(),
            format!("0\n1\ncompacted 0 {checkpoint}\n")
        );
        m.shutdown().unwrap();
    }
    let m = LogManager::open(dir.path().to_path_buf(), config(600)).unwrap();
    assert_eq!(m.cleaner_checkpoint("compacted", 0), Some(checkpoint));
    assert_eq!(m.cleaner_checkpoint("other", 1), Some(0));
    // Truncation below the checkpoint pulls it back.
    let log = m.get("compacted", 0).unwrap();
    log.lock().truncate_to(2).unwrap();
    assert!(m.cleaner_checkpoint("compacted", 0).unwrap() <= 2);
    // An unreadable checkpoint only means cleaning from the start.
    m.shutdown().unwrap();
    fs::write(dir.path().join(CLEANER_CHECKPOINT), "garbage").unwrap();
    let m = LogManager::open(dir.path().to_path_buf(), config(600)).unwrap();
    assert_eq!(m.cleaner_checkpoint("compacted", 0), Some(0));
}

#[test]
fn a_follower_replicates_a_compacted_log_with_its_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let mut leader = overwritten_log(dir.path(), 60, Compression::None);
    leader.compact(0, &no_tombstone_expiry()).unwrap();
    let want = read_all(&leader);
    let fdir = tempfile::tempdir().unwrap();
    let mut follower = open(fdir.path(), config(1500));
    let mut offset = 0;
    while offset < leader.log_end_offset() {
        let r = leader.read(offset, 1 << 20, i64::MAX, true).unwrap();
        let info = follower.append_as_follower(&r.records).unwrap().unwrap();
        offset = info.last_offset + 1;
    }
    follower.set_high_watermark(follower.log_end_offset());
    assert_eq!(read_all(&follower), want);
    // Going backwards is still refused.
    let r = leader.read(0, 1 << 20, i64::MAX, true).unwrap();
    assert!(follower.append_as_follower(&r.records).is_err());
}

#[derive(Debug, Clone)]
enum Op {
    /// Keys and values (`None` = tombstone) of one batch.
    Append(Vec<(u8, Option<u8>)>, u8),
    Roll,
    /// Advance the clock by this much, then compact.
    Compact(i64),
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (prop::collection::vec((0u8..8, prop::option::weighted(0.85, 0u8..50)), 1..6), 0u8..5)
            .prop_map(|(kv, c)| Op::Append(kv, c)),
        1 => Just(Op::Roll),
        2 => (0i64..3_000).prop_map(Op::Compact),
        1 => Just(Op::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn compaction_preserves_the_latest_value_of_every_key(ops in prop::collection::vec(op(), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(700);
        let mut log = open(dir.path(), cfg.clone());
        let ccfg = CompactionConfig { delete_retention_ms: 2_000, ..CompactionConfig::default() };
        let mut model: HashMap<String, Option<String>> = HashMap::new();
        let mut now = 1_000i64;
        let codecs = [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];
        for op in ops {
            match op {
                Op::Append(kv, c) => {
                    let owned: Vec<(String, Option<String>)> = kv
                        .iter()
                        .map(|(k, v)| (format!("k{k}"), v.map(|v| format!("v{v}"))))
                        .collect();
                    let refs: Vec<(&str, Option<&str>)> =
                        owned.iter().map(|(k, v)| (k.as_str(), v.as_deref())).collect();
                    append(&mut log, &kv_batch(&refs, now, codecs[c as usize]), 0);
                    for (k, v) in owned {
                        model.insert(k, v);
                    }
                }
                Op::Roll => log.roll().unwrap(),
                Op::Compact(dt) => {
                    now += dt;
                    let leo = log.log_end_offset();
                    log.set_high_watermark(leo);
                    log.compact(now, &ccfg).unwrap();
                }
                Op::Reopen => {
                    let (cp, hw) = (log.cleaner_checkpoint(), log.high_watermark());
                    log.close().unwrap();
                    log = PartitionLog::open(
                        dir.path().to_path_buf(),
                        cfg.clone(),
                        RecoveryHint { recovery_point: 0, log_start_offset: 0, high_watermark: hw, clean_shutdown: false },
                    )
                    .unwrap();
                    log.set_cleaner_checkpoint(cp);
                }
            }
            let entries = read_all(&log);
            assert_strictly_increasing(&entries);
            let got = latest_values(&entries);
            for (k, v) in &model {
                match (v, got.get(k)) {
                    (Some(v), Some(Some(g))) => prop_assert_eq!(v, g),
                    // A deleted key: its tombstone is still there or it is gone entirely.
                    (None, None) | (None, Some(None)) => {}
                    (want, g) => prop_assert!(false, "key {}: model {:?}, log {:?}", k, want, g),
                }
            }
            for k in got.keys() {
                prop_assert!(model.contains_key(k), "unknown key {}", k);
            }
        }
    }
}

/// Found by the red-team review: a committed swap's range marker was trusted as is, and a
/// damaged end (a larger number) deleted the live segments after the group, the active one
/// included. A legit end is the base of the segment after the group (live, or a later group's
/// swap); any other is damage, and the swap is ignored as uncommitted (the old segments are
/// still all there when the marker is read).
#[test]
fn a_damaged_swap_marker_deletes_no_segment_outside_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let (before, _after, _bases) = crashed_mid_clean(dir.path());
    rename_all(dir.path(), ".cleaned", ".swap", &[]);
    let markers: Vec<String> = dir_names(dir.path())
        .into_iter()
        .filter(|n| n.ends_with(".replaces.swap"))
        .collect();
    assert!(!markers.is_empty());
    for m in &markers {
        fs::write(dir.path().join(m), "99999999\n").unwrap();
    }
    let log = PartitionLog::open(dir.path().to_path_buf(), config(1500), unclean_hint(0)).unwrap();
    let got = read_all(&log);
    assert_eq!(got, before);
}
