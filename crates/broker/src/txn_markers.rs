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

use bytes::{Buf, BufMut, BytesMut};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use runnel_metadata::MetadataImage;
use runnel_txn::{MarkerJob, TopicPartition};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

const VERSION: i16 = 1;
const IO_TIMEOUT: Duration = Duration::from_secs(10);
const MIN_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(2);
const MAX_RESPONSE_BYTES: usize = 16 << 20;

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
        let mut correlation = 0i32;
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
                correlation = correlation.wrapping_add(1);
                let failed = match address(&current, leader) {
                    Some(addr) => {
                        send(&addr, correlation, &job, coordinator_epoch, &partitions).await
                    }
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
    correlation: i32,
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
    let response = match exchange(addr, correlation, &request).await {
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
                if p.error_code == 0 || p.error_code == 3 {
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

async fn exchange(
    addr: &str,
    correlation: i32,
    request: &WriteTxnMarkersRequest,
) -> Result<WriteTxnMarkersResponse, String> {
    let key = ApiKey::WriteTxnMarkers;
    let mut body = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(VERSION)
        .with_correlation_id(correlation)
        .with_client_id(Some(StrBytes::from_static_str("runnel-txn-markers")))
        .encode(&mut body, key.request_header_version(VERSION))
        .and_then(|()| request.encode(&mut body, VERSION))
        .map_err(|e| e.to_string())?;
    let len = i32::try_from(body.len()).map_err(|_| "request too large".to_string())?;
    let io = async {
        let mut stream = TcpStream::connect(addr).await?;
        let mut frame = BytesMut::with_capacity(body.len() + 4);
        frame.put_i32(len);
        frame.extend_from_slice(&body);
        stream.write_all(&frame).await?;
        let size = stream.read_i32().await?;
        let size = usize::try_from(size)
            .ok()
            .filter(|s| *s <= MAX_RESPONSE_BYTES)
            .ok_or_else(|| std::io::Error::other("response size out of bounds"))?;
        let mut buf = vec![0u8; size];
        stream.read_exact(&mut buf).await?;
        Ok::<_, std::io::Error>(bytes::Bytes::from(buf))
    };
    let mut bytes = tokio::time::timeout(IO_TIMEOUT, io)
        .await
        .map_err(|_| "timed out".to_string())?
        .map_err(|e| e.to_string())?;
    let header = ResponseHeader::decode(&mut bytes, key.response_header_version(VERSION))
        .map_err(|e| e.to_string())?;
    if header.correlation_id != correlation {
        return Err("out-of-order response".into());
    }
    let response =
        WriteTxnMarkersResponse::decode(&mut bytes, VERSION).map_err(|e| e.to_string())?;
    if bytes.has_remaining() {
        return Err("trailing bytes".into());
    }
    Ok(response)
}
