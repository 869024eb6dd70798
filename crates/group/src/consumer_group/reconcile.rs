//! Per-member reconciliation (Kafka's `CurrentAssignmentBuilder`): moves one member from what
//! it owns towards its target, revoking before assigning, and never hands out a partition
//! another member still owns. This is what makes KIP-848 incremental: each member advances on
//! its own heartbeat, and a partition changes hands only after its old owner confirmed it let
//! go.

use std::collections::BTreeSet;

use uuid::Uuid;

use super::api::Assignment;
use super::member::{Member, MemberState};

/// Partitions a client reports owning (`None`: not reported, so assumed unchanged).
pub(crate) type Owned<'a> = Option<&'a [(Uuid, Vec<i32>)]>;

/// The next state of `member` given the target of `target_epoch`. `owned_by_other(t, p)` says
/// whether another member still owns (assigned or pending revocation) the partition; `owned`
/// is what the client reported in this heartbeat.
pub(crate) fn reconcile(
    member: &Member,
    target_epoch: i32,
    target: &Assignment,
    owned_by_other: &dyn Fn(Uuid, i32) -> bool,
    owned: Owned<'_>,
) -> Member {
    match member.state {
        MemberState::Stable if member.member_epoch == target_epoch => member.clone(),
        MemberState::UnrevokedPartitions if owns_any(owned, &member.pending_revocation) => {
            member.clone()
        }
        _ => next_assignment(member, target_epoch, target, owned_by_other, owned),
    }
}

/// Whether the client still reports any of `pending`. A client that reports nothing is
/// assumed to still own them: revoked partitions are only free once explicitly released.
fn owns_any(owned: Owned<'_>, pending: &Assignment) -> bool {
    let Some(owned) = owned else {
        return true;
    };
    owned.iter().any(|(t, ps)| {
        pending
            .get(t)
            .is_some_and(|set| ps.iter().any(|p| set.contains(p)))
    })
}

/// Kafka's `computeNextAssignment`.
fn next_assignment(
    member: &Member,
    target_epoch: i32,
    target: &Assignment,
    owned_by_other: &dyn Fn(Uuid, i32) -> bool,
    owned: Owned<'_>,
) -> Member {
    let empty = BTreeSet::new();
    let topics: BTreeSet<Uuid> = target
        .keys()
        .chain(member.assigned.keys())
        .copied()
        .collect();
    let mut assigned = Assignment::new();
    let mut revoke = Assignment::new();
    let mut add = Assignment::new();
    let mut unreleased = false;
    for t in topics {
        let want = target.get(&t).unwrap_or(&empty);
        let have = member.assigned.get(&t).unwrap_or(&empty);
        let keep: BTreeSet<i32> = have.intersection(want).copied().collect();
        let gone: BTreeSet<i32> = have.difference(&keep).copied().collect();
        let mut new: BTreeSet<i32> = want.difference(&keep).copied().collect();
        new.retain(|p| {
            let busy = owned_by_other(t, *p);
            unreleased |= busy;
            !busy
        });
        if !keep.is_empty() {
            assigned.insert(t, keep);
        }
        if !gone.is_empty() {
            revoke.insert(t, gone);
        }
        if !new.is_empty() {
            add.insert(t, new);
        }
    }

    let mut next = member.clone();
    if !revoke.is_empty() && owns_any(owned, &revoke) {
        // Give back first, at the old epoch; nothing new until the client confirms.
        next.state = MemberState::UnrevokedPartitions;
        next.update_epoch(member.member_epoch);
        next.assigned = assigned;
        next.pending_revocation = revoke;
        return next;
    }
    for (t, ps) in add {
        assigned.entry(t).or_default().extend(ps);
    }
    next.state = if unreleased {
        MemberState::UnreleasedPartitions
    } else {
        MemberState::Stable
    };
    next.update_epoch(target_epoch);
    next.assigned = assigned;
    next.pending_revocation = Assignment::new();
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn asg(parts: &[(u128, &[i32])]) -> Assignment {
        parts
            .iter()
            .map(|(topic, ps)| (t(*topic), ps.iter().copied().collect()))
            .collect()
    }

    fn member(epoch: i32, assigned: Assignment) -> Member {
        let mut m = Member::new("m".into());
        m.member_epoch = epoch;
        m.assigned = assigned;
        m
    }

    #[test]
    fn reconciled_member_is_untouched() {
        let m = member(3, asg(&[(1, &[0])]));
        let next = reconcile(&m, 3, &asg(&[(1, &[0, 1])]), &|_, _| false, None);
        assert_eq!(next, m);
    }

    #[test]
    fn free_partitions_are_assigned_at_the_target_epoch() {
        let m = member(0, Assignment::new());
        let next = reconcile(&m, 1, &asg(&[(1, &[0, 1])]), &|_, _| false, Some(&[]));
        assert_eq!(next.assigned, asg(&[(1, &[0, 1])]));
        assert_eq!(next.member_epoch, 1);
        assert_eq!(next.state, MemberState::Stable);
    }

    #[test]
    fn partitions_owned_elsewhere_are_unreleased() {
        let m = member(0, Assignment::new());
        let next = reconcile(&m, 2, &asg(&[(1, &[0, 1])]), &|_, p| p == 0, Some(&[]));
        assert_eq!(next.assigned, asg(&[(1, &[1])]));
        assert_eq!(next.member_epoch, 2);
        assert_eq!(next.state, MemberState::UnreleasedPartitions);
    }

    #[test]
    fn revocation_first_then_epoch_bump_once_acknowledged() {
        let m = member(1, asg(&[(1, &[0, 1, 2, 3])]));
        let target = asg(&[(1, &[2, 3])]);
        let owned_all = [(t(1), vec![0, 1, 2, 3])];
        let next = reconcile(&m, 2, &target, &|_, _| false, Some(&owned_all));
        assert_eq!(next.state, MemberState::UnrevokedPartitions);
        assert_eq!(next.member_epoch, 1);
        assert_eq!(next.assigned, asg(&[(1, &[2, 3])]));
        assert_eq!(next.pending_revocation, asg(&[(1, &[0, 1])]));
        // Not acknowledged (partitions not reported): stays.
        assert_eq!(reconcile(&next, 2, &target, &|_, _| false, None), next);
        assert_eq!(
            reconcile(&next, 2, &target, &|_, _| false, Some(&owned_all)),
            next
        );
        // Acknowledged.
        let acked = [(t(1), vec![2, 3])];
        let done = reconcile(&next, 2, &target, &|_, _| false, Some(&acked));
        assert_eq!(done.state, MemberState::Stable);
        assert_eq!(done.member_epoch, 2);
        assert!(done.pending_revocation.is_empty());
        assert_eq!(done.assigned, target);
    }

    #[test]
    fn revocation_already_done_by_client_is_skipped() {
        let m = member(1, asg(&[(1, &[0, 1])]));
        let next = reconcile(
            &m,
            2,
            &asg(&[(1, &[1])]),
            &|_, _| false,
            Some(&[(t(1), vec![1])]),
        );
        assert_eq!(next.state, MemberState::Stable);
        assert_eq!(next.member_epoch, 2);
        assert_eq!(next.assigned, asg(&[(1, &[1])]));
    }
}
