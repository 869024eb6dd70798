//! Spec E.2 - E.4 on one leader: caught-up times, ISR shrink and expand, the HW, acks=all.

use std::collections::BTreeSet;

use runnel_replication::*;

const LAG: i64 = 30_000;
const T0: i64 = 1_700_000_000_000;

/// Leader 1 with followers 2 and 3, all in the ISR, at leader epoch 5.
fn leader(leo: i64, hw: i64, isr: &[i32], min_isr: i32) -> LeaderPartitionState {
    LeaderPartitionState::new(
        BecomeLeader {
            leader: 1,
            replicas: vec![1, 2, 3],
            isr: isr.to_vec(),
            leader_epoch: 5,
            partition_epoch: 7,
            log_end_offset: leo,
            high_watermark: hw,
        },
        LeaderConfig {
            replica_lag_time_max_ms: LAG,
            min_insync_replicas: min_isr,
        },
        T0,
    )
}

fn fetch(s: &mut LeaderPartitionState, r: i32, offset: i64, now: i64) -> FetchOutcome {
    s.on_follower_fetch(r, offset, now).expect("fetch accepted")
}

#[test]
fn spec_e3_example_hw_5_then_8_after_the_slow_follower_is_dropped() {
    // F2 (3) caught up at 5, F1 (2) caught up at 8 later; the leader is at 10.
    let mut s = leader(5, 0, &[1, 2, 3], 1);
    fetch(&mut s, 3, 5, T0);
    assert_eq!(s.high_watermark(), 0, "follower 2 has not fetched yet");
    s.on_leader_append(8, T0 + 1);
    fetch(&mut s, 2, 8, T0 + 20_000);
    s.on_leader_append(10, T0 + 20_001);
    assert_eq!(s.high_watermark(), 5, "leader 10, F1 8, F2 5 -> HW 5");

    // Exactly the lag time since F2 last caught up: still in sync (strictly greater).
    assert_eq!(s.maybe_shrink_isr(T0 + LAG), None);
    let proposed = s.maybe_shrink_isr(T0 + LAG + 1).expect("F2 is out of sync");
    assert_eq!(proposed, vec![1, 2]);
    assert_eq!(s.pending_isr(), Some(&[1, 2][..]));
    assert_eq!(s.isr(), &[1, 2, 3], "only the controller changes the ISR");
    assert_eq!(
        s.candidate_high_watermark(T0 + LAG + 1),
        5,
        "a member being removed holds the HW until the removal is committed"
    );

    assert_eq!(
        s.apply_committed_isr(vec![1, 2], 8, T0 + LAG + 2),
        Some(true)
    );
    assert_eq!(s.high_watermark(), 8, "F2 dropped -> HW 8");
    assert_eq!(s.pending_isr(), None);
    assert_eq!(s.partition_epoch(), 8);
}

#[test]
fn fetch_at_the_leaders_leo_catches_up_now() {
    let mut s = leader(10, 10, &[1, 2, 3], 1);
    fetch(&mut s, 2, 10, T0 + 500);
    let f = s.follower(2).unwrap();
    assert_eq!(f.log_end_offset, 10);
    assert_eq!(f.last_caught_up_time_ms, T0 + 500);
    assert_eq!(f.last_fetch_time_ms, T0 + 500);
    assert_eq!(f.last_fetch_leader_leo, 10);
}

#[test]
fn fetch_at_the_previous_fetchs_leo_caught_up_at_the_previous_fetch() {
    let mut s = leader(10, 10, &[1, 2, 3], 1);
    fetch(&mut s, 2, 10, T0 + 1_000); // caught up at T0+1000, leader LEO then 10
    s.on_leader_append(20, T0 + 1_500);
    fetch(&mut s, 2, 10, T0 + 2_000); // reached the previous LEO (10): caught up at T0+1000
    assert_eq!(s.follower(2).unwrap().last_caught_up_time_ms, T0 + 1_000);
    s.on_leader_append(30, T0 + 2_500);
    fetch(&mut s, 2, 20, T0 + 3_000); // reached 20 = LEO at the previous fetch (T0+2000)
    assert_eq!(s.follower(2).unwrap().last_caught_up_time_ms, T0 + 2_000);
    fetch(&mut s, 2, 25, T0 + 4_000); // below the previous fetch's LEO (30): no change
    assert_eq!(s.follower(2).unwrap().last_caught_up_time_ms, T0 + 2_000);
}

