//! The `uniform` server-side assignor (Kafka's default): spreads all subscribed partitions so
//! member sizes differ by at most one when subscriptions are the same, while keeping every
//! member's previous target partitions that it may still have (sticky), because each moved
//! partition costs a revocation round trip and a cache warm-up in KIP-848.
//!
//! Algorithm: (1) keep each member's previous partitions that are still subscribed and exist;
//! (2) give each unowned partition (fewest eligible members first) to the eligible member with
//! the fewest partitions; (3) while some partition's owner has at least two more partitions
//! than another eligible member, move one from the most loaded such owner (partitions it did
//! not have before first, then its highest ones, as Kafka's `UniformHomogeneousAssignmentBuilder`
//! keeps a member's first `quota` partitions) to the least loaded eligible member. Each move strictly lowers the
//! sum of squared member sizes, so step 3 terminates; it leaves no eligible pair more than one
//! apart, which for identical subscriptions is balance within one, and it only takes from the
//! most loaded members, which is the stickiness. Different subscriptions get the same local
//! optimum (Kafka's heterogeneous builder is a heuristic too).

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::api::Assignment;
use super::assignor::MemberSpec;

pub(crate) fn assign(
    members: &[MemberSpec<'_>],
    partitions: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    // Members by index, in id order, so ties resolve deterministically.
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_by(|a, b| members[*a].id.cmp(members[*b].id));
    let members: Vec<&MemberSpec<'_>> = order.iter().map(|i| &members[*i]).collect();

    let eligible: BTreeMap<Uuid, Vec<usize>> = partitions
        .keys()
        .map(|t| {
            let subs = (0..members.len())
                .filter(|i| members[*i].topics.contains(t))
                .collect();
            (*t, subs)
        })
        .collect();
    let exists = |t: &Uuid, p: i32| partitions.get(t).is_some_and(|n| p >= 0 && p < *n);

    let mut owner: BTreeMap<(Uuid, i32), usize> = BTreeMap::new();
    let mut count = vec![0usize; members.len()];
    // Partitions still with the member that had them before.
    let mut sticky: BTreeSet<(Uuid, i32)> = BTreeSet::new();

    // 1. Sticky: keep what is still valid.
    for (i, m) in members.iter().enumerate() {
        for (t, ps) in m.current {
            if !m.topics.contains(t) {
                continue;
            }
            for p in ps {
                if exists(t, *p) && !owner.contains_key(&(*t, *p)) {
                    owner.insert((*t, *p), i);
                    sticky.insert((*t, *p));
                    count[i] += 1;
                }
            }
        }
    }

    // 2. Unowned partitions, most constrained first.
    let mut unowned: Vec<(usize, Uuid, i32)> = Vec::new();
    for (t, n) in partitions {
        let subs = &eligible[t];
        if subs.is_empty() {
            continue;
        }
        for p in 0..(*n).max(0) {
            if !owner.contains_key(&(*t, p)) {
                unowned.push((subs.len(), *t, p));
            }
        }
    }
    unowned.sort_unstable();
    for (_, t, p) in unowned {
        if let Some(i) = least_loaded(&eligible[&t], &count) {
            owner.insert((t, p), i);
            count[i] += 1;
        }
    }

    // 3. Even out: always take from the most loaded member, preferring partitions it did not
    //    have before, and give to the least loaded eligible member.
    let mut parts: Vec<BTreeSet<(Uuid, i32)>> = vec![BTreeSet::new(); members.len()];
    for (k, i) in &owner {
        parts[*i].insert(*k);
    }
    while let Some((key, from, to)) = next_move(&parts, &sticky, &eligible, &count) {
        owner.insert(key, to);
        parts[from].remove(&key);
        parts[to].insert(key);
        sticky.remove(&key);
        count[from] -= 1;
        count[to] += 1;
    }

    let mut out: BTreeMap<String, Assignment> = members
        .iter()
        .map(|m| (m.id.to_string(), Assignment::new()))
        .collect();
    for ((t, p), i) in owner {
        if let Some(a) = out.get_mut(members[i].id) {
            a.entry(t).or_insert_with(BTreeSet::new).insert(p);
        }
    }
    out
}

/// One balancing move `(partition, from, to)`: from the most loaded member that has a
/// partition some eligible member holds at least two fewer than it; `None` when balanced.
fn next_move(
    parts: &[BTreeSet<(Uuid, i32)>],
    sticky: &BTreeSet<(Uuid, i32)>,
    eligible: &BTreeMap<Uuid, Vec<usize>>,
    count: &[usize],
) -> Option<((Uuid, i32), usize, usize)> {
    let mut donors: Vec<usize> = (0..count.len()).collect();
    donors.sort_by_key(|i| (std::cmp::Reverse(count[*i]), *i));
    for from in donors {
        if count[from] < 2 {
            return None;
        }
        // Like Kafka's uniform builders, an over-quota member keeps its first partitions (in
        // topic and partition order) and gives away its last ones.
        let fresh_first = parts[from]
            .iter()
            .rev()
            .filter(|k| !sticky.contains(*k))
            .chain(parts[from].iter().rev().filter(|k| sticky.contains(*k)));
        for key in fresh_first {
            if let Some(to) = least_loaded(&eligible[&key.0], count) {
                if count[to] + 1 < count[from] {
                    return Some((*key, from, to));
                }
            }
        }
    }
    None
}

/// The candidate with the fewest partitions (first in id order on ties).
fn least_loaded(candidates: &[usize], count: &[usize]) -> Option<usize> {
    candidates.iter().copied().min_by_key(|i| (count[*i], *i))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn t(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn spec<'a>(id: &'a str, topics: &[u128], current: &'a Assignment) -> MemberSpec<'a> {
        MemberSpec {
            id,
            topics: topics.iter().map(|n| t(*n)).collect(),
            current,
        }
    }

    fn sizes(out: &BTreeMap<String, Assignment>) -> Vec<usize> {
        out.values()
            .map(|a| a.values().map(BTreeSet::len).sum())
            .collect()
    }

    #[test]
    fn balanced_across_topics() {
        let e = Assignment::new();
        let members = [
            spec("a", &[1, 2], &e),
            spec("b", &[1, 2], &e),
            spec("c", &[1, 2], &e),
        ];
        let parts = BTreeMap::from([(t(1), 6), (t(2), 4)]);
        let out = assign(&members, &parts);
        let mut s = sizes(&out);
        s.sort_unstable();
        assert_eq!(s, vec![3, 3, 4]);
    }

    #[test]
    fn new_member_takes_only_the_excess() {
        let a_prev: Assignment = BTreeMap::from([(t(1), (0..6).collect())]);
        let e = Assignment::new();
        let members = [spec("a", &[1], &a_prev), spec("b", &[1], &e)];
        let out = assign(&members, &BTreeMap::from([(t(1), 6)]));
        assert_eq!(sizes(&out), vec![3, 3]);
        assert!(out["a"][&t(1)].is_subset(&a_prev[&t(1)]));
    }

    #[test]
    fn heterogeneous_subscriptions_only_get_subscribed_topics() {
        let e = Assignment::new();
        let members = [spec("a", &[1], &e), spec("b", &[1, 2], &e)];
        let out = assign(&members, &BTreeMap::from([(t(1), 4), (t(2), 4)]));
        assert!(!out["a"].contains_key(&t(2)));
        assert_eq!(out["b"][&t(2)].len(), 4);
        // b carries all of t2, so a gets all of t1.
        assert_eq!(out["a"][&t(1)].len(), 4);
    }

    /// librdkafka's 0113_cooperative_rebalance `x_incremental_rebalances` against Kafka: 6
    /// partitions, members joining one at a time. Each over-quota member keeps its lowest
    /// partitions: {0..5} -> {0,1,2}+{3,4,5} -> {0,1}+{3,4}+{2,5}. Caught: the balancing step
    /// gave away the lowest partitions first, so c0 ended with {3,4,5} after the second join.
    #[test]
    fn incremental_joins_keep_the_first_partitions_like_kafka() {
        let e = Assignment::new();
        let all: Assignment = BTreeMap::from([(t(1), (0..6).collect())]);
        let parts = BTreeMap::from([(t(1), 6)]);
        let two = assign(&[spec("c0", &[1], &all), spec("c1", &[1], &e)], &parts);
        let set = |ps: &[i32]| BTreeMap::from([(t(1), ps.iter().copied().collect())]);
        assert_eq!(two["c0"], set(&[0, 1, 2]));
        assert_eq!(two["c1"], set(&[3, 4, 5]));
        let three = assign(
            &[
                spec("c0", &[1], &two["c0"]),
                spec("c1", &[1], &two["c1"]),
                spec("c2", &[1], &e),
            ],
            &parts,
        );
        assert_eq!(three["c0"], set(&[0, 1]));
        assert_eq!(three["c1"], set(&[3, 4]));
        assert_eq!(three["c2"], set(&[2, 5]));
    }

    #[test]
    fn more_members_than_partitions() {
        let e = Assignment::new();
        let members = [
            spec("a", &[1], &e),
            spec("b", &[1], &e),
            spec("c", &[1], &e),
        ];
        let out = assign(&members, &BTreeMap::from([(t(1), 2)]));
        let mut s = sizes(&out);
        s.sort_unstable();
        assert_eq!(s, vec![0, 1, 1]);
    }

    proptest! {
        /// Same subscriptions: every partition exactly once, sizes within one, and each member
        /// keeps at least min(what it had, floor(P/M)) of its previous partitions.
        #[test]
        fn homogeneous_is_complete_balanced_and_sticky(
            counts in proptest::collection::vec(0i32..12, 1..4),
            members in 1usize..7,
            prev in proptest::collection::vec((0usize..8, 0usize..4, 0i32..14), 0..40),
        ) {
            let ids: Vec<String> = (0..members).map(|i| format!("m{i}")).collect();
            let parts: BTreeMap<Uuid, i32> = counts.iter().enumerate().map(|(i, n)| (t(i as u128), *n)).collect();
            let mut current: Vec<Assignment> = vec![Assignment::new(); members];
            let mut taken = BTreeSet::new();
            for (m, topic, p) in prev {
                if m < members && taken.insert((topic, p)) {
                    current[m].entry(t(topic as u128)).or_default().insert(p);
                }
            }
            let topics: Vec<u128> = (0..counts.len() as u128).collect();
            let specs: Vec<MemberSpec<'_>> = ids.iter().zip(&current).map(|(id, c)| spec(id, &topics, c)).collect();
            let out = assign(&specs, &parts);
            let mut seen = BTreeSet::new();
            for a in out.values() {
                for (tp, ps) in a {
                    for p in ps {
                        prop_assert!(seen.insert((*tp, *p)), "{tp}-{p} twice");
                    }
                }
            }
            let total: usize = counts.iter().map(|n| *n as usize).sum();
            prop_assert_eq!(seen.len(), total);
            let s = sizes(&out);
            prop_assert!(s.iter().max().unwrap() - s.iter().min().unwrap() <= 1, "{:?}", s);
            let floor = total / members;
            for (id, prev) in ids.iter().zip(&current) {
                let valid: BTreeSet<(Uuid, i32)> = prev.iter()
                    .flat_map(|(tp, ps)| ps.iter().map(move |p| (*tp, *p)))
                    .filter(|(tp, p)| parts.get(tp).is_some_and(|n| p < n))
                    .collect();
                let kept = valid.iter().filter(|(tp, p)| out[id].get(tp).is_some_and(|s| s.contains(p))).count();
                prop_assert!(kept >= valid.len().min(floor), "{id} kept {kept} of {}", valid.len());
            }
        }
    }
}
