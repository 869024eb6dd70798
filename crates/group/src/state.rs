//! The classic group state machine (spec H.2): states, Kafka's names for them, and the legal
//! transitions (Kafka's `validPreviousStates`), checked on every transition.

/// A classic group's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupState {
    /// No members; may still hold committed offsets.
    Empty,
    /// A rebalance is collecting JoinGroups.
    PreparingRebalance,
    /// Joins are answered; waiting for the leader's SyncGroup (a.k.a. AwaitingSync).
    CompletingRebalance,
    /// Every member has its assignment.
    Stable,
    /// Deleted or unloaded; never kept in the coordinator's map.
    Dead,
}

impl GroupState {
    /// The name Kafka uses in ListGroups / DescribeGroups.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }

    /// Whether `self -> to` is a legal transition.
    pub fn can_transition_to(self, to: GroupState) -> bool {
        use GroupState::*;
        match to {
            Dead => true,
            PreparingRebalance => matches!(self, Stable | CompletingRebalance | Empty),
            CompletingRebalance => self == PreparingRebalance,
            Stable => self == CompletingRebalance,
            Empty => self == PreparingRebalance,
        }
    }

    /// A rebalance may start from here (Kafka's `canRebalance`).
    pub fn can_rebalance(self) -> bool {
        self.can_transition_to(GroupState::PreparingRebalance)
    }
}

#[cfg(test)]
mod tests {
    use super::GroupState::*;

    #[test]
    fn transitions_table() {
        let all = [Empty, PreparingRebalance, CompletingRebalance, Stable, Dead];
        let legal = [
            (Empty, PreparingRebalance),
            (PreparingRebalance, CompletingRebalance),
            (PreparingRebalance, Empty),
            (CompletingRebalance, Stable),
            (CompletingRebalance, PreparingRebalance),
            (Stable, PreparingRebalance),
        ];
        for from in all {
            for to in all {
                let expected = to == Dead || legal.contains(&(from, to));
                assert_eq!(from.can_transition_to(to), expected, "{from:?} -> {to:?}");
            }
        }
        assert_eq!(CompletingRebalance.name(), "CompletingRebalance");
    }
}
