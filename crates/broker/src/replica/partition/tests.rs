//! The leader's HW and ISR-expansion rules (spec E.2, E.3) on a real log: the maximal ISR,
//! caught-up followers outside the ISR, and the epoch-start condition of expansion.

use std::sync::Arc;

use bytes::BytesMut;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use runnel_log::LogManager;
use runnel_metadata::topic_config::{effective_topic_config, BrokerDefaults};

use super::{log_config, FollowerPosition, Partition, ReadBound, Replicated, Role};

const LAG_MAX_MS: i64 = 30_000;

pub(super) fn role(leader_epoch: i32, isr: &[i32], live: &[i32]) -> Role {
    Role {
        leader: 1,
        leader_epoch,
        isr: isr.to_vec(),
        replicas: vec![1, 2, 3],
        live_replicas: live.to_vec(),
        partition_epoch: leader_epoch,
        config: Arc::new(effective_topic_config(
            &Default::default(),
            &BrokerDefaults::default(),
        )),
    }
}

/// A leader for `t-0` on broker 1 with replicas [1, 2, 3].
pub(super) fn leader(dir: &std::path::Path, role: Role) -> Partition {
    let logs = LogManager::open(dir.to_path_buf(), log_config(&role.config)).unwrap();
    let log = logs
        .get_or_create("t", 0, uuid::Uuid::from_u128(7), log_config(&role.config))
        .unwrap();
    Partition::new(
        "t".into(),
        0,
        uuid::Uuid::from_u128(7),
        log,
        role,
        1,
        LAG_MAX_MS,
    )
}

/// Appends `n` plain records as the leader.
fn append(p: &Partition, n: usize) {
    p.append_as_leader(&encode(n, None, 0, -1), 1, 1).unwrap();
}

