//! Per-partition record batches waiting to be sent (Kafka's `RecordAccumulator`).
//!
//! `send` appends to the partition's open batch; a batch becomes *ready* when it reaches
//! `batch.size`, when it has lingered `linger.ms`, or on flush. The sender drains at most one
//! ready batch per partition per request (Kafka accepts exactly one v2 batch per partition in
//! a Produce request).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use tokio::sync::watch;

use super::in_flight::{Candidate, InFlight};
use crate::error::ClientError;
use crate::records::BatchRecord;

/// What a batch ended with: `(base_offset, log_append_time)` or the error, shared by every
/// record of the batch.
pub type BatchOutcome = Result<(i64, i64), Arc<ClientError>>;

/// A batch of records for one partition.
#[derive(Debug)]
pub struct Batch {
    /// Topic.
    pub topic: Arc<str>,
    /// Partition.
    pub partition: i32,
    /// The records, offsets 0..n within the batch.
    pub records: Vec<BatchRecord>,
    /// Estimated bytes (buffer accounting).
    pub bytes: usize,
    /// When the first record arrived (linger).
    pub created: Instant,
    /// Not before this instant (retry backoff).
    pub retry_after: Option<Instant>,
    /// Send attempts so far.
    pub attempts: u32,
    /// Idempotence: sequence of the first record, fixed on first drain.
    pub base_sequence: Option<i32>,
    /// Encoded v2 batch, kept for retries so it is encoded once.
    pub encoded: Option<Bytes>,
    /// Where every record's future learns the outcome.
    pub result: watch::Sender<Option<BatchOutcome>>,
}

impl Batch {
    fn new(topic: Arc<str>, partition: i32, now: Instant) -> Self {
        let (tx, _) = watch::channel(None);
        Self {
            topic,
            partition,
            records: Vec::new(),
            bytes: 0,
            created: now,
            retry_after: None,
            attempts: 0,
            base_sequence: None,
            encoded: None,
            result: tx,
        }
    }
}

#[derive(Debug, Default)]
struct PartitionQueue {
    open: Option<Batch>,
    ready: VecDeque<Batch>,
    next_sequence: i32,
    /// Idempotence: the batches drained and not completed, and the drain rule on them.
    in_flight: InFlight,
}

/// What an append did, so the caller knows whether to wake the sender.
#[derive(Debug)]
pub struct Appended {
    /// Receiver of the batch outcome.
    pub result: watch::Receiver<Option<BatchOutcome>>,
    /// Index of the record within its batch.
    pub index: i32,
    /// Whether a new batch was opened or one became ready (the sender must re-plan).
    pub wake: bool,
    /// The interned topic name (saves an allocation per record).
    pub topic: Arc<str>,
}

/// All partitions' queues.
#[derive(Debug, Default)]
pub struct Accumulator {
    topics: HashMap<Arc<str>, Vec<PartitionQueue>>,
    /// Number of batches created and not yet completed (open, ready or in flight).
    pub outstanding: usize,
}

impl Accumulator {
    /// Appends a record; closes the batch when it reaches `batch_size`.
    pub fn append(
        &mut self,
        topic: &str,
        partition: i32,
        record: BatchRecord,
        size: usize,
        batch_size: usize,
        now: Instant,
    ) -> Appended {
        let topic_arc = self
            .topics
            .get_key_value(topic)
            .map(|(k, _)| k.clone())
            .unwrap_or_else(|| Arc::from(topic));
        let queues = self.topics.entry(topic_arc.clone()).or_default();
        let idx = usize::try_from(partition).unwrap_or(0);
        if queues.len() <= idx {
            queues.resize_with(idx + 1, PartitionQueue::default);
        }
        let queue = &mut queues[idx];
        let mut wake = false;
        // A record that would overflow a non-empty batch starts a new one.
        if queue
            .open
            .as_ref()
            .is_some_and(|b| !b.records.is_empty() && b.bytes + size > batch_size)
        {
            if let Some(full) = queue.open.take() {
                queue.ready.push_back(full);
            }
        }
        let batch = match &mut queue.open {
            Some(b) => b,
            open @ None => {
                self.outstanding += 1;
                wake = true;
                open.insert(Batch::new(topic_arc, partition, now))
            }
        };
        batch.records.push(record);
        batch.bytes += size;
        let appended = Appended {
            result: batch.result.subscribe(),
            index: (batch.records.len() - 1) as i32,
            wake,
            topic: batch.topic.clone(),
        };
        if batch.bytes >= batch_size {
            if let Some(full) = queue.open.take() {
                queue.ready.push_back(full);
            }
            return Appended {
                wake: true,
                ..appended
            };
        }
        appended
    }

