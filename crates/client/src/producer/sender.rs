//! The producer's background sender: drains ready batches, groups them per leader into
//! Produce requests (bounded by `max.request.size`, `max.in.flight` per broker), and completes
//! or retries each batch from the per-partition results.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
// BROKER_NOT_AVAILABLE: a broker named by stale metadata (not retriable in Kafka's table).
use runnel_codes::{BROKER_NOT_AVAILABLE, UNSUPPORTED_COMPRESSION_TYPE};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::connection::{Connection, ResponseSlot};
use crate::metadata::ClusterMetadata;

use super::accumulator::{Batch, BatchOutcome};
use super::{duplicate, Inner};
use crate::error::ClientError;
use crate::records::{encode_batch, ProducerStamp};

/// One partition's Produce answer: error code, message, base offset, log append time.
type PartitionResult = (i16, Option<String>, i64, i64);

/// Runs until the producer is closed and nothing is outstanding.
pub(crate) async fn run(inner: Arc<Inner>) {
    loop {
        let force =
            inner.flushing.load(Ordering::SeqCst) > 0 || inner.closed.load(Ordering::SeqCst);
        let now = Instant::now();
        // One metadata snapshot for the drain's leader rule and the grouping per leader.
        let meta = inner.client.metadata();
        let (ready, next) = inner.lock_accumulator().drain(
            now,
            inner.config.linger,
            force,
            inner.identity.is_some(),
            |topic, partition| meta.leader_for(topic, partition),
        );
        if ready.is_empty() {
            if inner.closed.load(Ordering::SeqCst) && inner.lock_accumulator().outstanding == 0 {
                return;
            }
            let wait = next.map_or(Duration::from_millis(100), |at| {
                at.saturating_duration_since(now)
            });
            let wait = if force {
                wait.min(Duration::from_millis(10))
            } else {
                wait
            };
            tokio::select! {
                _ = inner.wake.notified() => {}
                _ = tokio::time::sleep(wait) => {}
            }
            continue;
        }
        dispatch(&inner, &meta, ready).await;
    }
}

/// Groups batches per leader and spawns one request per group (split by size).
async fn dispatch(inner: &Arc<Inner>, meta: &ClusterMetadata, ready: Vec<Batch>) {
    let mut by_leader: BTreeMap<i32, Vec<Batch>> = BTreeMap::new();
    let mut leaderless = Vec::new();
    for batch in ready {
        match meta.leader_for(&batch.topic, batch.partition) {
            Some(leader) => by_leader.entry(leader).or_default().push(batch),
            None => leaderless.push(batch),
        }
    }
    if !leaderless.is_empty() {
        let err = ClientError::kafka(
            runnel_codes::LEADER_NOT_AVAILABLE,
            Some("no leader known for the partition".into()),
        );
        await_metadata(inner, leaderless, &err);
    }
    for (leader, batches) in by_leader {
        let mut request: Vec<Batch> = Vec::new();
        let mut bytes = 0usize;
        for batch in batches {
            if !request.is_empty() && bytes + batch.bytes > inner.config.max_request_size {
                spawn_request(inner, leader, std::mem::take(&mut request)).await;
                bytes = 0;
            }
            bytes += batch.bytes;
            request.push(batch);
        }
        if !request.is_empty() {
            spawn_request(inner, leader, request).await;
        }
    }
}

fn in_flight_slots(inner: &Inner, leader: i32) -> Arc<Semaphore> {
    let mut map = inner.in_flight.lock().unwrap_or_else(|p| p.into_inner());
    map.entry(leader)
        .or_insert_with(|| Arc::new(Semaphore::new(inner.config.max_in_flight)))
        .clone()
}

/// Waits for an in-flight slot (this is the producer's back-pressure towards the sender
/// loop: while slots are busy, batches keep filling up) and spawns the request.
///
/// Requests to one broker are written in the order the loop makes them: each task waits for
/// its predecessor's write (not its response) before connecting and writing, so a
/// partition's batches reach the broker in sequence order while the loop never blocks on a
/// connection. (With tasks that each connected and wrote as they pleased, a later batch could
/// land first on a fresh connection, and the earlier ones then failed with
/// OUT_OF_ORDER_SEQUENCE_NUMBER; Kafka's single sender thread writes in order.)
async fn spawn_request(inner: &Arc<Inner>, leader: i32, batches: Vec<Batch>) {
    let slots = in_flight_slots(inner, leader);
    let Ok(permit) = slots.acquire_owned().await else {
        return;
    };
    // While this request waited for its slot, an earlier batch of one of its partitions
    // may have failed and been requeued (the slot is often the one its failure freed).
    let batches = hold_behind_retries(inner, batches);
    if batches.is_empty() {
        return;
    }
    let (written_tx, written_rx) = tokio::sync::oneshot::channel();
    let previous = inner
        .write_turns
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(leader, written_rx);
    let inner = inner.clone();
    tokio::spawn(async move {
        if let Some(previous) = previous {
            // Sent or dropped: either way the predecessor is done writing.
            let _ = previous.await;
        }
        let written = write_request(&inner, leader, batches).await;
        drop(written_tx);
        if let Some(written) = written {
            handle_response(inner, written, permit).await;
        }
    });
}

