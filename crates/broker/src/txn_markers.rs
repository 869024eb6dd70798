//! Sends a finishing transaction's markers: WriteTxnMarkers (API 27) to the leader of every
//! partition in the transaction (Kafka's `TransactionMarkerChannelManager`). One task per
//! transaction, so a slow or unreachable leader delays only the transactions that have a
//! partition there. Failed partitions are retried with exponential backoff against the leader
//! the current image names; a partition whose topic is gone needs no marker (as Kafka drops
//! it). When every partition has answered NONE the coordinator task is told, and writes
//! CompleteCommit/CompleteAbort.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::errors::code;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use runnel_metadata::MetadataImage;
use runnel_txn::{MarkerJob, TopicPartition};
use tokio::sync::watch;

const VERSION: i16 = 1;
const IO_TIMEOUT: Duration = Duration::from_secs(10);
const MIN_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// Writes `job`'s markers, then calls `done`. Stops early when `cancelled` is set (this
/// broker no longer coordinates the transaction; the new coordinator resumes it).
pub fn spawn(
    job: MarkerJob,
    coordinator_epoch: i32,
    image: watch::Receiver<Arc<MetadataImage>>,
    cancelled: Arc<AtomicBool>,
    done: impl FnOnce(MarkerJob) + Send + 'static,
) {
    tokio::spawn(async move {
        let mut remaining: Vec<TopicPartition> = job.partitions.clone();
        let mut backoff = MIN_BACKOFF;
        loop {
            if cancelled.load(Ordering::Relaxed) {
                return;
            }
            let current = image.borrow().clone();
            remaining.retain(|tp| current.topic(&tp.topic).is_some());
            if remaining.is_empty() {
                done(job);
                return;
            }
            let mut still = Vec::new();
            for (leader, partitions) in by_leader(&current, &remaining) {
                let failed = match address(&current, leader) {
                    Some(addr) => send(&addr, &job, coordinator_epoch, &partitions).await,
                    None => partitions,
                };
                still.extend(failed);
            }
            if still.len() < remaining.len() {
                backoff = MIN_BACKOFF;
            }
            remaining = still;
            if !remaining.is_empty() {
                tracing::debug!(txn = %job.transactional_id, left = remaining.len(), "markers pending; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    });
}

/// The partitions grouped by their current leader (-1: none).
fn by_leader(
    image: &MetadataImage,
    partitions: &[TopicPartition],
) -> BTreeMap<i32, Vec<TopicPartition>> {
    let mut out: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
    for tp in partitions {
        let leader = image
            .topic(&tp.topic)
            .and_then(|t| t.partitions.get(&tp.partition))
            .map_or(-1, |p| p.leader);
        out.entry(leader).or_default().push(tp.clone());
    }
    out
}

fn address(image: &MetadataImage, broker: i32) -> Option<String> {
    image
        .brokers
        .get(&broker)
        .filter(|b| !b.fenced)
        .map(|b| format!("{}:{}", b.host, b.port))
}

/// One WriteTxnMarkers exchange; returns the partitions that must be retried.
async fn send(
    addr: &str,
    job: &MarkerJob,
    coordinator_epoch: i32,
    partitions: &[TopicPartition],
) -> Vec<TopicPartition> {
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        topics.entry(&tp.topic).or_default().push(tp.partition);
    }
    let marker = WritableTxnMarker::default()
        .with_producer_id(ProducerId(job.producer_id))
        .with_producer_epoch(job.producer_epoch)
        .with_transaction_result(job.commit)
        .with_coordinator_epoch(coordinator_epoch)
        .with_topics(
            topics
                .into_iter()
                .map(|(t, ps)| {
                    WritableTxnMarkerTopic::default()
                        .with_name(TopicName(StrBytes::from_string(t.to_string())))
                        .with_partition_indexes(ps)
                })
                .collect(),
        );
    let request = WriteTxnMarkersRequest::default().with_markers(vec![marker]);
    let sent = crate::inter_broker::exchange::<_, WriteTxnMarkersResponse>(
        addr,
        ApiKey::WriteTxnMarkers,
        VERSION,
        &request,
        IO_TIMEOUT,
    );
    let response = match sent.await {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(addr, error = %e, "WriteTxnMarkers failed");
            return partitions.to_vec();
        }
    };
    let mut acked = Vec::new();
    for marker in response
        .markers
        .iter()
        .filter(|m| m.producer_id.0 == job.producer_id)
    {
        for topic in &marker.topics {
            for p in &topic.partitions {
                // NONE, or a partition that no longer exists: nothing left to write there.
                if p.error_code == code::NONE || p.error_code == code::UNKNOWN_TOPIC_OR_PARTITION {
                    acked.push(TopicPartition::new(
                        topic.name.0.to_string(),
                        p.partition_index,
                    ));
                } else {
                    tracing::debug!(addr, topic = %topic.name.0, partition = p.partition_index, code = p.error_code, "marker refused");
                }
            }
        }
    }
    partitions
        .iter()
        .filter(|tp| !acked.contains(tp))
        .cloned()
        .collect()
}
