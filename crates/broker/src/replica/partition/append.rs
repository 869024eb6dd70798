//! The leader's append of a Produce request (validation of headers and records, KIP-937
//! timestamps, LogAppendTime stamping, the idempotence decision, the write) and of a
//! coordinator's own batch.

use runnel_log::batch::{self, BatchHeader};
use runnel_log::validate;
use runnel_log::{AppendInfo, PartitionLog};
use runnel_metadata::EffectiveTopicConfig;

use super::producers::{record_producers, snapshot_on_roll};
use super::{publish_high_watermark, Partition};
use crate::clock::now_ms;
use crate::errors::{code, KafkaError};
use crate::producer_state::{last_seq, ProducerStateTable, SequenceCheck};

/// Result of a leader append, per partition of a Produce request.
#[derive(Debug, Clone, Copy)]
pub struct Appended {
    pub base_offset: i64,
    pub last_offset: i64,
    pub log_start_offset: i64,
    /// True when nothing was written because every batch was a retry of an appended one.
    pub duplicate: bool,
    /// The broker time stamped on the batches (LogAppendTime topics), else -1.
    pub log_append_time: i64,
    /// The leader epoch the records were appended (or found) in: acks=all must still be the
    /// leader of this epoch when the high watermark covers them.
    pub leader_epoch: i32,
}

impl Partition {
    /// Appends a Produce request's records as the leader. Errors are Kafka error codes.
    pub fn append_as_leader(
        &self,
        records: &[u8],
        node_id: i32,
        acks: i16,
    ) -> Result<Appended, KafkaError> {
        self.append_as_leader_reporting(records, node_id, acks)
            .map_err(|refused| refused.error)
    }

    /// [`Self::append_as_leader`], with the records refused for their content (Produce v8+
    /// `record_errors`, KIP-467) when the batch is refused for them.
    pub fn append_as_leader_reporting(
        &self,
        records: &[u8],
        node_id: i32,
        acks: i16,
    ) -> Result<Appended, Refused> {
        self.append_leader(records, node_id, acks, true)
    }

    /// A coordinator's own batch (a TxnOffsetCommit's transactional records): appended like
    /// a client's, but the producer's sequence numbers are not checked, only its epoch
    /// (Kafka's `AppendOrigin.COORDINATOR`).
    pub fn append_as_coordinator(
        &self,
        records: &[u8],
        node_id: i32,
    ) -> Result<Appended, KafkaError> {
        self.append_leader(records, node_id, 1, false)
            .map_err(|refused| refused.error)
    }

    fn append_leader(
        &self,
        records: &[u8],
        node_id: i32,
        acks: i16,
        check_sequences: bool,
    ) -> Result<Appended, Refused> {
        let role = self.role();
        if role.leader != node_id {
            return Err(Refused::code(code::NOT_LEADER_OR_FOLLOWER));
        }
        // acks=all is refused before anything is written when the committed ISR is too small
        // (spec E.4, `runnel_replication::acks`).
        if acks == -1 {
            self.can_accept_acks_all(&role)
                .map_err(|e| Refused::new(code::NOT_ENOUGH_REPLICAS, e.to_string()))?;
        }
        let headers = validate_batches(records, &role.config)?;
        // LogAppendTime topics: the broker's clock replaces the producer's (a copy, because the
        // CRC must change); every other topic stores the producer's bytes untouched.
        let mut log_append_time = -1;
        let stamped;
        let records = if role.config.message_timestamp_type == LOG_APPEND_TIME {
            log_append_time = now_ms();
            stamped = stamp_log_append_time(records, &headers, log_append_time);
            &stamped[..]
        } else {
            records
        };
        let mut log = self.log.lock();
        // A failed log (or log directory) answers KAFKA_STORAGE_ERROR before any sequence is
        // looked at, as Kafka's offline partition does: answering a gap left by a refused
        // batch with OUT_OF_ORDER_SEQUENCE_NUMBER makes librdkafka bump its epoch and resend
        // possibly written batches as new ones (known case 6, docs/faults.md).
        log.check_writable()
            .map_err(|e| Refused::new(e.kafka_error_code(), e.to_string()))?;
        let mut producers = self.producers.lock();
        if let Some((first_offset, delta)) = duplicate_of(&producers, &headers, check_sequences)? {
            return Ok(Appended {
                base_offset: first_offset,
                last_offset: first_offset + i64::from(delta),
                log_start_offset: log.log_start_offset(),
                duplicate: true,
                log_append_time,
                leader_epoch: role.leader_epoch,
            });
        }
        let info: AppendInfo = log
            .append(records, &headers, role.leader_epoch)
            .map_err(|e| Refused::new(e.kafka_error_code(), e.to_string()))?;
        record_producers(&mut producers, &headers, info.first_offset);
        snapshot_on_roll(&mut log, &producers);
        drop(producers);
        self.after_leader_append(&mut log, info.last_offset);
        Ok(Appended {
            base_offset: info.first_offset,
            last_offset: info.last_offset,
            log_start_offset: info.log_start_offset,
            duplicate: false,
            log_append_time,
            leader_epoch: role.leader_epoch,
        })
    }