    /// Takes at most one sendable batch per partition: ready batches past their backoff, and
    /// open batches that lingered long enough (or all open ones when `force`). Also returns
    /// the earliest instant at which something else becomes sendable. An idempotent
    /// producer's partition drains only what its batches in flight allow
    /// ([`InFlight::may_drain`]; `leader_of` names a partition's leader, the one the sender
    /// will send to).
    pub fn drain(
        &mut self,
        now: Instant,
        linger: std::time::Duration,
        force: bool,
        idempotent: bool,
        leader_of: impl Fn(&str, i32) -> Option<i32>,
    ) -> (Vec<Batch>, Option<Instant>) {
        let mut out = Vec::new();
        let mut next: Option<Instant> = None;
        let consider = |at: Instant, next: &mut Option<Instant>| {
            *next = Some(next.map_or(at, |n| n.min(at)));
        };
        for (topic, queues) in self.topics.iter_mut() {
            for (index, queue) in queues.iter_mut().enumerate() {
                let partition = i32::try_from(index).unwrap_or(i32::MAX);
                // Looked up at most once, and only for an idempotent producer's batch.
                let mut known: Option<Option<i32>> = None;
                let mut leader = || *known.get_or_insert_with(|| leader_of(topic, partition));
                let due = match (queue.ready.front(), &queue.open) {
                    (Some(front), _) => match front.retry_after {
                        Some(at) if at > now => Err(Some(at)),
                        _ => Ok(front.base_sequence),
                    },
                    (None, Some(open)) if force || open.created + linger <= now => Ok(None),
                    (None, Some(open)) => Err(Some(open.created + linger)),
                    (None, None) => Err(None),
                };
                let sequence = match due {
                    Ok(sequence) => sequence,
                    Err(at) => {
                        if let Some(at) = at {
                            consider(at, &mut next);
                        }
                        continue;
                    }
                };
                if idempotent {
                    let candidate = sequence.map_or(Candidate::New, Candidate::Sequenced);
                    if !queue.in_flight.may_drain(candidate, &mut leader) {
                        continue;
                    }
                }
                let taken = match queue.ready.pop_front() {
                    Some(b) => Some(b),
                    None => queue.open.take(),
                };
                if let Some(mut b) = taken {
                    assign_sequence(&mut b, &mut queue.next_sequence, idempotent);
                    if let Some(seq) = b.base_sequence {
                        queue.in_flight.drained(seq, leader());
                    }
                    out.push(b);
                }
            }
        }
        (out, next)
    }

    /// Puts a batch back at the front of its partition's queue (retry keeps ordering). Batches
    /// that already have a sequence (idempotence) go back in sequence order: several may have
    /// been in flight and fail in any order, and resending a later one first would make the
    /// broker see a sequence gap (Kafka's `insertInSequenceOrder`).
    pub fn requeue(&mut self, batch: Batch) {
        let idx = usize::try_from(batch.partition).unwrap_or(0);
        let queues = self.topics.entry(batch.topic.clone()).or_default();
        if queues.len() <= idx {
            queues.resize_with(idx + 1, PartitionQueue::default);
        }
        let ready = &mut queues[idx].ready;
        let at = match batch.base_sequence {
            Some(seq) => ready
                .iter()
                .position(|b| b.base_sequence.is_none_or(|s| s > seq))
                .unwrap_or(ready.len()),
            None => 0,
        };
        ready.insert(at, batch);
    }

    /// Whether a batch of the partition drained with sequence `seq`, and not written yet,
    /// must go back behind an earlier one: a retry waits in the queue, or an earlier batch is
    /// unresolved ([`InFlight::holds_back`]). Sent first, it could push the earlier one out of
    /// the five batches the leader remembers (known case 8 of docs/faults.md).
    pub fn must_wait_behind(&self, topic: &str, partition: i32, seq: i32) -> bool {
        self.queue(topic, partition).is_some_and(|q| {
            q.in_flight.holds_back(seq)
                || q.ready
                    .iter()
                    .any(|b| b.base_sequence.is_some_and(|s| s < seq))
        })
    }

    /// The failure of the batch of sequence `seq` has been read; it will be retried (or
    /// fail). Recorded at once, before the sender waits for anything.
    pub fn failed(&mut self, topic: &str, partition: i32, seq: i32) {
        if let Some(q) = self.queue_mut(topic, partition) {
            q.in_flight.failed(seq);
        }
    }

    /// The batch of sequence `seq` is done: acknowledged (`acked`) or failed for good.
    /// Returns whether the sender must be woken (the drain held the partition back).
    pub fn completed(&mut self, topic: &str, partition: i32, seq: i32, acked: bool) -> bool {
        self.queue_mut(topic, partition).is_some_and(|q| {
            if acked {
                q.in_flight.succeeded(seq)
            } else {
                q.in_flight.completed(seq)
            }
        })
    }

