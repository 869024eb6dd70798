//! WriteTxnMarkers (API 27), the transaction coordinator's request to partition leaders: for
//! each marker, append a COMMIT / ABORT control batch to every listed partition this broker
//! leads ([`Partition::write_marker`]) and answer once the in-sync replicas have it (Kafka
//! appends markers with acks=all), per partition. Markers of one request are written at the
//! same time, under one deadline. A marker on a `__consumer_offsets` partition also ends the
//! producer's pending transactional offsets there (TxnOffsetCommit) before it is answered.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::write_txn_markers_request::WritableTxnMarker;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use runnel_log::control::Marker;

use super::{led_partition, topic_str};
use crate::context::Broker;
use crate::errors::code;
use crate::group_manager::OFFSETS_TOPIC;
use crate::replica::partition::join_all;

/// How long a marker waits for the ISR (Kafka: `request.timeout.ms`, 30000).
const MARKER_TIMEOUT: Duration = Duration::from_millis(30_000);

type Pending<'a> = Pin<Box<dyn Future<Output = i16> + Send + 'a>>;

pub async fn handle(
    broker: &Arc<Broker>,
    request: WriteTxnMarkersRequest,
    _version: i16,
) -> WriteTxnMarkersResponse {
    let deadline = tokio::time::Instant::now() + MARKER_TIMEOUT;
    let mut waits: Vec<Pending<'_>> = Vec::new();
    for m in &request.markers {
        let marker = Marker {
            producer_id: m.producer_id.0,
            producer_epoch: m.producer_epoch,
            commit: m.transaction_result,
            coordinator_epoch: m.coordinator_epoch,
        };
        for t in &m.topics {
            for &index in &t.partition_indexes {
                let topic = topic_str(&t.name).to_string();
                waits.push(Box::pin(write_one(broker, topic, index, marker, deadline)));
            }
        }
    }
    let mut codes = join_all(waits).await.into_iter();
    let markers = request
        .markers
        .iter()
        .map(|m| answer(m, &mut codes))
        .collect();
    WriteTxnMarkersResponse::default().with_markers(markers)
}

/// One marker's result, taking its partitions' codes in request order.
fn answer(m: &WritableTxnMarker, codes: &mut impl Iterator<Item = i16>) -> WritableTxnMarkerResult {
    let topics = m
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&index| {
                    WritableTxnMarkerPartitionResult::default()
                        .with_partition_index(index)
                        .with_error_code(codes.next().unwrap_or(code::UNKNOWN_SERVER_ERROR))
                })
                .collect();
            WritableTxnMarkerTopicResult::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    WritableTxnMarkerResult::default()
        .with_producer_id(m.producer_id)
        .with_topics(topics)
}

/// Writes `marker` to one partition and waits for its replication: the partition's error code.
async fn write_one(
    broker: &Arc<Broker>,
    topic: String,
    index: i32,
    marker: Marker,
    deadline: tokio::time::Instant,
) -> i16 {
    let partition = match led_partition(broker, &topic, index) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let appended = match partition.write_marker(&marker, broker.node_id) {
        Ok(a) => a,
        Err(e) => {
            tracing::info!(%topic, partition = index, producer_id = marker.producer_id, code = e.code, message = %e.message, "transaction marker refused");
            return e.code;
        }
    };
    let replicated = partition
        .wait_replicated(appended.last_offset + 1, appended.leader_epoch, deadline)
        .await;
    if let Some((code, _)) = super::produce::replicated_error(replicated) {
        return code;
    }
    if topic == OFFSETS_TOPIC {
        // The group coordinator commits or drops the transaction's pending offsets before
        // the marker is acknowledged (Kafka's `onTransactionCompleted`).
        broker
            .groups
            .complete_transaction(index, marker.producer_id, marker.commit)
            .await;
    }
    code::NONE
}
