//! kafka-topics.sh `--describe` partition filters: `--under-replicated-partitions`,
//! `--unavailable-partitions`, `--under-min-isr-partitions`, `--at-min-isr-partitions`.
//! With any of them only the matching partition lines are printed, without topic headers;
//! a partition is printed when it matches any requested filter.

use std::collections::BTreeSet;

use runnel_client::admin::PartitionReassignment;
use runnel_client::PartitionInfo;

/// The requested filters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PartitionFilters {
    /// ISR smaller than the replication factor.
    pub under_replicated: bool,
    /// No leader, or a leader that is not a live broker.
    pub unavailable: bool,
    /// No leader, or ISR smaller than `min.insync.replicas`.
    pub under_min_isr: bool,
    /// ISR exactly `min.insync.replicas`.
    pub at_min_isr: bool,
}

/// What a partition is judged against.
#[derive(Debug, Clone, Copy)]
pub struct FilterContext<'a> {
    /// Ids of the live brokers (DescribeCluster).
    pub live_brokers: &'a BTreeSet<i32>,
    /// The topic's `min.insync.replicas` (needed only by the min-ISR filters).
    pub min_isr: Option<i32>,
}

impl PartitionFilters {
    /// Whether any filter is set (then topic headers are not printed).
    pub fn any(&self) -> bool {
        self.under_replicated || self.unavailable || self.under_min_isr || self.at_min_isr
    }

    /// Whether the min-ISR filters need the topic's `min.insync.replicas`.
    pub fn needs_min_isr(&self) -> bool {
        self.under_min_isr || self.at_min_isr
    }

    /// Whether to print `p`: always without filters, else when any requested filter matches.
    pub fn matches(
        &self,
        p: &PartitionInfo,
        reassignment: Option<&PartitionReassignment>,
        ctx: FilterContext<'_>,
    ) -> bool {
        if !self.any() {
            return true;
        }
        let isr = p.isr.len();
        let min_isr = ctx.min_isr.and_then(|m| usize::try_from(m).ok());
        (self.under_replicated && replication_factor(p, reassignment) > isr)
            || (self.unavailable && p.leader.is_none_or(|l| !ctx.live_brokers.contains(&l)))
            || (self.under_min_isr && (p.leader.is_none() || min_isr.is_some_and(|m| isr < m)))
            || (self.at_min_isr && min_isr == Some(isr))
    }
}

/// Whether `p`'s replica set still holds replicas being added or removed.
pub fn reassignment_in_progress(
    p: &PartitionInfo,
    reassignment: Option<&PartitionReassignment>,
) -> bool {
    reassignment.is_some_and(|r| {
        p.replicas
            .iter()
            .any(|b| r.adding_replicas.contains(b) || r.removing_replicas.contains(b))
    })
}

/// The replication factor kafka-topics reports: during a reassignment, the replicas minus
/// the ones being added; otherwise the replica count.
pub fn replication_factor(
    p: &PartitionInfo,
    reassignment: Option<&PartitionReassignment>,
) -> usize {
    match reassignment {
        Some(r) if reassignment_in_progress(p, reassignment) => {
            r.replicas.len().saturating_sub(r.adding_replicas.len())
        }
        _ => p.replicas.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(leader: Option<i32>, replicas: &[i32], isr: &[i32]) -> PartitionInfo {
        PartitionInfo {
            partition: 0,
            leader,
            leader_epoch: 0,
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            offline: vec![],
            error_code: 0,
        }
    }

    fn live() -> BTreeSet<i32> {
        [1, 2, 3].into_iter().collect()
    }

    fn check(f: PartitionFilters, p: &PartitionInfo, min_isr: Option<i32>) -> bool {
        let live = live();
        f.matches(
            p,
            None,
            FilterContext {
                live_brokers: &live,
                min_isr,
            },
        )
    }

    const UNDER_REPLICATED: PartitionFilters = PartitionFilters {
        under_replicated: true,
        unavailable: false,
        under_min_isr: false,
        at_min_isr: false,
    };
    const UNAVAILABLE: PartitionFilters = PartitionFilters {
        under_replicated: false,
        unavailable: true,
        under_min_isr: false,
        at_min_isr: false,
    };
    const UNDER_MIN_ISR: PartitionFilters = PartitionFilters {
        under_replicated: false,
        unavailable: false,
        under_min_isr: true,
        at_min_isr: false,
    };
    const AT_MIN_ISR: PartitionFilters = PartitionFilters {
        under_replicated: false,
        unavailable: false,
        under_min_isr: false,
        at_min_isr: true,
    };

    #[test]
    fn no_filter_prints_everything() {
        let f = PartitionFilters::default();
        assert!(!f.any());
        assert!(check(f, &part(None, &[1], &[]), None));
    }

    #[test]
    fn under_replicated() {
        assert!(check(
            UNDER_REPLICATED,
            &part(Some(1), &[1, 2, 3], &[1, 2]),
            None
        ));
        assert!(!check(
            UNDER_REPLICATED,
            &part(Some(1), &[1, 2, 3], &[3, 1, 2]),
            None
        ));
    }

    #[test]
    fn under_replicated_during_reassignment_uses_the_target_size() {
        // Moving 1 -> 4: replicas 1,2,3,4 with 4 being added; RF is 3, so ISR 1,2,3 is full.
        let p = part(Some(1), &[1, 2, 3, 4], &[1, 2, 3]);
        let r = PartitionReassignment {
            replicas: vec![1, 2, 3, 4],
            adding_replicas: vec![4],
            removing_replicas: vec![1],
        };
        assert_eq!(replication_factor(&p, Some(&r)), 3);
        assert!(reassignment_in_progress(&p, Some(&r)));
        let live = live();
        let ctx = FilterContext {
            live_brokers: &live,
            min_isr: None,
        };
        assert!(!UNDER_REPLICATED.matches(&p, Some(&r), ctx));
        assert!(UNDER_REPLICATED.matches(&p, None, ctx));
    }

    #[test]
    fn unavailable() {
        assert!(check(UNAVAILABLE, &part(None, &[1, 2], &[]), None));
        assert!(check(UNAVAILABLE, &part(Some(7), &[7, 1], &[7]), None));
        assert!(!check(UNAVAILABLE, &part(Some(1), &[1, 2], &[1]), None));
    }

    #[test]
    fn min_isr_filters() {
        let two_of_three = part(Some(1), &[1, 2, 3], &[1, 2]);
        let one_of_three = part(Some(1), &[1, 2, 3], &[1]);
        assert!(!check(UNDER_MIN_ISR, &two_of_three, Some(2)));
        assert!(check(UNDER_MIN_ISR, &one_of_three, Some(2)));
        assert!(check(
            UNDER_MIN_ISR,
            &part(None, &[1, 2, 3], &[1, 2, 3]),
            Some(2)
        ));
        assert!(check(AT_MIN_ISR, &two_of_three, Some(2)));
        assert!(!check(AT_MIN_ISR, &one_of_three, Some(2)));
        assert!(!check(AT_MIN_ISR, &two_of_three, None));
    }

    #[test]
    fn filters_combine_with_or() {
        let both = PartitionFilters {
            under_replicated: true,
            unavailable: true,
            ..PartitionFilters::default()
        };
        assert!(check(both, &part(None, &[1], &[1]), None));
        assert!(check(both, &part(Some(1), &[1, 2], &[1]), None));
        assert!(!check(both, &part(Some(1), &[1, 2], &[2, 1]), None));
    }
}