#[test]
fn a_follower_always_one_fetch_behind_a_busy_leader_stays_in_the_isr() {
    let mut s = leader(0, 0, &[1, 2, 3], 1);
    let mut now = T0;
    for i in 1..200 {
        now += 1_000;
        // The leader keeps appending between fetches; each fetch reaches the previous LEO.
        let prev = s.log_end_offset();
        s.on_leader_append(i * 10, now - 1);
        fetch(&mut s, 2, prev, now);
        fetch(&mut s, 3, prev, now);
        assert_eq!(s.maybe_shrink_isr(now), None, "at {now}");
    }
    assert!(s.high_watermark() > 0);
}

#[test]
fn shrink_removes_lagging_followers_but_never_the_leader() {
    let mut s = leader(10, 0, &[1, 2, 3], 1);
    // Nobody fetches: both followers lag once the lag time passed.
    assert_eq!(s.maybe_shrink_isr(T0 + LAG + 1), Some(vec![1]));
    s.apply_committed_isr(vec![1], 8, T0 + LAG + 1);
    assert_eq!(s.high_watermark(), 10, "a lone leader's HW is its LEO");
    assert_eq!(s.maybe_shrink_isr(T0 + 10 * LAG), None, "the leader stays");
}

#[test]
fn a_follower_with_the_leaders_whole_log_is_never_shrunk() {
    let mut s = leader(10, 10, &[1, 2, 3], 1);
    fetch(&mut s, 2, 10, T0);
    fetch(&mut s, 3, 10, T0);
    // Nothing appended for a long time: LEO == leader LEO keeps them in sync.
    assert_eq!(s.maybe_shrink_isr(T0 + 100 * LAG), None);
}

#[test]
fn one_isr_change_in_flight_at_a_time() {
    let mut s = leader(10, 10, &[1, 2], 1);
    assert_eq!(s.maybe_shrink_isr(T0 + LAG + 1), Some(vec![1]));
    // 3 catches up while the shrink is pending: no second proposal.
    let out = fetch(&mut s, 3, 10, T0 + LAG + 2);
    assert_eq!(out.isr_expand, None);
    assert_eq!(s.maybe_shrink_isr(T0 + LAG + 3), None);
    s.apply_committed_isr(vec![1], 8, T0 + LAG + 4);
    let out = fetch(&mut s, 3, 10, T0 + LAG + 5);
    assert_eq!(out.isr_expand, Some(vec![1, 3]));
}

#[test]
fn expand_needs_the_hw_and_the_epoch_start_offset() {
    // New leader at LEO 100 (epoch start 100) with HW 80; 3 is out of the ISR.
    let mut s = leader(100, 80, &[1, 2], 1);
    assert_eq!(s.leader_epoch_start_offset(), 100);
    let out = fetch(&mut s, 3, 79, T0);
    assert_eq!(out.isr_expand, None, "below the HW");
    let out = fetch(&mut s, 3, 90, T0 + 1);
    assert_eq!(
        out.isr_expand, None,
        "at or above the HW but below the epoch start: may hold a divergent tail"
    );
    let out = fetch(&mut s, 3, 100, T0 + 2);
    assert_eq!(out.isr_expand, Some(vec![1, 2, 3]));
    assert_eq!(s.maximal_isr(), vec![1, 2, 3]);
    assert_eq!(s.isr(), &[1, 2]);
}

#[test]
fn a_member_being_added_holds_the_hw_before_the_controller_confirms() {
    let mut s = leader(100, 100, &[1, 2], 1);
    fetch(&mut s, 2, 100, T0);
    let out = fetch(&mut s, 3, 100, T0 + 1);
    assert_eq!(out.isr_expand, Some(vec![1, 2, 3]));
    s.on_leader_append(150, T0 + 2);
    fetch(&mut s, 2, 150, T0 + 3);
    assert_eq!(s.high_watermark(), 100, "3 (pending) is at 100");
    fetch(&mut s, 3, 150, T0 + 4);
    assert_eq!(s.high_watermark(), 150);
}

