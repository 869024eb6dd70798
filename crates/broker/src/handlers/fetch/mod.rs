//! Fetch (API 1): whole batches from the log, up to the high watermark for consumers, with long
//! polling (`max_wait_ms` / `min_bytes`) woken by the progress of the requested partitions only
//! (a wake-up checks their offsets before reading anything). Sessionless (session id 0), which
//! KIP-227 allows: every response is a full response. v13+ name topics by id.
//!
//! Bounded as Kafka's `ReplicaManager.readFromLog` (KIP-74): the response carries at most
//! `min(max_bytes, fetch.max.bytes)` of records (`replica.fetch.response.max.bytes` for
//! follower fetches; a non-positive `max_bytes` is 0, not unlimited), each partition at most
//! its `partition_max_bytes`, and only the first batch of the response may exceed a limit. A
//! partition listed more than once is answered once (Kafka keys the request by partition: the
//! last entry's position, data in the first's place). Logs are located under the partition's
//! lock and read without it, on the blocking pool, never on the async workers.
//!
//! Consumers with `isolation_level = 1` (read_committed, KIP-98) read only below the last
//! stable offset, and get the aborted transactions overlapping what they may read
//! (`PartitionLog::aborted_txns`) so they drop those records; read_uncommitted gets `null`.
//!
//! Consumer fetches v11+ may be redirected to, or served by, a follower (KIP-392):
//! `fetch_follower_read`.
//!
//! Follower fetches (`replica_id >= 0`) read up to the log end and move the HW, so they are
//! accepted only from a replica of the partition with its current broker epoch (Fetch v15's
//! `ReplicaState`, KIP-903): [`check_follower_fetch`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset as FetchEpochEndOffset, FetchableTopicResponse,
    LeaderIdAndEpoch, NodeEndpoint, PartitionData,
};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, TopicName};
use runnel_log::{LogError, ReadPlan, ReadResult};
use runnel_replication::{
    check_follower_fetch, check_leader_epoch, EpochEndOffset, FollowerIdentity,
};
use uuid::Uuid;

use crate::context::{Broker, RequestContext};
use crate::errors::code;
use crate::partition::{any_progress, FollowerPosition, Partition, Progress, ReadBound};

/// Bytes of a response that are not records, per partition and per topic (an overestimate),
/// so the records budget keeps the whole response within `i32::MAX`.
/// The largest response a frame can carry (its size prefix is an INT32).
const FRAME_MAX: usize = i32::MAX as usize;
const PARTITION_OVERHEAD: usize = 64;
const TOPIC_OVERHEAD: usize = 64;
/// Kafka's -1 UNKNOWN_SERVER_ERROR: the read pass could not run (runtime shutting down).
const UNKNOWN_SERVER_ERROR: i16 = -1;

pub(super) fn partition_error(index: i32, code: i16) -> PartitionData {
    PartitionData::default()
        .with_partition_index(index)
        .with_error_code(code)
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1)
        .with_preferred_read_replica(BrokerId(-1))
        .with_records(Some(Default::default()))
}

/// One topic of the response, in the order the request first named it.
struct Topic {
    name: TopicName,
    topic_id: Uuid,
    /// The name to look partitions up by (v13+: resolved from the id; `None`: unknown id).
    resolved: Option<String>,
}

/// One partition to answer, after duplicates were merged.
struct Wanted {
    topic: usize,
    fetch: FetchPartition,
}

/// The request, decoded once for every pass of the long poll.
struct Plan {
    topics: Vec<Topic>,
    wanted: Vec<Wanted>,
    follower: Option<FollowerIdentity>,
    /// Records budget of one response.
    max_bytes: usize,
    min_bytes: usize,
    /// Fetch v4+ `isolation_level` 1: read_committed (never for followers).
    read_committed: bool,
    /// Consumer fetches v11+: their rack (KIP-392; they may read at a follower).
    client: Option<super::fetch_follower_read::ClientMetadata>,
    version: i16,
}

