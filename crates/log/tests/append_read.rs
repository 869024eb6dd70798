//! Appends and reads through a PartitionLog with real Kafka batches.

mod common;

use common::*;
use kafka_protocol::records::Compression;
use proptest::prelude::*;
use runnel_log::batch::BatchHeader;
use runnel_log::{LogError, PartitionLog};

#[test]
fn offsets_are_assigned_densely_and_batches_patched() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(1 << 20));
    let a = append(&mut log, &batch(3, 10, 1000), 5);
    let b = append(&mut log, &batch(2, 10, 2000), 5);
    assert_eq!((a.first_offset, a.last_offset), (0, 2));
    assert_eq!((b.first_offset, b.last_offset), (3, 4));
    assert_eq!(b.max_timestamp, 2001);
    assert_eq!(b.offset_of_max_timestamp, 4);
    assert_eq!(log.log_end_offset(), 5);
    let r = log.read(0, 1 << 20, i64::MAX, false).unwrap();
    let hs = batches_of(&r.records);
    assert_eq!(hs.len(), 2);
    assert_eq!((hs[0].base_offset, hs[0].partition_leader_epoch), (0, 5));
    assert_eq!((hs[1].base_offset, hs[1].partition_leader_epoch), (3, 5));
    let recs = decode(&r.records);
    assert_eq!(
        recs.iter().map(|r| r.0).collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 4]
    );
    assert_eq!(r.log_end_offset, 5);
    assert_eq!(log.latest_epoch(), Some(5));
}

#[test]
fn payload_is_stored_byte_for_byte_including_compressed_batches() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(1 << 20));
    let mut originals = Vec::new();
    for (i, c) in [
        Compression::None,
        Compression::Gzip,
        Compression::Zstd,
        Compression::Lz4,
        Compression::Snappy,
    ]
    .into_iter()
    .enumerate()
    {
        let b = batch_with(20, 100, 1000 + i as i64, c);
        let info = append(&mut log, &b, 1);
        originals.push((info.first_offset, b));
    }
    for (first, original) in &originals {
        let r = log.read(*first, 1, i64::MAX, true).unwrap();
        assert_eq!(r.records.len(), original.len());
        // Only the base offset (bytes 0..8) and leader epoch (12..16) differ.
        assert_eq!(&r.records[8..12], &original[8..12]);
        assert_eq!(&r.records[16..], &original[16..]);
        assert_eq!(
            i64::from_be_bytes(r.records[0..8].try_into().unwrap()),
            *first
        );
        let h = BatchHeader::parse(&r.records).unwrap();
        assert_eq!(h.partition_leader_epoch, 1);
    }
    // kafka-protocol decodes (and decompresses) what we serve, with our offsets.
    let all = log.read(0, 1 << 20, i64::MAX, false).unwrap();
    let offsets: Vec<i64> = decode(&all.records).iter().map(|r| r.0).collect();
    assert_eq!(offsets, (0..100).collect::<Vec<_>>());
}

#[test]
fn round_trip_across_many_rolls_and_read_at_every_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(2048));
    let mut sizes = Vec::new();
    for i in 0..120 {
        let n = 1 + i % 5;
        let b = batch(n, 30 + (i * 7) % 90, 10_000 + i as i64);
        sizes.push((log.log_end_offset(), n as i64, b.len()));
        append(&mut log, &b, 0);
    }
    assert!(log.num_segments() > 20, "segments: {}", log.num_segments());
    let bases = log.segment_base_offsets();
    assert!(bases.windows(2).all(|w| w[0] < w[1]));
    let leo = log.log_end_offset();
    for offset in 0..leo {
        let r = log.read(offset, 1, i64::MAX, true).unwrap();
        let hs = batches_of(&r.records);
        assert_eq!(hs.len(), 1);
        assert!(
            hs[0].base_offset <= offset && offset <= hs[0].last_offset(),
            "offset {offset}"
        );
        let (base, n, len) = sizes
            .iter()
            .copied()
            .find(|(b, n, _)| *b <= offset && offset < b + n)
            .unwrap();
        assert_eq!(
            (
                hs[0].base_offset,
                hs[0].record_count as i64,
                r.records.len()
            ),
            (base, n, len)
        );
    }
    // Reading everything segment by segment gives every offset exactly once.
    let mut next = 0;
    let mut seen = Vec::new();
    while next < leo {
        let r = log.read(next, 1 << 20, i64::MAX, false).unwrap();
        assert!(!r.records.is_empty());
        for (o, _, _) in decode(&r.records) {
            seen.push(o);
        }
        next = batches_of(&r.records).last().unwrap().last_offset() + 1;
    }
    assert_eq!(seen, (0..leo).collect::<Vec<_>>());
    // Each segment's files follow Kafka's naming.
    for base in bases {
        for ext in ["log", "index", "timeindex"] {
            assert!(dir.path().join(format!("{base:020}.{ext}")).exists());
        }
    }
}

