//! Property tests of [`LeaderPartitionState`] under random appends, follower fetches, clock
//! ticks, shrink checks and controller answers. A model tracks what each follower really has,
//! so the invariants are checked against the truth, not against the leader's own view.

use std::collections::BTreeMap;

use proptest::prelude::*;
use runnel_replication::*;

const LAG: i64 = 1_000;
const T0: i64 = 1_000_000;
const FOLLOWERS: [i32; 3] = [2, 3, 4];

#[derive(Debug, Clone)]
enum Op {
    Append(i64),
    /// Follower (index) fetches, advancing its position by up to `step` records.
    Fetch(usize, i64),
    Tick(i64),
    Shrink,
    /// The controller commits the pending change (or the image brings it).
    Commit,
    /// The controller rejects the pending change.
    Reject,
    /// An acks=all produce of the records appended so far is parked.
    Park,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1i64..20).prop_map(Op::Append),
        6 => (0usize..3, 0i64..30).prop_map(|(f, s)| Op::Fetch(f, s)),
        3 => (1i64..800).prop_map(Op::Tick),
        2 => Just(Op::Shrink),
        2 => Just(Op::Commit),
        1 => Just(Op::Reject),
        2 => Just(Op::Park),
    ]
}

struct Model {
    state: LeaderPartitionState,
    now: i64,
    /// What each follower really has (its LEO); only grows.
    truth: BTreeMap<i32, i64>,
    /// Followers removed by a committed shrink and not re-added since.
    shrunk: Vec<i32>,
    parked: Vec<i64>,
    last_hw: i64,
}

fn run(
    init_isr: Vec<i32>,
    start_leo: i64,
    min_isr: i32,
    ops: Vec<Op>,
) -> Result<(), TestCaseError> {
    let mut isr = vec![1];
    isr.extend(init_isr);
    let state = LeaderPartitionState::new(
        BecomeLeader {
            leader: 1,
            replicas: vec![1, 2, 3, 4],
            isr: isr.clone(),
            leader_epoch: 3,
            partition_epoch: 10,
            log_end_offset: start_leo,
            high_watermark: start_leo / 2,
        },
        LeaderConfig {
            replica_lag_time_max_ms: LAG,
            min_insync_replicas: min_isr,
        },
        T0,
    );
    // ISR members have at least the HW; the others may have anything up to the leader's LEO.
    let truth = FOLLOWERS
        .iter()
        .map(|&f| {
            (
                f,
                if isr.contains(&f) {
                    start_leo / 2 + i64::from(f) % 3
                } else {
                    i64::from(f)
                },
            )
        })
        .map(|(f, v)| (f, v.min(start_leo)))
        .collect();
    let mut m = Model {
        last_hw: state.high_watermark(),
        state,
        now: T0,
        truth,
        shrunk: Vec::new(),
        parked: Vec::new(),
    };
    for op in ops {
        step(&mut m, op)?;
        check(&m)?;
    }
    Ok(())
}

