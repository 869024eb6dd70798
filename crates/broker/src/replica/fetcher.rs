//! Follower replication: for every leader broker that leads partitions replicated here, one
//! task fetches with the Kafka Fetch API (v15: topics by id, `ReplicaState` with this broker's
//! id and registration epoch, which the leader checks, KIP-903), appends the leader's batches
//! byte for byte, takes the leader's high watermark and log start offset (so DeleteRecords
//! reaches this replica), and truncates where the leader reports a diverging epoch. The fetch
//! position itself tells the leader how far this follower got.
//!
//! The set of followed partitions comes from the replica manager after every image; a task
//! whose leader no longer leads anything here ends. When a leader's set changes (a new topic, a
//! leadership moved here), its task abandons the long poll in flight and fetches the new set at
//! once, so new partitions do not wait up to `MAX_WAIT_MS` for their first fetch (acks=all
//! produces to them would wait as long).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use parking_lot::Mutex;
use runnel_client::stream::BoxStream;
use runnel_metadata::MetadataImage;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use uuid::Uuid;

use crate::replica::manager::ReplicaManager;
use crate::replica::partition::Partition;

const FETCH_VERSION: i16 = 15;
const MAX_WAIT_MS: i32 = 500;
const PARTITION_MAX_BYTES: i32 = 1 << 20;
/// Pause after a connection failure.
const RETRY: Duration = Duration::from_millis(200);
/// First pause after an answer with errors only (often a leader whose metadata is a moment
/// behind ours); doubled up to `RETRY` while the errors last.
const FIRST_ERROR_PAUSE: Duration = Duration::from_millis(5);
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Responses larger than this are refused (matches the broker's own request bound; the
/// leader keeps its answers within `replica.fetch.response.max.bytes` plus one batch).
const MAX_RESPONSE_BYTES: usize = 100 * 1024 * 1024;

type Followed = Arc<Mutex<HashMap<i32, Vec<(String, i32)>>>>;

/// Bumped whenever the followed sets change, so fetch tasks notice during a long poll.
type FollowedVersion = watch::Sender<u64>;

/// Watches the image and keeps one fetcher task per leader broker.
/// `response_max_bytes` is `replica.fetch.response.max.bytes`, the `max_bytes` of every fetch.
pub fn spawn(
    node_id: i32,
    response_max_bytes: i32,
    replicas: Arc<ReplicaManager>,
    mut image: watch::Receiver<Arc<MetadataImage>>,
) {
    let followed: Followed = Arc::default();
    let version: Arc<FollowedVersion> = Arc::new(watch::Sender::new(0));
    tokio::spawn(async move {
        let mut running: BTreeMap<i32, tokio::task::JoinHandle<()>> = BTreeMap::new();
        loop {
            let current = image.borrow_and_update().clone();
            let mut by_leader: HashMap<i32, Vec<(String, i32)>> = HashMap::new();
            for p in replicas.all() {
                let role = p.role();
                // A replica in a failed log dir stops fetching (Kafka's
                // `handleLogDirFailure` removes its fetcher).
                let follows =
                    role.leader >= 0 && role.leader != node_id && role.replicas.contains(&node_id);
                if follows && !p.lock_log().is_offline() {
                    by_leader
                        .entry(role.leader)
                        .or_default()
                        .push((p.topic.clone(), p.index));
                }
            }
            for set in by_leader.values_mut() {
                set.sort();
            }
            let changed = *followed.lock() != by_leader;
            if changed {
                *followed.lock() = by_leader.clone();
                version.send_modify(|v| *v += 1);
            }
            running.retain(|_, task| !task.is_finished());
            for leader in by_leader.keys() {
                if !running.contains_key(leader) {
                    let task = tokio::spawn(fetch_loop(
                        node_id,
                        response_max_bytes,
                        *leader,
                        replicas.clone(),
                        followed.clone(),
                        version.subscribe(),
                        image.clone(),
                    ));
                    running.insert(*leader, task);
                }
            }
            drop(current);
            if image.changed().await.is_err() {
                return;
            }
        }
    });
}

fn leader_address(image: &MetadataImage, leader: i32) -> Option<String> {
    image
        .brokers
        .get(&leader)
        .filter(|b| !b.fenced)
        .map(|b| format!("{}:{}", b.host, b.port))
}

async fn fetch_loop(
    node_id: i32,
    response_max_bytes: i32,
    leader: i32,
    replicas: Arc<ReplicaManager>,
    followed: Followed,
    mut version: watch::Receiver<u64>,
    image: watch::Receiver<Arc<MetadataImage>>,
) {
    let mut connection: Option<(String, BoxStream)> = None;
    let mut correlation = 0i32;
    let mut error_pause = FIRST_ERROR_PAUSE;
    loop {
        // Seen before reading the set: a change after this line interrupts the fetch below.
        version.mark_unchanged();
        let partitions = followed.lock().get(&leader).cloned().unwrap_or_default();
        if partitions.is_empty() {
            // Nothing to fetch from this leader now. The task stays (one per broker at most)
            // and waits for the set to change, so it can never exit just as new partitions
            // arrive for it.
            connection = None;
            if version.changed().await.is_err() {
                return;
            }
            continue;
        }
        let Some(address) = leader_address(&image.borrow(), leader) else {
            tokio::time::sleep(RETRY).await;
            continue;
        };
        let Some(stream) = connect(&mut connection, address, leader).await else {
            tokio::time::sleep(RETRY).await;
            continue;
        };
        correlation = correlation.wrapping_add(1);
        let (request, epochs) = build_request(
            replica_state(&image.borrow(), node_id),
            response_max_bytes,
            &replicas,
            &partitions,
        );
        let exchange = exchange(stream, correlation, &request);
        let answer =
            match interruptible(exchange, &mut version, &followed, leader, &partitions).await {
                Interrupted::Answer(answer) => answer,
                Interrupted::SetChanged => {
                    // Drop the long poll in flight (its answer would come on this connection)
                    // and fetch the new set now.
                    connection = None;
                    continue;
                }
                Interrupted::Shutdown => return,
            };
        match answer.map(|response| apply(&replicas, leader, &epochs, response)) {
            // An empty answer is the leader's long poll running out (it already waited
            // MAX_WAIT_MS): fetch again at once, or new records would wait for the pause (and
            // acks=all producers with them). Only errors back off, briefly at first.
            Ok(Applied::Errors) => {
                tokio::time::sleep(error_pause).await;
                error_pause = (error_pause * 2).min(RETRY);
            }
            Ok(Applied::Fine) => error_pause = FIRST_ERROR_PAUSE,
            Err(e) => {
                tracing::debug!(leader, error = %e, "replica fetch failed; reconnecting");
                connection = None;
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

/// The connection to the leader at `address`, opened (TLS and SASL as the inter-broker
/// listener says, `crate::inter_broker::open`) unless the one held goes there; `None` when
/// it cannot be opened.
async fn connect(
    connection: &mut Option<(String, BoxStream)>,
    address: String,
    leader: i32,
) -> Option<&mut BoxStream> {
    if connection.as_ref().is_none_or(|(a, _)| *a != address) {
        *connection =
            match crate::inter_broker::open(&address, "runnel-replica-fetcher", IO_TIMEOUT).await {
                Ok(stream) => Some((address, stream)),
                Err(e) => {
                    tracing::debug!(leader, error = %e, "replica fetcher cannot connect");
                    None
                }
            };
    }
    connection.as_mut().map(|(_, stream)| stream)
}

/// How a fetch in flight ended.
enum Interrupted {
    Answer(Result<FetchResponse, String>),
    /// The set of partitions followed from this leader changed.
    SetChanged,
    /// The fetcher's set is gone (shutdown).
    Shutdown,
}

/// Runs `exchange` until it answers or the followed set of `leader` stops being `partitions`.
async fn interruptible(
    exchange: impl std::future::Future<Output = Result<FetchResponse, String>>,
    version: &mut watch::Receiver<u64>,
    followed: &Followed,
    leader: i32,
    partitions: &[(String, i32)],
) -> Interrupted {
    tokio::pin!(exchange);
    loop {
        tokio::select! {
            biased;
            changed = version.changed() => {
                if changed.is_err() {
                    return Interrupted::Shutdown;
                }
                let now = followed.lock().get(&leader).cloned().unwrap_or_default();
                if now != partitions {
                    return Interrupted::SetChanged;
                }
            }
            answer = &mut exchange => return Interrupted::Answer(answer),
        }
    }
}

/// The leader epoch each partition was fetched in, and its topic's name, by (topic id,
/// partition): v13+ responses name topics by id.
type Requested = HashMap<(Uuid, i32), (String, i32)>;

/// Who fetches (KIP-903): this broker's id and registration epoch (-1 until registered).
fn replica_state(image: &MetadataImage, node_id: i32) -> ReplicaState {
    let broker_epoch = image.brokers.get(&node_id).map_or(-1, |b| b.epoch);
    ReplicaState::default()
        .with_replica_id(BrokerId(node_id))
        .with_replica_epoch(broker_epoch)
}

fn build_request(
    replica: ReplicaState,
    max_bytes: i32,
    replicas: &ReplicaManager,
    partitions: &[(String, i32)],
) -> (FetchRequest, Requested) {
    let mut topics: BTreeMap<Uuid, Vec<FetchPartition>> = BTreeMap::new();
    let mut requested = Requested::new();
    for (topic, index) in partitions {
        let Some(p) = replicas.get(topic, *index) else {
            continue;
        };
        let role = p.role();
        let log = p.lock_log();
        requested.insert((p.topic_id, *index), (topic.clone(), role.leader_epoch));
        topics.entry(p.topic_id).or_default().push(
            FetchPartition::default()
                .with_partition(*index)
                .with_current_leader_epoch(role.leader_epoch)
                .with_fetch_offset(log.log_end_offset())
                .with_last_fetched_epoch(log.latest_epoch().unwrap_or(-1))
                .with_log_start_offset(log.log_start_offset())
                .with_partition_max_bytes(PARTITION_MAX_BYTES),
        );
    }
    let request = FetchRequest::default()
        .with_replica_state(replica)
        .with_max_wait_ms(MAX_WAIT_MS)
        .with_min_bytes(1)
        .with_max_bytes(max_bytes)
        .with_session_epoch(-1)
        .with_topics(
            topics
                .into_iter()
                .map(|(topic_id, partitions)| {
                    FetchTopic::default()
                        .with_topic_id(topic_id)
                        .with_partitions(partitions)
                })
                .collect(),
        );
    (request, requested)
}

async fn exchange(
    stream: &mut BoxStream,
    correlation: i32,
    request: &FetchRequest,
) -> Result<FetchResponse, String> {
    let mut body = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(ApiKey::Fetch as i16)
        .with_request_api_version(FETCH_VERSION)
        .with_correlation_id(correlation)
        .with_client_id(Some(StrBytes::from_static_str("runnel-replica-fetcher")))
        .encode(
            &mut body,
            ApiKey::Fetch.request_header_version(FETCH_VERSION),
        )
        .and_then(|()| request.encode(&mut body, FETCH_VERSION))
        .map_err(|e| e.to_string())?;
    let size = i32::try_from(body.len()).map_err(|_| "fetch request over 2 GiB".to_string())?;
    let mut frame = BytesMut::with_capacity(body.len() + 4);
    frame.put_i32(size);
    frame.extend_from_slice(&body);
    let io = async {
        stream.write_all(&frame).await?;
        let size = stream.read_i32().await?;
        if size < 0 || size as usize > MAX_RESPONSE_BYTES {
            return Err(std::io::Error::other(format!(
                "response size {size} out of bounds"
            )));
        }
        // Read straight into uninitialised capacity (no zeroing pass over every response).
        let size = size as usize;
        let mut buf = BytesMut::with_capacity(size);
        while buf.len() < size {
            let want = (size - buf.len()) as u64;
            if (&mut *stream).take(want).read_buf(&mut buf).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
        Ok(buf.freeze())
    };
    let mut bytes =
        tokio::time::timeout(IO_TIMEOUT + Duration::from_millis(MAX_WAIT_MS as u64), io)
            .await
            .map_err(|_| "timed out".to_string())?
            .map_err(|e| e.to_string())?;
    let header = ResponseHeader::decode(
        &mut bytes,
        ApiKey::Fetch.response_header_version(FETCH_VERSION),
    )
    .map_err(|e| e.to_string())?;
    if header.correlation_id != correlation {
        return Err("out-of-order response".into());
    }
    let response = FetchResponse::decode(&mut bytes, FETCH_VERSION).map_err(|e| e.to_string())?;
    if bytes.has_remaining() {
        return Err("trailing bytes in fetch response".into());
    }
    Ok(response)
}

/// What a fetch response brought.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Applied {
    /// Records, a truncation, or nothing new (the long poll ran out): fetch again.
    Fine,
    /// The leader answered errors only (not leader yet, unknown partition, ...): back off.
    Errors,
}

/// Where a follower truncates for the leader's DivergingEpoch (spec E.5, the pure
/// `truncation_point`): below both the leader's end of that epoch and its own, or to its own
/// end of an older epoch first (the next fetch finishes the job).
fn diverging_truncation(log: &runnel_log::PartitionLog, leader_epoch: i32, leader_end: i64) -> i64 {
    use runnel_replication::{truncation_point, EpochEndOffset};
    let reply = EpochEndOffset {
        epoch: leader_epoch,
        end_offset: leader_end,
    };
    truncation_point(
        log.epoch_cache(),
        log.log_end_offset(),
        log.high_watermark(),
        reply,
    )
    .offset
}

/// Applies one response. Partitions this broker no longer follows from `leader` in the epoch
/// they were fetched in (it became their leader, or another broker did) are left alone: their
/// log is no longer this fetcher's to change.
fn apply(
    replicas: &ReplicaManager,
    leader: i32,
    requested: &Requested,
    response: FetchResponse,
) -> Applied {
    if response.error_code != 0 {
        return Applied::Errors;
    }
    let mut progressed = false;
    let mut errors = false;
    for topic in response.responses {
        for pd in topic.partitions {
            let Some((name, fetched_in)) = requested.get(&(topic.topic_id, pd.partition_index))
            else {
                continue;
            };
            let Some(p) = replicas.get(name, pd.partition_index) else {
                continue;
            };
            let role = p.role();
            if role.leader != leader || role.leader_epoch != *fetched_in {
                continue;
            }
            let step = apply_partition(&p, pd);
            progressed |= step.progressed;
            errors |= step.error;
        }
    }
    if errors && !progressed {
        Applied::Errors
    } else {
        Applied::Fine
    }
}

/// What one partition's answer did to this replica.
#[derive(Debug, Default)]
struct Step {
    /// The log moved (records appended, truncated, restarted).
    progressed: bool,
    /// An error, or an answer that cannot progress by fetching again at once.
    error: bool,
}

fn apply_partition(p: &Partition, pd: PartitionData) -> Step {
    match pd.error_code {
        0 if pd.diverging_epoch.epoch >= 0 => truncate_diverging(p, &pd),
        0 => append_fetched(p, pd),
        1 => out_of_range(p, &pd),
        _ => Step {
            progressed: false,
            error: true,
        },
    }
}

/// The leader says our log diverged: truncate to the pure `truncation_point`.
fn truncate_diverging(p: &Partition, pd: &PartitionData) -> Step {
    let position = |log: &runnel_log::PartitionLog| (log.log_end_offset(), log.latest_epoch());
    let (before, to) = {
        let log = p.lock_log();
        let to = diverging_truncation(
            &log,
            pd.diverging_epoch.epoch,
            pd.diverging_epoch.end_offset,
        );
        (position(&log), to)
    };
    tracing::info!(topic = %p.topic, partition = p.index, from = before.0, to, "truncating a diverging tail");
    if let Err(e) = p.truncate_to(to) {
        tracing::error!(error = %e, "truncation failed");
    }
    // Nothing changed (not even an empty epoch dropped): fetching again at once would only
    // repeat this answer, so pause like for an error.
    let progressed = position(&p.lock_log()) != before;
    Step {
        progressed,
        error: !progressed,
    }
}

/// The leader's batches, its HW and its log start.
fn append_fetched(p: &Partition, pd: PartitionData) -> Step {
    let records = pd.records.unwrap_or_default();
    let mut step = Step {
        progressed: !records.is_empty(),
        error: false,
    };
    let appended = p
        .append_as_follower(&records, pd.high_watermark)
        .and_then(|()| p.follow_leader_log_start(pd.log_start_offset));
    match appended {
        Ok(()) => {}
        // Shutting down, or the partition left this broker: nothing to report.
        Err(runnel_log::LogError::Closed) => step.error = true,
        // Refused (a batch damaged on the leader's disk fails its CRC here) or not written:
        // the same answer comes back at once, so back off as for an error instead of
        // refetching in a tight loop (Kafka's fetcher marks the partition failed and waits
        // `replica.fetch.backoff.ms`).
        Err(e) => {
            tracing::error!(topic = %p.topic, partition = p.index, error = %e, "follower append failed");
            step = Step {
                progressed: false,
                error: true,
            };
        }
    }
    step
}

/// OFFSET_OUT_OF_RANGE: our end is past the leader's (an unclean leader change): cut back to
/// the leader's high watermark and fetch from there; or below the leader's log start
/// (retention or DeleteRecords removed what we lack): restart our log where the leader's
/// begins.
fn out_of_range(p: &Partition, pd: &PartitionData) -> Step {
    let mut step = Step {
        progressed: false,
        error: true,
    };
    let leo = p.lock_log().log_end_offset();
    if leo < pd.log_start_offset {
        tracing::info!(topic = %p.topic, partition = p.index, leo, start = pd.log_start_offset, "restarting the log at the leader's log start");
        if let Err(e) = p.truncate_fully_and_start_at(pd.log_start_offset) {
            tracing::error!(error = %e, "log restart failed");
        }
        step.progressed = true;
    } else if leo > pd.high_watermark && pd.high_watermark >= 0 {
        if let Err(e) = p.truncate_to(pd.high_watermark) {
            tracing::error!(error = %e, "truncation failed");
        }
    }
    step
}

#[cfg(test)]
#[path = "fetcher_tests.rs"]
mod tests;
