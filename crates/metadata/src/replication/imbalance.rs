//! Spec F: the per-broker leader imbalance and the automatic preferred-leader rebalance
//! (Kafka 2.8's `checkAndTriggerAutoLeaderRebalance`).
//!
//! Placement spreads preferred replicas evenly, so leadership is balanced exactly when the
//! preferred replicas lead. Failovers move leadership away and nothing moves it back, so the
//! controller periodically measures, per broker, the share of its preferred partitions led
//! elsewhere, and runs preferred elections once that share exceeds
//! `leader.imbalance.per.broker.percentage`. The threshold avoids churning leadership (and
//! clients' metadata) for a partition or two.

use std::collections::{BTreeMap, BTreeSet};

use super::election::{preferred_election, Election};

/// What the rebalance needs to know about one partition; `key` is the caller's handle
/// (e.g. `(topic id, partition)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionLeadership<'a, K> {
    pub key: K,
    pub assignment: &'a [i32],
    pub isr: &'a [i32],
    /// The current leader; `Some(-1)` for a recorded "no leader" (counts as not preferred),
    /// `None` for a partition without leadership information yet (not counted, as in Kafka).
    pub leader: Option<i32>,
    /// The topic is being deleted: such partitions are left out entirely.
    pub deleting: bool,
}

/// One broker's preferred partitions and how many of them another broker leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BrokerImbalance {
    pub preferred: usize,
    pub not_led: usize,
}

impl BrokerImbalance {
    /// `not_led / preferred` (0 for a broker preferred for nothing).
    pub fn ratio(&self) -> f64 {
        if self.preferred == 0 {
            0.0
        } else {
            self.not_led as f64 / self.preferred as f64
        }
    }

    /// `ratio > percentage / 100`, strictly, in integers so that e.g. 1/10 against 10% is
    /// exactly "not above".
    pub fn exceeds(&self, percentage: u32) -> bool {
        (self.not_led as u128) * 100 > u128::from(percentage) * (self.preferred as u128)
    }
}

/// F steps 1-2: partitions (not being deleted) grouped by preferred replica, with how many of
/// each broker's are led by someone else.
pub fn imbalance_by_broker<K>(
    partitions: &[PartitionLeadership<'_, K>],
) -> BTreeMap<i32, BrokerImbalance> {
    let mut out: BTreeMap<i32, BrokerImbalance> = BTreeMap::new();
    for p in partitions.iter().filter(|p| !p.deleting) {
        let Some(&preferred) = p.assignment.first() else {
            continue;
        };
        let entry = out.entry(preferred).or_default();
        entry.preferred += 1;
        if p.leader.is_some_and(|l| l != preferred) {
            entry.not_led += 1;
        }
    }
    out
}

/// The outcome of one imbalance check.
#[derive(Debug, Clone, PartialEq)]
pub struct RebalancePlan<K> {
    pub imbalance: BTreeMap<i32, BrokerImbalance>,
    /// Preferred elections to commit, in input order.
    pub elections: Vec<(K, Election)>,
}

/// F step 3: for every broker whose imbalance exceeds `percentage`, a preferred election for
/// each of its partitions led elsewhere whose preferred replica is live and in the ISR.
/// Nothing is elected while any reassignment is in progress (it moves leaders itself).
pub fn auto_rebalance<K: Clone>(
    partitions: &[PartitionLeadership<'_, K>],
    live: &BTreeSet<i32>,
    percentage: u32,
    reassignment_in_progress: bool,
) -> RebalancePlan<K> {
    let imbalance = imbalance_by_broker(partitions);
    let mut elections = Vec::new();
    if !reassignment_in_progress {
        for p in partitions.iter().filter(|p| !p.deleting) {
            let Some(&preferred) = p.assignment.first() else {
                continue;
            };
            let over = imbalance
                .get(&preferred)
                .is_some_and(|b| b.exceeds(percentage));
            let led_elsewhere = p.leader.is_some_and(|l| l != preferred);
            if !(over && led_elsewhere) {
                continue;
            }
            if let Some(e) = preferred_election(p.assignment, p.isr, live) {
                elections.push((p.key.clone(), e));
            }
        }
    }
    RebalancePlan {
        imbalance,
        elections,
    }
}
