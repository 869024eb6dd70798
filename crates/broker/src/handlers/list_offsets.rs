//! ListOffsets (API 2): earliest (-2), latest (-1, the HW for consumers; the last stable offset
//! under `isolation_level` 1, read_committed), max timestamp (-3), or the first offset whose
//! timestamp is at or after the given one (below the same bound). Without tiered storage
//! (KIP-405) the earliest local offset (-4, v8+) is the earliest offset, and the latest tiered
//! offset (-5, KIP-1005, v9+) is -1 with epoch -1, as Kafka answers when remote storage is off;
//! v10's `timeout_ms` (KIP-1075) bounds remote lookups, of which there are none.

use std::sync::Arc;

use kafka_protocol::messages::list_offsets_request::ListOffsetsPartition;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use super::check_leader_epoch;
use crate::context::Broker;
use crate::errors::code;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;

fn failed(index: i32, code: i16) -> ListOffsetsPartitionResponse {
    ListOffsetsPartitionResponse::default()
        .with_partition_index(index)
        .with_error_code(code)
        .with_timestamp(-1)
        .with_offset(-1)
        .with_leader_epoch(-1)
}

pub async fn handle(
    broker: &Arc<Broker>,
    request: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let name = topic.name.0.as_str();
            let partitions = topic
                .partitions
                .iter()
                .map(|p| list_partition(broker, name, p, request.isolation_level))
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    let mut response = ListOffsetsResponse::default().with_topics(topics);
    if version < 4 {
        // leader_epoch exists from v4 on.
        for p in response
            .topics
            .iter_mut()
            .flat_map(|t| t.partitions.iter_mut())
        {
            p.leader_epoch = -1;
        }
    }
    response
}

/// One partition's answer: the offset for its timestamp spec (earliest, latest up to the HW
/// or under read_committed the LSO, max timestamp, or the first at / after a time).
fn list_partition(
    broker: &Arc<Broker>,
    name: &str,
    p: &ListOffsetsPartition,
    isolation_level: i8,
) -> ListOffsetsPartitionResponse {
    let index = p.partition_index;
    let partition = match super::led_partition(broker, name, index) {
        Ok(p) => p,
        Err(code) => return failed(index, code),
    };
    let role = partition.role();
    let epoch_error = check_leader_epoch(p.current_leader_epoch, role.leader_epoch);
    if epoch_error != code::NONE {
        return failed(index, epoch_error);
    }
    // Read before the log lock (lock order).
    let lso = partition.last_stable_offset();
    let log = partition.lock_log();
    let visible = if isolation_level == 1 {
        lso.min(log.high_watermark())
    } else {
        log.high_watermark()
    };
    let latest_epoch = log.latest_epoch().unwrap_or(role.leader_epoch);
    let found = match p.timestamp {
        EARLIEST | EARLIEST_LOCAL => Some((log.log_start_offset(), -1, latest_epoch)),
        LATEST_TIERED => Some((-1, -1, -1)),
        LATEST => Some((visible, -1, latest_epoch)),
        MAX_TIMESTAMP => log.max_timestamp().map(|(ts, off)| (off, ts, latest_epoch)),
        ts => match log.offset_for_timestamp(ts) {
            Ok(found) => found.filter(|(offset, _, _)| *offset < visible),
            Err(e) => {
                tracing::error!(topic = %name, partition = index, error = %e, "timestamp lookup failed");
                return failed(index, code::KAFKA_STORAGE_ERROR);
            }
        },
    };
    match found {
        Some((offset, timestamp, epoch)) => ListOffsetsPartitionResponse::default()
            .with_partition_index(index)
            .with_timestamp(timestamp)
            .with_offset(offset)
            .with_leader_epoch(epoch),
        None => failed(index, code::NONE),
    }
}
