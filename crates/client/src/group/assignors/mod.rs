//! Partition assignors (spec H.4), run by the group leader over every member's subscription.
//! Pure functions of their input, so every leader (and every test) computes the same answer.
//!
//! * [`RangeAssignor`] (`range`): per topic, consecutive ranges.
//! * [`RoundRobinAssignor`] (`roundrobin`): all partitions dealt in turn.
//! * [`StickyAssignor`] (`sticky`, eager): balanced, keeps previous owners where possible.
//! * [`CooperativeStickyAssignor`] (`cooperative-sticky`, KIP-429): sticky's target, but a
//!   partition changing owner is withheld for one round so the old owner can revoke it first.

mod cooperative;
mod range;
mod roundrobin;
mod sticky;
mod user_data;

#[cfg(test)]
mod proptests;

use std::cmp::Ordering;
use std::collections::BTreeMap;

use bytes::Bytes;

pub use cooperative::CooperativeStickyAssignor;
pub use range::RangeAssignor;
pub use roundrobin::RoundRobinAssignor;
pub use sticky::StickyAssignor;

use super::protocol::Subscription;
use super::TopicPartition;

/// Partition count per topic, as the leader read it from Metadata.
pub type PartitionsPerTopic = BTreeMap<String, i32>;

/// The leader's result: member id -> assigned partitions (sorted).
pub type GroupAssignment = BTreeMap<String, Vec<TopicPartition>>;

/// One member as the leader sees it in the JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Coordinator-assigned member id.
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub group_instance_id: Option<String>,
    /// Its decoded subscription.
    pub subscription: Subscription,
}

impl Member {
    /// A dynamic member with a plain subscription (convenient in tests).
    pub fn new(member_id: impl Into<String>, topics: &[&str]) -> Self {
        Self {
            member_id: member_id.into(),
            group_instance_id: None,
            subscription: Subscription {
                topics: topics.iter().map(|t| t.to_string()).collect(),
                generation_id: -1,
                ..Default::default()
            },
        }
    }

    /// Whether the member subscribes to `topic`.
    pub fn subscribes(&self, topic: &str) -> bool {
        self.subscription.topics.iter().any(|t| t == topic)
    }
}

/// Kafka's member order (`MemberInfo.compareTo`): static members first, by instance id, then
/// dynamic members by member id.
pub fn member_order(a: &Member, b: &Member) -> Ordering {
    match (&a.group_instance_id, &b.group_instance_id) {
        (Some(x), Some(y)) => x.cmp(y).then_with(|| a.member_id.cmp(&b.member_id)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.member_id.cmp(&b.member_id),
    }
}

/// Members sorted by [`member_order`].
pub(crate) fn sorted_members(members: &[Member]) -> Vec<&Member> {
    let mut sorted: Vec<&Member> = members.iter().collect();
    sorted.sort_by(|a, b| member_order(a, b));
    sorted
}

/// An empty assignment entry for every member, so members with nothing still get an answer.
pub(crate) fn empty_assignment(members: &[Member]) -> GroupAssignment {
    members
        .iter()
        .map(|m| (m.member_id.clone(), Vec::new()))
        .collect()
}

/// A partition assignment strategy.
pub trait Assignor: Send + Sync + std::fmt::Debug {
    /// The protocol name members advertise in JoinGroup (`range`, `cooperative-sticky`, ...).
    fn name(&self) -> &'static str;

    /// Whether members may keep their partitions across a rebalance (KIP-429). A consumer is
    /// cooperative only when every assignor it offers is, as in the Java client.
    fn cooperative(&self) -> bool {
        false
    }

    /// Assignor-specific subscription user data, given the member's previous assignment and
    /// the generation it came from.
    fn user_data(&self, _previous: &[TopicPartition], _generation: i32) -> Option<Bytes> {
        None
    }

    /// Computes every member's partitions. Topics missing from `partitions` are ignored.
    fn assign(&self, partitions: &PartitionsPerTopic, members: &[Member]) -> GroupAssignment;
}

/// The assignor for a `partition.assignment.strategy` entry: Kafka's short names, and the
/// Java class names for convenience.
pub fn by_name(name: &str) -> Option<Box<dyn Assignor>> {
    let short = name.trim().rsplit('.').next().unwrap_or_default();
    Some(match short {
        "range" | "RangeAssignor" => Box::new(RangeAssignor),
        "roundrobin" | "RoundRobinAssignor" => Box::new(RoundRobinAssignor),
        "sticky" | "StickyAssignor" => Box::new(StickyAssignor),
        "cooperative-sticky" | "CooperativeStickyAssignor" => Box::new(CooperativeStickyAssignor),
        _ => return None,
    })
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::*;

    pub fn tp(t: &str, p: i32) -> TopicPartition {
        TopicPartition::new(t, p)
    }

    pub fn parts(entries: &[(&str, i32)]) -> PartitionsPerTopic {
        entries.iter().map(|(t, n)| (t.to_string(), *n)).collect()
    }

    /// A member owning `owned` (partitions of topic `t`) in `generation`.
    pub fn owning(id: &str, topics: &[&str], owned: &[(&str, i32)], generation: i32) -> Member {
        let mut m = Member::new(id, topics);
        m.subscription.owned_partitions = owned.iter().map(|(t, p)| tp(t, *p)).collect();
        m.subscription.generation_id = generation;
        m
    }

    pub fn of(a: &GroupAssignment, member: &str) -> Vec<TopicPartition> {
        a.get(member).cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve() {
        assert_eq!(by_name("range").unwrap().name(), "range");
        assert_eq!(
            by_name("org.apache.kafka.clients.consumer.CooperativeStickyAssignor")
                .unwrap()
                .name(),
            "cooperative-sticky"
        );
        assert!(by_name("cooperative-sticky").unwrap().cooperative());
        assert!(!by_name("sticky").unwrap().cooperative());
        assert!(by_name("nope").is_none());
    }

    #[test]
    fn static_members_sort_first_by_instance_id() {
        let mut a = Member::new("a", &[]);
        let mut z = Member::new("z", &[]);
        z.group_instance_id = Some("i1".into());
        a.group_instance_id = Some("i2".into());
        let d = Member::new("0", &[]);
        let all = [d, a, z];
        let order: Vec<&str> = sorted_members(&all)
            .iter()
            .map(|m| m.member_id.as_str())
            .collect();
        assert_eq!(order, ["z", "a", "0"]);
    }
}
