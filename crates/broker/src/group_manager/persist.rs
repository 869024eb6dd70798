//! Group writes: records appended to the coordinator partition, answers parked until they
//! replicate, and the batch encoding.

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use runnel_group::{OffsetsRecord, Output};
use tokio::sync::oneshot;

use crate::clock::now_ms;
use crate::group_purgatory::Outcome;

use super::*;

/// What a parked group write answers once it finishes: the error code for the answers that
/// depended on it (0 once replicated).
pub(super) type Answer = Box<dyn FnOnce(i16) + Send>;

/// A parked group write: its answer, and for an offset commit the coordinator partition and
/// commit token whose offsets become visible to OffsetFetch only once the write replicated.
pub(super) struct Waiter {
    pub(super) commit: Option<(i32, u64)>,
    pub(super) answer: Answer,
}

/// The state of the records one request (or tick) appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Written {
    /// Nothing to wait for: nothing appended, or already replicated.
    Done,
    /// The append failed, or the write did not replicate: answer with this code.
    Failed(i16),
    /// Appended; replicated once the HW reaches this offset.
    Pending(i64),
}

impl Written {
    /// Both writes (of one partition, `other` later): a failure wins, else the later offset.
    pub(super) fn and(self, other: Written) -> Written {
        match (self, other) {
            (Written::Failed(c), _) | (_, Written::Failed(c)) => Written::Failed(c),
            (Written::Pending(a), Written::Pending(b)) => Written::Pending(a.max(b)),
            (Written::Pending(a), Written::Done) | (Written::Done, Written::Pending(a)) => {
                Written::Pending(a)
            }
            (Written::Done, Written::Done) => Written::Done,
        }
    }
}

/// A DeleteGroups answer waiting for the writes of its groups (one per group).
pub(super) struct DeleteAnswer {
    pub(super) results: Vec<(String, i16)>,
    pub(super) waiting: usize,
    pub(super) reply: Option<oneshot::Sender<Vec<(String, i16)>>>,
}

impl DeleteAnswer {
    /// One write finished with `err` for the results in `range`; answers after the last.
    pub(super) fn finish_one(&mut self, range: std::ops::Range<usize>, err: i16) {
        if err != 0 {
            for r in self.results.get_mut(range).into_iter().flatten() {
                if r.1 == 0 {
                    r.1 = err;
                }
            }
        }
        self.waiting = self.waiting.saturating_sub(1);
        if self.waiting == 0 {
            if let Some(reply) = self.reply.take() {
                let _ = reply.send(std::mem::take(&mut self.results));
            }
        }
    }
}

/// The error code a finished write gives the answers waiting for it.
pub(crate) fn outcome_code(outcome: Outcome) -> i16 {
    match outcome {
        Outcome::Replicated => 0,
        Outcome::TimedOut => COORDINATOR_NOT_AVAILABLE,
        Outcome::NotLeader => NOT_COORDINATOR,
    }
}

impl GroupManager {
    /// Runs `waiter` once `written` is replicated (now, if nothing is pending), or with the
    /// error code it failed with.
    pub(super) fn when_written(&mut self, partition: i32, written: Written, answer: Answer) {
        let waiter = Waiter {
            commit: None,
            answer,
        };
        self.park_or_finish(partition, written, waiter);
    }

    /// [`Self::when_written`] for an offset commit: its offsets become visible (or are
    /// dropped, if the write failed) right before the answer.
    pub(super) fn when_commit_written(
        &mut self,
        partition: i32,
        written: Written,
        token: u64,
        answer: Answer,
    ) {
        let waiter = Waiter {
            commit: Some((partition, token)),
            answer,
        };
        self.park_or_finish(partition, written, waiter);
    }