#[test]
fn a_caught_up_follower_outside_the_isr_holds_the_hw_so_it_can_rejoin() {
    let mut s = leader(100, 100, &[1], 1);
    // 2's expansion is pending, which blocks 3's: only the caught-up rule counts 3 in.
    assert_eq!(fetch(&mut s, 2, 100, T0).isr_expand, Some(vec![1, 2]));
    assert_eq!(fetch(&mut s, 3, 100, T0 + 1).isr_expand, None);
    s.on_leader_append(120, T0 + 2);
    fetch(&mut s, 2, 120, T0 + 3);
    assert_eq!(
        s.high_watermark(),
        100,
        "3 is caught up within the lag time"
    );
    // Once 3 is no longer caught up, it stops holding the HW.
    assert_eq!(s.candidate_high_watermark(T0 + 1 + LAG), 100);
    assert_eq!(s.candidate_high_watermark(T0 + 2 + LAG), 120);
    // An ineligible (fenced) broker never holds it.
    s.set_ineligible_replicas(BTreeSet::from([3]));
    assert_eq!(s.candidate_high_watermark(T0 + 5), 120);
}

#[test]
fn ineligible_followers_are_not_proposed() {
    let mut s = leader(10, 10, &[1, 2], 1);
    s.set_ineligible_replicas(BTreeSet::from([3]));
    assert_eq!(fetch(&mut s, 3, 10, T0).isr_expand, None);
    s.set_ineligible_replicas(BTreeSet::new());
    assert_eq!(fetch(&mut s, 3, 10, T0 + 1).isr_expand, Some(vec![1, 2, 3]));
}

#[test]
fn hw_never_moves_backwards_even_if_a_follower_regresses() {
    let mut s = leader(10, 0, &[1, 2], 1);
    fetch(&mut s, 2, 10, T0);
    assert_eq!(s.high_watermark(), 10);
    // The follower lost unflushed data (unclean restart) and fetches from 4.
    let out = fetch(&mut s, 2, 4, T0 + 1);
    assert!(!out.hw_changed);
    assert_eq!(s.high_watermark(), 10);
    assert_eq!(s.candidate_high_watermark(T0 + 1), 4);
}

#[test]
fn unknown_follower_positions_hold_the_hw_after_a_leader_change() {
    // A new leader knows nothing of its followers' positions yet.
    let mut s = leader(50, 40, &[1, 2, 3], 1);
    assert!(!s.on_leader_append(60, T0));
    assert_eq!(s.high_watermark(), 40);
    assert_eq!(s.follower(2).unwrap().log_end_offset, UNKNOWN_OFFSET);
    fetch(&mut s, 2, 60, T0 + 1);
    assert_eq!(s.high_watermark(), 40, "3 is still unknown");
    let out = fetch(&mut s, 3, 55, T0 + 2);
    assert!(out.hw_changed);
    assert_eq!(s.high_watermark(), 55);
}

#[test]
fn new_leader_clamps_its_hw_to_its_leo() {
    let s = leader(10, 25, &[1, 2, 3], 1);
    assert_eq!(s.high_watermark(), 10);
}

#[test]
fn a_new_leader_alone_in_its_isr_exposes_its_whole_log_at_once() {
    // A restarted single replica: its checkpointed HW (0) lags its recovered log (10).
    let s = leader(10, 0, &[1], 1);
    assert_eq!(
        s.high_watermark(),
        10,
        "Kafka's makeLeader: maybeIncrementLeaderHW"
    );
    // Followers in the ISR have unknown LEOs on a new leader: they hold the HW.
    let s = leader(10, 4, &[1, 2], 1);
    assert_eq!(s.high_watermark(), 4);
}

