//! The states of a transactional id and their legal transitions (Kafka's `TransactionState`
//! and its `validPreviousStates`). The ids are the `TransactionStatus` byte of the
//! `__transaction_state` value; the names are those DescribeTransactions/ListTransactions
//! report.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TxnState {
    /// No transaction in progress (after InitProducerId).
    Empty,
    /// Partitions have been added; the transaction is open.
    Ongoing,
    /// EndTxn(commit) is durable; commit markers are being written.
    PrepareCommit,
    /// EndTxn(abort) (or a timeout, or a fencing InitProducerId) is durable; abort markers are
    /// being written.
    PrepareAbort,
    /// Every commit marker is written.
    CompleteCommit,
    /// Every abort marker is written.
    CompleteAbort,
    /// The transactional id expired; its tombstone is being written.
    Dead,
    /// The producer epoch is being bumped to fence a producer before aborting its transaction
    /// (never written to the log: the abort that follows is).
    PrepareEpochFence,
}

pub const ALL: [TxnState; 8] = [
    TxnState::Empty,
    TxnState::Ongoing,
    TxnState::PrepareCommit,
    TxnState::PrepareAbort,
    TxnState::CompleteCommit,
    TxnState::CompleteAbort,
    TxnState::Dead,
    TxnState::PrepareEpochFence,
];

impl TxnState {
    /// The `TransactionStatus` byte.
    pub fn id(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
            TxnState::PrepareEpochFence => 7,
        }
    }

    pub fn from_id(id: i8) -> Option<TxnState> {
        ALL.into_iter().find(|s| s.id() == id)
    }

    /// The name Kafka's admin APIs use.
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// The state named `name` (case-insensitive, as ListTransactions' state filters).
    pub fn from_name(name: &str) -> Option<TxnState> {
        ALL.into_iter()
            .find(|s| s.name().eq_ignore_ascii_case(name))
    }

    /// The states this one may be entered from.
    pub fn valid_previous(self) -> &'static [TxnState] {
        use TxnState::*;
        match self {
            Empty => &[Empty, CompleteCommit, CompleteAbort],
            Ongoing => &[Ongoing, Empty, CompleteCommit, CompleteAbort],
            PrepareCommit => &[Ongoing],
            // From an idle state: a version 2 abort of a transaction that added no partition.
            PrepareAbort => &[
                Ongoing,
                PrepareEpochFence,
                Empty,
                CompleteCommit,
                CompleteAbort,
            ],
            CompleteCommit => &[PrepareCommit],
            CompleteAbort => &[PrepareAbort],
            Dead => &[Empty, CompleteCommit, CompleteAbort],
            PrepareEpochFence => &[Ongoing],
        }
    }

    pub fn can_transition_to(self, next: TxnState) -> bool {
        next.valid_previous().contains(&self)
    }

    /// Markers are pending: new requests of this producer wait (CONCURRENT_TRANSACTIONS).
    pub fn is_preparing(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }

    /// No transaction open and none finishing: the id may start one or expire.
    pub fn is_idle(self) -> bool {
        matches!(
            self,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        )
    }
}

#[cfg(test)]
mod tests {
    use super::TxnState::*;
    use super::*;

    /// The full 8x8 table, written out so a change to any edge is a visible diff.
    #[test]
    fn every_legal_and_illegal_transition() {
        let legal: &[(TxnState, TxnState)] = &[
            (Empty, Empty),
            (CompleteCommit, Empty),
            (CompleteAbort, Empty),
            (Ongoing, Ongoing),
            (Empty, Ongoing),
            (CompleteCommit, Ongoing),
            (CompleteAbort, Ongoing),
            (Ongoing, PrepareCommit),
            (Ongoing, PrepareAbort),
            (PrepareEpochFence, PrepareAbort),
            (Empty, PrepareAbort),
            (CompleteCommit, PrepareAbort),
            (CompleteAbort, PrepareAbort),
            (PrepareCommit, CompleteCommit),
            (PrepareAbort, CompleteAbort),
            (Empty, Dead),
            (CompleteCommit, Dead),
            (CompleteAbort, Dead),
            (Ongoing, PrepareEpochFence),
        ];
        let mut n = 0;
        for from in ALL {
            for to in ALL {
                let expected = legal.contains(&(from, to));
                assert_eq!(from.can_transition_to(to), expected, "{from:?} -> {to:?}");
                n += usize::from(expected);
            }
        }
        assert_eq!(n, legal.len());
    }

    #[test]
    fn ids_and_names_round_trip() {
        for s in ALL {
            assert_eq!(TxnState::from_id(s.id()), Some(s));
            assert_eq!(TxnState::from_name(&s.name().to_uppercase()), Some(s));
        }
        assert_eq!(TxnState::from_id(8), None);
        assert_eq!(TxnState::from_id(-1), None);
        assert_eq!(TxnState::from_name("Running"), None);
    }
}