/// Puts back the idempotent batches that a retry of their partition must precede
/// (`Accumulator::must_wait_behind`: requeued, or its failure read and not yet handled),
/// without counting an attempt; returns the others. The drain takes them again once the
/// retry is acknowledged.
fn hold_behind_retries(inner: &Arc<Inner>, batches: Vec<Batch>) -> Vec<Batch> {
    if inner.identity.is_none() {
        return batches;
    }
    let mut acc = inner.lock_accumulator();
    let mut send = Vec::with_capacity(batches.len());
    let mut held = false;
    for batch in batches {
        let behind = batch
            .base_sequence
            .is_some_and(|seq| acc.must_wait_behind(&batch.topic, batch.partition, seq));
        if behind {
            tracing::debug!(topic = %batch.topic, partition = batch.partition, "batch waits for an earlier retry");
            acc.requeue(batch);
            held = true;
        } else {
            send.push(batch);
        }
    }
    drop(acc);
    if held {
        inner.wake.notify_one();
    }
    send
}

/// A Produce request on the wire, waiting for its response.
struct Written {
    conn: Arc<Connection>,
    slot: ResponseSlot,
    version: i16,
    batches: Vec<Batch>,
}

/// Encodes the batches into one Produce request and writes it; `None` when there is no
/// response to wait for (acks=0, or the batches were already failed or requeued).
async fn write_request(
    inner: &Arc<Inner>,
    leader: i32,
    mut batches: Vec<Batch>,
) -> Option<Written> {
    let (conn, version) = match produce_connection(inner, leader).await {
        Ok(found) => found,
        Err(unsent) => {
            match unsent {
                Unsent::Awaits(e) => await_metadata(inner, batches, &e),
                Unsent::Retry(e) => retry_or_fail(inner, batches, &e),
                Unsent::Fail(e) => fail_all(inner, batches, &e),
            }
            return None;
        }
    };
    let req = match produce_request(inner, &mut batches) {
        Ok(req) => req,
        Err(e) => {
            fail_all(inner, batches, &e);
            return None;
        }
    };
    if inner.config.acks == 0 {
        match conn.send_no_response(&req, version).await {
            Ok(()) => {
                for b in batches {
                    complete(inner, b, Ok((-1, -1)));
                }
            }
            Err(e) => retry_or_fail(inner, batches, &e),
        }
        return None;
    }
    match conn.write_request(&req, version).await {
        Ok(slot) => Some(Written {
            conn,
            slot,
            version,
            batches,
        }),
        Err(e) => {
            retry_or_fail(inner, batches, &e);
            None
        }
    }
}

/// Why no Produce request was written, and what becomes of its batches.
enum Unsent {
    /// The leader left the broker list (BROKER_NOT_AVAILABLE) or cannot be reached yet: wait
    /// for metadata as for an unknown leader.
    Awaits(ClientError),
    Retry(ClientError),
    Fail(ClientError),
}

/// The leader's connection and the Produce version it speaks (zstd needs v7+).
async fn produce_connection(
    inner: &Arc<Inner>,
    leader: i32,
) -> Result<(Arc<Connection>, i16), Unsent> {
    let conn = match inner.client.broker_connection(leader).await {
        Ok(conn) => conn,
        Err(e) if e.is_retriable() || e.code() == Some(BROKER_NOT_AVAILABLE) => {
            return Err(Unsent::Awaits(e))
        }
        Err(e) => return Err(Unsent::Retry(e)),
    };
    let version = conn.negotiated::<ProduceRequest>().map_err(Unsent::Fail)?;
    if inner.config.compression == Compression::Zstd && version < 7 {
        return Err(Unsent::Fail(ClientError::kafka(
            UNSUPPORTED_COMPRESSION_TYPE,
            Some(format!(
                "zstd needs Produce v7+, the broker speaks v{version}"
            )),
        )));
    }
    Ok((conn, version))
}