#[test]
fn read_bounds_max_offset_max_bytes_and_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(1 << 20));
    let infos = fill(&mut log, 10, 4, 50, 0); // offsets 0..40, batches of 4
    let one = infos[0];
    let batch_len = log.read(0, 1, i64::MAX, true).unwrap().records.len();
    // max_offset: never a batch whose last offset >= max_offset.
    let r = log.read(0, 1 << 20, 10, false).unwrap();
    assert_eq!(batches_of(&r.records).last().unwrap().last_offset(), 7);
    let r = log.read(0, 1 << 20, 12, false).unwrap();
    assert_eq!(batches_of(&r.records).last().unwrap().last_offset(), 11);
    assert!(log.read(8, 1 << 20, 10, false).unwrap().records.is_empty());
    assert!(log.read(12, 1 << 20, 12, false).unwrap().records.is_empty());
    // max_bytes: whole batches only; KIP-74 min_one_batch.
    let r = log.read(0, batch_len * 3 + 5, i64::MAX, false).unwrap();
    assert_eq!(r.records.len(), batch_len * 3);
    assert!(log
        .read(0, batch_len - 1, i64::MAX, false)
        .unwrap()
        .records
        .is_empty());
    assert_eq!(
        log.read(0, batch_len - 1, i64::MAX, true)
            .unwrap()
            .records
            .len(),
        batch_len
    );
    // LEO: empty; beyond or below: out of range.
    assert!(log
        .read(40, 1 << 20, i64::MAX, false)
        .unwrap()
        .records
        .is_empty());
    let e = log.read(41, 1 << 20, i64::MAX, false).unwrap_err();
    assert!(matches!(
        e,
        LogError::OffsetOutOfRange {
            offset: 41,
            log_start: 0,
            log_end: 40
        }
    ));
    assert_eq!(e.kafka_error_code(), 1);
    assert!(log.read(-1, 10, i64::MAX, false).is_err());
    assert_eq!(one.log_start_offset, 0);
}

#[test]
fn high_watermark_is_clamped() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(1 << 20));
    fill(&mut log, 3, 2, 10, 0);
    log.set_high_watermark(100);
    assert_eq!(log.high_watermark(), 6);
    log.set_high_watermark(-5);
    assert_eq!(log.high_watermark(), 0);
    log.set_high_watermark(4);
    assert_eq!(
        log.read(0, 1 << 20, log.high_watermark(), false)
            .unwrap()
            .high_watermark,
        4
    );
}

#[test]
fn follower_append_keeps_offsets_and_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let leader_dir = tempfile::tempdir().unwrap();
    let mut leader = open(leader_dir.path(), small_config(1 << 20));
    append(&mut leader, &batch(3, 10, 0), 1);
    append(&mut leader, &batch(3, 10, 0), 2);
    let fetched = leader.read(0, 1 << 20, i64::MAX, false).unwrap().records;
    let mut follower = open(dir.path(), small_config(1 << 20));
    // A fetch cut mid-batch: the partial tail is ignored.
    let info = follower
        .append_as_follower(&fetched[..fetched.len() - 5])
        .unwrap()
        .unwrap();
    assert_eq!((info.first_offset, info.last_offset), (0, 2));
    let info = follower
        .append_as_follower(&fetched[..])
        .map(|_| ())
        .unwrap_err();
    assert!(matches!(
        info,
        LogError::UnexpectedOffset {
            expected: 3,
            got: 0
        }
    ));
    let second = leader.read(3, 1 << 20, i64::MAX, false).unwrap().records;
    follower.append_as_follower(&second).unwrap().unwrap();
    assert_eq!(follower.log_end_offset(), 6);
    assert_eq!(follower.epoch_entries(), vec![(1, 0), (2, 3)]);
    assert_eq!(
        follower.read(0, 1 << 20, i64::MAX, false).unwrap().records,
        fetched
    );
    assert_eq!(follower.append_as_follower(&[]).unwrap(), None);
    let mut corrupt = second.to_vec();
    let n = corrupt.len();
    corrupt[n - 1] ^= 1;
    follower.truncate_to(3).unwrap();
    assert!(matches!(
        follower.append_as_follower(&corrupt),
        Err(LogError::Batch(_))
    ));
}