    pub(super) fn park_or_finish(&mut self, partition: i32, written: Written, waiter: Waiter) {
        match written {
            Written::Done => self.finish(waiter, 0),
            Written::Failed(code) => self.finish(waiter, code),
            Written::Pending(offset) => {
                let deadline = now_ms().saturating_add(PERSIST_TIMEOUT_MS);
                self.purgatory.park(partition, offset, deadline, waiter);
            }
        }
    }

    /// Completes a write: a commit's offsets are stored (written) or forgotten (failed) by
    /// its coordinator, if this node still is it, then the answer goes out.
    pub(super) fn finish(&mut self, waiter: Waiter, code: i16) {
        if let Some((partition, token)) = waiter.commit {
            if let Some(coordinator) = self.coordinators.get_mut(&partition) {
                coordinator.complete_offset_commit(token, code == 0);
            }
        }
        (waiter.answer)(code);
    }

    /// Appends the `Persist` outputs first; JoinGroup answers go out at once, SyncGroup
    /// answers once the records before them are replicated (with an error instead if they are
    /// not). Returns the state of everything appended, for answers that follow.
    pub(super) fn apply_outputs(&mut self, partition: i32, outputs: Vec<Output>) -> Written {
        let mut written = Written::Done;
        for output in outputs {
            match output {
                Output::Persist(records) => {
                    written = written.and(self.persist(partition, records));
                }
                Output::Join(id, response) => {
                    if let Some(Pending::Join(_, reply)) = self.pending.remove(&id) {
                        let _ = reply.send(response);
                    }
                }
                Output::Sync(id, response) => {
                    if let Some(Pending::Sync(_, reply)) = self.pending.remove(&id) {
                        self.when_written(
                            partition,
                            written,
                            Box::new(move |err| {
                                let response = if err == 0 { response } else { sync_error(err) };
                                let _ = reply.send(response);
                            }),
                        );
                    }
                }
            }
        }
        written
    }

    /// Appends records to the group's `__consumer_offsets` partition as one batch, without
    /// waiting: like Kafka's coordinator (acks=all) the answers depending on it wait until
    /// every in-sync replica has the records, so a failover cannot lose an acknowledged commit.
    pub(super) fn persist(&mut self, partition: i32, records: Vec<OffsetsRecord>) -> Written {
        self.persist_as(partition, records, None)
    }

    /// [`Self::persist`], as a transactional batch of `producer` (id, epoch) when given: a
    /// TxnOffsetCommit's records, which its transaction's marker later ends. Only the
    /// producer's epoch is checked (INVALID_PRODUCER_EPOCH once a newer one wrote here).
    pub(super) fn persist_as(
        &mut self,
        partition: i32,
        records: Vec<OffsetsRecord>,
        producer: Option<(i64, i16)>,
    ) -> Written {
        if records.is_empty() {
            return Written::Done;
        }
        let Some(p) = self.replicas.get(OFFSETS_TOPIC, partition) else {
            tracing::error!(partition, "__consumer_offsets partition is not hosted here");
            return Written::Failed(NOT_COORDINATOR);
        };
        let batch = match encode_batch_of(records, producer) {
            Ok(batch) => batch,
            Err(e) => {
                tracing::error!(partition, error = %e, "cannot encode group records");
                return Written::Failed(COORDINATOR_NOT_AVAILABLE);
            }
        };
        let appended = match producer {
            None => p.append_as_leader(&batch, self.node_id, 1),
            Some(_) => p.append_as_coordinator(&batch, self.node_id),
        };
        match appended {
            Ok(appended) => {
                let needed = appended.last_offset + 1;
                if p.high_watermark() >= needed {
                    Written::Done
                } else {
                    Written::Pending(needed)
                }
            }
            Err(e) if producer.is_some() && e.code == INVALID_PRODUCER_EPOCH => {
                Written::Failed(e.code)
            }
            Err(e) => {
                tracing::error!(partition, code = e.code, message = %e.message, "cannot persist group records");
                Written::Failed(coordinator_write_error(e.code))
            }
        }
    }
}