/// A v2 batch of `n` records at `base_offset`, stamped with `leader_epoch`; with
/// `Some(seq)`, from idempotent producer 9 (epoch 0) starting at sequence `seq`.
fn encode(n: usize, seq: Option<i32>, base_offset: i64, leader_epoch: i32) -> BytesMut {
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: leader_epoch,
            producer_id: if seq.is_some() { 9 } else { -1 },
            producer_epoch: if seq.is_some() { 0 } else { -1 },
            timestamp_type: TimestampType::Creation,
            offset: base_offset + i as i64,
            sequence: seq.map_or(-1, |s| s + i as i32),
            timestamp: crate::clock::now_ms(),
            key: None,
            value: Some(bytes::Bytes::from_static(b"v")),
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

/// A batch of `n` plain records.
pub(super) fn plain_batch(n: usize) -> BytesMut {
    encode(n, None, 0, -1)
}

fn hw(p: &Partition) -> i64 {
    p.log.lock().high_watermark()
}

#[test]
fn hw_is_the_smallest_leo_in_the_isr() {
    let dir = tempfile::tempdir().unwrap();
    let p = leader(dir.path(), role(0, &[1, 2], &[1, 2, 3]));
    append(&p, 10);
    assert_eq!(hw(&p), 0, "follower 2 has not fetched yet");
    assert!(p.record_follower_fetch(2, 6).hw_changed);
    assert_eq!(hw(&p), 6);
    p.record_follower_fetch(2, 10);
    assert_eq!(hw(&p), 10);
}

#[test]
fn a_pending_expansion_holds_the_hw_at_the_joining_follower() {
    let dir = tempfile::tempdir().unwrap();
    let p = leader(dir.path(), role(0, &[1, 2], &[1, 2, 3]));
    append(&p, 10);
    p.record_follower_fetch(2, 10);
    assert_eq!(hw(&p), 10);
    assert!(
        p.record_follower_fetch(3, 4).propose.is_none(),
        "below the HW"
    );
    let request = p
        .record_follower_fetch(3, 10)
        .propose
        .expect("3 reached the HW: expansion proposed");
    assert_eq!(request.new_isr, vec![1, 2, 3]);
    assert_eq!((request.leader_epoch, request.partition_epoch), (0, 0));
    // Until the controller answers, the HW must not run ahead of 3, or it could join the ISR
    // without records consumers have read.
    append(&p, 5);
    p.record_follower_fetch(2, 15);
    assert_eq!(hw(&p), 10, "held by the joining follower");
    p.record_follower_fetch(3, 12);
    assert_eq!(hw(&p), 12);
    assert!(
        p.isr_shrink(crate::clock::now_ms()).is_none(),
        "one change at a time"
    );
    // The controller commits it: settled, nothing to retry.
    assert!(
        !p.isr_change_answered(&request, Ok((vec![1, 2, 3], 1)))
            .retry
    );
    assert_eq!(p.pending_isr(), None);
}

#[test]
fn refusals_keep_the_change_pending_unless_it_can_never_apply() {
    let dir = tempfile::tempdir().unwrap();
    let p = leader(dir.path(), role(0, &[1, 2], &[1, 2, 3]));
    append(&p, 10);
    let request = p.record_follower_fetch(3, 10).propose.expect("expansion");
    // No controller right now: try again, still pending.
    assert!(p.isr_change_answered(&request, Err(41)).retry);
    // A stale partition epoch: an earlier attempt may have been committed, so the change
    // stays pending (and holds the HW) until the image settles it; no retry.
    assert!(!p.isr_change_answered(&request, Err(95)).retry);
    assert_eq!(p.pending_isr(), Some(vec![1, 2, 3]));
    p.record_follower_fetch(2, 10);
    append(&p, 5);
    p.record_follower_fetch(2, 15);
    assert_eq!(hw(&p), 10, "the pending member still holds the HW");
    // The image with a newer partition epoch settles it.
    p.set_role(Role {
        partition_epoch: 1,
        ..role(0, &[1, 2, 3], &[1, 2, 3])
    });
    assert_eq!(p.pending_isr(), None);
    // INELIGIBLE_REPLICA: this very request was refused, so it is forgotten.
    let dir = tempfile::tempdir().unwrap();
    let q = leader(dir.path(), role(0, &[1, 2], &[1, 2, 3]));
    append(&q, 10);
    let request = q.record_follower_fetch(3, 10).propose.expect("expansion");
    assert!(!q.isr_change_answered(&request, Err(107)).retry);
    assert_eq!(q.pending_isr(), None);
    // An answer to a request that is no longer pending changes nothing.
    let again = q
        .record_follower_fetch(3, 10)
        .propose
        .expect("proposed again");
    let stale = crate::controller::shell::AlterIsr {
        new_isr: vec![1, 3],
        ..again.clone()
    };
    assert!(!q.isr_change_answered(&stale, Err(107)).retry);
    assert_eq!(q.pending_isr(), Some(vec![1, 2, 3]));
}

#[test]
fn a_fenced_follower_neither_joins_nor_holds_the_hw() {
    let dir = tempfile::tempdir().unwrap();
    let p = leader(dir.path(), role(0, &[1, 2], &[1, 2]));
    append(&p, 10);
    p.record_follower_fetch(2, 10);
    assert!(
        p.record_follower_fetch(3, 10).propose.is_none(),
        "3's broker is fenced (ineligible, KIP-841)"
    );
    append(&p, 5);
    p.record_follower_fetch(2, 15);
    assert_eq!(hw(&p), 15);
}

#[test]
fn expansion_needs_the_hw_and_the_current_epochs_start() {
    let dir = tempfile::tempdir().unwrap();
    let p = leader(dir.path(), role(0, &[1, 2], &[1, 2, 3]));
    append(&p, 10);
    p.record_follower_fetch(2, 5);
    assert_eq!(hw(&p), 5);
    // A new leader epoch starts at offset 10 (nothing written in it yet).
    p.set_role(Role {
        partition_epoch: 1,
        ..role(1, &[1, 2], &[1, 2, 3])
    });
    assert!(
        p.record_follower_fetch(3, 7).propose.is_none(),
        "position 7 >= HW 5 but before the epoch start 10"
    );
    let request = p.record_follower_fetch(3, 10).propose.expect("expansion");
    assert_eq!(request.new_isr, vec![1, 2, 3]);
    assert_eq!((request.leader_epoch, request.partition_epoch), (1, 1));
}

/// A batch from idempotent producer 9: `n` records from sequence `seq` at `base_offset`
/// (what a follower receives; a producer sends 0), stamped with `leader_epoch`.
fn idempotent(seq: i32, n: usize, base_offset: i64, leader_epoch: i32) -> BytesMut {
    encode(n, Some(seq), base_offset, leader_epoch)
}

/// Broker 1 following broker 2 (epoch 0).
pub(super) fn follower_role() -> Role {
    Role {
        leader: 2,
        ..role(0, &[1, 2, 3], &[1, 2, 3])
    }
}

#[test]
fn a_follower_keeps_the_producer_state_for_when_it_leads() {
    let dir = tempfile::tempdir().unwrap();
    let p = leader(dir.path(), follower_role());
    p.append_as_follower(&idempotent(0, 3, 0, 0), 0).unwrap();
    p.append_as_follower(&idempotent(3, 3, 3, 0), 0).unwrap();
    p.set_role(role(1, &[1, 2, 3], &[1, 2, 3]));
    // The producer retries the batch whose acknowledgement died with the old leader.
    let retry = p.append_as_leader(&idempotent(3, 3, 0, -1), 1, 1).unwrap();
    assert!(
        retry.duplicate,
        "a retry of a replicated batch is not appended twice"
    );
    assert_eq!(retry.base_offset, 3);
    // A sequence gap is refused, the next batch in sequence appended.
    let gap = p.append_as_leader(&idempotent(9, 1, 0, -1), 1, 1);
    assert_eq!(gap.err().map(|e| e.code), Some(45));
    let next = p.append_as_leader(&idempotent(6, 2, 0, -1), 1, 1).unwrap();
    assert_eq!((next.base_offset, next.duplicate), (6, false));
}

#[test]
fn truncation_forgets_the_producer_state_of_the_cut_batches() {
    let dir = tempfile::tempdir().unwrap();
    let p = leader(dir.path(), follower_role());
    p.append_as_follower(&idempotent(0, 3, 0, 0), 0).unwrap();
    p.append_as_follower(&idempotent(3, 3, 3, 0), 0).unwrap();
    // The new leader never had the second batch: the follower cuts it.
    p.truncate_to(3).unwrap();
    p.set_role(role(1, &[1, 2, 3], &[1, 2, 3]));
    let resent = p.append_as_leader(&idempotent(3, 3, 0, -1), 1, 1).unwrap();
    assert_eq!((resent.base_offset, resent.duplicate), (3, false));
}

/// Caught by comparing with the simulation's rule: the follower's HW only moved forward, but
/// Kafka's follower takes the leader's HW capped at its LEO (spec E.3,
/// `runnel_replication::follower_high_watermark`), also when a new leader's HW is lower.
#[test]
fn a_follower_takes_the_leaders_hw_even_when_it_is_lower() {
    let dir = tempfile::tempdir().unwrap();
    let p = leader(dir.path(), follower_role());
    p.append_as_follower(&idempotent(0, 3, 0, 0), 2).unwrap();
    assert_eq!(hw(&p), 2);
    p.append_as_follower(&[], 9).unwrap();
    assert_eq!(hw(&p), 3, "capped at the follower's LEO");
    // A new leader whose HW has not caught up yet answers HW 1.
    p.append_as_follower(&[], 1).unwrap();
    assert_eq!(hw(&p), 1);
}

// ---- issue 10: the data path's waits and the follower fetch on the pure rules --------------

fn min_isr(mut role: Role, min_insync_replicas: i32) -> Role {
    let mut config = (*role.config).clone();
    config.min_insync_replicas = min_insync_replicas;
    role.config = Arc::new(config);
    role
}

fn deadline_in(ms: u64) -> tokio::time::Instant {
    tokio::time::Instant::now() + std::time::Duration::from_millis(ms)
}

#[tokio::test]
async fn acks_all_completes_when_the_isr_has_the_batch() {
    let dir = tempfile::tempdir().unwrap();
    let p = Arc::new(leader(dir.path(), role(0, &[1, 2], &[1, 2, 3])));
    let appended = p.append_as_leader(&encode(3, None, 0, -1), 1, -1).unwrap();
    let waiter = {
        let p = p.clone();
        tokio::spawn(async move {
            p.wait_replicated(appended.last_offset + 1, 0, deadline_in(10_000))
                .await
        })
    };
    // The waiter parks on the partition's own watch; the follower's fetch wakes it.
    tokio::task::yield_now().await;
    assert!(!waiter.is_finished());
    p.record_follower_fetch(2, 3);
    assert_eq!(waiter.await.unwrap(), Replicated::Done);
}

#[tokio::test]
async fn acks_all_ends_on_a_timeout_or_a_leadership_change() {
    let dir = tempfile::tempdir().unwrap();
    let p = Arc::new(leader(dir.path(), role(0, &[1, 2], &[1, 2, 3])));
    let appended = p.append_as_leader(&encode(3, None, 0, -1), 1, -1).unwrap();
    let required = appended.last_offset + 1;
    assert_eq!(
        p.wait_replicated(required, 0, deadline_in(20)).await,
        Replicated::TimedOut
    );
    let waiter = {
        let p = p.clone();
        tokio::spawn(async move { p.wait_replicated(required, 0, deadline_in(10_000)).await })
    };
    tokio::task::yield_now().await;
    p.set_role(Role {
        leader: 2,
        leader_epoch: 1,
        ..role(1, &[1, 2], &[1, 2, 3])
    });
    assert_eq!(waiter.await.unwrap(), Replicated::LeadershipMoved);
}

#[tokio::test]
async fn min_isr_is_checked_on_the_committed_isr_before_and_after_the_append() {
    let dir = tempfile::tempdir().unwrap();
    let p = leader(dir.path(), min_isr(role(0, &[1], &[1, 2, 3]), 2));
    let refused = p.append_as_leader(&encode(1, None, 0, -1), 1, -1);
    assert_eq!(refused.err().map(|e| e.code), Some(19));
    assert_eq!(p.lock_log().log_end_offset(), 0, "nothing written");
    // With 2 in sync the append is taken; the followers' brokers are then fenced and the
    // controller shrinks the ISR to the leader before the batch is committed: the leader alone
    // commits it, but not as the producer asked (20).
    let dir = tempfile::tempdir().unwrap();
    let p = leader(dir.path(), min_isr(role(0, &[1, 2], &[1, 2, 3]), 2));
    let appended = p.append_as_leader(&encode(2, None, 0, -1), 1, -1).unwrap();
    p.set_role(Role {
        partition_epoch: 1,
        ..min_isr(role(0, &[1], &[1]), 2)
    });
    assert_eq!(
        p.wait_replicated(appended.last_offset + 1, 0, deadline_in(5_000))
            .await,
        Replicated::NotEnoughReplicasAfterAppend
    );
}

#[test]
fn an_append_wakes_only_the_waiters_of_its_partition() {
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = leader(d1.path(), role(0, &[1], &[1, 2, 3]));
    let b = leader(d2.path(), role(0, &[1], &[1, 2, 3]));
    let (mut on_a, on_b) = (a.subscribe(), b.subscribe());
    append(&a, 2);
    assert!(on_a.has_changed().unwrap(), "a's waiters see its append");
    assert!(!on_b.has_changed().unwrap(), "b's waiters sleep on");
    let now = *on_a.borrow_and_update();
    assert_eq!((now.log_end_offset, now.high_watermark), (2, 2));
}

#[test]
fn a_woken_fetch_reads_only_past_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let p = leader(dir.path(), role(0, &[1, 2], &[1, 2, 3]));
    append(&p, 5);
    let seen = *p.subscribe().borrow();
    // A consumer at the HW (0) and a follower at the LEO (5) have nothing new yet.
    assert!(!seen.has_news_for(&seen, 0, ReadBound::HighWatermark));
    assert!(!seen.has_news_for(&seen, 5, ReadBound::LogEnd));
    append(&p, 1);
    let now = *p.subscribe().borrow();
    assert!(
        now.has_news_for(&seen, 5, ReadBound::LogEnd),
        "the follower has a batch"
    );
    assert!(
        !now.has_news_for(&seen, 0, ReadBound::HighWatermark),
        "the HW did not move"
    );
    p.record_follower_fetch(2, 6);
    let later = *p.subscribe().borrow();
    assert!(
        later.has_news_for(&seen, 0, ReadBound::HighWatermark),
        "now the consumer has"
    );
}