fn step(m: &mut Model, op: Op) -> Result<(), TestCaseError> {
    let s = &mut m.state;
    match op {
        Op::Append(n) => {
            let leo = s.log_end_offset() + n;
            let hw_before = s.high_watermark();
            let changed = s.on_leader_append(leo, m.now);
            prop_assert_eq!(changed, s.high_watermark() != hw_before);
        }
        Op::Fetch(i, step) => {
            let f = FOLLOWERS[i];
            let offset = (m.truth[&f] + step).min(s.log_end_offset());
            let hw_before = s.high_watermark();
            let out = s.on_follower_fetch(f, offset, m.now).expect("valid fetch");
            m.truth.insert(f, offset);
            prop_assert_eq!(out.hw_changed, s.high_watermark() != hw_before);
            if let Some(proposed) = out.isr_expand {
                // A follower only (re)joins once it has caught up: HW and epoch start.
                prop_assert!(offset >= hw_before, "expand below the HW");
                prop_assert!(offset >= s.leader_epoch_start_offset());
                prop_assert!(proposed.contains(&f) && !s.isr().contains(&f));
                prop_assert_eq!(s.pending_isr(), Some(&proposed[..]));
            }
        }
        Op::Tick(dt) => m.now += dt,
        Op::Shrink => {
            let before = s.isr().to_vec();
            if let Some(proposed) = s.maybe_shrink_isr(m.now) {
                prop_assert!(proposed.contains(&1), "the leader never removes itself");
                for r in before.iter().filter(|r| !proposed.contains(r)) {
                    let f = *s.follower(*r).unwrap();
                    prop_assert!(f.log_end_offset != s.log_end_offset());
                    prop_assert!(m.now - f.last_caught_up_time_ms > LAG);
                }
            }
        }
        Op::Commit => {
            if let Some(pending) = s.pending_isr().map(<[i32]>::to_vec) {
                let before = s.isr().to_vec();
                let epoch = s.partition_epoch() + 1;
                prop_assert!(s
                    .apply_committed_isr(pending.clone(), epoch, m.now)
                    .is_some());
                for r in &before {
                    if !pending.contains(r) {
                        m.shrunk.push(*r);
                    }
                }
                m.shrunk.retain(|r| !pending.contains(r));
            }
        }
        Op::Reject => s.abandon_pending_isr(),
        Op::Park => {
            if s.can_accept_acks_all().is_ok() {
                m.parked.push(s.log_end_offset());
            } else {
                prop_assert!((s.isr().len() as i32) < s.config().min_insync_replicas);
            }
        }
    }
    Ok(())
}

fn check(m: &Model) -> Result<(), TestCaseError> {
    let s = &m.state;
    let hw = s.high_watermark();
    prop_assert!(
        hw >= m.last_hw,
        "HW moved backwards: {} -> {}",
        m.last_hw,
        hw
    );
    prop_assert!(hw <= s.log_end_offset());
    for r in s.maximal_isr() {
        if r != 1 {
            prop_assert!(
                hw <= m.truth[&r],
                "HW {} above ISR member {}'s LEO {}",
                hw,
                r,
                m.truth[&r]
            );
        }
    }
    for r in &m.shrunk {
        prop_assert!(
            !s.isr().contains(r),
            "{} back in the ISR without rejoining",
            r
        );
    }
    for &required in &m.parked {
        if s.acks_all_outcome(required) != AcksOutcome::Pending {
            for &r in s.isr() {
                let leo = if r == 1 {
                    s.log_end_offset()
                } else {
                    m.truth[&r]
                };
                prop_assert!(
                    leo >= required,
                    "acks=all done at {} but {} has {}",
                    required,
                    r,
                    leo
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(crate::config(512, "tests/replication/regressions/leader_state_props.txt"))]

    #[test]
    fn leader_invariants_hold(
        init_isr in proptest::sample::subsequence(FOLLOWERS.to_vec(), 0..=3),
        start_leo in 0i64..50,
        min_isr in 1i32..=3,
        ops in proptest::collection::vec(op(), 1..120),
    ) {
        run(init_isr, start_leo, min_isr, ops)?;
    }

    /// With every follower fetching to the end and no time passing, the HW reaches the LEO:
    /// the rule is not vacuously safe by never advancing.
    #[test]
    fn hw_reaches_the_leo_when_everyone_caught_up(
        appends in proptest::collection::vec(1i64..50, 1..10),
    ) {
        let mut s = LeaderPartitionState::new(
            BecomeLeader { leader: 1, replicas: vec![1, 2, 3], isr: vec![1, 2, 3], leader_epoch: 0,
                partition_epoch: 0, log_end_offset: 0, high_watermark: 0 },
            LeaderConfig::default(),
            T0,
        );
        let mut leo = 0;
        for n in appends {
            leo += n;
            s.on_leader_append(leo, T0);
            s.on_follower_fetch(2, leo, T0).unwrap();
            s.on_follower_fetch(3, leo, T0).unwrap();
            prop_assert_eq!(s.high_watermark(), leo);
            prop_assert_eq!(s.acks_all_outcome(leo), AcksOutcome::Done);
        }
    }
}