    fn queue(&self, topic: &str, partition: i32) -> Option<&PartitionQueue> {
        let idx = usize::try_from(partition).ok()?;
        self.topics.get(topic)?.get(idx)
    }

    fn queue_mut(&mut self, topic: &str, partition: i32) -> Option<&mut PartitionQueue> {
        let idx = usize::try_from(partition).ok()?;
        self.topics.get_mut(topic)?.get_mut(idx)
    }

    /// Whether any batch is waiting (open or ready).
    #[cfg(test)]
    pub fn has_waiting(&self) -> bool {
        self.topics
            .values()
            .flatten()
            .any(|q| q.open.is_some() || !q.ready.is_empty())
    }
}

fn assign_sequence(batch: &mut Batch, next_sequence: &mut i32, idempotent: bool) {
    if idempotent && batch.base_sequence.is_none() {
        batch.base_sequence = Some(*next_sequence);
        *next_sequence = next_sequence.wrapping_add(batch.records.len() as i32) & i32::MAX;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Every partition's leader is broker 1.
    fn leader(_: &str, _: i32) -> Option<i32> {
        Some(1)
    }

    fn rec() -> BatchRecord {
        BatchRecord {
            key: None,
            value: Some(Bytes::from_static(b"0123456789")),
            headers: vec![],
            timestamp: 0,
        }
    }

    #[test]
    fn full_batches_become_ready_and_drain_one_per_partition() {
        let mut acc = Accumulator::default();
        let now = Instant::now();
        for _ in 0..10 {
            acc.append("t", 0, rec(), 10, 30, now);
        }
        // 3 full batches (30 bytes each) ready + 1 open with 1 record.
        assert_eq!(acc.outstanding, 4);
        let (out, _) = acc.drain(now, Duration::from_secs(10), false, true, leader);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].records.len(), 3);
        assert_eq!(out[0].base_sequence, Some(0));
        let (out, _) = acc.drain(now, Duration::from_secs(10), false, true, leader);
        assert_eq!(out[0].base_sequence, Some(3));
    }

    #[test]
    fn linger_and_force() {
        let mut acc = Accumulator::default();
        let now = Instant::now();
        let a = acc.append("t", 2, rec(), 10, 1000, now);
        assert!(a.wake);
        assert_eq!(a.index, 0);
        let b = acc.append("t", 2, rec(), 10, 1000, now);
        assert!(!b.wake);
        assert_eq!(b.index, 1);
        let (out, next) = acc.drain(now, Duration::from_millis(50), false, false, leader);
        assert!(out.is_empty());
        assert_eq!(next, Some(now + Duration::from_millis(50)));
        let (out, _) = acc.drain(
            now + Duration::from_millis(50),
            Duration::from_millis(50),
            false,
            false,
            leader,
        );
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].base_sequence, None);
        acc.append("u", 0, rec(), 10, 1000, now);
        let (out, _) = acc.drain(now, Duration::from_secs(1), true, false, leader);
        assert_eq!(out.len(), 1);
        assert!(!acc.has_waiting());
    }

    #[test]
    fn requeued_idempotent_batches_keep_sequence_order() {
        let mut acc = Accumulator::default();
        let now = Instant::now();
        let mut sent = Vec::new();
        for _ in 0..3 {
            acc.append("t", 0, rec(), 10, 10, now);
            let (mut out, _) = acc.drain(now, Duration::ZERO, false, true, leader);
            sent.push(out.remove(0));
        }
        // A full batch not sent yet.
        acc.append("t", 0, rec(), 10, 10, now);
        // The in-flight batches fail (responses come in order) and are requeued as they fail.
        for b in sent {
            if let Some(seq) = b.base_sequence {
                acc.failed("t", 0, seq);
            }
            acc.requeue(b);
        }
        // Each retry goes alone (in flight is 1 until the retries resolve): acknowledged
        // before the next drains.
        let mut order = Vec::new();
        loop {
            let (out, _) = acc.drain(now, Duration::ZERO, false, true, leader);
            let Some(b) = out.into_iter().next() else {
                break;
            };
            order.push(b.base_sequence);
            let (again, _) = acc.drain(now, Duration::ZERO, false, true, leader);
            assert!(
                again.is_empty(),
                "a second batch drained behind a retry in flight"
            );
            if let Some(seq) = b.base_sequence {
                // The refused drains behind a retry want a wake; after the new batch, none.
                assert_eq!(acc.completed("t", 0, seq, true), seq < 3);
            }
        }
        assert_eq!(order, vec![Some(0), Some(1), Some(2), Some(3)]);
    }

    #[test]
    fn a_later_batch_sees_an_earlier_retry_waiting() {
        let mut acc = Accumulator::default();
        let now = Instant::now();
        let mut sent = Vec::new();
        for _ in 0..2 {
            acc.append("t", 0, rec(), 10, 10, now);
            let (mut out, _) = acc.drain(now, Duration::ZERO, false, true, leader);
            sent.push(out.remove(0));
        }
        assert!(!acc.must_wait_behind("t", 0, 1));
        let second = sent.remove(1);
        acc.requeue(sent.remove(0));
        assert!(acc.must_wait_behind("t", 0, 1));
        assert!(!acc.must_wait_behind("t", 0, 0));
        assert!(!acc.must_wait_behind("t", 1, 1));
        assert!(!acc.must_wait_behind("u", 0, 1));
        acc.requeue(second);
        let (out, _) = acc.drain(now, Duration::ZERO, false, true, leader);
        assert_eq!(out[0].base_sequence, Some(0));
    }

    /// The window case 8 left: sequence 0's failure is read (and recorded) while the four
    /// batches behind it succeed and sequence 5, drained, waits for a slot; neither 5 nor a
    /// new batch may go before 0's retry has been acknowledged.
    #[test]
    fn a_read_failure_holds_the_partition_before_its_retry_is_queued() {
        let mut acc = Accumulator::default();
        let now = Instant::now();
        let mut sent = Vec::new();
        for _ in 0..6 {
            acc.append("t", 0, rec(), 10, 10, now);
            let (mut out, _) = acc.drain(now, Duration::ZERO, false, true, leader);
            sent.push(out.remove(0));
        }
        acc.failed("t", 0, 0);
        for seq in 1..5 {
            acc.completed("t", 0, seq, true);
        }
        assert!(acc.must_wait_behind("t", 0, 5));
        let fifth = sent.pop().expect("sequence 5");
        acc.requeue(fifth);
        acc.append("t", 0, rec(), 10, 10, now);
        let (out, _) = acc.drain(now, Duration::ZERO, false, true, leader);
        assert!(
            out.is_empty(),
            "nothing drains while sequence 0 is unresolved"
        );
        acc.requeue(sent.remove(0));
        let (out, _) = acc.drain(now, Duration::ZERO, false, true, leader);
        assert_eq!(
            out.iter().map(|b| b.base_sequence).collect::<Vec<_>>(),
            [Some(0)]
        );
        let (out, _) = acc.drain(now, Duration::ZERO, false, true, leader);
        assert!(out.is_empty(), "the retry goes alone");
        assert!(acc.completed("t", 0, 0, true), "held: the sender is woken");
        let (out, _) = acc.drain(now, Duration::ZERO, false, true, leader);
        assert_eq!(out[0].base_sequence, Some(5));
        let (out, _) = acc.drain(now, Duration::ZERO, false, true, leader);
        assert_eq!(out[0].base_sequence, Some(6));
    }

    /// A new batch waits while the partition's batches wait for a broker that is no longer
    /// its leader; a non-idempotent producer drains as before.
    #[test]
    fn new_batches_wait_for_the_old_leaders_answers() {
        let mut acc = Accumulator::default();
        let now = Instant::now();
        acc.append("t", 0, rec(), 10, 10, now);
        let (out, _) = acc.drain(now, Duration::ZERO, false, true, |_, _| Some(1));
        assert_eq!(out.len(), 1);
        acc.append("t", 0, rec(), 10, 10, now);
        let (held, _) = acc.drain(now, Duration::ZERO, false, true, |_, _| Some(2));
        assert!(held.is_empty());
        assert!(acc.completed("t", 0, 0, true));
        let (moved, _) = acc.drain(now, Duration::ZERO, false, true, |_, _| Some(2));
        assert_eq!(moved[0].base_sequence, Some(1));

        let mut plain = Accumulator::default();
        for to in [1, 2] {
            plain.append("t", 0, rec(), 10, 10, now);
            let (out, _) = plain.drain(now, Duration::ZERO, false, false, move |_, _| Some(to));
            assert_eq!(out.len(), 1, "without idempotence nothing is held");
        }
    }

    #[test]
    fn requeued_batches_wait_for_backoff() {
        let mut acc = Accumulator::default();
        let now = Instant::now();
        acc.append("t", 0, rec(), 10, 10, now);
        let (mut out, _) = acc.drain(now, Duration::ZERO, false, false, leader);
        let mut b = out.remove(0);
        b.retry_after = Some(now + Duration::from_millis(100));
        acc.requeue(b);
        let (out, next) = acc.drain(now, Duration::ZERO, false, false, leader);
        assert!(out.is_empty());
        assert_eq!(next, Some(now + Duration::from_millis(100)));
    }
}
