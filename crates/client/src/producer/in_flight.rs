//! An idempotent producer's batches of one partition between drain and completion, and the
//! drain rule built on them (known case 8 of docs/faults.md).
//!
//! A leader remembers a producer's last five batches per partition; the retry of a batch
//! that is already in the log is a duplicate (success) only while it is one of them. Anything
//! sent after it that lands first pushes it out, and every later retry is then a sequence gap
//! (OUT_OF_ORDER_SEQUENCE_NUMBER) although the records are in the log. This is the state
//! Kafka's `TransactionManager` keeps per partition for the same reason
//! (`inflightBatchesBySequence`, `firstInFlightSequence`, `hasUnresolvedSequence`), and the
//! decisions `RecordAccumulator.shouldStopDrainBatchesForPartition` takes from it:
//!
//! * a retry drains only when it is the partition's first batch in flight: in flight is
//!   effectively 1 until the retries resolve (a batch held back before it was ever sent
//!   drains as a new one, behind what is in flight);
//! * a new batch does not drain while a batch of the partition is *unresolved*: its failure
//!   was read (recorded at once, before the sender waits for a metadata refresh, so that no
//!   slot freed meanwhile lets a later batch out), or a later batch's success was handled
//!   before its own answer (the tasks that handle responses can run in any order; the
//!   answers of one connection arrive in order, so its outcome is known to the broker and
//!   not yet to us);
//! * a new batch does not drain while a batch of the partition waits for the answer of a
//!   broker that is no longer its leader: the old leader may have appended and replicated
//!   it, and batches written to the new leader first would push it out of the new leader's
//!   memory. Kafka holds new batches back across a producer epoch change
//!   (`hasStaleProducerIdAndEpoch`) but not across a leader change; this is the same rule for
//!   the leader.
//!
//! None of it costs anything while nothing is unresolved: a partition with nothing in flight
//! or only batches on their way to its leader drains as before.

use std::collections::BTreeMap;
use std::ops::RangeBounds;

/// One batch drained and not completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Flight {
    /// The broker it was drained for (`None`: no leader was known then).
    leader: Option<i32>,
    /// Its outcome is pending after a failure or a later batch's success: it must resolve
    /// before anything new of the partition goes out.
    unresolved: bool,
}

/// What the head of a partition's queue offers to the drain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Candidate {
    /// A batch with its sequence fixed: a retry, or one put back behind a retry.
    Sequenced(i32),
    /// A batch that gets its sequence when it drains.
    New,
}

/// The partition's batches between drain and completion, by base sequence.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    batches: BTreeMap<i32, Flight>,
    /// The drain refused the partition since the last completion: the completion must wake
    /// the sender (nothing else would until its next timer).
    held: bool,
}

impl InFlight {
    /// Whether `candidate` may drain now, the partition's leader being `leader()` (asked only
    /// when something is in flight). A refusal is remembered for [`InFlight::completed`].
    pub fn may_drain(
        &mut self,
        candidate: Candidate,
        leader: impl FnOnce() -> Option<i32>,
    ) -> bool {
        let allowed = match candidate {
            Candidate::Sequenced(seq) if self.is_unresolved(seq) => {
                self.batches.keys().next().is_none_or(|&first| first == seq)
            }
            Candidate::Sequenced(seq) => self.clear(..seq, leader),
            Candidate::New => self.clear(.., leader),
        };
        self.held |= !allowed;
        allowed
    }

    fn is_unresolved(&self, seq: i32) -> bool {
        self.batches.get(&seq).is_some_and(|f| f.unresolved)
    }

    /// No batch of `range` is unresolved or waits for a broker other than the leader.
    fn clear(&self, range: impl RangeBounds<i32>, leader: impl FnOnce() -> Option<i32>) -> bool {
        let mut before = self.batches.range(range).map(|(_, f)| f).peekable();
        if before.peek().is_none() {
            return true;
        }
        let leader = leader();
        !before.any(|f| f.unresolved || (f.leader.is_some() && f.leader != leader))
    }

    /// The batch of sequence `seq` drained for `leader` (again, for a retry: it stays
    /// unresolved until it completes).
    pub fn drained(&mut self, seq: i32, leader: Option<i32>) {
        self.batches
            .entry(seq)
            .and_modify(|f| f.leader = leader)
            .or_insert(Flight {
                leader,
                unresolved: false,
            });
    }

    /// The batch of sequence `seq` failed and will be sent again (or fail): unresolved.
    pub fn failed(&mut self, seq: i32) {
        if let Some(f) = self.batches.get_mut(&seq) {
            f.unresolved = true;
        }
    }

    /// The batch of sequence `seq` succeeded: it leaves, and every earlier one still waiting
    /// for its own answer becomes unresolved (its answer arrived before this one's and has
    /// not been handled yet, or its connection was lost). Returns whether the sender must be
    /// woken, as for [`InFlight::completed`].
    pub fn succeeded(&mut self, seq: i32) -> bool {
        for f in self.batches.range_mut(..seq).map(|(_, f)| f) {
            f.unresolved = true;
        }
        self.completed(seq)
    }

    /// The batch of sequence `seq` is done (acknowledged, or failed for good). Returns
    /// whether the drain refused the partition since the last completion.
    pub fn completed(&mut self, seq: i32) -> bool {
        self.batches.remove(&seq);
        std::mem::take(&mut self.held)
    }