#[test]
fn a_follower_fetch_diverging_from_our_epochs_is_answered_and_not_recorded() {
    let dir = tempfile::tempdir().unwrap();
    // Epoch 0 wrote offsets 0..5; this broker then led epoch 2 from offset 5.
    let p = leader(dir.path(), role(0, &[1, 2], &[1, 2, 3]));
    append(&p, 5);
    p.set_role(role(2, &[1, 2], &[1, 2, 3]));
    append(&p, 5);
    // The follower has 8 records, the last of epoch 1, which this leader never had: its log
    // matches ours only up to where epoch 0 ended (runnel_replication::diverging_epoch).
    match p.serve_follower_fetch(2, 8, Some(1), 0) {
        FollowerPosition::Diverging { epoch_end, .. } => {
            assert_eq!((epoch_end.epoch, epoch_end.end_offset), (0, 5))
        }
        other => panic!("expected a divergence, got {other:?}"),
    }
    assert_eq!(hw(&p), 0, "a diverging position does not move the HW");
    // Its last fetched epoch checks out: the position is recorded.
    assert!(matches!(
        p.serve_follower_fetch(2, 10, Some(2), 0),
        FollowerPosition::Recorded { .. }
    ));
    assert_eq!(hw(&p), 10);
    // Without a last fetched epoch (Fetch < v12) only the position counts; past our end it
    // is not a position.
    assert!(matches!(
        p.serve_follower_fetch(2, 11, None, 0),
        FollowerPosition::OutsideLog
    ));
}
