//! `cooperative-sticky` (Java's CooperativeStickyAssignor, KIP-429): computes the sticky
//! target, then withholds every partition that would move to a new owner while another
//! member still claims it. The claimant sees the partition missing from its assignment,
//! revokes it and re-joins; the second rebalance hands the now unclaimed partition over.
//! So no partition is ever owned by two members at once, and unaffected members keep
//! consuming throughout.

use bytes::Bytes;

use super::sticky::{balance, Claims};
use super::user_data::{decode_cooperative_user_data, encode_cooperative_user_data};
use super::{Assignor, GroupAssignment, Member, PartitionsPerTopic};
use crate::group::TopicPartition;

/// The `cooperative-sticky` assignor.
#[derive(Debug, Clone, Copy, Default)]
pub struct CooperativeStickyAssignor;

impl Assignor for CooperativeStickyAssignor {
    fn name(&self) -> &'static str {
        "cooperative-sticky"
    }

    fn cooperative(&self) -> bool {
        true
    }

    fn user_data(&self, _previous: &[TopicPartition], generation: i32) -> Option<Bytes> {
        Some(encode_cooperative_user_data(generation))
    }

    fn assign(&self, partitions: &PartitionsPerTopic, members: &[Member]) -> GroupAssignment {
        let claims: Claims = members
            .iter()
            .map(|m| {
                let sub = &m.subscription;
                // Subscription v2+ carries the generation; older ones put it in user data.
                let generation = if sub.generation_id >= 0 {
                    sub.generation_id
                } else {
                    sub.user_data
                        .as_ref()
                        .map_or(-1, decode_cooperative_user_data)
                };
                (
                    m.member_id.clone(),
                    (sub.owned_partitions.clone(), generation),
                )
            })
            .collect();
        let mut target = balance(partitions, members, &claims);
        for (member, list) in target.iter_mut() {
            list.retain(|tp| {
                let claimed_by_self = claims
                    .get(member)
                    .is_some_and(|(owned, _)| owned.contains(tp));
                let claimed_by_other = claims
                    .iter()
                    .any(|(other, (owned, _))| other != member && owned.contains(tp));
                claimed_by_self || !claimed_by_other
            });
        }
        target
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;

    #[test]
    fn spec_example_two_rounds() {
        let p = parts(&[("t", 6)]);
        // C0 {0,1,4}, C1 {2,3,5}; C3 joins.
        let round1 = CooperativeStickyAssignor.assign(
            &p,
            &[
                owning("C0", &["t"], &[("t", 0), ("t", 1), ("t", 4)], 2),
                owning("C1", &["t"], &[("t", 2), ("t", 3), ("t", 5)], 2),
                owning("C3", &["t"], &[], -1),
            ],
        );
        assert_eq!(of(&round1, "C0"), [tp("t", 0), tp("t", 1)]);
        assert_eq!(of(&round1, "C1"), [tp("t", 2), tp("t", 3)]);
        assert!(of(&round1, "C3").is_empty());
        // The old owners revoked 4 and 5 and re-joined.
        let round2 = CooperativeStickyAssignor.assign(
            &p,
            &[
                owning("C0", &["t"], &[("t", 0), ("t", 1)], 3),
                owning("C1", &["t"], &[("t", 2), ("t", 3)], 3),
                owning("C3", &["t"], &[], 3),
            ],
        );
        assert_eq!(of(&round2, "C0"), [tp("t", 0), tp("t", 1)]);
        assert_eq!(of(&round2, "C1"), [tp("t", 2), tp("t", 3)]);
        assert_eq!(of(&round2, "C3"), [tp("t", 4), tp("t", 5)]);
    }

    #[test]
    fn partitions_of_a_departed_member_move_in_round_one() {
        let p = parts(&[("t", 4)]);
        let a = CooperativeStickyAssignor.assign(
            &p,
            &[
                owning("C0", &["t"], &[("t", 0), ("t", 1)], 4),
                owning("C1", &["t"], &[], 4),
            ],
        );
        assert_eq!(of(&a, "C0"), [tp("t", 0), tp("t", 1)]);
        assert_eq!(of(&a, "C1"), [tp("t", 2), tp("t", 3)]);
    }
}
