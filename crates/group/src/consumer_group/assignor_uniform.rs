//! The `uniform` server-side assignor (Kafka's default): spreads all subscribed partitions so
//! member sizes differ by at most one when subscriptions are the same, while keeping every
//! member's previous target partitions that it may still have (sticky), because each moved
//! partition costs a revocation round trip and a cache warm-up in KIP-848.
//!
//! Algorithm: (1) keep each member's previous partitions that are still subscribed and exist;
//! (2) give each unowned partition (fewest eligible members first) to the eligible member with
//! the fewest partitions; (3) while some partition's owner has at least two more partitions
//! than another eligible member, move it there. Step 3 strictly lowers the sum of squared
//! member sizes, so it terminates; it leaves no eligible pair more than one apart, which for
//! identical subscriptions is balance within one, and it only moves partitions off members
//! above that bound, which is the stickiness. Different subscriptions get the same local
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

    // 1. Sticky: keep what is still valid.
    for (i, m) in members.iter().enumerate() {
        for (t, ps) in m.current {
            if !m.topics.contains(t) {
                continue;
            }
            for p in ps {
                if exists(t, *p) && !owner.contains_key(&(*t, *p)) {
                    owner.insert((*t, *p), i);
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

    // 3. Even out.
    loop {
        let mut moved = false;
        let keys: Vec<(Uuid, i32)> = owner.keys().copied().collect();
        for key in keys {
            let from = owner[&key];
            if let Some(to) = least_loaded(&eligible[&key.0], &count) {
                if count[to] + 1 < count[from] {
                    owner.insert(key, to);
                    count[from] -= 1;
                    count[to] += 1;
                    moved = true;
                }
            }
        }
        if !moved {
            break;
        }
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

/// The candidate with the fewest partitions (first in id order on ties).
fn least_loaded(candidates: &[usize], count: &[usize]) -> Option<usize> {
    candidates.iter().copied().min_by_key(|i| (count[*i], *i))
}
