//! `range` (Java's RangeAssignor): per topic, the sorted subscribers get consecutive ranges,
//! the first `P % C` of them one partition more. Co-partitioned topics thus land on the same
//! member, at the price of imbalance growing with the number of topics.

use super::{
    empty_assignment, sorted_members, Assignor, GroupAssignment, Member, PartitionsPerTopic,
};
use crate::group::TopicPartition;

/// The `range` assignor.
#[derive(Debug, Clone, Copy, Default)]
pub struct RangeAssignor;

impl Assignor for RangeAssignor {
    fn name(&self) -> &'static str {
        "range"
    }

    fn assign(&self, partitions: &PartitionsPerTopic, members: &[Member]) -> GroupAssignment {
        let mut out = empty_assignment(members);
        let sorted = sorted_members(members);
        for (topic, &count) in partitions {
            let subscribers: Vec<&&Member> =
                sorted.iter().filter(|m| m.subscribes(topic)).collect();
            if subscribers.is_empty() || count <= 0 {
                continue;
            }
            let consumers = subscribers.len() as i32;
            let (quota, extra) = (count / consumers, count % consumers);
            for (i, member) in subscribers.iter().enumerate() {
                let i = i as i32;
                let start = quota * i + i.min(extra);
                let len = quota + i32::from(i < extra);
                if let Some(list) = out.get_mut(&member.member_id) {
                    list.extend(
                        (start..start + len).map(|p| TopicPartition::new(topic.clone(), p)),
                    );
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;

    #[test]
    fn spec_example() {
        let members = [
            Member::new("C0", &["t0", "t1"]),
            Member::new("C1", &["t0", "t1"]),
        ];
        let a = RangeAssignor.assign(&parts(&[("t0", 3), ("t1", 3)]), &members);
        assert_eq!(
            of(&a, "C0"),
            [tp("t0", 0), tp("t0", 1), tp("t1", 0), tp("t1", 1)]
        );
        assert_eq!(of(&a, "C1"), [tp("t0", 2), tp("t1", 2)]);
    }

    #[test]
    fn only_subscribers_and_known_topics() {
        let members = [
            Member::new("a", &["x", "missing"]),
            Member::new("b", &["y"]),
        ];
        let a = RangeAssignor.assign(&parts(&[("x", 2), ("y", 1)]), &members);
        assert_eq!(of(&a, "a"), [tp("x", 0), tp("x", 1)]);
        assert_eq!(of(&a, "b"), [tp("y", 0)]);
    }

    #[test]
    fn more_members_than_partitions() {
        let members = [
            Member::new("a", &["t"]),
            Member::new("b", &["t"]),
            Member::new("c", &["t"]),
        ];
        let a = RangeAssignor.assign(&parts(&[("t", 2)]), &members);
        assert_eq!(of(&a, "a"), [tp("t", 0)]);
        assert_eq!(of(&a, "b"), [tp("t", 1)]);
        assert!(of(&a, "c").is_empty());
        assert!(a.contains_key("c"));
    }
}
