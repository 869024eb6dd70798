//! Property tests over random groups: coverage (every partition exactly once, to a
//! subscriber), balance for equal subscriptions, stickiness across membership changes, and
//! the cooperative no-double-ownership rule.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;

fn topic_names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("t{i}")).collect()
}

fn partitions_strategy() -> impl Strategy<Value = PartitionsPerTopic> {
    proptest::collection::vec(1i32..9, 1..4)
        .prop_map(|counts| topic_names(counts.len()).into_iter().zip(counts).collect())
}

fn equal_members(ids: &[usize], topics: &[String]) -> Vec<Member> {
    let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
    ids.iter()
        .map(|i| Member::new(format!("m{i:02}"), &refs))
        .collect()
}

fn with_owned(mut members: Vec<Member>, prev: &GroupAssignment, generation: i32) -> Vec<Member> {
    for m in &mut members {
        m.subscription.owned_partitions = prev.get(&m.member_id).cloned().unwrap_or_default();
        m.subscription.generation_id = generation;
        m.subscription.user_data =
            StickyAssignor.user_data(&m.subscription.owned_partitions, generation);
    }
    members
}

fn all_partitions(parts: &PartitionsPerTopic, members: &[Member]) -> BTreeSet<TopicPartition> {
    parts
        .iter()
        .filter(|(t, _)| members.iter().any(|m| m.subscribes(t)))
        .flat_map(|(t, &n)| (0..n).map(move |p| TopicPartition::new(t.clone(), p)))
        .collect()
}

/// Every partition at most once, only to subscribers; returns the assigned set.
fn check_exclusive(a: &GroupAssignment, members: &[Member]) -> BTreeSet<TopicPartition> {
    let mut seen = BTreeSet::new();
    for (id, list) in a {
        let m = members
            .iter()
            .find(|m| &m.member_id == id)
            .expect("known member");
        for tp in list {
            assert!(m.subscribes(&tp.topic), "{tp} given to non-subscriber {id}");
            assert!(seen.insert(tp.clone()), "{tp} assigned twice");
        }
    }
    seen
}

fn check_covers(a: &GroupAssignment, parts: &PartitionsPerTopic, members: &[Member]) {
    assert_eq!(check_exclusive(a, members), all_partitions(parts, members));
    assert_eq!(a.len(), members.len(), "every member gets an entry");
}

fn spread(a: &GroupAssignment) -> usize {
    let counts: Vec<usize> = a.values().map(Vec::len).collect();
    counts.iter().max().unwrap_or(&0) - counts.iter().min().unwrap_or(&0)
}

fn random_members() -> impl Strategy<Value = (PartitionsPerTopic, Vec<Member>)> {
    partitions_strategy().prop_flat_map(|parts| {
        let n = parts.len();
        let subs = proptest::collection::vec(proptest::collection::vec(any::<bool>(), n), 1..7);
        (Just(parts), subs).prop_map(|(parts, subs)| {
            let topics: Vec<String> = parts.keys().cloned().collect();
            let members = subs
                .iter()
                .enumerate()
                .map(|(i, mask)| {
                    let mine: Vec<&str> = topics
                        .iter()
                        .zip(mask)
                        .filter(|(_, on)| **on)
                        .map(|(t, _)| t.as_str())
                        .collect();
                    Member::new(format!("m{i}"), &mine)
                })
                .collect();
            (parts, members)
        })
    })
}