impl Plan {
    fn new(broker: &Broker, request: FetchRequest, version: i16) -> Plan {
        let follower = if version >= 15 {
            FollowerIdentity {
                replica_id: request.replica_state.replica_id.0,
                broker_epoch: request.replica_state.replica_epoch,
            }
        } else {
            FollowerIdentity {
                replica_id: request.replica_id.0,
                broker_epoch: -1,
            }
        };
        let follower = (follower.replica_id >= 0).then_some(follower);
        let read_committed = follower.is_none() && request.isolation_level == 1;
        let client =
            super::fetch_follower_read::client_metadata(&request, version, follower.is_some());
        let cap = i64::from(if follower.is_some() {
            broker.settings.replica_fetch_response_max_bytes
        } else {
            broker.settings.fetch_max_bytes
        });
        let max_bytes = i64::from(request.max_bytes).clamp(0, cap);
        let image = broker.image();
        let mut topics: Vec<Topic> = Vec::new();
        let mut topic_of: HashMap<(Uuid, String), usize> = HashMap::new();
        let mut wanted: Vec<Wanted> = Vec::new();
        let mut seen: HashMap<(usize, i32), usize> = HashMap::new();
        for t in request.topics {
            let key = (t.topic_id, t.topic.0.to_string());
            let topic = *topic_of.entry(key).or_insert_with(|| {
                let resolved = if version >= 13 {
                    image.topic_by_id(&t.topic_id).map(|ti| ti.name.clone())
                } else {
                    Some(t.topic.0.to_string())
                };
                topics.push(Topic {
                    name: t.topic.clone(),
                    topic_id: t.topic_id,
                    resolved,
                });
                topics.len() - 1
            });
            for fetch in t.partitions {
                match seen.get(&(topic, fetch.partition)) {
                    Some(&at) => wanted[at].fetch = fetch,
                    None => {
                        seen.insert((topic, fetch.partition), wanted.len());
                        wanted.push(Wanted { topic, fetch });
                    }
                }
            }
        }
        let overhead = wanted.len() * PARTITION_OVERHEAD + topics.len() * TOPIC_OVERHEAD;
        // `max_bytes` is clamped to 0..=cap above, so the conversion cannot fail.
        let max_bytes = usize::try_from(max_bytes)
            .unwrap_or(0)
            .min(FRAME_MAX.saturating_sub(overhead));
        let min_bytes = (request.min_bytes.max(0) as usize).min(max_bytes);
        Plan {
            topics,
            wanted,
            follower,
            max_bytes,
            min_bytes,
            read_committed,
            client,
            version,
        }
    }
}

impl Plan {
    /// Up to where this fetch reads (what its long poll waits for).
    fn bound(&self) -> ReadBound {
        if self.follower.is_some() {
            ReadBound::LogEnd
        } else if self.read_committed {
            ReadBound::LastStable
        } else {
            ReadBound::HighWatermark
        }
    }
}

pub async fn handle(
    broker: &Arc<Broker>,
    mut request: FetchRequest,
    version: i16,
    ctx: &RequestContext,
) -> FetchResponse {
    let refused = super::fetch_authz::take_refused(broker, ctx, &mut request, version);
    let response = fetch(broker, request, version).await;
    let mut response = super::fetch_authz::answer_refused(response, refused, version);
    if version >= 16 {
        add_leader_hints(broker, &mut response, version, &ctx.listener);
    }
    response
}

/// KIP-951 (v16+): a partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names
/// the current leader and epoch; the response carries each such leader's endpoint once.
fn add_leader_hints(broker: &Broker, response: &mut FetchResponse, version: i16, listener: &str) {
    let image = broker.image();
    let mut endpoints: Vec<NodeEndpoint> = Vec::new();
    for t in &mut response.responses {
        let name = if version >= 13 {
            match image.topic_by_id(&t.topic_id) {
                Some(ti) => ti.name.clone(),
                None => continue,
            }
        } else {
            t.topic.0.to_string()
        };
        for p in &mut t.partitions {
            if p.error_code != code::NOT_LEADER_OR_FOLLOWER
                && p.error_code != code::FENCED_LEADER_EPOCH
            {
                continue;
            }
            let Some(hint) = super::leader_hint(broker, &image, &name, p.partition_index, listener)
            else {
                continue;
            };
            p.current_leader = LeaderIdAndEpoch::default()
                .with_leader_id(BrokerId(hint.leader_id))
                .with_leader_epoch(hint.leader_epoch);
            if !endpoints.iter().any(|e| e.node_id.0 == hint.leader_id) {
                endpoints.push(
                    NodeEndpoint::default()
                        .with_node_id(BrokerId(hint.leader_id))
                        .with_host(super::str_bytes(&hint.host))
                        .with_port(hint.port)
                        .with_rack(hint.rack.as_deref().map(super::str_bytes)),
                );
            }
        }
    }
    response.node_endpoints = endpoints;
}

