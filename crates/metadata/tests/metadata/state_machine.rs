//! Spec D.1 / D.2: every (from, to) pair of both state machines, allowed and forbidden.
//! The expected tables are written out here independently of the implementation.

use runnel_metadata::state_machine::*;
use PartitionState as P;
use ReplicaState as R;

/// D.1, as (target, valid previous states).
const PARTITION_TABLE: [(P, &[P]); 4] = [
    (P::New, &[P::NonExistent]),
    (P::Online, &[P::New, P::Online, P::Offline]),
    (P::Offline, &[P::New, P::Online, P::Offline]),
    (P::NonExistent, &[P::Offline]),
];

/// D.2 (Kafka 2.8), as (target, valid previous states).
const REPLICA_TABLE: [(R, &[R]); 7] = [
    (R::New, &[R::NonExistent]),
    (
        R::Online,
        &[R::New, R::Online, R::Offline, R::DeletionIneligible],
    ),
    (
        R::Offline,
        &[R::New, R::Online, R::Offline, R::DeletionIneligible],
    ),
    (R::DeletionStarted, &[R::Offline]),
    (R::DeletionSuccessful, &[R::DeletionStarted]),
    (R::DeletionIneligible, &[R::Offline, R::DeletionStarted]),
    (R::NonExistent, &[R::DeletionSuccessful]),
];

#[test]
fn all_16_partition_pairs() {
    let mut checked = 0;
    for from in P::ALL {
        for (to, prev) in PARTITION_TABLE {
            let allowed = prev.contains(&from);
            assert_eq!(to.can_transition_from(from), allowed, "{from} -> {to}");
            let r = check_partition_transition("t", 0, from, to);
            assert_eq!(r.is_ok(), allowed, "{from} -> {to}");
            if let Err(e) = r {
                assert_eq!(
                    e.to_string(),
                    format!(
                        "Illegal state transition from {} to {} for partition t-0",
                        from.name(),
                        to.name()
                    )
                );
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 16);
}

#[test]
fn all_49_replica_pairs() {
    let mut checked = 0;
    for from in R::ALL {
        for (to, prev) in REPLICA_TABLE {
            let allowed = prev.contains(&from);
            assert_eq!(to.can_transition_from(from), allowed, "{from} -> {to}");
            let r = check_replica_transition("t", 3, 5, from, to);
            assert_eq!(r.is_ok(), allowed, "{from} -> {to}");
            if let Err(e) = r {
                assert_eq!(
                    e.to_string(),
                    format!(
                        "Illegal state transition from {} to {} for replica 5 of partition t-3",
                        from.name(),
                        to.name()
                    )
                );
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 49);
}

#[test]
fn numeric_codes_and_names_match_kafka() {
    assert_eq!(P::ALL.map(|s| s.code()), [0, 1, 2, 3]);
    assert_eq!(R::ALL.map(|s| s.code()), [1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(P::NonExistent.name(), "NonExistentPartition");
    assert_eq!(R::DeletionIneligible.name(), "ReplicaDeletionIneligible");
    assert_eq!(R::NonExistent.name(), "NonExistentReplica");
}
