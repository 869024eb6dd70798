//! Spec D.3: the leader-election strategies, as pure choices over a partition's assignment,
//! ISR and the brokers' liveness, and ElectLeaders' per-partition results.
//!
//! Every strategy walks the *assignment order*, so the preferred replica (first assigned)
//! wins whenever it qualifies and leadership stays where placement spread it. A clean
//! election only ever picks an ISR member, because only they are known to have every
//! committed record; an unclean one trades that for availability and must be asked for.
//!
//! "Live" is what the caller passes in `live`: registered, unfenced and not shutting down
//! (the controller's `active_broker_ids`). The controller's `on_commit`
//! (`controller/commit.rs`) calls the initial and offline strategies; there is no other copy.

use std::collections::BTreeSet;

use super::codes;
use crate::errors::ApiError;

/// A new leader and ISR to write in a PartitionChange record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Election {
    pub leader: i32,
    pub isr: Vec<i32>,
    /// The leader was not in the ISR: committed data may have been lost (E.6); the
    /// state-change log says so and `UncleanLeaderElectionsPerSec` counts it.
    pub unclean: bool,
}

fn clean(leader: i32, isr: Vec<i32>) -> Election {
    Election {
        leader,
        isr,
        unclean: false,
    }
}

/// D.1's election for a partition that never had a leader (no ISR yet): the first live
/// replica leads and every live replica is in sync, since none holds any data.
pub fn initial_election(assignment: &[i32], live: &BTreeSet<i32>) -> Option<Election> {
    let live_replicas: Vec<i32> = assignment
        .iter()
        .copied()
        .filter(|r| live.contains(r))
        .collect();
    let leader = *live_replicas.first()?;
    Some(clean(leader, live_replicas))
}

/// Offline strategy (a new or offline partition, a broker failure): the first assigned
/// replica that is live and in the ISR, with the ISR filtered to live brokers. Failing that,
/// if unclean election is allowed, the first live replica with ISR = `[leader]`.
pub fn offline_election(
    assignment: &[i32],
    isr: &[i32],
    live: &BTreeSet<i32>,
    unclean_allowed: bool,
) -> Option<Election> {
    let live_isr: Vec<i32> = isr.iter().copied().filter(|r| live.contains(r)).collect();
    if let Some(&leader) = assignment.iter().find(|r| live_isr.contains(r)) {
        return Some(clean(leader, live_isr));
    }
    if !unclean_allowed {
        return None;
    }
    let &leader = assignment.iter().find(|r| live.contains(r))?;
    Some(Election {
        leader,
        isr: vec![leader],
        unclean: true,
    })
}

/// Reassign strategy: the first replica of the *target* replica list that is live and in
/// the ISR; the ISR is unchanged (the reassignment itself manages it).
pub fn reassign_election(
    target_replicas: &[i32],
    isr: &[i32],
    live: &BTreeSet<i32>,
) -> Option<Election> {
    let &leader = target_replicas
        .iter()
        .find(|r| live.contains(r) && isr.contains(r))?;
    Some(clean(leader, isr.to_vec()))
}

/// Preferred strategy (ElectLeaders PREFERRED, auto rebalance): only the first assigned
/// replica, and only if it is live and in the ISR; the ISR is unchanged. Picking anyone else
/// would not restore the balance placement intended, so there is no fallback.
pub fn preferred_election(
    assignment: &[i32],
    isr: &[i32],
    live: &BTreeSet<i32>,
) -> Option<Election> {
    let &preferred = assignment.first()?;
    (live.contains(&preferred) && isr.contains(&preferred)).then(|| clean(preferred, isr.to_vec()))
}

/// Controlled-shutdown strategy: the first assigned replica that is in the ISR, live or
/// shutting down, and not shutting down itself; the new ISR is the old one minus every
/// shutting-down broker, so leadership does not bounce back to a broker about to stop.
/// Dead (fenced) ISR members are left to the offline path, as in Kafka.
pub fn controlled_shutdown_election(
    assignment: &[i32],
    isr: &[i32],
    live: &BTreeSet<i32>,
    shutting_down: &BTreeSet<i32>,
) -> Option<Election> {
    let &leader = assignment.iter().find(|r| {
        (live.contains(r) || shutting_down.contains(r))
            && isr.contains(r)
            && !shutting_down.contains(r)
    })?;
    let new_isr = isr
        .iter()
        .copied()
        .filter(|r| !shutting_down.contains(r))
        .collect();
    Some(clean(leader, new_isr))
}

/// ElectLeaders' `election_type` on the wire (0 PREFERRED, 1 UNCLEAN). Same values as the
/// controller's `ElectionType`; kept separate so these pure rules do not depend on the
/// controller module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElectLeadersType {
    Preferred = 0,
    Unclean = 1,
}

impl ElectLeadersType {
    pub fn from_i8(value: i8) -> Option<Self> {
        match value {
            0 => Some(ElectLeadersType::Preferred),
            1 => Some(ElectLeadersType::Unclean),
            _ => None,
        }
    }
}

/// One partition of an ElectLeaders request (Kafka 2.8's `processReplicaLeaderElection`),
/// given its assignment, ISR and current leader (-1: none). Unknown partitions (3) are the
/// caller's, since it owns the image.
///
/// * PREFERRED: 84 ELECTION_NOT_NEEDED if the preferred replica leads already; otherwise
///   [`preferred_election`], or 80 PREFERRED_LEADER_NOT_AVAILABLE.
/// * UNCLEAN: 84 if a live leader exists (an unclean election only rescues leaderless
///   partitions); otherwise [`offline_election`] with unclean allowed, or 83
///   ELIGIBLE_LEADERS_NOT_AVAILABLE.
pub fn elect_leaders(
    election_type: ElectLeadersType,
    assignment: &[i32],
    isr: &[i32],
    current_leader: i32,
    live: &BTreeSet<i32>,
) -> Result<Election, ApiError> {
    match election_type {
        ElectLeadersType::Preferred => {
            if assignment.first() == Some(&current_leader) {
                return Err(ApiError::new(
                    codes::ELECTION_NOT_NEEDED,
                    "Leader election not needed for topic partition.",
                ));
            }
            preferred_election(assignment, isr, live).ok_or_else(|| {
                ApiError::new(
                    codes::PREFERRED_LEADER_NOT_AVAILABLE,
                    format!(
                        "Failed to elect leader under strategy PreferredReplicaPartitionLeaderElectionStrategy: preferred replica {:?} is not live or not in the ISR {isr:?}",
                        assignment.first()
                    ),
                )
            })
        }
        ElectLeadersType::Unclean => {
            if current_leader != -1 && live.contains(&current_leader) {
                return Err(ApiError::new(
                    codes::ELECTION_NOT_NEEDED,
                    "Leader election not needed for topic partition.",
                ));
            }
            offline_election(assignment, isr, live, true).ok_or_else(|| {
                ApiError::new(
                    codes::ELIGIBLE_LEADERS_NOT_AVAILABLE,
                    format!(
                        "Failed to elect leader under strategy OfflinePartitionLeaderElectionStrategy(true): no live replica among {assignment:?}"
                    ),
                )
            })
        }
    }
}