async fn fetch(broker: &Arc<Broker>, request: FetchRequest, version: i16) -> FetchResponse {
    let max_wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0));
    let deadline = tokio::time::Instant::now() + max_wait;
    let plan = Arc::new(Plan::new(broker, request, version));
    loop {
        // Subscribed before the read: an append in between is not missed.
        let mut watched = watch_partitions(broker, &plan);
        let (b, p) = (broker.clone(), plan.clone());
        let pass = tokio::task::spawn_blocking(move || read_once(&b, &p)).await;
        let Ok((response, bytes, errors)) = pass else {
            // The blocking pool is shutting down: nothing was read.
            return FetchResponse::default().with_error_code(UNKNOWN_SERVER_ERROR);
        };
        let now = tokio::time::Instant::now();
        if bytes >= plan.min_bytes || errors || now >= deadline {
            return response;
        }
        wait_for_news(&mut watched, plan.bound(), deadline).await;
    }
}

/// A requested partition hosted here, watched during the long poll.
struct Watched {
    fetch_offset: i64,
    seen: Progress,
    rx: tokio::sync::watch::Receiver<Progress>,
}

fn watch_partitions(broker: &Broker, plan: &Plan) -> Vec<Watched> {
    plan.wanted
        .iter()
        .filter_map(|w| {
            let name = plan.topics[w.topic].resolved.as_ref()?;
            let partition = broker.replicas.get(name, w.fetch.partition)?;
            let rx = partition.subscribe();
            let seen = *rx.borrow();
            Some(Watched {
                fetch_offset: w.fetch.fetch_offset,
                seen,
                rx,
            })
        })
        .collect()
}

/// Sleeps until one of the partitions has something past its fetch offset (or changed
/// leadership), or the deadline: the offsets are checked on every wake-up before anything is
/// read, so appends elsewhere, or below what this fetch waits for, cost it nothing.
async fn wait_for_news(watched: &mut [Watched], bound: ReadBound, deadline: tokio::time::Instant) {
    loop {
        // A closed watch is a partition that left this broker: the read reports it.
        let news = watched.iter().any(|w| {
            w.rx.has_changed().is_err()
                || w.rx.borrow().has_news_for(&w.seen, w.fetch_offset, bound)
        });
        if news {
            return;
        }
        tokio::select! {
            _ = any_progress(watched.iter_mut().map(|w| &mut w.rx)) => {}
            _ = tokio::time::sleep_until(deadline) => return,
        }
    }
}

/// What one partition's pass produced.
struct Answer {
    data: PartitionData,
    bytes: usize,
    error: bool,
}

impl Answer {
    fn error(data: PartitionData) -> Answer {
        Answer {
            data,
            bytes: 0,
            error: true,
        }
    }
}

/// One pass over the requested partitions: (response, bytes of records, any partition error).
/// Runs on the blocking pool (it reads segment files).
fn read_once(broker: &Arc<Broker>, plan: &Plan) -> (FetchResponse, usize, bool) {
    let mut budget = plan.max_bytes;
    let mut total = 0usize;
    let mut errors = false;
    let mut by_topic: Vec<Vec<PartitionData>> = plan.topics.iter().map(|_| Vec::new()).collect();
    for w in &plan.wanted {
        let topic = &plan.topics[w.topic];
        let answer = match &topic.resolved {
            None => Answer::error(partition_error(w.fetch.partition, code::UNKNOWN_TOPIC_ID)),
            Some(name) => read_partition(broker, plan, name, &w.fetch, budget, total == 0),
        };
        total += answer.bytes;
        budget = budget.saturating_sub(answer.bytes);
        errors |= answer.error;
        by_topic[w.topic].push(answer.data);
    }
    let mut topics = Vec::with_capacity(plan.topics.len());
    for (t, mut partitions) in plan.topics.iter().zip(by_topic) {
        if partitions.is_empty() {
            continue;
        }
        if plan.version < 5 {
            // log_start_offset exists from v5 on.
            for p in &mut partitions {
                p.log_start_offset = -1;
            }
        }
        let mut out = FetchableTopicResponse::default().with_partitions(partitions);
        if plan.version >= 13 {
            out.topic_id = t.topic_id;
        } else {
            out.topic = t.name.clone();
        }
        topics.push(out);
    }
    (
        FetchResponse::default().with_responses(topics),
        total,
        errors,
    )
}

