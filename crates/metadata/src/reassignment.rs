//! The replica-set arithmetic of a partition reassignment (KIP-455, KRaft's
//! `PartitionReassignmentReplicas` / `PartitionReassignmentRevert`).
//!
//! A reassignment never moves data by itself: the controller widens the replica set to
//! `target ++ (current - target)` and records which replicas are being added and removed. The
//! added replicas start as followers, fetch from the leader and join the ISR like any follower
//! that caught up. Once every target replica is in the ISR the reassignment completes: the
//! removed replicas leave the replica set and the ISR (and lead no more), so the partition never
//! has fewer in-sync copies than before the move.

/// The replica sets while a reassignment runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReassignmentReplicas {
    /// The target replicas first (their order makes the new preferred leader), then the current
    /// replicas that are leaving.
    pub replicas: Vec<i32>,
    /// Target replicas that are not current replicas yet.
    pub adding: Vec<i32>,
    /// Current replicas that are not in the target.
    pub removing: Vec<i32>,
}

impl ReassignmentReplicas {
    /// The replica sets for moving a partition from `current` to `target`. `current` is the
    /// partition's replica list as it stands, including `still_adding`, the replicas an
    /// earlier, unfinished reassignment is adding: a new reassignment replaces the old one,
    /// replicas it no longer wants are removed again (as in KRaft), and the ones it keeps are
    /// still being added, so the move waits for them to catch up (KRaft would count them as
    /// established and could complete with them out of sync).
    pub fn new(current: &[i32], still_adding: &[i32], target: &[i32]) -> Self {
        let removing: Vec<i32> = current
            .iter()
            .copied()
            .filter(|r| !target.contains(r))
            .collect();
        let adding: Vec<i32> = target
            .iter()
            .copied()
            .filter(|r| !current.contains(r) || still_adding.contains(r))
            .collect();
        let mut replicas = target.to_vec();
        replicas.extend(&removing);
        Self {
            replicas,
            adding,
            removing,
        }
    }

    /// The target replica list: the replicas that stay.
    pub fn target(&self) -> Vec<i32> {
        target_replicas(&self.replicas, &self.removing)
    }
}

/// `replicas` without the ones being removed, in order.
pub fn target_replicas(replicas: &[i32], removing: &[i32]) -> Vec<i32> {
    replicas
        .iter()
        .copied()
        .filter(|r| !removing.contains(r))
        .collect()
}

/// Whether a reassignment is running (KRaft's `isReassignmentInProgress`).
pub fn in_progress(adding: &[i32], removing: &[i32]) -> bool {
    !adding.is_empty() || !removing.is_empty()
}

/// The replicas and ISR after the reassignment completes, if it can complete now: every
/// target replica (the added ones and those that stay) is in `isr`, so removing the leaving
/// replicas never leaves fewer in-sync copies than the target asks for (KRaft's
/// `maybeCompleteReassignment`: `newTargetIsr.containsAll(newTargetReplicas)`).
pub fn completed(
    replicas: &[i32],
    isr: &[i32],
    adding: &[i32],
    removing: &[i32],
) -> Option<(Vec<i32>, Vec<i32>)> {
    if !in_progress(adding, removing) || adding.iter().any(|r| !isr.contains(r)) {
        return None;
    }
    let new_isr: Vec<i32> = isr
        .iter()
        .copied()
        .filter(|r| !removing.contains(r))
        .collect();
    let target = target_replicas(replicas, removing);
    if new_isr.is_empty() || target.iter().any(|r| !new_isr.contains(r)) {
        return None;
    }
    Some((target, new_isr))
}

