//! `sticky` (Java's StickyAssignor, eager) and the balancing core it shares with
//! `cooperative-sticky`: keep each member's valid previous partitions up to its quota, then
//! hand out the rest so counts differ by at most one when all subscriptions are equal.
//!
//! Previous ownership ("claims") is trusted only from members of the newest generation seen;
//! a partition claimed twice in that generation is treated as unowned (Java does the same,
//! because one of the two claims must be stale).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;

use super::user_data::{decode_sticky_user_data, encode_sticky_user_data};
use super::{
    empty_assignment, sorted_members, Assignor, GroupAssignment, Member, PartitionsPerTopic,
};
use crate::group::TopicPartition;

/// The `sticky` assignor (eager protocol: members revoke everything before re-joining, so
/// their previous assignment travels in the subscription's user data).
#[derive(Debug, Clone, Copy, Default)]
pub struct StickyAssignor;

impl Assignor for StickyAssignor {
    fn name(&self) -> &'static str {
        "sticky"
    }

    fn user_data(&self, previous: &[TopicPartition], generation: i32) -> Option<Bytes> {
        Some(encode_sticky_user_data(previous, generation))
    }

    fn assign(&self, partitions: &PartitionsPerTopic, members: &[Member]) -> GroupAssignment {
        let claims = members
            .iter()
            .map(|m| {
                let sub = &m.subscription;
                // Java reads only the user data; we fall back to owned partitions so that
                // members which send them (cooperative-capable clients) stay sticky too.
                let claim = sub
                    .user_data
                    .as_ref()
                    .filter(|d| !d.is_empty())
                    .and_then(decode_sticky_user_data)
                    .unwrap_or_else(|| (sub.owned_partitions.clone(), sub.generation_id));
                (m.member_id.clone(), claim)
            })
            .collect();
        balance(partitions, members, &claims)
    }
}

/// Claimed partitions and the generation they were assigned in, per member id.
pub(crate) type Claims = BTreeMap<String, (Vec<TopicPartition>, i32)>;

/// The claims that count: from the newest generation only, for partitions that exist and the
/// member still subscribes to, claimed exactly once.
pub(crate) fn valid_owned(
    partitions: &PartitionsPerTopic,
    members: &[Member],
    claims: &Claims,
) -> BTreeMap<String, Vec<TopicPartition>> {
    let newest = claims.values().map(|(_, g)| *g).max().unwrap_or(-1);
    let mut owner: BTreeMap<TopicPartition, String> = BTreeMap::new();
    let mut doubly = BTreeSet::new();
    let mut owned: BTreeMap<String, Vec<TopicPartition>> = BTreeMap::new();
    for m in sorted_members(members) {
        let mine = owned.entry(m.member_id.clone()).or_default();
        let Some((claimed, generation)) = claims.get(&m.member_id) else {
            continue;
        };
        if *generation != newest {
            continue;
        }
        let mut claimed = claimed.clone();
        claimed.sort();
        claimed.dedup();
        for tp in claimed {
            let exists = partitions
                .get(&tp.topic)
                .is_some_and(|&n| tp.partition >= 0 && tp.partition < n);
            if !exists || !m.subscribes(&tp.topic) {
                continue;
            }
            if owner.insert(tp.clone(), m.member_id.clone()).is_some() {
                doubly.insert(tp);
            } else {
                mine.push(tp);
            }
        }
    }
    for list in owned.values_mut() {
        list.retain(|tp| !doubly.contains(tp));
    }
    owned
}

/// Every partition of a topic some member subscribes to, sorted.
fn subscribed_partitions(
    partitions: &PartitionsPerTopic,
    members: &[Member],
) -> Vec<TopicPartition> {
    partitions
        .iter()
        .filter(|(t, _)| members.iter().any(|m| m.subscribes(t)))
        .flat_map(|(t, &n)| (0..n.max(0)).map(move |p| TopicPartition::new(t.clone(), p)))
        .collect()
}

/// The sticky target assignment for `members` given their claims.
pub(crate) fn balance(
    partitions: &PartitionsPerTopic,
    members: &[Member],
    claims: &Claims,
) -> GroupAssignment {
    let owned = valid_owned(partitions, members, claims);
    let topics_of = |m: &Member| -> BTreeSet<String> {
        m.subscription
            .topics
            .iter()
            .filter(|t| partitions.contains_key(*t))
            .cloned()
            .collect()
    };
    let all_equal = members
        .windows(2)
        .all(|w| topics_of(&w[0]) == topics_of(&w[1]));
    let mut out = if all_equal {
        constrained(partitions, members, owned)
    } else {
        general(partitions, members, owned)
    };
    for list in out.values_mut() {
        list.sort();
    }
    out
}

