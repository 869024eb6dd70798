//! Transactions on one partition (KIP-98): the LSO held by an open transaction, markers that
//! end it (stale epochs refused), the aborted-transaction index and its rebuild on restart.

use bytes::BytesMut;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use runnel_log::control::Marker;
use runnel_log::txn::AbortedTxn;

use super::tests::{leader, role};
use super::{Partition, ReadBound};

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
    assert_eq!(stale_producer.err().map(|e| e.0), Some(47));
    let stale_coordinator = p.write_marker(&marker(5, 1, true, 2), 1);
    assert_eq!(stale_coordinator.err().map(|e| e.0), Some(52));
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

/// A leader for `t-0` whose segments roll after `segment_bytes`.
fn solo_with_segments(dir: &std::path::Path, segment_bytes: u64) -> Partition {
    let mut r = role(0, &[1], &[1, 2, 3]);
    let mut config = (*r.config).clone();
    config.segment_bytes = segment_bytes;
    r.config = std::sync::Arc::new(config);
    leader(dir, r)
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
        let p = solo_with_segments(dir.path(), 64);
        p.append_as_leader(&txn_batch(5, 0, 3), 1, 1).unwrap();
        p.append_as_leader(&txn_batch(5, 3, 3), 1, 1).unwrap();
        assert!(p.lock_log().num_segments() > 1);
        let leo = p.lock_log().log_end_offset();
        leo
    };
    assert_eq!(snapshots(dir.path()), vec![rolled_at]);
    let p = solo_with_segments(dir.path(), 64);
    assert!(p.in_transaction(5));
    drop(p);
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
    let p = solo_with_segments(dir.path(), 64);
    assert!(p.in_transaction(77), "the snapshot was loaded");
    assert!(
        !p.in_transaction(5),
        "the log below the snapshot was not replayed"
    );
    drop(p);
    let path = producer_snapshot::snapshot_path(&log_dir, rolled_at);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[20] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    let p = solo_with_segments(dir.path(), 64);
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

/// The clean stop's snapshot is as of the LEO: the next open replays nothing.
#[test]
fn a_clean_stop_snapshot_covers_the_whole_log() {
    let dir = tempfile::tempdir().unwrap();
    {
        let p = solo(dir.path());
        p.append_as_leader(&txn_batch(5, 0, 2), 1, 1).unwrap();
        p.write_marker(&marker(5, 0, true, 3), 1).unwrap();
        p.append_as_leader(&txn_batch(6, 0, 1), 1, 1).unwrap();
        p.snapshot_producers();
    }
    assert_eq!(snapshots(dir.path()), vec![4]);
    let p = solo(dir.path());
    assert!(p.in_transaction(6));
    assert!(!p.in_transaction(5));
    assert_eq!(
        p.write_marker(&marker(5, 0, true, 2), 1).unwrap_err().0,
        crate::producer_state::TRANSACTION_COORDINATOR_FENCED
    );
}
