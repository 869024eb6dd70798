//! Transactions on one partition (KIP-98): the LSO held by an open transaction, markers that
//! end it (stale epochs refused), the aborted-transaction index and its rebuild on restart.

use bytes::BytesMut;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use runnel_log::control::Marker;
use runnel_log::txn::AbortedTxn;
use runnel_log::LogManager;

use super::tests::{leader, role};
use super::{log_config, Partition, ReadBound};

/// A transactional batch of `n` records of producer `pid` (epoch 0) from sequence `seq`.
fn txn_batch(pid: i64, seq: i32, n: usize) -> BytesMut {
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            transactional: true,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: pid,
            producer_epoch: 0,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: seq + i as i32,
            timestamp: crate::clock::now_ms(),
            key: None,
            value: Some(bytes::Bytes::from_static(b"t")),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf
}

fn marker(pid: i64, epoch: i16, commit: bool, coordinator_epoch: i32) -> Marker {
    Marker {
        producer_id: pid,
        producer_epoch: epoch,
        commit,
        coordinator_epoch,
    }
}

/// The only in-sync replica is this broker: the HW follows the LEO.
fn solo(dir: &std::path::Path) -> Partition {
    leader(dir, role(0, &[1], &[1, 2, 3]))
}

/// Caught: with transaction version 2 the next transaction (epoch + 1) can be produced before
/// the previous one's marker reached the partition; the guard took it for the open one, so
/// the coordinator never added the partition and the old marker committed the new data.
#[test]
fn the_verification_guard_is_the_open_transaction_of_the_same_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let p = solo(dir.path());
    p.append_as_leader(&txn_batch(5, 0, 2), 1, 1).unwrap();
    assert!(p.in_transaction_at(5, 0));
    assert!(!p.in_transaction_at(5, 1), "another epoch's transaction");
    assert!(!p.in_transaction_at(6, 0), "another producer");
    // The marker with the bumped epoch ends it and moves the producer to epoch 1.
    p.write_marker(&marker(5, 1, true, 0), 1).unwrap();
    assert!(!p.in_transaction_at(5, 1));
    assert!(!p.in_transaction(5));
}

#[test]
fn an_open_transaction_holds_the_lso_until_its_marker() {
    let dir = tempfile::tempdir().unwrap();
    let p = solo(dir.path());
    p.append_as_leader(&super::tests::plain_batch(2), 1, 1)
        .unwrap();
    p.append_as_leader(&txn_batch(5, 0, 2), 1, 1).unwrap();
    p.append_as_leader(&super::tests::plain_batch(1), 1, 1)
        .unwrap();
    assert_eq!(p.high_watermark(), 5);
    assert_eq!(p.last_stable_offset(), 2);
    assert!(p.in_transaction(5));
    let m = p.write_marker(&marker(5, 0, true, 0), 1).unwrap();
    assert_eq!(m.base_offset, 5);
    assert_eq!(p.last_stable_offset(), 6);
    assert!(!p.in_transaction(5));
    assert!(p.lock_log().aborted_txns(0, 6).is_empty());
}

#[test]
fn markers_with_an_older_producer_or_coordinator_epoch_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = solo(dir.path());
    p.append_as_leader(&txn_batch(5, 0, 1), 1, 1).unwrap();
    // The coordinator fenced the producer: its abort carries the bumped epoch.
    p.write_marker(&marker(5, 1, false, 3), 1).unwrap();
    let stale_producer = p.write_marker(&marker(5, 0, true, 3), 1);
    assert_eq!(stale_producer.err().map(|e| e.code), Some(47));
    let stale_coordinator = p.write_marker(&marker(5, 1, true, 2), 1);
    assert_eq!(stale_coordinator.err().map(|e| e.code), Some(52));
    // A marker for a producer without an open transaction is written (Kafka does too).
    p.write_marker(&marker(6, 0, true, 0), 1).unwrap();
}

