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
    /// the earliest instant at which something else becomes sendable.
    pub fn drain(
        &mut self,
        now: Instant,
        linger: std::time::Duration,
        force: bool,
        idempotent: bool,
    ) -> (Vec<Batch>, Option<Instant>) {
        let mut out = Vec::new();
        let mut next: Option<Instant> = None;
        let consider = |at: Instant, next: &mut Option<Instant>| {
            *next = Some(next.map_or(at, |n| n.min(at)));
        };
        for queues in self.topics.values_mut() {
            for queue in queues.iter_mut() {
                if let Some(front) = queue.ready.front() {
                    match front.retry_after {
                        Some(at) if at > now => consider(at, &mut next),
                        _ => {
                            if let Some(mut b) = queue.ready.pop_front() {
                                assign_sequence(&mut b, &mut queue.next_sequence, idempotent);
                                out.push(b);
                            }
                        }
                    }
                    continue;
                }
                if let Some(open) = &queue.open {
                    let due = open.created + linger;
                    if force || due <= now {
                        if let Some(mut b) = queue.open.take() {
                            assign_sequence(&mut b, &mut queue.next_sequence, idempotent);
                            out.push(b);
                        }
                    } else {
                        consider(due, &mut next);
                    }
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

    /// Whether a batch of the partition with a lower sequence than `seq` waits in its queue
    /// (a retry). A batch drained before that retry was requeued must not overtake it: the
    /// broker remembers a producer's last five batches only, so the retry of a batch already
    /// in the log, arriving behind a later one, is no longer a duplicate but a gap
    /// (OUT_OF_ORDER_SEQUENCE_NUMBER until retries run out; Kafka's sender drains a retry
    /// before anything after it, `RecordAccumulator.shouldStopDrainBatchesForPartition`).
    pub fn retry_waits_before(&self, topic: &str, partition: i32, seq: i32) -> bool {
        let Ok(idx) = usize::try_from(partition) else {
            return false;
        };
        self.topics
            .get(topic)
            .and_then(|queues| queues.get(idx))
            .is_some_and(|q| {
                q.ready
                    .iter()
                    .any(|b| b.base_sequence.is_some_and(|s| s < seq))
            })
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
        let (out, _) = acc.drain(now, Duration::from_secs(10), false, true);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].records.len(), 3);
        assert_eq!(out[0].base_sequence, Some(0));
        let (out, _) = acc.drain(now, Duration::from_secs(10), false, true);
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
        let (out, next) = acc.drain(now, Duration::from_millis(50), false, false);
        assert!(out.is_empty());
        assert_eq!(next, Some(now + Duration::from_millis(50)));
        let (out, _) = acc.drain(
            now + Duration::from_millis(50),
            Duration::from_millis(50),
            false,
            false,
        );
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].base_sequence, None);
        acc.append("u", 0, rec(), 10, 1000, now);
        let (out, _) = acc.drain(now, Duration::from_secs(1), true, false);
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
            let (mut out, _) = acc.drain(now, Duration::ZERO, false, true);
            sent.push(out.remove(0));
        }
        // A full batch not sent yet.
        acc.append("t", 0, rec(), 10, 10, now);
        // The in-flight batches fail (responses come in order) and are requeued as they fail.
        for b in sent {
            acc.requeue(b);
        }
        let mut order = Vec::new();
        loop {
            let (out, _) = acc.drain(now, Duration::ZERO, false, true);
            let Some(b) = out.into_iter().next() else {
                break;
            };
            order.push(b.base_sequence);
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
            let (mut out, _) = acc.drain(now, Duration::ZERO, false, true);
            sent.push(out.remove(0));
        }
        assert!(!acc.retry_waits_before("t", 0, 1));
        let second = sent.remove(1);
        acc.requeue(sent.remove(0));
        assert!(acc.retry_waits_before("t", 0, 1));
        assert!(!acc.retry_waits_before("t", 0, 0));
        assert!(!acc.retry_waits_before("t", 1, 1));
        assert!(!acc.retry_waits_before("u", 0, 1));
        acc.requeue(second);
        let (out, _) = acc.drain(now, Duration::ZERO, false, true);
        assert_eq!(out[0].base_sequence, Some(0));
    }

    #[test]
    fn requeued_batches_wait_for_backoff() {
        let mut acc = Accumulator::default();
        let now = Instant::now();
        acc.append("t", 0, rec(), 10, 10, now);
        let (mut out, _) = acc.drain(now, Duration::ZERO, false, false);
        let mut b = out.remove(0);
        b.retry_after = Some(now + Duration::from_millis(100));
        acc.requeue(b);
        let (out, next) = acc.drain(now, Duration::ZERO, false, false);
        assert!(out.is_empty());
        assert_eq!(next, Some(now + Duration::from_millis(100)));
    }
}