#[test]
fn initial_caught_up_times_depend_on_isr_membership() {
    let s = leader(10, 10, &[1, 2], 1);
    assert_eq!(s.follower(2).unwrap().last_caught_up_time_ms, T0);
    assert_eq!(s.follower(3).unwrap().last_caught_up_time_ms, 0);
    assert_eq!(s.follower(1), None, "the leader is not its own follower");
}

#[test]
fn fetch_errors() {
    let mut s = leader(10, 10, &[1, 2, 3], 1);
    let e = s.on_follower_fetch(9, 5, T0).unwrap_err();
    assert_eq!((e, e.code()), (FetchError::NotAReplica, 6));
    let e = s.on_follower_fetch(1, 5, T0).unwrap_err();
    assert_eq!(
        e,
        FetchError::NotAReplica,
        "the leader does not fetch from itself"
    );
    let e = s.on_follower_fetch(2, 11, T0).unwrap_err();
    assert_eq!((e, e.code()), (FetchError::OffsetOutOfRange, 1));
    assert_eq!(s.follower(2).unwrap().log_end_offset, UNKNOWN_OFFSET);
}

#[test]
fn stale_committed_isr_is_ignored() {
    let mut s = leader(10, 0, &[1, 2, 3], 1);
    assert_eq!(s.apply_committed_isr(vec![1], 6, T0), None);
    assert_eq!(s.isr(), &[1, 2, 3]);
    assert_eq!(s.partition_epoch(), 7);
    // The same epoch again (e.g. the AlterPartition answer after the image) settles pending.
    s.maybe_shrink_isr(T0 + LAG + 1).unwrap();
    assert_eq!(s.apply_committed_isr(vec![1], 8, T0 + LAG + 1), Some(true));
    assert_eq!(s.apply_committed_isr(vec![1], 8, T0 + LAG + 1), Some(false));
}

#[test]
fn abandoning_a_rejected_change_allows_a_new_proposal() {
    let mut s = leader(10, 10, &[1, 2, 3], 1);
    assert!(s.maybe_shrink_isr(T0 + LAG + 1).is_some());
    assert_eq!(s.maybe_shrink_isr(T0 + LAG + 2), None);
    s.abandon_pending_isr();
    assert_eq!(s.maybe_shrink_isr(T0 + LAG + 3), Some(vec![1]));
}

#[test]
fn acks_all_needs_min_isr_before_and_after_append() {
    let mut s = leader(0, 0, &[1, 2, 3], 2);
    assert_eq!(s.can_accept_acks_all(), Ok(()));
    s.on_leader_append(5, T0);
    assert_eq!(s.acks_all_outcome(5), AcksOutcome::Pending);
    fetch(&mut s, 2, 5, T0 + 1);
    assert_eq!(s.acks_all_outcome(5), AcksOutcome::Pending, "3 lacks it");
    fetch(&mut s, 3, 3, T0 + 2);
    assert_eq!(s.acks_all_outcome(3), AcksOutcome::Done);
    assert_eq!(s.acks_all_outcome(5), AcksOutcome::Pending);
    // 3 drops out: the request completes, but the ISR is now below min.insync.replicas=2?
    // No: [1, 2] is exactly 2.
    s.maybe_shrink_isr(T0 + LAG + 10).unwrap();
    s.apply_committed_isr(vec![1, 2], 8, T0 + LAG + 10);
    assert_eq!(s.acks_all_outcome(5), AcksOutcome::Done);
    assert_eq!(AcksOutcome::Done.error_code(), Some(0));

    // Down to [1]: new acks=all produces are refused before appending (19) ...
    s.on_leader_append(9, T0 + LAG + 11);
    s.maybe_shrink_isr(T0 + 3 * LAG).unwrap();
    s.apply_committed_isr(vec![1], 9, T0 + 3 * LAG);
    let err = s.can_accept_acks_all().unwrap_err();
    assert_eq!(
        err,
        NotEnoughReplicas {
            isr_size: 1,
            min_insync_replicas: 2
        }
    );
    assert_eq!(NotEnoughReplicas::CODE, 19);
    // ... and a parked one that reaches the HW now fails with 20 (the data is in the log).
    assert_eq!(s.high_watermark(), 9);
    assert_eq!(
        s.acks_all_outcome(9),
        AcksOutcome::NotEnoughReplicasAfterAppend
    );
    assert_eq!(
        AcksOutcome::NotEnoughReplicasAfterAppend.error_code(),
        Some(20)
    );
    assert_eq!(AcksOutcome::Pending.error_code(), None);
}