#[test]
fn aborted_transactions_are_indexed_and_rebuilt_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let expected = AbortedTxn {
        producer_id: 5,
        first_offset: 0,
        last_offset: 2,
        last_stable_offset: 3,
    };
    {
        let p = solo(dir.path());
        p.append_as_leader(&txn_batch(5, 0, 2), 1, 1).unwrap();
        p.write_marker(&marker(5, 0, false, 0), 1).unwrap();
        p.append_as_leader(&txn_batch(6, 0, 1), 1, 1).unwrap();
        assert_eq!(p.lock_log().aborted_txns(0, 10), vec![expected]);
        assert_eq!(p.last_stable_offset(), 3);
    }
    // Reopened with the index: the open transaction of producer 6 still holds the LSO.
    {
        let p = solo(dir.path());
        assert_eq!(p.lock_log().aborted_txns(0, 10), vec![expected]);
        assert!(p.in_transaction(6));
        // The HW restarts at 0 (no checkpoint); once it moves, the LSO stops at producer 6.
        p.append_as_leader(&super::tests::plain_batch(1), 1, 1)
            .unwrap();
        assert_eq!(p.last_stable_offset(), 3);
    }
    // Reopened without it (lost with an unclean shutdown): the log replay rebuilds it.
    let index = dir.path().join("t-0").join("00000000000000000000.txnindex");
    std::fs::remove_file(&index).unwrap();
    let p = solo(dir.path());
    assert_eq!(p.lock_log().aborted_txns(0, 10), vec![expected]);
    assert_eq!(std::fs::read(&index).unwrap().len(), 34);
    // A read past the aborted range does not list it.
    assert!(p.lock_log().aborted_txns(3, 10).is_empty());
}

#[test]
fn a_follower_replicating_a_marker_ends_the_transaction_too() {
    let dir = tempfile::tempdir().unwrap();
    let leader_dir = tempfile::tempdir().unwrap();
    let l = solo(leader_dir.path());
    l.append_as_leader(&txn_batch(5, 0, 2), 1, 1).unwrap();
    l.write_marker(&marker(5, 0, false, 0), 1).unwrap();
    let records = l.lock_log().read(0, 1 << 20, 3, true).unwrap().records;
    let f = leader(dir.path(), super::tests::follower_role());
    f.append_as_follower(&records, 3).unwrap();
    assert!(!f.in_transaction(5));
    assert_eq!(f.lock_log().aborted_txns(0, 3).len(), 1);
}

#[test]
fn a_read_committed_long_poll_wakes_on_the_lso_not_the_hw() {
    let dir = tempfile::tempdir().unwrap();
    let p = solo(dir.path());
    let seen = *p.subscribe().borrow();
    p.append_as_leader(&txn_batch(5, 0, 2), 1, 1).unwrap();
    let now = *p.subscribe().borrow();
    assert!(now.has_news_for(&seen, 0, ReadBound::HighWatermark));
    assert!(
        !now.has_news_for(&seen, 0, ReadBound::LastStable),
        "only an open transaction"
    );
    p.write_marker(&marker(5, 0, true, 0), 1).unwrap();
    let committed = *p.subscribe().borrow();
    assert!(committed.has_news_for(&seen, 0, ReadBound::LastStable));
}

/// A leader for `t-0` whose segments roll after `segment_bytes`, with its log manager (to stop
/// it cleanly or checkpoint it).
fn solo_with_segments(dir: &std::path::Path, segment_bytes: u64) -> (LogManager, Partition) {
    let mut r = role(0, &[1], &[1, 2, 3]);
    let mut config = (*r.config).clone();
    config.segment_bytes = segment_bytes;
    r.config = std::sync::Arc::new(config);
    let logs = LogManager::open(dir.to_path_buf(), log_config(&r.config)).unwrap();
    let id = uuid::Uuid::from_u128(7);
    let log = logs
        .get_or_create("t", 0, id, log_config(&r.config))
        .unwrap();
    let p = Partition::new("t".into(), 0, id, log, r, 1, 30_000);
    (logs, p)
}

/// The broker's clean stop: the producer snapshot, then the logs closed with the marker.
fn stop_cleanly((logs, p): (LogManager, Partition)) {
    p.snapshot_producers();
    logs.shutdown().unwrap();
}

fn snapshots(dir: &std::path::Path) -> Vec<i64> {
    runnel_log::producer_snapshot::list(&dir.join("t-0")).unwrap()
}