/// The partition after cancelling a reassignment: the replicas being added leave the replica
/// set and the ISR, the original replicas stay. `None` when the ISR would become empty (only the
/// added replicas are in sync): reverting then needs an unclean election, which KRaft refuses.
pub fn reverted(replicas: &[i32], isr: &[i32], adding: &[i32]) -> Option<(Vec<i32>, Vec<i32>)> {
    let original: Vec<i32> = replicas
        .iter()
        .copied()
        .filter(|r| !adding.contains(r))
        .collect();
    let new_isr: Vec<i32> = isr
        .iter()
        .copied()
        .filter(|r| !adding.contains(r))
        .collect();
    (!new_isr.is_empty()).then_some((original, new_isr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moving_one_replica_adds_then_removes_it() {
        let r = ReassignmentReplicas::new(&[1, 2, 3], &[], &[4, 2, 3]);
        assert_eq!(r.replicas, vec![4, 2, 3, 1]);
        assert_eq!(r.adding, vec![4]);
        assert_eq!(r.removing, vec![1]);
        assert_eq!(r.target(), vec![4, 2, 3]);
    }

    #[test]
    fn reordering_needs_no_data_movement() {
        let r = ReassignmentReplicas::new(&[1, 2, 3], &[], &[3, 1, 2]);
        assert_eq!(r.replicas, vec![3, 1, 2]);
        assert!(r.adding.is_empty() && r.removing.is_empty());
    }

    #[test]
    fn completes_only_when_every_added_replica_is_in_sync() {
        let replicas = [4, 2, 3, 1];
        assert_eq!(completed(&replicas, &[1, 2, 3], &[4], &[1]), None);
        assert_eq!(
            completed(&replicas, &[1, 2, 3, 4], &[4], &[1]),
            Some((vec![4, 2, 3], vec![2, 3, 4]))
        );
        // Nothing running: nothing to complete.
        assert_eq!(completed(&[1, 2], &[1, 2], &[], &[]), None);
    }

    #[test]
    fn shrinking_the_replication_factor_completes_at_once() {
        let r = ReassignmentReplicas::new(&[1, 2, 3], &[], &[1, 2]);
        assert_eq!(
            completed(&r.replicas, &[1, 2, 3], &r.adding, &r.removing),
            Some((vec![1, 2], vec![1, 2]))
        );
    }

    #[test]
    fn never_completes_while_a_staying_replica_is_out_of_sync() {
        // [1,2,3] -> [1,2] with 2 lagging: dropping 3 would leave one in-sync copy.
        assert_eq!(completed(&[1, 2, 3], &[1, 3], &[], &[3]), None);
        // [1,2,3] -> [4,2,3] with 2 and 3 lagging: 4 caught up, but 2 and 3 did not.
        assert_eq!(completed(&[4, 2, 3, 1], &[1, 4], &[4], &[1]), None);
        assert_eq!(
            completed(&[4, 2, 3, 1], &[1, 2, 3, 4], &[4], &[1]),
            Some((vec![4, 2, 3], vec![2, 3, 4]))
        );
    }

    #[test]
    fn never_completes_with_an_empty_isr() {
        // Target [4]; only the leaving replica 1 is in sync and 4 is not: wait.
        assert_eq!(completed(&[4, 1], &[1], &[4], &[1]), None);
    }

    #[test]
    fn a_new_target_replaces_an_unfinished_reassignment() {
        // [1,2,3] -> [4,5,6] was running (replicas [4,5,6,1,2,3]); now the target is [1,2,4].
        let r = ReassignmentReplicas::new(&[4, 5, 6, 1, 2, 3], &[4, 5, 6], &[1, 2, 4]);
        assert_eq!(r.replicas, vec![1, 2, 4, 5, 6, 3]);
        assert_eq!(r.adding, vec![4], "4 has not caught up yet");
        assert_eq!(r.removing, vec![5, 6, 3]);
    }

    #[test]
    fn cancelling_drops_the_added_replicas() {
        assert_eq!(
            reverted(&[4, 2, 3, 1], &[1, 2, 3, 4], &[4]),
            Some((vec![2, 3, 1], vec![1, 2, 3]))
        );
        assert_eq!(reverted(&[4, 1], &[4], &[4]), None);
    }

    mod props {
        use super::super::*;
        use proptest::prelude::*;

        fn distinct(max_len: usize) -> impl Strategy<Value = Vec<i32>> {
            proptest::sample::subsequence((0..8).collect::<Vec<i32>>(), 1..=max_len).prop_shuffle()
        }

        proptest! {
            /// The widened replica set holds every current and every target replica exactly
            /// once, with the target first; completion with everyone in sync yields the target.
            #[test]
            fn widening_then_completing_lands_on_the_target(
                current in distinct(5),
                target in distinct(5),
            ) {
                let r = ReassignmentReplicas::new(&current, &[], &target);
                let mut all: Vec<i32> = r.replicas.clone();
                all.sort_unstable();
                let mut expected: Vec<i32> = current.iter().chain(&target).copied().collect();
                expected.sort_unstable();
                expected.dedup();
                prop_assert_eq!(all, expected);
                prop_assert_eq!(&r.replicas[..target.len()], &target[..]);
                prop_assert_eq!(r.target(), target.clone());
                if in_progress(&r.adding, &r.removing) {
                    let (replicas, isr) = completed(&r.replicas, &r.replicas, &r.adding, &r.removing)
                        .expect("everyone in sync completes");
                    prop_assert_eq!(replicas, target.clone());
                    let mut isr = isr;
                    isr.sort_unstable();
                    let mut t = target.clone();
                    t.sort_unstable();
                    prop_assert_eq!(isr, t);
                }
            }

            /// Cancelling restores the original replicas whenever one of them is in sync.
            #[test]
            fn cancelling_restores_the_original(current in distinct(5), target in distinct(5)) {
                let r = ReassignmentReplicas::new(&current, &[], &target);
                let isr = current.clone();
                let (replicas, new_isr) = reverted(&r.replicas, &isr, &r.adding)
                    .expect("the original replicas are in sync");
                let mut a = replicas.clone();
                a.sort_unstable();
                let mut b = current.clone();
                b.sort_unstable();
                prop_assert_eq!(a, b);
                prop_assert_eq!(new_isr, isr);
            }
        }
    }
}