/// Reads one partition within `budget` (`first`: nothing was returned yet, so one batch may
/// exceed the limits).
fn read_partition(
    broker: &Arc<Broker>,
    plan: &Plan,
    name: &str,
    fp: &FetchPartition,
    budget: usize,
    first: bool,
) -> Answer {
    let index = fp.partition;
    let (partition, role) = match admit(broker, plan, name, fp) {
        Ok(admitted) => admitted,
        Err(answer) => return *answer,
    };
    // Read before the log lock (lock order). A leader's LSO only grows; a follower serving
    // consumers (KIP-392) may have truncated since, so the read stays capped by the HW taken
    // under the lock.
    let lso = partition.last_stable_offset();
    let (located, aborted) = locate(&partition, plan, fp, budget, first, lso);
    let result: Result<ReadResult, (LogError, i64, i64)> = match located {
        Located::Nothing(read) => Ok(read),
        // Reading located bytes fails only with I/O errors or corruption (no offsets needed).
        Located::Read(plan) => plan.execute().map_err(|e| (e, -1, -1)),
        Located::Failed(e, hw, start) => Err((e, hw, start)),
    };
    match result {
        Ok(read) => {
            let n = read.records.len();
            if plan.client.is_some() {
                super::fetch_follower_read::served(
                    &partition,
                    broker.node_id,
                    &role,
                    fp.fetch_offset,
                    n,
                );
            }
            Answer {
                data: PartitionData::default()
                    .with_partition_index(index)
                    .with_high_watermark(read.high_watermark)
                    .with_last_stable_offset(lso.min(read.high_watermark))
                    .with_log_start_offset(read.log_start_offset)
                    .with_aborted_transactions(aborted)
                    .with_preferred_read_replica(BrokerId(-1))
                    .with_records(Some(read.records)),
                bytes: n,
                error: false,
            }
        }
        Err((LogError::OffsetOutOfRange { .. }, hw, start)) => Answer::error(
            partition_error(index, code::OFFSET_OUT_OF_RANGE)
                .with_high_watermark(hw)
                .with_last_stable_offset(hw)
                .with_log_start_offset(start),
        ),
        Err((e, _, _)) => {
            tracing::error!(topic = %name, partition = index, error = %e, "read failed");
            Answer::error(partition_error(index, code::KAFKA_STORAGE_ERROR))
        }
    }
}

/// Whether this broker reads `fp` for the request: the partition hosted here, a role that may
/// serve this fetcher (leader, or a follower serving a KIP-392 consumer), the current leader
/// epoch, and for a follower its registration and position. Anything else is the answer.
fn admit(
    broker: &Arc<Broker>,
    plan: &Plan,
    name: &str,
    fp: &FetchPartition,
) -> Result<(Arc<Partition>, crate::partition::Role), Box<Answer>> {
    let index = fp.partition;
    let refuse = |code| Box::new(Answer::error(partition_error(index, code)));
    let Some(partition) = broker.replicas.get(name, index) else {
        let code = if broker.image().partition(name, index).is_some() {
            code::NOT_LEADER_OR_FOLLOWER
        } else {
            code::UNKNOWN_TOPIC_OR_PARTITION
        };
        return Err(refuse(code));
    };
    let role = partition.role();
    let leader_here = role.leader == broker.node_id;
    if !leader_here
        && !super::fetch_follower_read::may_read_at_follower(
            plan.client.as_ref(),
            &role,
            broker.node_id,
        )
    {
        return Err(refuse(code::NOT_LEADER_OR_FOLLOWER));
    }
    check_leader_epoch(fp.current_leader_epoch, role.leader_epoch).map_err(refuse)?;
    if leader_here {
        let preferred = super::fetch_follower_read::preferred_replica(
            broker,
            &partition,
            plan.client.as_ref(),
            fp.fetch_offset,
        );
        if let Some(replica) = preferred {
            let data = super::fetch_follower_read::redirect(&partition, index, replica);
            // Answered at once, as an error is (Kafka's `hasPreferredReadReplica`).
            return Err(Box::new(Answer {
                data,
                bytes: 0,
                error: true,
            }));
        }
    }
    if let Some(who) = plan.follower {
        let registered = broker.image().brokers.get(&who.replica_id).map(|b| b.epoch);
        check_follower_fetch(who, broker.node_id, &role.replicas, registered).map_err(refuse)?;
        if let Some(answer) = follower_position(broker, &partition, who.replica_id, fp, plan) {
            return Err(Box::new(answer));
        }
    }
    Ok((partition, role))
}

