//! Produce (API 0): validate batch headers, append the producer's bytes once, acknowledge per
//! `acks` (and after the fsync group commit when `flush.messages` demands it).

use std::sync::Arc;

use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use runnel_log::batch::BatchHeader;

use super::str_bytes;
use crate::context::Broker;
use crate::errors::code;

const ZSTD: u8 = 4;

fn error(index: i32, code: i16, message: &str) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(code)
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
        .with_error_message((!message.is_empty()).then(|| str_bytes(message)))
}

pub async fn handle(
    broker: &Arc<Broker>,
    request: ProduceRequest,
    version: i16,
) -> ProduceResponse {
    let acks = request.acks;
    let timeout_ms = request.timeout_ms;
    let acks_valid = matches!(acks, -1..=1);
    let mut topics = Vec::with_capacity(request.topic_data.len());
    for topic in request.topic_data {
        let name = topic.name.0.as_str();
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for data in topic.partition_data {
            let index = data.index;
            if !acks_valid {
                partitions.push(error(index, code::INVALID_REQUIRED_ACKS, ""));
                continue;
            }
            // Internal topics are written by the broker itself (the group coordinator appends
            // to `__consumer_offsets` directly, not through this handler), never by clients.
            if runnel_metadata::is_internal(name) {
                partitions.push(error(
                    index,
                    code::INVALID_TOPIC_EXCEPTION,
                    &format!("Cannot append to internal topic {name}"),
                ));
                continue;
            }
            let Some(partition) = broker.replicas.get(name, index) else {
                let code = if broker.image().partition(name, index).is_some() {
                    code::NOT_LEADER_OR_FOLLOWER
                } else {
                    code::UNKNOWN_TOPIC_OR_PARTITION
                };
                partitions.push(error(index, code, ""));
                continue;
            };
            let Some(records) = data.records else {
                partitions.push(error(
                    index,
                    code::INVALID_RECORD,
                    "Produce request without records",
                ));
                continue;
            };
            if version < 7 && uses_zstd(&records) {
                partitions.push(error(
                    index,
                    code::UNSUPPORTED_COMPRESSION_TYPE,
                    "zstd needs Produce v7 or later",
                ));
                continue;
            }
            if version >= 3 && holds_more_than_one_batch(&records) {
                // Kafka's ProduceRequest.validateRecords: this bounds what one request can add
                // to the idempotent-producer state to one producer per partition.
                partitions.push(error(
                    index,
                    code::INVALID_RECORD,
                    &format!(
                        "Produce requests with version {version} are only allowed to contain exactly one record batch per partition"
                    ),
                ));
                continue;
            }
            match partition.append_as_leader(&records, broker.node_id, acks) {
                Ok(appended) => {
                    if !appended.duplicate {
                        // Wake long-polling fetches now: followers must see it for acks=all.
                        broker.replicas.appended.notify_waiters();
                    }
                    let needs_flush = !appended.duplicate && partition.needs_flush();
                    if needs_flush {
                        if let Err(e) = partition.wait_flushed(appended.last_offset + 1).await {
                            tracing::error!(topic = %name, partition = index, error = %e, "fsync failed");
                            partitions.push(error(
                                index,
                                code::KAFKA_STORAGE_ERROR,
                                &e.to_string(),
                            ));
                            continue;
                        }
                    }
                    if acks == -1 {
                        let deadline = tokio::time::Instant::now()
                            + std::time::Duration::from_millis(timeout_ms.max(0) as u64);
                        match wait_for_high_watermark(
                            broker,
                            &partition,
                            appended.last_offset + 1,
                            appended.leader_epoch,
                            deadline,
                        )
                        .await
                        {
                            Replicated::Yes => {}
                            Replicated::TimedOut => {
                                partitions.push(error(
                                    index,
                                    code::REQUEST_TIMED_OUT,
                                    "the in-sync replicas did not confirm the write in time",
                                ));
                                continue;
                            }
                            Replicated::LeadershipMoved => {
                                partitions.push(error(
                                    index,
                                    code::NOT_LEADER_OR_FOLLOWER,
                                    "the leadership moved before the in-sync replicas confirmed the write",
                                ));
                                continue;
                            }
                        }
                        // Written and replicated, but the ISR shrank below the minimum meanwhile
                        // (spec E.4): the client learns its durability guarantee was not met.
                        let role = partition.role();
                        if role.isr.len() < role.config.min_insync_replicas.max(1) as usize {
                            partitions.push(error(
                                index,
                                code::NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                                "the in-sync replica set shrank below min.insync.replicas after the append",
                            ));
                            continue;
                        }
                    }
                    partitions.push(
                        PartitionProduceResponse::default()
                            .with_index(index)
                            .with_base_offset(appended.base_offset)
                            .with_log_append_time_ms(appended.log_append_time)
                            .with_log_start_offset(appended.log_start_offset),
                    );
                }
                Err((code, message)) => partitions.push(error(index, code, &message)),
            }
        }
        topics.push(
            TopicProduceResponse::default()
                .with_name(topic.name)
                .with_partition_responses(partitions),
        );
    }
    fit_to_version(ProduceResponse::default().with_responses(topics), version)
}

