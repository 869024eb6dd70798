//! Fetch (API 1): whole batches from the log, up to the high watermark for consumers, with long
//! polling (`max_wait_ms` / `min_bytes`) woken by appends. Sessionless (session id 0), which
//! KIP-227 allows: every response is a full response.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse};
use runnel_log::LogError;

use super::check_leader_epoch;
use crate::context::Broker;
use crate::errors::code;

fn partition_error(index: i32, code: i16) -> PartitionData {
    PartitionData::default()
        .with_partition_index(index)
        .with_error_code(code)
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1)
        .with_preferred_read_replica(BrokerId(-1))
        .with_records(Some(Default::default()))
}

pub async fn handle(broker: &Arc<Broker>, request: FetchRequest, version: i16) -> FetchResponse {
    let max_wait = Duration::from_millis(request.max_wait_ms.max(0) as u64);
    let deadline = tokio::time::Instant::now() + max_wait;
    loop {
        let notified = broker.replicas.appended.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let (response, bytes, errors) = read_once(broker, &request, version);
        let now = tokio::time::Instant::now();
        if bytes >= request.min_bytes.max(0) as usize || errors || now >= deadline {
            return response;
        }
        tokio::select! {
            _ = &mut notified => {}
            _ = tokio::time::sleep_until(deadline) => {}
        }
    }
}

/// One pass over the requested partitions: (response, bytes of records, any partition error).
fn read_once(
    broker: &Arc<Broker>,
    request: &FetchRequest,
    version: i16,
) -> (FetchResponse, usize, bool) {
    let replica_id = if version >= 15 {
        request.replica_state.replica_id.0
    } else {
        request.replica_id.0
    };
    let follower = replica_id >= 0;
    let mut budget = if request.max_bytes <= 0 {
        usize::MAX
    } else {
        request.max_bytes as usize
    };
    let mut total = 0usize;
    let mut errors = false;
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let name = topic.topic.0.as_str();
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for fp in &topic.partitions {
            let index = fp.partition;
            let Some(partition) = broker.replicas.get(name, index) else {
                let code = if broker.image().partition(name, index).is_some() {
                    code::NOT_LEADER_OR_FOLLOWER
                } else {
                    code::UNKNOWN_TOPIC_OR_PARTITION
                };
                errors = true;
                partitions.push(partition_error(index, code));
                continue;
            };
            let role = partition.role();
            if role.leader != broker.node_id {
                errors = true;
                partitions.push(partition_error(index, code::NOT_LEADER_OR_FOLLOWER));
                continue;
            }
            let epoch_error = check_leader_epoch(fp.current_leader_epoch, role.leader_epoch);
            if epoch_error != code::NONE {
                errors = true;
                partitions.push(partition_error(index, epoch_error));
                continue;
            }
            if follower {
                // One look at the log decides what the follower's position means.
                let (diverged, in_log) = {
                    let log = partition.log.lock();
                    let diverged = (version >= 12 && fp.last_fetched_epoch >= 0)
                        .then(|| log.end_offset_for_epoch(fp.last_fetched_epoch))
                        .filter(|&(epoch, end)| {
                            epoch < 0
                                || end < 0
                                || epoch != fp.last_fetched_epoch
                                || end < fp.fetch_offset
                        })
                        .map(|epoch_end| (epoch_end, log.high_watermark(), log.log_start_offset()));
                    let in_log = fp.fetch_offset >= log.log_start_offset()
                        && fp.fetch_offset <= log.log_end_offset();
                    (diverged, in_log)
                };
                if let Some(((epoch, end), hw, log_start)) = diverged {
                    errors = true;
                    partitions.push(if epoch < 0 || end < 0 {
                        // We know no epoch at or below the follower's: its log cannot be
                        // matched with ours (Kafka answers OFFSET_OUT_OF_RANGE and the
                        // follower falls back to our HW).
                        partition_error(index, code::OFFSET_OUT_OF_RANGE)
                            .with_high_watermark(hw)
                            .with_last_stable_offset(hw)
                            .with_log_start_offset(log_start)
                    } else {
                        // The follower's log diverged from ours: tell it where to truncate
                        // (KIP-595 style).
                        PartitionData::default()
                            .with_partition_index(index)
                            .with_high_watermark(hw)
                            .with_last_stable_offset(hw)
                            .with_log_start_offset(log_start)
                            .with_diverging_epoch(
                                kafka_protocol::messages::fetch_response::EpochEndOffset::default()
                                    .with_epoch(epoch)
                                    .with_end_offset(end),
                            )
                            .with_preferred_read_replica(BrokerId(-1))
                            .with_records(Some(Default::default()))
                    });
                    // Its fetch position is not a position in *our* log, so it neither moves
                    // the HW nor earns an ISR place (as in Kafka).
                    continue;
                }
                // The fetch position is the follower's LEO: it may move the HW (spec E.3). A
                // position outside our log is answered OFFSET_OUT_OF_RANGE below and counts
                // for nothing.
                if in_log {
                    let outcome = partition.record_follower_fetch(replica_id, fp.fetch_offset);
                    if outcome.hw_changed {
                        broker.replicas.appended.notify_waiters();
                    }
                    if let Some(request) = outcome.propose {
                        crate::isr::propose(
                            broker.controller.clone(),
                            broker.replicas.clone(),
                            partition.clone(),
                            request,
                        );
                    }
                }
            }
            let log = partition.log.lock();
            let hw = log.high_watermark();
            let upper = if follower { log.log_end_offset() } else { hw };
            let max = (fp.partition_max_bytes.max(0) as usize).min(budget);
            let in_range = fp.fetch_offset >= log.log_start_offset()
                && fp.fetch_offset <= log.log_end_offset();
            let result = if in_range && fp.fetch_offset >= upper {
                // Between the HW and the LEO: nothing visible yet, not an error.
                Ok(runnel_log::ReadResult {
                    records: Default::default(),
                    log_start_offset: log.log_start_offset(),
                    log_end_offset: log.log_end_offset(),
                    high_watermark: hw,
                })
            } else {
                log.read(fp.fetch_offset, max, upper, total == 0)
            };
            match result {
                Ok(read) => {
                    let n = read.records.len();
                    total += n;
                    budget = budget.saturating_sub(n);
                    partitions.push(
                        PartitionData::default()
                            .with_partition_index(index)
                            .with_high_watermark(read.high_watermark)
                            .with_last_stable_offset(read.high_watermark)
                            .with_log_start_offset(read.log_start_offset)
                            .with_preferred_read_replica(BrokerId(-1))
                            .with_records(Some(read.records)),
                    );
                }
                Err(LogError::OffsetOutOfRange { .. }) => {
                    errors = true;
                    partitions.push(
                        partition_error(index, code::OFFSET_OUT_OF_RANGE)
                            .with_high_watermark(hw)
                            .with_last_stable_offset(hw)
                            .with_log_start_offset(log.log_start_offset()),
                    );
                }
                Err(e) => {
                    tracing::error!(topic = %name, partition = index, error = %e, "read failed");
                    errors = true;
                    partitions.push(partition_error(index, code::KAFKA_STORAGE_ERROR));
                }
            }
        }
        topics.push(
            FetchableTopicResponse::default()
                .with_topic(topic.topic.clone())
                .with_topic_id(topic.topic_id)
                .with_partitions(partitions),
        );
    }
    if version < 5 {
        // log_start_offset exists from v5 on.
        for p in topics.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
            p.log_start_offset = -1;
        }
    }
    (
        FetchResponse::default().with_responses(topics),
        total,
        errors,
    )
}