#[test]
fn acks_decisions_in_isolation() {
    assert_eq!(acks_all_outcome(10, 11, 3, 2), AcksOutcome::Pending);
    assert_eq!(acks_all_outcome(11, 11, 3, 2), AcksOutcome::Done);
    assert_eq!(acks_all_outcome(11, 11, 2, 2), AcksOutcome::Done);
    assert_eq!(
        acks_all_outcome(11, 11, 1, 2),
        AcksOutcome::NotEnoughReplicasAfterAppend
    );
    assert!(check_min_isr(0, 1).is_err());
    assert!(check_min_isr(1, 1).is_ok());
    assert!(check_min_isr(3, 0).is_ok());
    assert_eq!(
        check_min_isr(1, 3).unwrap_err().to_string(),
        "The size of the current ISR 1 is insufficient to satisfy the min.isr requirement of 3"
    );
}

#[test]
fn leader_epoch_fencing() {
    assert_eq!(check_leader_epoch(-1, 5), Ok(()));
    assert_eq!(check_leader_epoch(5, 5), Ok(()));
    assert_eq!(check_leader_epoch(4, 5), Err(74));
    assert_eq!(check_leader_epoch(6, 5), Err(75));
}

// ---- regressions found by the replication simulation (tests/replication/sim.rs) --------

/// Follower 3 catches up with leader 1 (ISR [1, 2], HW 10) and the expansion to [1, 2, 3] is
/// proposed against partition epoch 7. Returns the state with that change pending.
fn with_expansion_pending() -> LeaderPartitionState {
    let mut s = leader(10, 10, &[1, 2], 1);
    fetch(&mut s, 2, 10, T0);
    let out = fetch(&mut s, 3, 10, T0 + 1);
    assert_eq!(out.isr_expand, Some(vec![1, 2, 3]));
    s
}

/// 3 goes silent for longer than the lag time while 1 and 2 move on to 20: a pending
/// expansion must keep holding the HW at 3's position.
fn three_falls_behind(s: &mut LeaderPartitionState) {
    let later = T0 + 2 * LAG;
    s.on_leader_append(20, later);
    fetch(s, 2, 20, later + 1);
    assert!(!s.follower(3).unwrap().is_caught_up(20, later + 1, LAG));
}

/// Found by the simulation: the AlterPartition answer for one change (epoch 8) arrived before
/// the image with that epoch; the leader proposed the next change (adding 3) in between,
/// and the controller committed it (epoch 9). The image at epoch 8 used to settle that next
/// change too, so the HW passed follower 3 while the controller had it in the ISR: had 1 and
/// 2 failed then, 3 would have been elected without acknowledged records.
#[test]
fn an_image_with_the_same_epoch_keeps_a_change_proposed_after_the_answer() {
    let mut s = leader(10, 10, &[1, 2, 3], 1);
    fetch(&mut s, 2, 10, T0 + LAG);
    assert_eq!(s.maybe_shrink_isr(T0 + LAG + 1), Some(vec![1, 2]));
    // The AlterPartition answer: [1, 2] at epoch 8.
    assert_eq!(
        s.apply_committed_isr(vec![1, 2], 8, T0 + LAG + 2),
        Some(false)
    );
    // 3 catches up again: the next change, against epoch 8.
    let out = fetch(&mut s, 3, 10, T0 + LAG + 3);
    assert_eq!(out.isr_expand, Some(vec![1, 2, 3]));
    // The image with epoch 8 arrives: nothing new, the expansion stays pending.
    assert_eq!(
        s.apply_committed_isr(vec![1, 2], 8, T0 + LAG + 4),
        Some(false)
    );
    assert_eq!(s.pending_isr(), Some(&[1, 2, 3][..]));
    assert_eq!(
        s.maybe_shrink_isr(T0 + LAG + 5),
        None,
        "still one change in flight"
    );

    let later = T0 + 3 * LAG;
    s.on_leader_append(20, later);
    fetch(&mut s, 2, 20, later + 1);
    assert_eq!(s.high_watermark(), 10, "3 (being added) holds the HW");
    // The image with the expansion (epoch 9) settles it.
    assert_eq!(
        s.apply_committed_isr(vec![1, 2, 3], 9, later + 2),
        Some(false)
    );
    assert_eq!(s.pending_isr(), None);
    assert_eq!(s.isr(), &[1, 2, 3]);
}