/// Locates the read under the log lock (the bytes are read without it): up to the LEO for a
/// follower, the HW for a consumer, the LSO (`lso`) for read_committed, which also gets the
/// aborted transactions of the range.
fn locate(
    partition: &Partition,
    plan: &Plan,
    fp: &FetchPartition,
    budget: usize,
    first: bool,
    lso: i64,
) -> (Located, Option<Vec<AbortedTransaction>>) {
    let log = partition.lock_log();
    let hw = log.high_watermark();
    let upper = if plan.follower.is_some() {
        log.log_end_offset()
    } else if plan.read_committed {
        lso.min(hw)
    } else {
        hw
    };
    let aborted = plan
        .read_committed
        .then(|| aborted_transactions(&log, fp.fetch_offset, upper));
    let max = usize::try_from(fp.partition_max_bytes)
        .unwrap_or(0)
        .min(budget);
    let in_range =
        fp.fetch_offset >= log.log_start_offset() && fp.fetch_offset <= log.log_end_offset();
    let located = if in_range && fp.fetch_offset >= upper {
        // Between the HW and the LEO: nothing visible yet, not an error.
        Located::Nothing(ReadResult {
            records: Default::default(),
            log_start_offset: log.log_start_offset(),
            log_end_offset: log.log_end_offset(),
            high_watermark: hw,
        })
    } else {
        match log.plan_read(fp.fetch_offset, max, upper, first) {
            Ok(plan) => Located::Read(plan),
            Err(e) => Located::Failed(e, hw, log.log_start_offset()),
        }
    };
    (located, aborted)
}

/// The aborted transactions of `from..upper`, as a Fetch response lists them.
fn aborted_transactions(
    log: &runnel_log::PartitionLog,
    from: i64,
    upper: i64,
) -> Vec<AbortedTransaction> {
    log.aborted_txns(from, upper)
        .into_iter()
        .map(|t| {
            AbortedTransaction::default()
                .with_producer_id(kafka_protocol::messages::ProducerId(t.producer_id))
                .with_first_offset(t.first_offset)
        })
        .collect()
}

enum Located {
    Nothing(ReadResult),
    Read(ReadPlan),
    Failed(LogError, i64, i64),
}

/// A verified follower's fetch position: `Some` answers a diverging log (nothing is read);
/// otherwise a position inside our log is recorded as the follower's LEO and log start (it may
/// move the HW, the ISR and the low watermark) by [`Partition::serve_follower_fetch`].
fn follower_position(
    broker: &Arc<Broker>,
    partition: &Arc<Partition>,
    replica_id: i32,
    fp: &FetchPartition,
    plan: &Plan,
) -> Option<Answer> {
    let index = fp.partition;
    let last_fetched_epoch = (plan.version >= 12).then_some(fp.last_fetched_epoch);
    let position = partition.serve_follower_fetch(
        replica_id,
        fp.fetch_offset,
        last_fetched_epoch,
        fp.log_start_offset,
    );
    match position {
        FollowerPosition::Diverging {
            epoch_end,
            high_watermark: hw,
            log_start_offset,
        } => Some(Answer::error(diverging_answer(
            index,
            epoch_end,
            hw,
            log_start_offset,
        ))),
        FollowerPosition::Recorded { propose } => {
            if let Some(request) = propose {
                crate::isr::propose(broker.controller.clone(), partition.clone(), request);
            }
            None
        }
        // The read answers OFFSET_OUT_OF_RANGE; the position counts for nothing.
        FollowerPosition::OutsideLog => None,
    }
}

/// The answer to a follower whose log diverged from ours (KIP-595's DivergingEpoch): where
/// to truncate, no records. Its fetch position is not a position in *our* log, so it neither
/// moved the HW nor earned an ISR place (as in Kafka).
///
/// An undefined answer (`runnel_replication::EpochEndOffset::UNDEFINED`: we know no epoch at
/// or below the follower's) cannot travel as a DivergingEpoch: the field's -1 epoch means
/// "none" on the wire (Kafka's `FetchResponse.isDivergingEpoch`). It is answered
/// OFFSET_OUT_OF_RANGE with our HW instead, as before; the follower then cuts back to our
/// HW. A leader records its own epoch at its LEO on election, and fencing has checked that
/// the follower fetches in that epoch, so a follower's last fetched epoch is never above our
/// latest and this answer needs a leader whose epoch cache is empty.
fn diverging_answer(
    index: i32,
    epoch_end: EpochEndOffset,
    hw: i64,
    log_start: i64,
) -> PartitionData {
    if epoch_end.epoch < 0 || epoch_end.end_offset < 0 {
        return partition_error(index, code::OFFSET_OUT_OF_RANGE)
            .with_high_watermark(hw)
            .with_last_stable_offset(hw)
            .with_log_start_offset(log_start);
    }
    PartitionData::default()
        .with_partition_index(index)
        .with_high_watermark(hw)
        .with_last_stable_offset(hw)
        .with_log_start_offset(log_start)
        .with_diverging_epoch(
            FetchEpochEndOffset::default()
                .with_epoch(epoch_end.epoch)
                .with_end_offset(epoch_end.end_offset),
        )
        .with_preferred_read_replica(BrokerId(-1))
        .with_records(Some(Default::default()))
}