#[test]
fn append_rejects_headers_that_do_not_describe_the_records() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(1 << 20));
    let b = batch(2, 10, 0);
    let h = headers(&b);
    assert!(log.append(&b[..b.len() - 1], &h, 0).is_err());
    assert!(log.append(&b, &[], 0).is_err());
    assert_eq!(log.log_end_offset(), 0);
}

#[test]
fn group_commit_flush_target() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(1024));
    assert_eq!(log.unflushed_messages(), 0);
    fill(&mut log, 10, 3, 100, 0);
    assert_eq!(log.unflushed_messages(), 30);
    let target = log.flush_target();
    assert!(!target.is_empty());
    // Appends continue while the sync runs outside the lock.
    fill(&mut log, 2, 3, 100, 0);
    let t = std::thread::spawn(move || {
        target.sync().unwrap();
        target.up_to_offset()
    });
    let up_to = t.join().unwrap();
    assert_eq!(up_to, 30);
    log.mark_flushed(up_to);
    assert_eq!(log.recovery_point(), 30);
    assert_eq!(log.unflushed_messages(), 6);
    log.flush().unwrap();
    assert_eq!(log.unflushed_messages(), 0);
}

#[test]
fn segment_ms_rolls_on_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = small_config(1 << 20);
    cfg.segment_ms = 1000;
    let mut log = open(dir.path(), cfg);
    append(&mut log, &batch(1, 10, 10_000), 0);
    append(&mut log, &batch(1, 10, 10_500), 0);
    assert_eq!(log.num_segments(), 1);
    append(&mut log, &batch(1, 10, 11_001), 0);
    assert_eq!(log.segment_base_offsets(), vec![0, 2]);
}

#[test]
fn full_index_rolls() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = small_config(1 << 20);
    cfg.index_interval_bytes = 1;
    cfg.max_index_bytes = 8 * 4;
    let mut log = open(dir.path(), cfg);
    fill(&mut log, 12, 1, 10, 0);
    assert!(log.num_segments() >= 3, "{:?}", log.segment_base_offsets());
    for o in 0..12 {
        let r = log.read(o, 1, i64::MAX, true).unwrap();
        assert_eq!(batches_of(&r.records)[0].base_offset, o);
    }
}

fn reopen(log: PartitionLog, dir: &std::path::Path) -> PartitionLog {
    let (ls, hw, cfg) = (
        log.log_start_offset(),
        log.high_watermark(),
        log.config().clone(),
    );
    let leo = log.log_end_offset();
    log.close().unwrap();
    PartitionLog::open(dir.to_path_buf(), cfg, clean_hint(ls, hw, leo)).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random batch shapes and segment sizes: offsets dense, every offset readable before and
    /// after a clean reopen, max_offset respected.
    #[test]
    fn random_appends_read_back(
        shapes in proptest::collection::vec((1usize..6, 1usize..300), 1..40),
        seg in 300u64..4000,
        bound in 0i64..100,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open(dir.path(), small_config(seg));
        let mut expected = Vec::new();
        for (i, (n, len)) in shapes.iter().enumerate() {
            let info = append(&mut log, &batch(*n, *len, i as i64), 0);
            prop_assert_eq!(info.first_offset, expected.len() as i64);
            for k in 0..*n { expected.push((info.first_offset + k as i64, i as i64 + k as i64, *len)); }
        }
        for pass in 0..2 {
            let leo = log.log_end_offset();
            prop_assert_eq!(leo, expected.len() as i64);
            for o in 0..leo {
                let r = log.read(o, 1, i64::MAX, true).unwrap();
                let recs = decode(&r.records);
                prop_assert!(recs.iter().any(|r| r.0 == o));
                prop_assert!(recs.iter().all(|r| expected[r.0 as usize] == *r));
                let r = log.read(o, 1 << 16, bound, false);
                if o < bound.min(leo) || o == leo.min(bound) {
                    for h in batches_of(&r.unwrap().records) {
                        prop_assert!(h.last_offset() < bound);
                    }
                }
            }
            if pass == 0 { log = reopen(log, dir.path()); }
        }
    }
}