/// The same epoch again with exactly the pending ISR settles it (the controller's answer
/// to a change that was already in place: `changed: false`).
#[test]
fn the_same_epoch_settles_a_change_that_is_already_in_place() {
    let mut s = with_expansion_pending();
    assert_eq!(s.apply_committed_isr(vec![1, 2, 3], 7, T0 + 2), Some(false));
    assert_eq!(s.pending_isr(), None);
    assert_eq!(s.partition_epoch(), 7);
}

/// Found by the simulation: the first attempt of an expansion was committed (epoch 8) but its
/// answer was lost; the retry was refused with 95 INVALID_UPDATE_VERSION. Forgetting the
/// change then (as `abandon_pending_isr` was documented for 95) let the HW pass follower 3,
/// which the controller had in the ISR.
#[test]
fn a_refused_attempt_keeps_the_change_pending_until_the_image_settles_it() {
    for code in [95, 74, 42, 3] {
        let mut s = with_expansion_pending();
        assert_eq!(
            s.on_alter_partition_error(code),
            AlterPartitionFailure::AwaitMetadata,
            "{code}"
        );
        assert_eq!(s.pending_isr(), Some(&[1, 2, 3][..]), "{code}");
        three_falls_behind(&mut s);
        assert_eq!(
            s.high_watermark(),
            10,
            "{code}: 3 may be in the ISR already"
        );
        assert_eq!(s.maybe_shrink_isr(T0 + 3 * LAG), None, "{code}");
        // The image shows the first attempt committed.
        assert_eq!(
            s.apply_committed_isr(vec![1, 2, 3], 8, T0 + 3 * LAG),
            Some(false)
        );
        assert_eq!(s.pending_isr(), None, "{code}");
    }
}

#[test]
fn alter_partition_errors_that_retry_or_drop() {
    for code in [41, 7, 0] {
        let mut s = with_expansion_pending();
        assert_eq!(
            s.on_alter_partition_error(code),
            AlterPartitionFailure::Retry
        );
        assert_eq!(s.pending_isr(), Some(&[1, 2, 3][..]));
    }
    // 107: this very request was checked against the current epoch and refused, so no
    // attempt was applied; the HW is free to move past 3 and a new proposal may follow.
    let mut s = with_expansion_pending();
    assert_eq!(
        s.on_alter_partition_error(107),
        AlterPartitionFailure::Dropped
    );
    assert_eq!(s.pending_isr(), None);
    three_falls_behind(&mut s);
    assert_eq!(s.high_watermark(), 20);
}

#[test]
fn a_reassignment_adds_unknown_followers_and_forgets_removed_ones() {
    let mut s = leader(10, 0, &[1, 2, 3], 1);
    fetch(&mut s, 2, 10, T0);
    fetch(&mut s, 3, 10, T0);
    assert_eq!(s.high_watermark(), 10);
    // 4 joins the assignment; 3 leaves it (a move from [1,2,3] to [1,2,4] in progress).
    s.update_replicas(vec![1, 2, 4, 3], T0 + 1);
    assert!(s
        .follower(4)
        .is_some_and(|f| f.log_end_offset == UNKNOWN_OFFSET));
    assert_eq!(s.follower(2).map(|f| f.log_end_offset), Some(10), "kept");
    s.on_leader_append(20, T0 + 2);
    fetch(&mut s, 2, 20, T0 + 2);
    fetch(&mut s, 3, 20, T0 + 2);
    assert_eq!(
        s.high_watermark(),
        20,
        "4 is not in the ISR and never caught up"
    );
    let outcome = fetch(&mut s, 4, 20, T0 + 3);
    assert_eq!(outcome.isr_expand, Some(vec![1, 2, 3, 4]));
    s.update_replicas(vec![1, 2, 4], T0 + 4);
    assert!(s.follower(3).is_none());
    assert_eq!(s.pending_isr(), Some(&[1, 2, 3, 4][..]), "still pending");
}