/// A previous membership and a changed one (some left, some joined).
fn membership_change() -> impl Strategy<Value = (PartitionsPerTopic, Vec<usize>, Vec<usize>)> {
    (
        partitions_strategy(),
        proptest::collection::btree_set(0usize..10, 1..7),
        proptest::collection::btree_set(0usize..10, 1..7),
    )
        .prop_map(|(p, before, after)| {
            (p, before.into_iter().collect(), after.into_iter().collect())
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn every_partition_exactly_once((parts, members) in random_members()) {
        for assignor in [&RangeAssignor as &dyn Assignor, &RoundRobinAssignor, &StickyAssignor] {
            let a = assignor.assign(&parts, &members);
            check_covers(&a, &parts, &members);
        }
        // Cooperative, first round of a new group: nobody owns anything, so it covers too.
        let a = CooperativeStickyAssignor.assign(&parts, &members);
        check_covers(&a, &parts, &members);
    }

    #[test]
    fn balanced_within_one_for_equal_subscriptions(
        parts in partitions_strategy(),
        n in 1usize..8,
    ) {
        let topics: Vec<String> = parts.keys().cloned().collect();
        let members = equal_members(&(0..n).collect::<Vec<_>>(), &topics);
        for assignor in [&RoundRobinAssignor as &dyn Assignor, &StickyAssignor, &CooperativeStickyAssignor] {
            let a = assignor.assign(&parts, &members);
            prop_assert!(spread(&a) <= 1, "{}: {a:?}", assignor.name());
        }
        // Range balances per topic only; with a single topic it is within one too.
        if parts.len() == 1 {
            prop_assert!(spread(&RangeAssignor.assign(&parts, &members)) <= 1);
        }
    }

    #[test]
    fn sticky_keeps_previous_assignments((parts, before, after) in membership_change()) {
        let topics: Vec<String> = parts.keys().cloned().collect();
        let prev = StickyAssignor.assign(&parts, &equal_members(&before, &topics));
        let members = with_owned(equal_members(&after, &topics), &prev, 1);
        let next = StickyAssignor.assign(&parts, &members);
        check_covers(&next, &parts, &members);
        prop_assert!(spread(&next) <= 1);
        let total: usize = parts.values().map(|&n| n as usize).sum();
        let min_quota = total / members.len();
        let mut kept = 0;
        let mut bound = 0;
        for m in &members {
            let owned: BTreeSet<_> = m.subscription.owned_partitions.iter().cloned().collect();
            let now: BTreeSet<_> = next[&m.member_id].iter().cloned().collect();
            let keep = owned.intersection(&now).count();
            // A member only gives up owned partitions when it holds more than its share ...
            prop_assert_eq!(keep, owned.len().min(now.len()), "{}: {:?} -> {:?}", m.member_id, owned, now);
            kept += keep;
            bound += owned.len().min(min_quota);
        }
        // ... so at least min(owned, floor(P/C)) per member survives the change.
        prop_assert!(kept >= bound);
    }

    #[test]
    fn cooperative_never_hands_over_in_the_revoking_round((parts, before, after) in membership_change()) {
        let topics: Vec<String> = parts.keys().cloned().collect();
        let prev = CooperativeStickyAssignor.assign(&parts, &equal_members(&before, &topics));
        let members = with_owned(equal_members(&after, &topics), &prev, 1);
        let round1 = CooperativeStickyAssignor.assign(&parts, &members);
        check_exclusive(&round1, &members);
        let owner: BTreeMap<TopicPartition, String> = members
            .iter()
            .flat_map(|m| m.subscription.owned_partitions.iter().map(|tp| (tp.clone(), m.member_id.clone())))
            .collect();
        for (id, list) in &round1 {
            for tp in list {
                if let Some(current) = owner.get(tp) {
                    prop_assert_eq!(current, id, "{} moved from {} to {} in one round", tp, current, id);
                }
            }
        }
        // Members keep what they were given (revoking the rest) and re-join: the second
        // round completes a balanced assignment.
        let members2 = with_owned(equal_members(&after, &topics), &round1, 2);
        let round2 = CooperativeStickyAssignor.assign(&parts, &members2);
        check_covers(&round2, &parts, &members2);
        prop_assert!(spread(&round2) <= 1);
        for (id, list) in &round1 {
            for tp in list {
                prop_assert!(round2[id].contains(tp), "{} lost {} in round 2", id, tp);
            }
        }
    }
}