/// Equal subscriptions (Java's `constrainedAssign`): quotas `floor(P/C)` and `ceil(P/C)`,
/// exactly `P % C` members at the higher one; owned partitions are kept up to the quota,
/// the rest dealt round-robin to members below it.
fn constrained(
    partitions: &PartitionsPerTopic,
    members: &[Member],
    owned: BTreeMap<String, Vec<TopicPartition>>,
) -> GroupAssignment {
    let sorted = sorted_members(members);
    if sorted.is_empty() {
        return empty_assignment(members);
    }
    let all = subscribed_partitions(partitions, members);
    let mut deal = Dealing::new(empty_assignment(members), all.len(), sorted.len());
    let mut assigned: BTreeSet<TopicPartition> = BTreeSet::new();
    for m in &sorted {
        let mine = owned.get(&m.member_id).cloned().unwrap_or_default();
        assigned.extend(deal.keep_owned(&m.member_id, &mine).iter().cloned());
    }
    // Members that reached the max quota in the first pass close the "exactly min" list
    // once the expected number of them exists.
    if deal.current_over >= deal.expected_over {
        deal.exactly_min.clear();
    }
    for tp in all.into_iter().filter(|tp| !assigned.contains(tp)) {
        deal.give(tp);
    }
    deal.out
}

/// The state of [`constrained`]'s two passes: the quotas, who is below or exactly at the
/// minimum, and the round-robin cursor over the members below it.
struct Dealing {
    out: GroupAssignment,
    min_quota: usize,
    max_quota: usize,
    /// How many members end at the max quota (`P % C`), and how many are there so far.
    expected_over: usize,
    current_over: usize,
    under_min: Vec<String>,
    exactly_min: VecDeque<String>,
    cursor: usize,
}

impl Dealing {
    fn new(out: GroupAssignment, partitions: usize, consumers: usize) -> Dealing {
        Dealing {
            out,
            min_quota: partitions / consumers,
            max_quota: partitions.div_ceil(consumers),
            expected_over: partitions % consumers,
            current_over: 0,
            under_min: Vec::new(),
            exactly_min: VecDeque::new(),
            cursor: 0,
        }
    }

    /// First pass: the member keeps its owned partitions up to its quota; returns those kept.
    fn keep_owned<'a>(&mut self, member: &str, mine: &'a [TopicPartition]) -> &'a [TopicPartition] {
        let keep = if mine.len() < self.min_quota {
            self.under_min.push(member.to_owned());
            mine.len()
        } else if mine.len() >= self.max_quota && self.current_over < self.expected_over {
            self.current_over += 1;
            self.max_quota
        } else {
            if self.current_over < self.expected_over {
                self.exactly_min.push_back(member.to_owned());
            }
            self.min_quota
        };
        let kept = &mine[..keep];
        if let Some(list) = self.out.get_mut(member) {
            list.extend_from_slice(kept);
        }
        kept
    }

    /// Second pass: an unassigned partition goes round-robin to the members below the
    /// minimum, then to those exactly at it (one partition each, up to `P % C` of them).
    fn give(&mut self, tp: TopicPartition) {
        let member = if !self.under_min.is_empty() {
            if self.cursor >= self.under_min.len() {
                self.cursor = 0;
            }
            let m = self.under_min[self.cursor].clone();
            self.cursor += 1;
            m
        } else if let Some(m) = self.exactly_min.pop_front() {
            self.current_over += 1;
            if self.current_over >= self.expected_over {
                self.exactly_min.clear();
            }
            m
        } else {
            // Unreachable with correct quotas; keep the partition unassigned rather than
            // break the balance guarantee.
            tracing::warn!(%tp, "sticky assignor: no member below quota");
            return;
        };
        let Some(list) = self.out.get_mut(&member) else {
            return;
        };
        list.push(tp);
        let cursor = self.cursor;
        if list.len() == self.min_quota
            && cursor > 0
            && self.under_min.get(cursor - 1) == Some(&member)
        {
            self.cursor -= 1;
            self.under_min.remove(self.cursor);
            if self.current_over < self.expected_over {
                self.exactly_min.push_back(member);
            }
        }
    }
}