/// The Produce request of the batches, each encoded once (a retry sends the same bytes, with
/// its sequence).
fn produce_request(inner: &Inner, batches: &mut [Batch]) -> Result<ProduceRequest, ClientError> {
    let mut topics: Vec<TopicProduceData> = Vec::new();
    for batch in batches.iter_mut() {
        let mut pd = PartitionProduceData::default();
        pd.index = batch.partition;
        pd.records = Some(encoded(inner, batch)?);
        match topics
            .iter_mut()
            .find(|t| t.name.0.as_str() == &*batch.topic)
        {
            Some(t) => t.partition_data.push(pd),
            None => {
                let mut t = TopicProduceData::default();
                t.name = TopicName(StrBytes::from_string(batch.topic.to_string()));
                t.partition_data.push(pd);
                topics.push(t);
            }
        }
    }
    let mut req = ProduceRequest::default();
    req.acks = inner.config.acks;
    req.timeout_ms = i32::try_from(inner.config.request_timeout.as_millis()).unwrap_or(i32::MAX);
    req.topic_data = topics;
    Ok(req)
}

/// The batch's records as a v2 batch, stamped with the producer and its sequence; encoded on
/// the first send and kept.
fn encoded(inner: &Inner, batch: &mut Batch) -> Result<bytes::Bytes, ClientError> {
    if let Some(bytes) = &batch.encoded {
        return Ok(bytes.clone());
    }
    let stamp = match (inner.identity, batch.base_sequence) {
        (Some(id), Some(seq)) => ProducerStamp {
            producer_id: id.id,
            producer_epoch: id.epoch,
            base_sequence: seq,
        },
        _ => ProducerStamp::none(),
    };
    let mut buf = BytesMut::with_capacity(batch.bytes + 128);
    encode_batch(&batch.records, inner.config.compression, stamp, &mut buf)?;
    let bytes = buf.freeze();
    batch.encoded = Some(bytes.clone());
    Ok(bytes)
}

/// Waits for a written request's response (the in-flight slot is held until then) and
/// completes, retries or fails each of its batches.
async fn handle_response(inner: Arc<Inner>, written: Written, _permit: OwnedSemaphorePermit) {
    let Written {
        conn,
        slot,
        version,
        batches,
    } = written;

    let rpc_timeout = inner.config.request_timeout + Duration::from_secs(5);
    let resp = match conn
        .await_response::<ProduceRequest>(slot, version, rpc_timeout)
        .await
    {
        Ok(resp) => resp,
        Err(e) => return retry_or_fail(&inner, batches, &e),
    };
    let mut results: HashMap<(String, i32), PartitionResult> = HashMap::new();
    for t in resp.responses {
        let topic = t.name.0.to_string();
        for p in t.partition_responses {
            results.insert(
                (topic.clone(), p.index),
                (
                    p.error_code,
                    p.error_message.map(|m| m.to_string()),
                    p.base_offset,
                    p.log_append_time_ms,
                ),
            );
        }
    }
    let mut retry = Vec::new();
    let mut refresh_topics: Vec<String> = Vec::new();
    for batch in batches {
        let key = (batch.topic.to_string(), batch.partition);
        match results.remove(&key) {
            Some((0, _, base, append_time)) => complete(&inner, batch, Ok((base, append_time))),
            // The broker already has this batch (an earlier attempt landed): success.
            Some((46, _, _, _)) if inner.identity.is_some() => {
                complete(&inner, batch, Ok((-1, -1)))
            }
            Some((code, message, _, _)) => {
                let err = ClientError::kafka(code, message);
                if err.needs_metadata_refresh() && !refresh_topics.contains(&key.0) {
                    refresh_topics.push(key.0.clone());
                }
                retry.push((batch, err));
            }
            None => {
                let err = ClientError::Protocol(format!(
                    "no result for {}-{} in the Produce response",
                    key.0, key.1
                ));
                complete(&inner, batch, Err(Arc::new(err)));
            }
        }
    }
    // Before any wait: from now on nothing later of these partitions goes out until the
    // retries resolve (the successes behind them free their slots meanwhile).
    mark_failed(&inner, &retry);
    if !refresh_topics.is_empty() {
        if let Err(e) = inner.client.refresh_metadata(Some(&refresh_topics)).await {
            tracing::debug!(error = %e, "metadata refresh after produce error failed");
        }
    }
    for (batch, err) in retry {
        retry_or_fail(&inner, vec![batch], &err);
    }
}

/// Records the failures read from a response in the accumulator (idempotence:
/// `Accumulator::failed`), so the drain holds their partitions at once.
fn mark_failed(inner: &Inner, failed: &[(Batch, ClientError)]) {
    if inner.identity.is_none() || failed.is_empty() {
        return;
    }
    let mut acc = inner.lock_accumulator();
    for (batch, _) in failed {
        if let Some(seq) = batch.base_sequence {
            acc.failed(&batch.topic, batch.partition, seq);
        }
    }
}