    /// Whether a batch drained with sequence `seq` and not written yet must go back behind
    /// an unresolved earlier one.
    pub fn holds_back(&self, seq: i32) -> bool {
        self.batches.range(..seq).any(|(_, f)| f.unresolved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn five_at(leader: i32) -> InFlight {
        let mut f = InFlight::default();
        for seq in 0..5 {
            f.drained(seq, Some(leader));
        }
        f
    }

    #[test]
    fn nothing_unresolved_drains_as_before() {
        let mut f = InFlight::default();
        assert!(f.may_drain(Candidate::New, || panic!("no leader needed")));
        let mut f = five_at(1);
        assert!(f.may_drain(Candidate::New, || Some(1)));
        assert!(!f.holds_back(5));
        assert!(!f.completed(0), "nothing was refused: no wake");
    }

    #[test]
    fn a_read_failure_holds_new_and_later_batches_until_it_resolves() {
        let mut f = five_at(1);
        f.failed(0);
        assert!(f.holds_back(5));
        assert!(!f.holds_back(0));
        assert!(!f.may_drain(Candidate::New, || Some(1)));
        // The later ones succeed; only sequence 0's retry may go.
        for seq in 1..5 {
            f.succeeded(seq);
        }
        f.drained(5, Some(1));
        assert!(!f.may_drain(Candidate::Sequenced(5), || Some(1)));
        assert!(f.may_drain(Candidate::Sequenced(0), || Some(1)));
        f.drained(0, Some(1));
        assert!(
            !f.may_drain(Candidate::New, || Some(1)),
            "the retry is unresolved in flight"
        );
        assert!(f.succeeded(0), "refused drains want a wake");
        assert!(f.may_drain(Candidate::Sequenced(5), || Some(1)));
    }

    #[test]
    fn a_later_success_handled_first_makes_the_earlier_batches_unresolved() {
        let mut f = five_at(1);
        f.succeeded(3);
        assert!(f.holds_back(5));
        assert!(!f.holds_back(0));
        for seq in [0, 1, 2] {
            f.succeeded(seq);
        }
        assert!(!f.holds_back(5));
        assert!(f.may_drain(Candidate::New, || Some(1)));
    }

    #[test]
    fn new_batches_wait_for_the_old_leaders_answers() {
        let mut f = five_at(1);
        assert!(!f.may_drain(Candidate::New, || Some(2)));
        assert!(!f.may_drain(Candidate::New, || None));
        f.failed(0);
        // The first retry goes to the new leader while the others still wait.
        assert!(f.may_drain(Candidate::Sequenced(0), || Some(2)));
        f.drained(0, Some(2));
        assert!(!f.may_drain(Candidate::Sequenced(1), || Some(2)));
        for seq in 0..5 {
            f.completed(seq);
        }
        assert!(f.may_drain(Candidate::New, || Some(2)));
    }

    #[derive(Debug, Clone)]
    enum Step {
        Drain(Option<i32>),
        Fail(usize),
        Succeed(usize),
        Give(usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            prop::option::of(1..3i32).prop_map(Step::Drain),
            (0..8usize).prop_map(Step::Fail),
            (0..8usize).prop_map(Step::Succeed),
            (0..8usize).prop_map(Step::Give),
        ]
    }

    /// The model's rule: nothing before `seq` unresolved or bound for another broker.
    fn clear(model: &BTreeMap<i32, (Option<i32>, bool)>, seq: i32, leader: i32) -> bool {
        model
            .range(..seq)
            .all(|(_, (at, unresolved))| !unresolved && at.is_none_or(|at| at == leader))
    }

    proptest! {
        /// Whatever happens to the batches, a new batch drains only when every batch in
        /// flight is resolved and headed for the current leader, a retry only when no
        /// earlier one is in flight, a held one as a new one behind the earlier ones, and a
        /// refusal is answered by a wake on completion.
        #[test]
        fn the_rule_holds_in_any_history(steps in prop::collection::vec(step(), 1..60), leader in 1..3i32) {
            let mut f = InFlight::default();
            let mut model: BTreeMap<i32, (Option<i32>, bool)> = BTreeMap::new();
            let mut next = 0;
            let mut refused = false;
            for s in steps {
                let pick = |i: usize| model.keys().nth(i % model.len().max(1)).copied();
                match s {
                    Step::Drain(at) => {
                        let want = clear(&model, i32::MAX, leader);
                        let got = f.may_drain(Candidate::New, || Some(leader));
                        prop_assert_eq!(got, want);
                        refused |= !got;
                        if got {
                            f.drained(next, at);
                            model.insert(next, (at, false));
                            next += 1;
                        }
                    }
                    Step::Fail(i) => if let Some(seq) = pick(i) {
                        f.failed(seq);
                        model.entry(seq).and_modify(|e| e.1 = true);
                        let earlier = model.range(..seq).any(|(_, e)| e.1);
                        prop_assert_eq!(f.holds_back(seq), earlier);
                        prop_assert!(f.holds_back(seq + 1));
                    },
                    Step::Succeed(i) => if let Some(seq) = pick(i) {
                        for (_, e) in model.range_mut(..seq) { e.1 = true; }
                        model.remove(&seq);
                        prop_assert_eq!(f.succeeded(seq), std::mem::take(&mut refused));
                    },
                    Step::Give(i) => if let Some(seq) = pick(i) {
                        let want = if model[&seq].1 {
                            model.keys().next() == Some(&seq)
                        } else {
                            clear(&model, seq, leader)
                        };
                        let got = f.may_drain(Candidate::Sequenced(seq), || Some(leader));
                        prop_assert_eq!(got, want);
                        refused |= !got;
                    },
                }
            }
        }
    }
}
