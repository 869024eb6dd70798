//! `roundrobin` (Java's RoundRobinAssignor): every subscribed partition, sorted by topic and
//! partition, dealt to the sorted members in turn, skipping members not subscribed to the
//! partition's topic.

use super::{
    empty_assignment, sorted_members, Assignor, GroupAssignment, Member, PartitionsPerTopic,
};
use crate::group::TopicPartition;

/// The `roundrobin` assignor.
#[derive(Debug, Clone, Copy, Default)]
pub struct RoundRobinAssignor;

impl Assignor for RoundRobinAssignor {
    fn name(&self) -> &'static str {
        "roundrobin"
    }

    fn assign(&self, partitions: &PartitionsPerTopic, members: &[Member]) -> GroupAssignment {
        let mut out = empty_assignment(members);
        let sorted = sorted_members(members);
        if sorted.is_empty() {
            return out;
        }
        let mut cursor = 0usize;
        for (topic, &count) in partitions {
            if !sorted.iter().any(|m| m.subscribes(topic)) {
                continue;
            }
            for p in 0..count.max(0) {
                // A circular walk to the next subscriber; one exists, so this terminates.
                while !sorted[cursor % sorted.len()].subscribes(topic) {
                    cursor += 1;
                }
                let member = sorted[cursor % sorted.len()];
                cursor += 1;
                if let Some(list) = out.get_mut(&member.member_id) {
                    list.push(TopicPartition::new(topic.clone(), p));
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
        let a = RoundRobinAssignor.assign(&parts(&[("t0", 3), ("t1", 3)]), &members);
        assert_eq!(of(&a, "C0"), [tp("t0", 0), tp("t0", 2), tp("t1", 1)]);
        assert_eq!(of(&a, "C1"), [tp("t0", 1), tp("t1", 0), tp("t1", 2)]);
    }

    #[test]
    fn skips_members_not_subscribed() {
        // Java's documented example: C0 {t0}, C1 {t0,t1}, C2 {t0,t1,t2}; t0 1, t1 2, t2 3.
        let members = [
            Member::new("C0", &["t0"]),
            Member::new("C1", &["t0", "t1"]),
            Member::new("C2", &["t0", "t1", "t2"]),
        ];
        let a = RoundRobinAssignor.assign(&parts(&[("t0", 1), ("t1", 2), ("t2", 3)]), &members);
        assert_eq!(of(&a, "C0"), [tp("t0", 0)]);
        assert_eq!(of(&a, "C1"), [tp("t1", 0)]);
        assert_eq!(
            of(&a, "C2"),
            [tp("t1", 1), tp("t2", 0), tp("t2", 1), tp("t2", 2)]
        );
    }
}