/// Caught: the producer state was rebuilt from the last 100,000 offsets only, so a transaction
/// opened before them was forgotten on restart and its uncommitted records became visible to
/// read_committed consumers (the LSO jumped to the HW). Now the replay starts at the newest
/// snapshot or, without one (an unclean stop before any roll), at the log start.
#[test]
fn an_open_transaction_older_than_100k_offsets_survives_an_unclean_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let p = solo(dir.path());
        p.append_as_leader(&txn_batch(5, 0, 1), 1, 1).unwrap();
        for _ in 0..11 {
            p.append_as_leader(&super::tests::plain_batch(10_000), 1, 1)
                .unwrap();
        }
        assert_eq!(p.last_stable_offset(), 0);
    }
    assert!(snapshots(dir.path()).is_empty(), "no roll, no clean stop");
    let p = solo(dir.path());
    assert!(p.in_transaction(5));
    p.append_as_leader(&super::tests::plain_batch(1), 1, 1)
        .unwrap();
    assert_eq!(p.last_stable_offset(), 0);
}

/// A roll writes a snapshot as of the LEO and a restart starts from it: a crafted snapshot
/// that names an open transaction the log does not hold is believed (so it was read, not
/// the log), and a damaged one is skipped for the log replay.
#[test]
fn a_roll_writes_a_snapshot_and_a_restart_starts_from_the_newest_readable_one() {
    use runnel_log::producer_snapshot::{self, SnapshotEntry};
    let dir = tempfile::tempdir().unwrap();
    let rolled_at = {
        let (logs, p) = solo_with_segments(dir.path(), 64);
        p.append_as_leader(&txn_batch(5, 0, 3), 1, 1).unwrap();
        p.append_as_leader(&txn_batch(5, 3, 3), 1, 1).unwrap();
        assert!(p.lock_log().num_segments() > 1);
        // Flushed and checkpointed, then stopped uncleanly: the recovery point covers it.
        logs.flush_all().unwrap();
        logs.checkpoint().unwrap();
        let leo = p.lock_log().log_end_offset();
        leo
    };
    assert_eq!(snapshots(dir.path()), vec![rolled_at]);
    let (_logs, p) = solo_with_segments(dir.path(), 64);
    assert!(p.in_transaction(5));
    drop((_logs, p));
    let crafted = SnapshotEntry {
        producer_id: 77,
        epoch: 0,
        last_sequence: 0,
        last_offset: 0,
        offset_delta: 0,
        timestamp: 0,
        coordinator_epoch: 0,
        current_txn_first_offset: 0,
    };
    let log_dir = dir.path().join("t-0");
    producer_snapshot::write(&log_dir, rolled_at, &[crafted], true).unwrap();
    let (logs, p) = solo_with_segments(dir.path(), 64);
    assert!(p.in_transaction(77), "the snapshot was loaded");
    assert!(
        !p.in_transaction(5),
        "the log below the snapshot was not replayed"
    );
    drop((logs, p));
    let path = producer_snapshot::snapshot_path(&log_dir, rolled_at);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[20] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    let (_logs, p) = solo_with_segments(dir.path(), 64);
    assert!(!p.in_transaction(77), "the damaged snapshot was skipped");
    assert!(p.in_transaction(5), "the log replay rebuilt the state");
}

/// A follower truncation removes the snapshots of the cut tail: otherwise, once new batches
/// reach that offset again, a restart would load the state of batches the log lost.
#[test]
fn a_truncation_deletes_the_snapshots_above_the_new_end() {
    let dir = tempfile::tempdir().unwrap();
    let p = solo(dir.path());
    p.append_as_leader(&txn_batch(5, 0, 3), 1, 1).unwrap();
    p.snapshot_producers();
    assert_eq!(snapshots(dir.path()), vec![3]);
    p.set_role(super::tests::follower_role());
    p.truncate_to(0).unwrap();
    assert!(snapshots(dir.path()).is_empty());
    assert!(!p.in_transaction(5));
}