/// Issue 9 item 7: DeleteRecords answers only once every live replica dropped the records
/// (Kafka's low watermark). Before the fix the leader tracked no follower log start at all,
/// so there was nothing to wait for and deleted records came back after a failover.
#[test]
fn low_watermark_is_the_smallest_log_start_of_the_live_replicas() {
    let mut s = leader(100, 100, &[1, 2, 3], 1);
    assert_eq!(
        s.low_watermark(50),
        UNKNOWN_OFFSET,
        "followers that have not fetched yet hold it back"
    );
    fetch(&mut s, 2, 100, T0);
    assert!(s.on_follower_log_start(2, 50));
    assert!(
        !s.on_follower_log_start(2, 50),
        "no change, nothing to wake"
    );
    assert_eq!(
        s.low_watermark(50),
        UNKNOWN_OFFSET,
        "follower 3 still unknown"
    );
    fetch(&mut s, 3, 100, T0);
    s.on_follower_log_start(3, 20);
    assert_eq!(s.low_watermark(50), 20, "follower 3 still has 20..50");
    s.on_follower_log_start(3, 60);
    assert_eq!(
        s.low_watermark(50),
        50,
        "the leader's own log start counts too"
    );
    assert_eq!(s.low_watermark(70), 50);
}

#[test]
fn a_dead_follower_does_not_hold_the_low_watermark_back_and_unknowns_are_ignored() {
    let mut s = leader(100, 100, &[1, 2, 3], 1);
    fetch(&mut s, 2, 100, T0);
    s.on_follower_log_start(2, 40);
    s.set_ineligible_replicas(BTreeSet::from([3]));
    assert_eq!(
        s.low_watermark(40),
        40,
        "fenced follower 3 is not waited for"
    );
    assert!(!s.on_follower_log_start(9, 0), "not a replica: ignored");
    assert_eq!(s.low_watermark(40), 40);
}

/// `on_image`, what the broker and the simulation both run on every image of a partition
/// they keep leading: the committed ISR moves the HW, an older partition epoch is ignored,
/// and a fenced broker (ineligible) is not proposed back into the ISR.
#[test]
fn every_image_of_the_same_leader_epoch_goes_through_on_image() {
    let config = LeaderConfig {
        replica_lag_time_max_ms: LAG,
        min_insync_replicas: 1,
    };
    let mut s = leader(10, 0, &[1, 2, 3], 1);
    fetch(&mut s, 2, 10, T0);
    let image = |isr: &'static [i32], epoch, ineligible: &[i32]| LeaderImage {
        replicas: &[1, 2, 3],
        isr,
        partition_epoch: epoch,
        ineligible: ineligible.iter().copied().collect(),
    };
    // 3 never fetched: it holds the HW until the image drops it.
    assert_eq!(s.high_watermark(), 0);
    assert!(s.on_image(image(&[1, 2], 8, &[3]), config, T0 + 1));
    assert_eq!((s.isr(), s.high_watermark()), (&[1, 2][..], 10));
    // A late image of an older partition epoch changes nothing.
    assert!(!s.on_image(image(&[1, 2, 3], 7, &[3]), config, T0 + 2));
    assert_eq!(s.isr(), &[1, 2]);
    // Caught up but fenced: not proposed.
    let out = fetch(&mut s, 3, 10, T0 + 3);
    assert_eq!(out.isr_expand, None);
    assert_eq!(
        ineligible_replicas(&[1, 2, 3], |r| r != 3),
        BTreeSet::from([3])
    );
}
