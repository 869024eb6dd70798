//! The server-side assignor interface (Kafka's `ConsumerGroupPartitionAssignor` with its
//! `GroupSpec` / `SubscribedTopicDescriber`) and the choice of assignor for a group. The
//! assignors are pure functions of the members' subscriptions, their previous targets (for
//! stickiness) and the partition counts, so the target is reproducible from group state.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::api::Assignment;
use super::member::Member;
use super::{assignor_range, assignor_uniform};

/// What an assignor knows about one member.
#[derive(Debug, Clone)]
pub(crate) struct MemberSpec<'a> {
    pub id: &'a str,
    /// Subscribed topics that exist.
    pub topics: BTreeSet<Uuid>,
    /// The member's previous target, which a sticky assignor tries to keep.
    pub current: &'a Assignment,
}

/// Runs the assignor called `name` (one of [`KNOWN_ASSIGNORS`](super::KNOWN_ASSIGNORS));
/// `partitions` maps each subscribed topic id to its partition count. Every member in
/// `members` gets an entry, possibly empty.
pub(crate) fn assign(
    name: &str,
    members: &[MemberSpec<'_>],
    partitions: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    match name {
        "range" => assignor_range::assign(members, partitions),
        _ => assignor_uniform::assign(members, partitions),
    }
}

/// Kafka's `computePreferredServerAssignor`: the assignor most members asked for (ties to the
/// smaller name, for determinism), else the configured default.
pub(crate) fn preferred<'a>(members: impl Iterator<Item = &'a Member>, default: &str) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for m in members {
        if let Some(a) = m.server_assignor.as_deref() {
            *counts.entry(a).or_default() += 1;
        }
    }
    let mut best: Option<(&str, usize)> = None;
    for (name, n) in counts {
        if best.is_none_or(|(_, b)| n > b) {
            best = Some((name, n));
        }
    }
    best.map_or_else(|| default.to_string(), |(n, _)| n.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preferred_assignor_is_the_most_requested() {
        let mut a = Member::new("a".into());
        let mut b = Member::new("b".into());
        let mut c = Member::new("c".into());
        assert_eq!(preferred([&a, &b].into_iter(), "uniform"), "uniform");
        a.server_assignor = Some("range".into());
        assert_eq!(preferred([&a, &b].into_iter(), "uniform"), "range");
        b.server_assignor = Some("uniform".into());
        assert_eq!(preferred([&a, &b].into_iter(), "uniform"), "range");
        c.server_assignor = Some("uniform".into());
        assert_eq!(preferred([&a, &b, &c].into_iter(), "range"), "uniform");
    }
}
