//! The simulated metadata quorum the controller appends to: what the shell's appender and the
//! Raft log do, reduced to what the pipeline sees. An appended batch commits after a seeded
//! delay (the quorum's round trip), in append order, so several batches are in flight at once;
//! an append can fail (the batch and everything appended after it never commit, the
//! appender reports the failure); leadership can be lost mid-pipeline (a seeded prefix of the
//! in-flight batches was replicated and commits under the next leader after an election, the
//! rest is gone); the quorum can stall (nothing commits for a while, answers time out).
//!
//! The quorum keeps the committed log and its image (`truth`): the checks compare what the
//! controller publishes and acknowledges against it. All randomness comes from the world's
//! seeded generator, so a seed replays the same pipeline.

use std::collections::VecDeque;
use std::sync::Arc;

use runnel_metadata::{MetadataImage, MetadataRecord};

use super::rng::Rng;

/// One appended batch, not committed yet.
#[derive(Debug, Clone)]
pub struct Batch {
    pub first: i64,
    pub records: Vec<MetadataRecord>,
    /// The tick it commits at (or fails at, if `fails`).
    pub due: u64,
    pub fails: bool,
    /// Which operation decided it (for the trace and invariant 5's message).
    pub how: &'static str,
}

/// What the quorum did at a tick.
#[derive(Debug)]
pub enum Outcome {
    /// The batch committed: `truth` now holds it.
    Committed(Batch),
    /// The append of the batch at `first` failed: it and every later batch are gone.
    Failed { first: i64 },
}

pub struct Quorum {
    /// Raft's term; a leadership loss starts the next one.
    pub term: u64,
    /// No leader before this tick (an election is running).
    pub leader_at: u64,
    pub pending: VecDeque<Batch>,
    /// Every committed record; its index is its offset.
    pub log: Vec<MetadataRecord>,
    /// The committed log applied: the only image anyone may be shown.
    pub truth: Arc<MetadataImage>,
    /// Nothing commits before this tick.
    pub stalled_until: u64,
}

impl Quorum {
    pub fn new(log: Vec<MetadataRecord>, truth: Arc<MetadataImage>) -> Quorum {
        Quorum {
            term: 1,
            leader_at: 0,
            pending: VecDeque::new(),
            log,
            truth,
            stalled_until: 0,
        }
    }

    pub fn has_leader(&self, tick: u64) -> bool {
        tick >= self.leader_at
    }

    /// Takes a batch decided at `first`; it commits `1..=max_delay` ticks from now, never
    /// before an earlier batch, or fails with `fail_per_10k`.
    #[allow(clippy::too_many_arguments)]
    pub fn append(
        &mut self,
        rng: &mut Rng,
        tick: u64,
        first: i64,
        records: Vec<MetadataRecord>,
        how: &'static str,
        max_delay: u64,
        fail_per_10k: u64,
    ) {
        let after = self.pending.back().map_or(0, |b| b.due);
        let due = (tick + rng.range(1, max_delay)).max(after);
        let fails = rng.chance(fail_per_10k);
        self.pending.push_back(Batch {
            first,
            records,
            due,
            fails,
            how,
        });
    }

    /// The next thing due at `tick`, oldest batch first.
    pub fn poll(&mut self, tick: u64) -> Option<Outcome> {
        if tick < self.stalled_until || !self.has_leader(tick) {
            return None;
        }
        if self.pending.front()?.due > tick {
            return None;
        }
        let batch = self.pending.pop_front()?;
        if batch.fails {
            self.pending.clear();
            return Some(Outcome::Failed { first: batch.first });
        }
        let numbered: Vec<(i64, MetadataRecord)> =
            (batch.first..).zip(batch.records.iter().cloned()).collect();
        let next = self
            .truth
            .apply(&numbered)
            .unwrap_or_else(|e| panic!("the quorum committed an inconsistent batch: {e}"));
        self.log.extend(batch.records.iter().cloned());
        self.truth = Arc::new(next);
        Some(Outcome::Committed(batch))
    }

    /// The leader steps down: the first `kept` of the in-flight batches were replicated and
    /// commit under the next leader once the election (`election` ticks) is over; the others
    /// are gone. Returns how many were dropped.
    pub fn lose_leadership(&mut self, tick: u64, kept: usize, election: u64) -> usize {
        let dropped = self.pending.len().saturating_sub(kept);
        self.pending.truncate(kept);
        self.term += 1;
        self.leader_at = tick + election;
        for b in self.pending.iter_mut() {
            b.due = b.due.max(self.leader_at);
            // Replicated already: the new leader commits it.
            b.fails = false;
        }
        dropped
    }

    pub fn stall(&mut self, until: u64) {
        self.stalled_until = self.stalled_until.max(until);
    }
}
