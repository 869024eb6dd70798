//! Spec F: per-broker leader imbalance and the automatic preferred-leader rebalance.

use std::collections::BTreeSet;

use proptest::prelude::*;
use runnel_metadata::replication::*;

struct P {
    assignment: Vec<i32>,
    isr: Vec<i32>,
    leader: Option<i32>,
    deleting: bool,
}

fn p(assignment: &[i32], leader: i32) -> P {
    P {
        assignment: assignment.to_vec(),
        isr: assignment.to_vec(),
        leader: Some(leader),
        deleting: false,
    }
}

fn view(ps: &[P]) -> Vec<PartitionLeadership<'_, usize>> {
    ps.iter()
        .enumerate()
        .map(|(key, x)| PartitionLeadership {
            key,
            assignment: &x.assignment,
            isr: &x.isr,
            leader: x.leader,
            deleting: x.deleting,
        })
        .collect()
}

/// Broker 1 preferred for 10 partitions, leading `led` of them (the rest led by 2).
fn ten_preferred_by_1(led: usize) -> Vec<P> {
    (0..10)
        .map(|i| p(&[1, 2, 3], if i < led { 1 } else { 2 }))
        .collect()
}

fn all_live() -> BTreeSet<i32> {
    BTreeSet::from([1, 2, 3])
}

#[test]
fn spec_example_8_of_10_triggers_a_preferred_election_for_the_2() {
    let ps = ten_preferred_by_1(8);
    let plan = auto_rebalance(&view(&ps), &all_live(), 10, false);
    let b1 = plan.imbalance[&1];
    assert_eq!((b1.preferred, b1.not_led), (10, 2));
    assert!((b1.ratio() - 0.2).abs() < 1e-12);
    let keys: Vec<usize> = plan.elections.iter().map(|(k, _)| *k).collect();
    assert_eq!(keys, vec![8, 9]);
    for (_, e) in &plan.elections {
        assert_eq!(e.leader, 1);
        assert_eq!(e.isr, vec![1, 2, 3]);
    }
}

#[test]
fn spec_example_9_of_10_is_exactly_the_threshold_so_nothing_happens() {
    let ps = ten_preferred_by_1(9);
    let plan = auto_rebalance(&view(&ps), &all_live(), 10, false);
    assert!(!plan.imbalance[&1].exceeds(10));
    assert!(plan.elections.is_empty());
    // A 0% threshold acts on any imbalance.
    assert_eq!(
        auto_rebalance(&view(&ps), &all_live(), 0, false)
            .elections
            .len(),
        1
    );
}

#[test]
fn only_live_in_sync_preferred_replicas_and_no_reassignment() {
    let mut ps = ten_preferred_by_1(5);
    ps[5].isr = vec![2, 3]; // preferred replica out of sync
    let plan = auto_rebalance(&view(&ps), &all_live(), 10, false);
    let keys: Vec<usize> = plan.elections.iter().map(|(k, _)| *k).collect();
    assert_eq!(keys, vec![6, 7, 8, 9]);
    let plan = auto_rebalance(&view(&ps), &BTreeSet::from([2, 3]), 10, false);
    assert!(plan.elections.is_empty(), "preferred replica not live");
    let plan = auto_rebalance(&view(&ps), &all_live(), 10, true);
    assert!(plan.elections.is_empty(), "a reassignment is in progress");
    assert_eq!(plan.imbalance[&1].not_led, 5, "the ratio is still reported");
}

#[test]
fn partitions_without_leader_information_are_not_counted_but_no_leader_is() {
    let mut ps = ten_preferred_by_1(10);
    ps[0].leader = None;
    ps[1].leader = Some(-1);
    let imb = imbalance_by_broker(&view(&ps));
    assert_eq!((imb[&1].preferred, imb[&1].not_led), (10, 1));
}

#[test]
fn deleted_topics_are_ignored() {
    let mut ps = ten_preferred_by_1(0);
    for x in &mut ps {
        x.deleting = true;
    }
    ps.push(p(&[2, 1], 2));
    let plan = auto_rebalance(&view(&ps), &all_live(), 10, false);
    assert!(!plan.imbalance.contains_key(&1));
    assert_eq!(plan.imbalance[&2].preferred, 1);
    assert!(plan.elections.is_empty());
}

#[test]
fn ratios_are_per_broker() {
    let ps = vec![
        p(&[1, 2], 1),
        p(&[1, 2], 2),
        p(&[2, 1], 2),
        p(&[2, 1], 2),
        p(&[3, 1], 1),
    ];
    let imb = imbalance_by_broker(&view(&ps));
    assert_eq!((imb[&1].preferred, imb[&1].not_led), (2, 1));
    assert_eq!((imb[&2].preferred, imb[&2].not_led), (2, 0));
    assert_eq!((imb[&3].preferred, imb[&3].not_led), (1, 1));
    assert_eq!(BrokerImbalance::default().ratio(), 0.0);
    let plan = auto_rebalance(&view(&ps), &all_live(), 50, false);
    let keys: Vec<usize> = plan.elections.iter().map(|(k, _)| *k).collect();
    assert_eq!(
        keys,
        vec![4],
        "broker 1 at exactly 50% is not above it; broker 3 is"
    );
}

proptest! {
    #![proptest_config(crate::config(512, "tests/replication/regressions/imbalance.txt"))]

    /// Every election moves leadership to a live in-sync preferred replica of a broker whose
    /// imbalance is strictly above the threshold, and the integer threshold comparison agrees
    /// with the ratio.
    #[test]
    fn rebalance_only_elects_eligible_preferred_replicas(
        parts in proptest::collection::vec((Just(vec![1, 2, 3, 4]).prop_shuffle(), 0usize..4, any::<bool>()), 1..40),
        live in proptest::collection::btree_set(1i32..=4, 0..=4),
        pct in 0u32..=100,
    ) {
        let ps: Vec<P> = parts.iter().map(|(a, l, in_isr)| P {
            assignment: a[..3].to_vec(),
            isr: if *in_isr { a[..3].to_vec() } else { a[1..3].to_vec() },
            leader: Some(a[*l % 3]),
            deleting: false,
        }).collect();
        let plan = auto_rebalance(&view(&ps), &live, pct, false);
        let threshold = f64::from(pct) / 100.0;
        for b in plan.imbalance.values() {
            if b.ratio() > threshold + 1e-9 {
                prop_assert!(b.exceeds(pct));
            } else if b.ratio() < threshold + 1e-9 {
                prop_assert!(!b.exceeds(pct), "{:?} at {}%", b, pct);
            }
        }
        for (k, e) in &plan.elections {
            let x = &ps[*k];
            prop_assert_eq!(e.leader, x.assignment[0]);
            prop_assert!(x.leader != Some(e.leader));
            prop_assert!(live.contains(&e.leader) && x.isr.contains(&e.leader));
            prop_assert!(plan.imbalance[&e.leader].exceeds(pct));
        }
    }
}