/// The clean stop's snapshot is as of the LEO and the next open starts from it; after an
/// unclean stop a snapshot above the recovery point is not trusted (the `.txnindex` entries
/// of unflushed segments may be lost, and only the replay writes them again).
#[test]
fn a_clean_stop_snapshot_covers_the_whole_log_and_an_unflushed_one_is_not_trusted() {
    use runnel_log::producer_snapshot;
    let dir = tempfile::tempdir().unwrap();
    {
        let kept = solo_with_segments(dir.path(), 1 << 20);
        let p = &kept.1;
        p.append_as_leader(&txn_batch(5, 0, 2), 1, 1).unwrap();
        p.write_marker(&marker(5, 0, true, 3), 1).unwrap();
        p.append_as_leader(&txn_batch(6, 0, 1), 1, 1).unwrap();
        stop_cleanly(kept);
    }
    assert_eq!(snapshots(dir.path()), vec![4]);
    let log_dir = dir.path().join("t-0");
    let only_77 = |offset| {
        let crafted = runnel_log::producer_snapshot::SnapshotEntry {
            producer_id: 77,
            epoch: 0,
            last_sequence: -1,
            last_offset: -1,
            offset_delta: 0,
            timestamp: 0,
            coordinator_epoch: 0,
            current_txn_first_offset: 0,
        };
        producer_snapshot::write(&log_dir, offset, &[crafted], true).unwrap();
    };
    only_77(4);
    let (logs, p) = solo_with_segments(dir.path(), 1 << 20);
    assert!(p.in_transaction(77), "the clean stop's snapshot was loaded");
    assert!(!p.in_transaction(6));
    drop(p);
    logs.shutdown().unwrap();
    std::fs::remove_file(dir.path().join(runnel_log::CLEAN_SHUTDOWN_FILE)).unwrap();
    std::fs::remove_file(dir.path().join(runnel_log::RECOVERY_POINT_CHECKPOINT)).unwrap();
    only_77(4);
    let (_logs, p) = solo_with_segments(dir.path(), 1 << 20);
    assert!(
        !p.in_transaction(77),
        "a snapshot above the recovery point is not used"
    );
    assert!(p.in_transaction(6));
    assert_eq!(
        p.write_marker(&marker(5, 0, true, 2), 1).unwrap_err().code,
        crate::producer_state::TRANSACTION_COORDINATOR_FENCED
    );
}

/// One record `key=value` in a batch of producer `pid` (epoch 0) at sequence `seq`;
/// transactional or not.
fn keyed(
    pid: i64,
    seq: i32,
    key: &'static str,
    value: &'static str,
    transactional: bool,
) -> BytesMut {
    let record = Record {
        transactional,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: pid,
        producer_epoch: 0,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: seq,
        timestamp: crate::clock::now_ms(),
        key: Some(bytes::Bytes::from_static(key.as_bytes())),
        value: Some(bytes::Bytes::from_static(value.as_bytes())),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        std::iter::once(&record),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf
}

/// A compacted `t-0` led alone, rolling after every batch.
fn compacted(dir: &std::path::Path) -> (LogManager, Partition) {
    let (logs, p) = solo_with_segments(dir, 1);
    let mut r = p.role();
    let mut config = (*r.config).clone();
    config.cleanup_policy = "compact".into();
    r.config = std::sync::Arc::new(config);
    p.set_role(r);
    (logs, p)
}

/// The values of `key` left in the log, in offset order.
fn values_of(p: &Partition, key: &[u8]) -> Vec<Vec<u8>> {
    let log = p.lock_log();
    let leo = log.log_end_offset();
    let mut values = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < leo {
        // One segment per read: each batch has its own segment here.
        let read = log.read(offset, 1 << 20, leo, true).unwrap();
        let mut buf = read.records.clone();
        let batches = kafka_protocol::records::RecordBatchDecoder::decode_all(&mut buf).unwrap();
        let Some(next) = batches
            .iter()
            .flat_map(|b| &b.records)
            .map(|r| r.offset + 1)
            .max()
        else {
            break;
        };
        values.extend(
            batches
                .into_iter()
                .flat_map(|b| b.records)
                .filter(|r| !r.control && r.key.as_deref() == Some(key))
                .filter_map(|r| r.value.map(|v| v.to_vec())),
        );
        offset = next;
    }
    values
}

fn compact_now(p: &Partition) {
    p.lock_log()
        .compact(
            crate::clock::now_ms(),
            &runnel_log::CompactionConfig::default(),
        )
        .unwrap();
}

/// Caught: the cleaner treated aborted records as live, so an aborted write of a key removed
/// the committed value before it (read_committed consumers then had no value for the key),
/// and it cleaned up to the HW, past open transactions. Now aborted batches never win a key
/// and are removed (Kafka's LogCleaner), and the cleaner stays below the first open
/// transaction.
#[test]
fn the_cleaner_drops_aborted_data_and_stays_below_open_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let (_logs, p) = compacted(dir.path());
    p.append_as_leader(&keyed(-1, -1, "k", "committed", false), 1, 1)
        .unwrap();
    p.append_as_leader(&keyed(5, 0, "k", "aborted", true), 1, 1)
        .unwrap();
    p.write_marker(&marker(5, 0, false, 0), 1).unwrap();
    p.append_as_leader(&keyed(6, 0, "k", "open", true), 1, 1)
        .unwrap();
    p.append_as_leader(&keyed(-1, -1, "other", "x", false), 1, 1)
        .unwrap();
    assert_eq!(p.last_stable_offset(), 3);
    compact_now(&p);
    assert_eq!(
        values_of(&p, b"k"),
        vec![b"committed".to_vec(), b"open".to_vec()],
        "the aborted value is gone, the committed one stays while a later one is still open"
    );
    p.write_marker(&marker(6, 0, true, 0), 1).unwrap();
    p.append_as_leader(&keyed(-1, -1, "other", "y", false), 1, 1)
        .unwrap();
    compact_now(&p);
    assert_eq!(values_of(&p, b"k"), vec![b"open".to_vec()], "committed now");
}