/// A batch whose leader is unknown, missing from the broker list or not reachable yet is no
/// failure: as Kafka's `RecordAccumulator.ready` keeps such a batch and asks for metadata, it
/// goes back to its queue with its sequence and without counting an attempt, until metadata
/// names a reachable leader or `delivery.timeout.ms` since its creation runs out. (Failing
/// it instead left a gap in the producer's sequences: every later batch of the partition
/// was then OUT_OF_ORDER_SEQUENCE_NUMBER until retries ran out, known case 7 of
/// docs/faults.md.)
fn await_metadata(inner: &Arc<Inner>, batches: Vec<Batch>, why: &ClientError) {
    let now = Instant::now();
    let (expired, waiting): (Vec<Batch>, Vec<Batch>) = batches
        .into_iter()
        .partition(|b| delivery_expired(inner, b, now));
    refresh_in_background(inner, &waiting);
    let mut acc = inner.lock_accumulator();
    for mut batch in waiting {
        batch.retry_after = Some(now + inner.config.retry_backoff);
        tracing::debug!(topic = %batch.topic, partition = batch.partition, reason = %why, "batch waits for metadata");
        acc.requeue(batch);
    }
    drop(acc);
    inner.wake.notify_one();
    for batch in expired {
        let err = expiry(inner, why);
        complete(inner, batch, Err(Arc::new(err)));
    }
}

/// Whether `delivery.timeout.ms` has passed since the batch was created.
fn delivery_expired(inner: &Inner, batch: &Batch, now: Instant) -> bool {
    now.saturating_duration_since(batch.created) >= inner.config.delivery_timeout
}

fn expiry(inner: &Inner, last: &ClientError) -> ClientError {
    ClientError::Timeout(
        inner.config.delivery_timeout,
        format!("delivery of the batch (delivery.timeout.ms; last error: {last})"),
    )
}

/// Asks for the batches' topics' metadata without waiting for it.
fn refresh_in_background(inner: &Inner, batches: &[Batch]) {
    if batches.is_empty() {
        return;
    }
    let client = inner.client.clone();
    let mut topics: Vec<String> = batches.iter().map(|b| b.topic.to_string()).collect();
    topics.dedup();
    tokio::spawn(async move {
        let _ = client.refresh_metadata(Some(&topics)).await;
    });
}

/// Requeues retriable failures (with backoff) while attempts remain and
/// `delivery.timeout.ms` has not run out; fails the rest. BROKER_NOT_AVAILABLE counts as
/// retriable here (the metadata that named the broker is stale and is refreshed), and so
/// does OUT_OF_ORDER_SEQUENCE_NUMBER for an idempotent producer.
fn retry_or_fail(inner: &Arc<Inner>, batches: Vec<Batch>, err: &ClientError) {
    let retriable = err.is_retriable()
        || err.code() == Some(BROKER_NOT_AVAILABLE)
        || (inner.identity.is_some()
            && err.code() == Some(runnel_codes::OUT_OF_ORDER_SEQUENCE_NUMBER));
    if err.needs_metadata_refresh() {
        refresh_in_background(inner, &batches);
    }
    let now = Instant::now();
    let mut acc = inner.lock_accumulator();
    let mut failed = Vec::new();
    for mut batch in batches {
        if delivery_expired(inner, &batch, now) {
            failed.push((batch, Some(expiry(inner, err))));
        } else if retriable && batch.attempts < inner.config.retries {
            batch.attempts += 1;
            let backoff =
                inner.config.retry_backoff * 2u32.saturating_pow(batch.attempts.min(5) - 1);
            batch.retry_after = Some(Instant::now() + backoff.min(Duration::from_secs(1)));
            tracing::debug!(topic = %batch.topic, partition = batch.partition, attempt = batch.attempts, error = %err, "retrying batch");
            if let Some(seq) = batch.base_sequence {
                acc.failed(&batch.topic, batch.partition, seq);
            }
            acc.requeue(batch);
        } else {
            failed.push((batch, None));
        }
    }
    drop(acc);
    inner.wake.notify_one();
    for (batch, expired) in failed {
        let err = expired.unwrap_or_else(|| duplicate(err));
        complete(inner, batch, Err(Arc::new(err)));
    }
}

fn fail_all(inner: &Arc<Inner>, batches: Vec<Batch>, err: &ClientError) {
    for batch in batches {
        complete(inner, batch, Err(Arc::new(duplicate(err))));
    }
}

/// Publishes the outcome to every record's future and releases the batch's buffer bytes;
/// wakes the sender when the drain held the batch's partition back behind it.
fn complete(inner: &Inner, batch: Batch, outcome: BatchOutcome) {
    let acked = outcome.is_ok();
    batch.result.send_replace(Some(outcome));
    inner.buffer.add_permits(batch.bytes);
    let mut acc = inner.lock_accumulator();
    let held = batch
        .base_sequence
        .is_some_and(|seq| acc.completed(&batch.topic, batch.partition, seq, acked));
    acc.outstanding = acc.outstanding.saturating_sub(1);
    if acc.outstanding == 0 {
        inner.idle.notify_waiters();
    }
    drop(acc);
    if held {
        inner.wake.notify_one();
    }
}