    /// The leader's own LEO counts for the HW; waiters learn of the append.
    pub(super) fn after_leader_append(&self, log: &mut PartitionLog, last_offset: i64) {
        if let Some(state) = self.leader_state.lock().as_mut() {
            state.on_leader_append(last_offset + 1, now_ms());
            publish_high_watermark(state, log);
        }
        self.publish(log);
    }
}

/// A refused append: the Kafka code and its message, and the records refused for their content
/// (Produce v8+ `record_errors`, KIP-467; empty for every other refusal).
#[derive(Debug)]
pub struct Refused {
    pub error: KafkaError,
    pub record_errors: Vec<validate::RecordError>,
}

impl Refused {
    fn new(code: i16, message: impl Into<String>) -> Self {
        KafkaError::new(code, message).into()
    }

    /// A refusal whose code says it all (no message).
    fn code(code: i16) -> Self {
        Self::new(code, String::new())
    }
}

impl From<KafkaError> for Refused {
    fn from(error: KafkaError) -> Self {
        Refused {
            error,
            record_errors: Vec::new(),
        }
    }
}

const LOG_APPEND_TIME: &str = "LogAppendTime";

/// Headers and every record (streamed, bounded decompression; keys on compacted topics; on
/// CreateTime topics each record's timestamp against KIP-937's bounds), then the headers' own
/// first and max timestamps: the records passed, so only a batch whose header disagrees with
/// its records (forged) can fail there; the header's max timestamp feeds the time index and
/// retention.
fn validate_batches(
    records: &[u8],
    config: &EffectiveTopicConfig,
) -> Result<Vec<BatchHeader>, Refused> {
    let max = usize::try_from(config.max_message_bytes.max(0)).unwrap_or(usize::MAX);
    let create_time = config.message_timestamp_type != LOG_APPEND_TIME;
    let mut rules = validate::RecordRules::new(config.compacts());
    if create_time {
        rules = rules.with_timestamp_bounds(
            now_ms(),
            config.message_timestamp_before_max_ms,
            config.message_timestamp_after_max_ms,
        );
    }
    let headers = validate::validate_produce(records, max, rules).map_err(|e| Refused {
        error: KafkaError::new(e.kafka_error_code(), e.to_string()),
        record_errors: e.record_errors().to_vec(),
    })?;
    if create_time {
        check_timestamps(&headers, config, now_ms())?;
    }
    Ok(headers)
}

/// A copy of `records` with every batch stamped with the broker's `time` (LogAppendTime).
fn stamp_log_append_time(records: &[u8], headers: &[BatchHeader], time: i64) -> Vec<u8> {
    let mut copy = records.to_vec();
    let mut at = 0;
    for h in headers {
        batch::set_log_append_time(&mut copy[at..at + h.total_size()], time);
        at += h.total_size();
    }
    copy
}

/// Idempotence, decided for every batch before writing any of them: `Some((first offset,
/// last offset delta))` when the request is a retry of one appended batch, a refusal when a
/// batch is out of sequence or fenced. A coordinator's batch (`check_sequences` false) is
/// checked for its epoch only.
fn duplicate_of(
    producers: &ProducerStateTable,
    headers: &[BatchHeader],
    check_sequences: bool,
) -> Result<Option<(i64, i32)>, Refused> {
    let mut duplicate = None;
    for h in headers.iter().filter(|h| h.producer_id >= 0) {
        let last = last_seq(h.base_sequence, h.record_count);
        let check = if check_sequences {
            producers.check(h.producer_id, h.producer_epoch, h.base_sequence, last)
        } else {
            producers.check_epoch(h.producer_id, h.producer_epoch)
        };
        match check {
            SequenceCheck::Append => {}
            SequenceCheck::Duplicate { first_offset } if headers.len() == 1 => {
                duplicate = Some((first_offset, h.last_offset_delta));
            }
            SequenceCheck::Duplicate { .. } => {
                return Err(Refused::code(code::DUPLICATE_SEQUENCE_NUMBER))
            }
            SequenceCheck::Reject { error_code } => return Err(Refused::code(error_code)),
        }
    }
    Ok(duplicate)
}

/// `message.timestamp.before.max.ms` / `after.max.ms` (KIP-937) against the batch's first and
/// largest timestamps: records too far from the broker's clock get INVALID_TIMESTAMP.
fn check_timestamps(
    headers: &[BatchHeader],
    config: &EffectiveTopicConfig,
    now: i64,
) -> Result<(), KafkaError> {
    for h in headers {
        for ts in [h.base_timestamp, h.max_timestamp] {
            if ts < 0 {
                continue;
            }
            let too_old = now.saturating_sub(ts) > config.message_timestamp_before_max_ms;
            let too_new = ts.saturating_sub(now) > config.message_timestamp_after_max_ms;
            if too_old || too_new {
                return Err(KafkaError::new(
                    code::INVALID_TIMESTAMP,
                    format!(
                        "Timestamp {ts} is out of range: it must be within message.timestamp.before.max.ms={} \
                         and message.timestamp.after.max.ms={} of the broker time {now}",
                        config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
                    ),
                ));
            }
        }
    }
    Ok(())
}
