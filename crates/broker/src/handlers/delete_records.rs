//! DeleteRecords (API 21): moves the log start offset; `-1` means "up to the high watermark".
//!
//! As Kafka's `DelayedDeleteRecords`, the answer waits (up to the request's `timeout_ms`)
//! until the partition's low watermark, the smallest log start offset over the leader and its
//! live followers, reached the target: only then does no replica a failover could elect still
//! hold the deleted records. Followers take the leader's log start from every fetch response
//! (`Partition::follow_leader_log_start`). A partition still waiting at the deadline answers
//! REQUEST_TIMED_OUT (its leader's log start has moved all the same).

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use crate::context::Broker;
use crate::errors::code;
use crate::replica::partition::Partition;

fn result(index: i32, code: i16, low_watermark: i64) -> DeleteRecordsPartitionResult {
    DeleteRecordsPartitionResult::default()
        .with_partition_index(index)
        .with_error_code(code)
        .with_low_watermark(low_watermark)
}

/// A partition whose leader deleted, waiting for its low watermark to reach `target`.
struct Waiting {
    topic: usize,
    at: usize,
    partition: Arc<Partition>,
    target: i64,
}

pub async fn handle(
    broker: &Arc<Broker>,
    request: DeleteRecordsRequest,
    _version: i16,
) -> DeleteRecordsResponse {
    let deadline = tokio::time::Instant::now()
        + Duration::from_millis(u64::try_from(request.timeout_ms).unwrap_or(0));
    let mut waiting = Vec::new();
    let mut topics: Vec<DeleteRecordsTopicResult> = Vec::with_capacity(request.topics.len());
    for (t, topic) in request.topics.iter().enumerate() {
        let name = topic.name.0.as_str();
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let index = p.partition_index;
            let (answer, target) = delete_locally(broker, name, index, p.offset);
            if let Some((partition, target)) = target {
                waiting.push(Waiting {
                    topic: t,
                    at: partitions.len(),
                    partition,
                    target,
                });
            }
            partitions.push(answer);
        }
        topics.push(
            DeleteRecordsTopicResult::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions),
        );
    }
    loop {
        // Subscribed before the low watermarks are read, so a move in between is not missed.
        let mut watches: Vec<_> = waiting.iter().map(|w| w.partition.subscribe()).collect();
        waiting.retain(|w| match w.partition.low_watermark() {
            Some(low) if low >= w.target => {
                topics[w.topic].partitions[w.at] = result(w.partition.index, code::NONE, low);
                false
            }
            Some(_) => true,
            None => {
                topics[w.topic].partitions[w.at] =
                    result(w.partition.index, code::NOT_LEADER_OR_FOLLOWER, -1);
                false
            }
        });
        if waiting.is_empty() {
            break;
        }
        tokio::select! {
            _ = crate::replica::partition::any_progress(watches.iter_mut()) => {}
            _ = tokio::time::sleep_until(deadline) => break,
        }
    }
    DeleteRecordsResponse::default().with_topics(topics)
}

/// Moves the leader's log start; returns the answer if final, else REQUEST_TIMED_OUT (the
/// answer at the deadline) and what to wait for.
fn delete_locally(
    broker: &Arc<Broker>,
    name: &str,
    index: i32,
    offset: i64,
) -> (DeleteRecordsPartitionResult, Option<(Arc<Partition>, i64)>) {
    let partition = match super::led_partition(broker, name, index) {
        Ok(p) => p,
        Err(code) => return (result(index, code, -1), None),
    };
    let deleted = {
        let mut log = partition.lock_log();
        let hw = log.high_watermark();
        let target = if offset == -1 { hw } else { offset };
        if target < 0 || target > hw {
            return (result(index, code::OFFSET_OUT_OF_RANGE, -1), None);
        }
        log.delete_records_before(target).map(|_| target)
    };
    match deleted {
        Ok(target) => (
            result(index, code::REQUEST_TIMED_OUT, -1),
            Some((partition, target)),
        ),
        Err(e) => {
            tracing::error!(topic = %name, partition = index, error = %e, "delete records failed");
            (result(index, code::KAFKA_STORAGE_ERROR, -1), None)
        }
    }
}