/// The control batches (markers) left in the log: (offset, commit).
fn markers_of(p: &Partition) -> Vec<(i64, bool)> {
    let log = p.lock_log();
    let leo = log.log_end_offset();
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < leo {
        let read = log.read(offset, 1 << 20, leo, true).unwrap();
        let mut buf = read.records.clone();
        let batches = kafka_protocol::records::RecordBatchDecoder::decode_all(&mut buf).unwrap();
        let Some(next) = batches
            .iter()
            .flat_map(|b| &b.records)
            .map(|r| r.offset + 1)
            .max()
        else {
            break;
        };
        for r in batches
            .iter()
            .flat_map(|b| &b.records)
            .filter(|r| r.control)
        {
            // The control key: version int16, type int16 (0 abort, 1 commit).
            let key = r.key.as_deref().unwrap();
            out.push((r.offset, key[3] == 1));
        }
        offset = next;
    }
    out
}

/// Caught: the cleaner kept every transaction marker (and every `.txnindex` entry) forever.
/// As Kafka's LogCleaner, a marker goes once no data of its transaction is left below it and
/// `delete.retention.ms` passed since the pass that found so (its delete horizon); an aborted
/// transaction's index entry goes with its data, and a restart does not bring it back.
#[test]
fn the_cleaner_removes_markers_after_their_data_and_the_delete_retention() {
    let dir = tempfile::tempdir().unwrap();
    let config = runnel_log::CompactionConfig {
        delete_retention_ms: 60_000,
        ..runnel_log::CompactionConfig::default()
    };
    let clean_at = |p: &Partition, now: i64| {
        p.lock_log().compact(now, &config).unwrap();
    };
    let aborted = AbortedTxn {
        producer_id: 6,
        first_offset: 2,
        last_offset: 3,
        last_stable_offset: 4,
    };
    let t0 = crate::clock::now_ms();
    {
        let (logs, p) = compacted(dir.path());
        p.append_as_leader(&keyed(5, 0, "k", "committed", true), 1, 1)
            .unwrap(); // 0
        p.write_marker(&marker(5, 0, true, 0), 1).unwrap(); // 1
        p.append_as_leader(&keyed(6, 0, "a", "aborted", true), 1, 1)
            .unwrap(); // 2
        p.write_marker(&marker(6, 0, false, 0), 1).unwrap(); // 3
        p.append_as_leader(&keyed(-1, -1, "k", "newer", false), 1, 1)
            .unwrap(); // 4: supersedes the committed value
        p.append_as_leader(&keyed(-1, -1, "z", "active", false), 1, 1)
            .unwrap(); // 5: the active segment
        assert_eq!(markers_of(&p), [(1, true), (3, false)]);

        // Pass 1 removes the data of both transactions: their markers stay (a reader may
        // have read that data), the aborted entry too.
        clean_at(&p, t0);
        assert_eq!(values_of(&p, b"k"), [b"newer".to_vec()]);
        assert!(values_of(&p, b"a").is_empty());
        assert_eq!(markers_of(&p), [(1, true), (3, false)]);
        assert_eq!(p.lock_log().aborted_txns(0, 10), [aborted]);

        // Pass 2 finds no data below them: the delete horizon starts, the empty entry goes.
        clean_at(&p, t0 + 1);
        assert_eq!(markers_of(&p), [(1, true), (3, false)]);
        assert!(p.lock_log().aborted_txns(0, 10).is_empty());
        // Before the horizon nothing more happens; then they go.
        clean_at(&p, t0 + 60_000);
        assert_eq!(markers_of(&p), [(1, true), (3, false)]);
        clean_at(&p, t0 + 1 + 60_000);
        assert!(markers_of(&p).is_empty());
        assert_eq!(values_of(&p, b"k"), [b"newer".to_vec()]);
        stop_cleanly((logs, p));
    }
    let (_logs, p) = compacted(dir.path());
    assert!(
        p.lock_log().aborted_txns(0, 10).is_empty(),
        "no entry comes back"
    );
    assert!(markers_of(&p).is_empty());
    assert_eq!(values_of(&p, b"k"), [b"newer".to_vec()]);
}