/// The error a group request gets when the append of its records fails with `code` (Kafka's
/// `CoordinatorOperationExceptionHelper`): the partition is gone from this leader or its disk
/// failed -> NOT_COORDINATOR (the client looks the coordinator up again); too few replicas or
/// a timeout -> COORDINATOR_NOT_AVAILABLE; a batch too large -> UNKNOWN_SERVER_ERROR. Any other
/// refusal is COORDINATOR_NOT_AVAILABLE, which every client retries.
fn coordinator_write_error(code: i16) -> i16 {
    use crate::errors::code::{
        INVALID_FETCH_SIZE, KAFKA_STORAGE_ERROR, MESSAGE_TOO_LARGE, NOT_LEADER_OR_FOLLOWER,
        RECORD_LIST_TOO_LARGE, UNKNOWN_SERVER_ERROR,
    };
    match code {
        NOT_LEADER_OR_FOLLOWER | KAFKA_STORAGE_ERROR => NOT_COORDINATOR,
        MESSAGE_TOO_LARGE | RECORD_LIST_TOO_LARGE | INVALID_FETCH_SIZE => UNKNOWN_SERVER_ERROR,
        // UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, and the rest
        _ => COORDINATOR_NOT_AVAILABLE,
    }
}

/// One uncompressed, non-idempotent batch of keyed records, as Kafka's coordinators write.
pub(crate) fn encode_batch(records: Vec<OffsetsRecord>) -> anyhow_free::Result<Bytes> {
    encode_batch_of(records, None)
}

/// [`encode_batch`], or with `producer` (id, epoch) a transactional batch of that producer
/// with base sequence 0, as Kafka's group coordinator writes a TxnOffsetCommit.
fn encode_batch_of(
    records: Vec<OffsetsRecord>,
    producer: Option<(i64, i16)>,
) -> anyhow_free::Result<Bytes> {
    let now = now_ms();
    let (producer_id, producer_epoch) = producer.unwrap_or((-1, -1));
    // The encoder derives the base sequence from `offset - sequence`: -1 (none) or 0.
    let first_sequence: i32 = if producer.is_some() { 0 } else { -1 };
    let records: Vec<Record> = records
        .into_iter()
        .enumerate()
        .map(|(i, r)| (i64::try_from(i).unwrap_or(i64::MAX), r))
        .map(|(i, r)| Record {
            transactional: producer.is_some(),
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i,
            // The encoder starts a new batch wherever `offset - sequence` changes; keeping it
            // constant (base sequence -1: not idempotent) makes the records one batch, as
            // Kafka's coordinator writes them, instead of one batch per record.
            sequence: i32::try_from(i)
                .unwrap_or(i32::MAX)
                .wrapping_add(first_sequence),
            timestamp: now,
            key: Some(r.key),
            value: r.value,
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .map_err(|e| e.to_string())?;
    Ok(buf.freeze())
}

/// kafka-protocol reports errors as `anyhow::Error`; this crate keeps them as strings.
mod anyhow_free {
    pub type Result<T> = std::result::Result<T, String>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use runnel_group::batch_size::record_batch_size;

    /// The pure coordinator sizes a commit's batch without encoding it; this is the batch the
    /// shell then writes, so the two must agree byte for byte.
    #[test]
    pub(super) fn the_pure_batch_size_is_the_size_of_the_encoded_batch() {
        let records: Vec<OffsetsRecord> = (0..300)
            .map(|i| OffsetsRecord {
                key: Bytes::from(vec![b'k'; 10 + i]),
                value: (i % 7 != 0).then(|| Bytes::from(vec![b'v'; 3 * i])),
            })
            .collect();
        for n in [1, 2, 128, 300] {
            let encoded = encode_batch(records[..n].to_vec()).unwrap();
            assert_eq!(
                encoded.len(),
                record_batch_size(&records[..n]),
                "{n} records"
            );
        }
    }
}