/// Clears fields the negotiated version does not carry (the encoder rejects them).
fn fit_to_version(mut response: ProduceResponse, version: i16) -> ProduceResponse {
    for p in response
        .responses
        .iter_mut()
        .flat_map(|t| t.partition_responses.iter_mut())
    {
        if version < 5 {
            p.log_start_offset = -1;
        }
        if version < 8 {
            p.error_message = None;
            p.record_errors.clear();
        }
    }
    response
}

/// How an acks=all wait ended.
enum Replicated {
    /// The high watermark covers the write, and this broker still leads in its epoch.
    Yes,
    TimedOut,
    /// This broker no longer leads in the epoch of the append: as a follower it may truncate
    /// the write away and later reach its offset with other records, so only the new leader
    /// can tell (the client retries there). Kafka answers NOT_LEADER_OR_FOLLOWER too.
    LeadershipMoved,
}

/// acks=all: waits until the high watermark covers `offset` (every ISR member has it), while
/// this broker leads in `leader_epoch`.
async fn wait_for_high_watermark(
    broker: &Arc<Broker>,
    partition: &crate::partition::Partition,
    offset: i64,
    leader_epoch: i32,
    deadline: tokio::time::Instant,
) -> Replicated {
    let check = || {
        // The HW first, then the role: a follower's HW only moves after its role changed.
        let hw = partition.log.lock().high_watermark();
        let role = partition.role();
        if role.leader != broker.node_id || role.leader_epoch != leader_epoch {
            Some(Replicated::LeadershipMoved)
        } else if hw >= offset {
            Some(Replicated::Yes)
        } else {
            None
        }
    };
    loop {
        let notified = broker.replicas.appended.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if let Some(done) = check() {
            return done;
        }
        // HW moves and leadership changes both notify `appended` (the replica manager wakes
        // waiters after applying every image), so no polling is needed.
        tokio::select! {
            _ = &mut notified => {}
            _ = tokio::time::sleep_until(deadline) => {
                return check().unwrap_or(Replicated::TimedOut);
            }
        }
    }
}

/// Whether any batch in the blob is zstd-compressed (headers only; bad framing is caught later).
/// Whether `records` starts with a complete batch followed by more bytes (a header that does
/// not parse is left to the append's validation, which names the problem).
fn holds_more_than_one_batch(records: &[u8]) -> bool {
    BatchHeader::parse(records).is_ok_and(|h| h.total_size() < records.len())
}

fn uses_zstd(records: &[u8]) -> bool {
    let mut rest = records;
    while let Ok(h) = BatchHeader::parse(rest) {
        if h.compression() == ZSTD {
            return true;
        }
        let size = h.total_size();
        if size == 0 || size > rest.len() {
            break;
        }
        rest = &rest[size..];
    }
    false
}
