//! Group writes waiting for replication (Kafka's delayed produce for the coordinator's
//! appends): each entry is keyed by the `__consumer_offsets` partition and the offset its
//! records end at, and completes once the partition's high watermark passes that offset,
//! fails when its deadline (`offsets.commit.timeout.ms`) passes or the partition's leadership
//! leaves. The group task only appends and parks the answer here; it never waits for
//! replication itself, so one slow partition cannot hold up every other group.
//!
//! Pure: time and high watermarks are arguments. Per partition the entries are kept in append
//! order, so their offsets only grow and completion takes them from the front.

use std::collections::{BTreeMap, VecDeque};

/// Why a parked write finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every in-sync replica has the records.
    Replicated,
    /// Not replicated within the deadline (Kafka: COORDINATOR_NOT_AVAILABLE).
    TimedOut,
    /// This broker no longer leads the partition (Kafka: NOT_COORDINATOR).
    NotLeader,
}

struct Entry<T> {
    /// The HW that completes it: the offset after the appended records.
    offset: i64,
    deadline_ms: i64,
    waiter: T,
}

/// Parked writes, per partition in append order.
pub struct Purgatory<T> {
    partitions: BTreeMap<i32, VecDeque<Entry<T>>>,
}

impl<T> Default for Purgatory<T> {
    fn default() -> Self {
        Purgatory {
            partitions: BTreeMap::new(),
        }
    }
}

impl<T> Purgatory<T> {
    pub fn is_empty(&self) -> bool {
        self.partitions.is_empty()
    }

    pub fn len(&self) -> usize {
        self.partitions.values().map(VecDeque::len).sum()
    }

    /// The partitions with parked writes.
    pub fn partitions(&self) -> impl Iterator<Item = i32> + '_ {
        self.partitions.keys().copied()
    }

    /// Parks `waiter` until `partition`'s HW reaches `offset` or `deadline_ms` passes.
    pub fn park(&mut self, partition: i32, offset: i64, deadline_ms: i64, waiter: T) {
        let queue = self.partitions.entry(partition).or_default();
        // Offsets of one partition grow with appends; keep the queue sorted even if not.
        let at = queue.partition_point(|e| e.offset <= offset);
        queue.insert(
            at,
            Entry {
                offset,
                deadline_ms,
                waiter,
            },
        );
    }

    /// Takes the writes of `partition` the high watermark `hw` covers.
    pub fn complete(&mut self, partition: i32, hw: i64) -> Vec<(T, Outcome)> {
        let mut out = Vec::new();
        if let Some(queue) = self.partitions.get_mut(&partition) {
            while queue.front().is_some_and(|e| e.offset <= hw) {
                if let Some(e) = queue.pop_front() {
                    out.push((e.waiter, Outcome::Replicated));
                }
            }
            if queue.is_empty() {
                self.partitions.remove(&partition);
            }
        }
        out
    }

    /// Takes the writes whose deadline passed at `now_ms`.
    pub fn expire(&mut self, now_ms: i64) -> Vec<(T, Outcome)> {
        let mut out = Vec::new();
        for queue in self.partitions.values_mut() {
            let (due, keep): (VecDeque<_>, VecDeque<_>) = std::mem::take(queue)
                .into_iter()
                .partition(|e| now_ms >= e.deadline_ms);
            *queue = keep;
            out.extend(due.into_iter().map(|e| (e.waiter, Outcome::TimedOut)));
        }
        self.partitions.retain(|_, q| !q.is_empty());
        out
    }

    /// Takes every write of a partition whose leadership left.
    pub fn abandon(&mut self, partition: i32) -> Vec<(T, Outcome)> {
        self.partitions
            .remove(&partition)
            .map(|q| {
                q.into_iter()
                    .map(|e| (e.waiter, Outcome::NotLeader))
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_complete_in_offset_order_as_the_high_watermark_passes() {
        let mut p = Purgatory::default();
        p.park(0, 5, 1000, "a");
        p.park(0, 9, 1000, "b");
        p.park(1, 3, 1000, "other partition");
        assert!(p.complete(0, 4).is_empty());
        assert_eq!(p.complete(0, 5), vec![("a", Outcome::Replicated)]);
        assert_eq!(p.complete(0, 100), vec![("b", Outcome::Replicated)]);
        assert_eq!(p.len(), 1);
        assert_eq!(p.partitions().collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn deadlines_and_lost_leadership_fail_writes() {
        let mut p = Purgatory::default();
        p.park(0, 5, 1000, "early");
        p.park(0, 6, 2000, "late");
        p.park(1, 1, 5000, "moved");
        assert_eq!(p.expire(999), vec![]);
        assert_eq!(p.expire(1000), vec![("early", Outcome::TimedOut)]);
        assert_eq!(p.abandon(1), vec![("moved", Outcome::NotLeader)]);
        assert_eq!(p.complete(0, 6), vec![("late", Outcome::Replicated)]);
        assert!(p.is_empty());
    }
}