/// Unequal subscriptions: keep every valid owned partition, give each unowned partition
/// (fewest eligible members first) to the eligible member with the fewest partitions, then
/// move partitions from fuller to emptier eligible members while that narrows the gap,
/// moving newly assigned partitions before previously owned ones.
fn general(
    partitions: &PartitionsPerTopic,
    members: &[Member],
    owned: BTreeMap<String, Vec<TopicPartition>>,
) -> GroupAssignment {
    let mut out = empty_assignment(members);
    let sorted = sorted_members(members);
    for (id, list) in &owned {
        if let Some(entry) = out.get_mut(id) {
            entry.extend(list.iter().cloned());
        }
    }
    let taken: BTreeSet<TopicPartition> = owned.values().flatten().cloned().collect();
    let eligible = |topic: &str| -> Vec<&Member> {
        sorted
            .iter()
            .copied()
            .filter(|m| m.subscribes(topic))
            .collect()
    };
    let mut unassigned: Vec<TopicPartition> = subscribed_partitions(partitions, members)
        .into_iter()
        .filter(|tp| !taken.contains(tp))
        .collect();
    unassigned.sort_by_key(|tp| (eligible(&tp.topic).len(), tp.clone()));
    for tp in unassigned {
        let target = eligible(&tp.topic)
            .into_iter()
            .min_by_key(|m| out.get(&m.member_id).map_or(0, Vec::len));
        if let Some(m) = target {
            if let Some(list) = out.get_mut(&m.member_id) {
                list.push(tp);
            }
        }
    }
    // Each move lowers the sum of squared counts, so this loop terminates.
    'moves: loop {
        let mut by_count: Vec<&Member> = sorted.clone();
        by_count.sort_by_key(|m| std::cmp::Reverse(out.get(&m.member_id).map_or(0, Vec::len)));
        for from in &by_count {
            let from_len = out.get(&from.member_id).map_or(0, Vec::len);
            let mut candidates = out.get(&from.member_id).cloned().unwrap_or_default();
            let was_owned = owned.get(&from.member_id);
            candidates.sort_by_key(|tp| (was_owned.is_some_and(|o| o.contains(tp)), tp.clone()));
            for tp in candidates {
                let to = eligible(&tp.topic).into_iter().find(|m| {
                    m.member_id != from.member_id
                        && out.get(&m.member_id).map_or(0, Vec::len) + 1 < from_len
                });
                if let Some(to) = to {
                    if let Some(list) = out.get_mut(&from.member_id) {
                        list.retain(|x| *x != tp);
                    }
                    if let Some(list) = out.get_mut(&to.member_id) {
                        list.push(tp);
                    }
                    continue 'moves;
                }
            }
        }
        break;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;

    fn sticky_member(id: &str, topics: &[&str], prev: &[(&str, i32)], generation: i32) -> Member {
        let mut m = Member::new(id, topics);
        let prev: Vec<TopicPartition> = prev.iter().map(|(t, p)| tp(t, *p)).collect();
        m.subscription.user_data = StickyAssignor.user_data(&prev, generation);
        m
    }

    #[test]
    fn spec_example_member_leaves() {
        // t has 6 partitions; C0 {0,1}, C1 {2,3}, C2 {4,5}; C2 leaves.
        let members = [
            sticky_member("C0", &["t"], &[("t", 0), ("t", 1)], 3),
            sticky_member("C1", &["t"], &[("t", 2), ("t", 3)], 3),
        ];
        let a = StickyAssignor.assign(&parts(&[("t", 6)]), &members);
        assert_eq!(of(&a, "C0"), [tp("t", 0), tp("t", 1), tp("t", 4)]);
        assert_eq!(of(&a, "C1"), [tp("t", 2), tp("t", 3), tp("t", 5)]);
    }

    #[test]
    fn first_assignment_is_balanced_round_robin() {
        let members = [Member::new("a", &["t"]), Member::new("b", &["t"])];
        let a = StickyAssignor.assign(&parts(&[("t", 3)]), &members);
        assert_eq!(of(&a, "a"), [tp("t", 0), tp("t", 2)]);
        assert_eq!(of(&a, "b"), [tp("t", 1)]);
    }

    #[test]
    fn stale_generation_and_double_claims_are_ignored() {
        let members = [
            sticky_member("a", &["t"], &[("t", 0), ("t", 1)], 5),
            sticky_member("b", &["t"], &[("t", 1), ("t", 2)], 5),
            sticky_member("c", &["t"], &[("t", 3)], 4),
        ];
        let owned = valid_owned(
            &parts(&[("t", 4)]),
            &members,
            &members
                .iter()
                .map(|m| {
                    let d = m.subscription.user_data.as_ref().unwrap();
                    (m.member_id.clone(), decode_sticky_user_data(d).unwrap())
                })
                .collect(),
        );
        assert_eq!(owned["a"], [tp("t", 0)]);
        assert_eq!(owned["b"], [tp("t", 2)]);
        assert!(owned["c"].is_empty());
    }

    #[test]
    fn unequal_subscriptions_are_covered_and_sticky() {
        let members = [
            owning("a", &["x", "y"], &[("x", 0), ("x", 1), ("y", 0)], 1),
            owning("b", &["y"], &[], 1),
        ];
        let a = StickyAssignor.assign(&parts(&[("x", 2), ("y", 2)]), &members);
        let mut all: Vec<TopicPartition> = a.values().flatten().cloned().collect();
        all.sort();
        assert_eq!(all, [tp("x", 0), tp("x", 1), tp("y", 0), tp("y", 1)]);
        // b can only take y partitions: it gets the unowned y-1 and then y-0 for balance.
        assert_eq!(of(&a, "a"), [tp("x", 0), tp("x", 1)]);
        assert_eq!(of(&a, "b"), [tp("y", 0), tp("y", 1)]);
    }
}