/// Caught: a cleaned segment got no `.txnindex` (the old segments' files went with them), so
/// after a restart the ABORT entry of data still in it was gone and read_committed readers
/// would have taken that data for committed. Here one segment holds the aborted data, its
/// marker and a superseded value; the pass rewrites it while the data is still there (the
/// pass drops it, its marker and entry stay, as Kafka), and a restart keeps the entry.
#[test]
fn an_abort_entry_stays_with_its_marker_across_a_cleaned_swap_and_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let expected = AbortedTxn {
        producer_id: 6,
        first_offset: 1,
        last_offset: 2,
        last_stable_offset: 3,
    };
    let open = |dir: &std::path::Path| {
        let (logs, p) = solo_with_segments(dir, 1 << 20);
        let mut r = p.role();
        let mut config = (*r.config).clone();
        config.cleanup_policy = "compact".into();
        r.config = std::sync::Arc::new(config);
        p.set_role(r);
        (logs, p)
    };
    {
        let (logs, p) = open(dir.path());
        p.append_as_leader(&keyed(-1, -1, "k", "old", false), 1, 1)
            .unwrap(); // 0
        p.append_as_leader(&keyed(6, 0, "a", "aborted", true), 1, 1)
            .unwrap(); // 1
        p.write_marker(&marker(6, 0, false, 0), 1).unwrap(); // 2
        p.append_as_leader(&keyed(-1, -1, "k", "new", false), 1, 1)
            .unwrap(); // 3
        p.lock_log().roll().unwrap();
        p.append_as_leader(&keyed(-1, -1, "z", "active", false), 1, 1)
            .unwrap(); // 4
        compact_now(&p);
        assert_eq!(
            values_of(&p, b"k"),
            [b"new".to_vec()],
            "the segment was rewritten"
        );
        assert_eq!(markers_of(&p), [(2, false)], "data read this pass: kept");
        assert_eq!(p.lock_log().aborted_txns(0, 10), [expected]);
        stop_cleanly((logs, p));
    }
    let (_logs, p) = open(dir.path());
    assert_eq!(p.lock_log().aborted_txns(0, 10), [expected]);
    assert_eq!(markers_of(&p), [(2, false)]);
}

/// Found by the red-team review: a torn `.txnindex` was dropped on open for "the log replay"
/// to rebuild, but the replay starts at the newest producer snapshot, after the segments an
/// older index describes: its aborted transactions were gone for good and read_committed
/// consumers read their records as committed. Kafka rebuilds a corrupt index by recovering its
/// segment; here the replay then starts at the log start.
#[test]
fn a_torn_txn_index_of_an_old_segment_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let expected = AbortedTxn {
        producer_id: 5,
        first_offset: 0,
        last_offset: 2,
        last_stable_offset: 3,
    };
    {
        let (logs, p) = solo_with_segments(dir.path(), 64);
        p.append_as_leader(&txn_batch(5, 0, 2), 1, 1).unwrap();
        p.write_marker(&marker(5, 0, false, 0), 1).unwrap();
        for _ in 0..3 {
            p.append_as_leader(&super::tests::plain_batch(1), 1, 1)
                .unwrap();
        }
        assert!(p.lock_log().num_segments() > 2);
        assert_eq!(p.lock_log().aborted_txns(0, 100), vec![expected]);
        stop_cleanly((logs, p));
    }
    let indexes: Vec<std::path::PathBuf> = std::fs::read_dir(dir.path().join("t-0"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txnindex"))
        .collect();
    assert_eq!(indexes.len(), 1, "{indexes:?}");
    let bytes = std::fs::read(&indexes[0]).unwrap();
    std::fs::write(&indexes[0], &bytes[..20]).unwrap();
    let (_logs, p) = solo_with_segments(dir.path(), 64);
    assert_eq!(p.lock_log().aborted_txns(0, 100), vec![expected]);
    assert_eq!(std::fs::read(&indexes[0]).unwrap(), bytes);
}
