//! Produce (API 0): validate batch headers, append the producer's bytes once, acknowledge per
//! `acks` (and after the fsync group commit when `flush.messages` demands it). With acks=all
//! every partition of the request waits for its replication at once, under one deadline
//! (Kafka's `DelayedProduce`).
//!
//! A transactional batch needs the request's `transactional_id`
//! (TRANSACTIONAL_ID_AUTHORIZATION_FAILED without one, as Kafka) and, unless its producer's
//! transaction is already open on the partition, the coordinator's word that the transaction
//! is ongoing with the partition ([`crate::txn_verify`]); all such partitions of a request
//! are verified in one AddPartitionsToTxn before anything is appended. From v12 (KIP-890 part
//! 2, a transaction version 2 client that sends no AddPartitionsToTxn) that request adds the
//! partitions to the transaction instead (Kafka's `TransactionSupportedOperation.addPartition`
//! for Produce versions above 11).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use kafka_protocol::messages::produce_request::PartitionProduceData;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse,
    TopicProduceResponse,
};
use kafka_protocol::messages::BrokerId;
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use runnel_log::batch::BatchHeader;
use runnel_metadata::acl::{AclOperation, ResourceType};

use super::str_bytes;
use crate::context::{Broker, RequestContext};
use crate::errors::code;
use crate::replica::partition::{join_all, Appended, Partition, Refused, Replicated};
use uuid::Uuid;

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

/// One partition of the request: answered at once, or appended and waiting for its fsync
/// (`flush.messages`) and, with acks=all, its replication.
enum Slot {
    Answered(PartitionProduceResponse),
    Appended {
        partition: Arc<Partition>,
        appended: Appended,
        needs_flush: bool,
    },
}

pub async fn handle(
    broker: &Arc<Broker>,
    request: ProduceRequest,
    version: i16,
    ctx: &RequestContext,
) -> ProduceResponse {
    append_all(broker, request, version, ctx)
        .await
        .complete()
        .await
}

/// A Produce request whose partitions were appended (or answered at once): what is left is
/// waiting for their fsync and replication, which touches no other request's state, so the
/// connection may go on to its next Produce meanwhile (`crate::server::pipeline`).
pub struct PendingProduce {
    broker: Arc<Broker>,
    image: Arc<runnel_metadata::image::MetadataImage>,
    acks: i16,
    version: i16,
    listener: String,
    deadline: tokio::time::Instant,
    names: Vec<(kafka_protocol::messages::TopicName, Uuid)>,
    slots: Vec<Vec<(i32, Slot)>>,
}

/// The first half of a Produce: checks, transaction verification and the appends, in the
/// request's order.
pub async fn append_all(
    broker: &Arc<Broker>,
    request: ProduceRequest,
    version: i16,
    ctx: &RequestContext,
) -> PendingProduce {
    let acks = request.acks;
    let txn_denied = request.transactional_id.as_ref().is_some_and(|id| {
        !broker.authorized(ctx, AclOperation::Write, ResourceType::TransactionalId, id)
    });
    // One deadline for the whole request, as Kafka's DelayedProduce: every partition waits
    // for its replication at the same time, not one after the other.
    let deadline = tokio::time::Instant::now()
        + std::time::Duration::from_millis(u64::try_from(request.timeout_ms).unwrap_or(0));
    let image = broker.image();
    let mut request = request;
    let unknown_ids = resolve_topic_ids(&image, &mut request, version);
    let refused =
        verify_transactional(broker, &request, version >= FIRST_ADD_PARTITION_VERSION).await;
    let mut names = Vec::with_capacity(request.topic_data.len());
    let mut slots: Vec<Vec<(i32, Slot)>> = Vec::with_capacity(request.topic_data.len());
    for topic in request.topic_data {
        let name = topic.name.0.to_string();
        let denied = if version >= 13 && unknown_ids.contains(&topic.topic_id) {
            Some(code::UNKNOWN_TOPIC_ID)
        } else {
            refusal(broker, ctx, txn_denied, &name)
        };
        let appended = topic
            .partition_data
            .into_iter()
            .map(|data| {
                let index = data.index;
                let slot = match (denied, refused.get(&(name.clone(), index))) {
                    (Some(code), _) => Slot::Answered(error(index, code, "")),
                    (None, Some(&(code, message))) => Slot::Answered(error(index, code, message)),
                    (None, None) => append(broker, &name, data, acks, version),
                };
                (index, slot)
            })
            .collect();
        names.push((topic.name, topic.topic_id));
        slots.push(appended);
    }
    PendingProduce {
        broker: broker.clone(),
        image,
        acks,
        version,
        listener: ctx.listener.clone(),
        deadline,
        names,
        slots,
    }
}

impl PendingProduce {
    /// The second half: waits for every partition at once, under the request's deadline, and
    /// builds the response.
    pub async fn complete(self) -> ProduceResponse {
        let (acks, deadline) = (self.acks, self.deadline);
        let waits: Vec<Pin<Box<dyn Future<Output = PartitionProduceResponse> + Send + '_>>> = self
            .slots
            .iter()
            .flatten()
            .map(|(index, slot)| {
                Box::pin(complete(*index, slot, acks, deadline))
                    as Pin<Box<dyn Future<Output = PartitionProduceResponse> + Send + '_>>
            })
            .collect();
        let mut answers = join_all(waits).await.into_iter();
        let version = self.version;
        let topics: Vec<TopicProduceResponse> = self
            .names
            .into_iter()
            .zip(&self.slots)
            .map(|((name, topic_id), partitions)| {
                let t = TopicProduceResponse::default()
                    .with_partition_responses(answers.by_ref().take(partitions.len()).collect());
                if version >= 13 {
                    t.with_topic_id(topic_id)
                } else {
                    t.with_name(name)
                }
            })
            .collect();
        respond(&self.broker, &self.image, topics, version, &self.listener)
    }
}

/// v13 names topics by id (KIP-516): resolves them once into the request's names; returns
/// the unknown ids (answered UNKNOWN_TOPIC_ID).
fn resolve_topic_ids(
    image: &runnel_metadata::image::MetadataImage,
    request: &mut ProduceRequest,
    version: i16,
) -> std::collections::BTreeSet<Uuid> {
    let mut unknown_ids = std::collections::BTreeSet::new();
    if version >= 13 {
        for topic in &mut request.topic_data {
            match image.topic_by_id(&topic.topic_id) {
                Some(t) => topic.name = super::topic_name(&t.name),
                None => {
                    unknown_ids.insert(topic.topic_id);
                }
            }
        }
    }
    unknown_ids
}

/// The response: KIP-951's leader hints (v10+), fields the version does not carry cleared.
fn respond(
    broker: &Broker,
    image: &runnel_metadata::image::MetadataImage,
    mut topics: Vec<TopicProduceResponse>,
    version: i16,
    listener: &str,
) -> ProduceResponse {
    let mut node_endpoints = Vec::new();
    if version >= 10 {
        let names: Vec<String> = request_names(&topics, image, version);
        for (t, name) in topics.iter_mut().zip(names) {
            for p in &mut t.partition_responses {
                add_leader_hint(broker, image, &name, p, listener, &mut node_endpoints);
            }
        }
    }
    fit_to_version(
        ProduceResponse::default()
            .with_responses(topics)
            .with_node_endpoints(node_endpoints),
        version,
    )
}

/// The topic names of a response's topics (v13 carries ids).
fn request_names(
    topics: &[TopicProduceResponse],
    image: &runnel_metadata::image::MetadataImage,
    version: i16,
) -> Vec<String> {
    topics
        .iter()
        .map(|t| {
            if version >= 13 {
                image
                    .topic_by_id(&t.topic_id)
                    .map(|ti| ti.name.clone())
                    .unwrap_or_default()
            } else {
                t.name.0.to_string()
            }
        })
        .collect()
}

/// KIP-951 (v10+): a partition answered NOT_LEADER_OR_FOLLOWER names the current leader and
/// epoch, and the response carries that leader's endpoint once.
fn add_leader_hint(
    broker: &Broker,
    image: &runnel_metadata::image::MetadataImage,
    topic: &str,
    p: &mut PartitionProduceResponse,
    listener: &str,
    endpoints: &mut Vec<NodeEndpoint>,
) {
    if p.error_code != code::NOT_LEADER_OR_FOLLOWER {
        return;
    }
    let Some(hint) = super::leader_hint(broker, image, topic, p.index, listener) else {
        return;
    };
    p.current_leader = LeaderIdAndEpoch::default()
        .with_leader_id(BrokerId(hint.leader_id))
        .with_leader_epoch(hint.leader_epoch);
    if !endpoints.iter().any(|e| e.node_id.0 == hint.leader_id) {
        endpoints.push(
            NodeEndpoint::default()
                .with_node_id(BrokerId(hint.leader_id))
                .with_host(str_bytes(&hint.host))
                .with_port(hint.port)
                .with_rack(hint.rack.as_deref().map(str_bytes)),
        );
    }
}

/// The producer of the first batch of `records` if it is transactional: (id, epoch).
fn transactional_producer(records: &[u8]) -> Option<(i64, i16)> {
    BatchHeader::parse(records)
        .ok()
        .filter(|h| h.is_transactional() && !h.is_control())
        .map(|h| (h.producer_id, h.producer_epoch))
}

/// The first Produce version whose transactional batches join the transaction implicitly.
const FIRST_ADD_PARTITION_VERSION: i16 = 12;

/// The partitions of `request` whose transactional batch may not be appended, with the
/// produce error: no transactional id, or the coordinator did not confirm (`add`: did not
/// add) the partition to the transaction.
async fn verify_transactional(
    broker: &Arc<Broker>,
    request: &ProduceRequest,
    add: bool,
) -> std::collections::BTreeMap<(String, i32), (i16, &'static str)> {
    let mut refused = std::collections::BTreeMap::new();
    let mut wanted: Option<crate::txn_verify::Verify> = None;
    for topic in &request.topic_data {
        let name = topic.name.0.to_string();
        for data in &topic.partition_data {
            let Some((producer_id, producer_epoch)) =
                data.records.as_deref().and_then(transactional_producer)
            else {
                continue;
            };
            let key = (name.clone(), data.index);
            let Some(tid) = request.transactional_id.as_ref() else {
                let why = "transactional records need a transactional id";
                refused.insert(key, (code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED, why));
                continue;
            };
            let open = broker
                .replicas
                .get(&name, data.index)
                .is_some_and(|p| p.in_transaction_at(producer_id, producer_epoch));
            if open {
                continue;
            }
            let v = wanted.get_or_insert_with(|| crate::txn_verify::Verify {
                transactional_id: tid.0.to_string(),
                producer_id,
                producer_epoch,
                partitions: Default::default(),
                add,
            });
            v.partitions
                .entry(name.clone())
                .or_default()
                .push(data.index);
        }
    }
    if let Some(v) = wanted {
        let image = broker.image();
        for (key, verification) in crate::txn_verify::verify(&image, &v).await {
            if verification != code::NONE {
                let why = "the transaction coordinator did not confirm an ongoing transaction with this partition";
                refused.insert(
                    key,
                    (crate::txn_verify::produce_error(verification, add), why),
                );
            }
        }
    }
    refused
}

/// Kafka's authorization of Produce: Write on the transactional id of a transactional
/// producer (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition), Write on each topic.
fn refusal(broker: &Broker, ctx: &RequestContext, txn_denied: bool, topic: &str) -> Option<i16> {
    if txn_denied {
        Some(code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    } else if !broker.authorized_topic(ctx, AclOperation::Write, topic) {
        Some(code::TOPIC_AUTHORIZATION_FAILED)
    } else {
        None
    }
}

/// Validates and appends one partition's records as the leader.
fn append(
    broker: &Arc<Broker>,
    name: &str,
    data: PartitionProduceData,
    acks: i16,
    version: i16,
) -> Slot {
    let index = data.index;
    let (partition, records) = match admit(broker, name, data, acks, version) {
        Ok(admitted) => admitted,
        Err(answer) => return Slot::Answered(*answer),
    };
    match partition.append_as_leader_reporting(&records, broker.node_id, acks) {
        Ok(appended) => {
            let needs_flush = !appended.duplicate && partition.needs_flush();
            Slot::Appended {
                partition,
                appended,
                needs_flush,
            }
        }
        // Records refused for their content are listed one by one (KIP-467, v8+).
        Err(Refused {
            error: refused,
            record_errors,
        }) => {
            let mut answer = error(index, refused.code, &refused.message);
            answer.record_errors = record_errors
                .into_iter()
                .map(|e| {
                    BatchIndexAndErrorMessage::default()
                        .with_batch_index(e.batch_index)
                        .with_batch_index_error_message(Some(str_bytes(&e.message)))
                })
                .collect();
            Slot::Answered(answer)
        }
    }
}

/// The request-level checks of one partition before its append (acks, internal topics, the
/// partition hosted here, records present, zstd only from v7, one batch from v3): the
/// partition and its records, or the answer.
fn admit(
    broker: &Arc<Broker>,
    name: &str,
    data: PartitionProduceData,
    acks: i16,
    version: i16,
) -> Result<(Arc<Partition>, bytes::Bytes), Box<PartitionProduceResponse>> {
    let index = data.index;
    let refuse = |code: i16, message: &str| Err(Box::new(error(index, code, message)));
    if !matches!(acks, -1..=1) {
        return refuse(code::INVALID_REQUIRED_ACKS, "");
    }
    // Internal topics are written by the broker itself (the group coordinator appends to
    // `__consumer_offsets` directly, not through this handler), never by clients.
    if runnel_metadata::is_internal(name) {
        return refuse(
            code::INVALID_TOPIC_EXCEPTION,
            &format!("Cannot append to internal topic {name}"),
        );
    }
    let Some(partition) = broker.replicas.get(name, index) else {
        let code = if broker.image().partition(name, index).is_some() {
            code::NOT_LEADER_OR_FOLLOWER
        } else {
            code::UNKNOWN_TOPIC_OR_PARTITION
        };
        return refuse(code, "");
    };
    let Some(records) = data.records else {
        return refuse(code::INVALID_RECORD, "Produce request without records");
    };
    if version < 7 && uses_zstd(&records) {
        return refuse(
            code::UNSUPPORTED_COMPRESSION_TYPE,
            "zstd needs Produce v7 or later",
        );
    }
    if version >= 3 && holds_more_than_one_batch(&records) {
        // Kafka's ProduceRequest.validateRecords: this bounds what one request can add to the
        // idempotent-producer state to one producer per partition.
        return refuse(
            code::INVALID_RECORD,
            &format!(
                "Produce requests with version {version} are only allowed to contain exactly one record batch per partition"
            ),
        );
    }
    Ok((partition, records))
}

/// Waits for what an appended partition's answer depends on: the fsync when
/// `flush.messages` demands it, and with acks=all the HW (until `deadline`).
async fn complete(
    index: i32,
    slot: &Slot,
    acks: i16,
    deadline: tokio::time::Instant,
) -> PartitionProduceResponse {
    let (partition, appended, needs_flush) = match slot {
        Slot::Answered(answer) => return answer.clone(),
        Slot::Appended {
            partition,
            appended,
            needs_flush,
        } => (partition, appended, *needs_flush),
    };
    if needs_flush {
        if let Err(e) = partition.wait_flushed(appended.last_offset + 1).await {
            tracing::error!(topic = %partition.topic, partition = index, error = %e, "fsync failed");
            return error(index, code::KAFKA_STORAGE_ERROR, &e.to_string());
        }
    }
    if acks == -1 {
        let replicated = partition
            .wait_replicated(appended.last_offset + 1, appended.leader_epoch, deadline)
            .await;
        if let Some((code, message)) = replicated_error(replicated) {
            return error(index, code, message);
        }
    }
    PartitionProduceResponse::default()
        .with_index(index)
        .with_base_offset(appended.base_offset)
        .with_log_append_time_ms(appended.log_append_time)
        .with_log_start_offset(appended.log_start_offset)
}

/// The Kafka error of an acks=all wait that did not end in `Done` (Produce and the
/// WriteTxnMarkers the coordinator sends, both acks=all).
pub(crate) fn replicated_error(replicated: Replicated) -> Option<(i16, &'static str)> {
    match replicated {
        Replicated::Done => None,
        Replicated::TimedOut => Some((
            code::REQUEST_TIMED_OUT,
            "the in-sync replicas did not confirm the write in time",
        )),
        Replicated::LeadershipMoved => Some((
            code::NOT_LEADER_OR_FOLLOWER,
            "the leadership moved before the in-sync replicas confirmed the write",
        )),
        // Written and replicated, but the ISR shrank below the minimum meanwhile (spec E.4):
        // the client learns its durability guarantee was not met.
        Replicated::NotEnoughReplicasAfterAppend => Some((
            code::NOT_ENOUGH_REPLICAS_AFTER_APPEND,
            "the in-sync replica set shrank below min.insync.replicas after the append",
        )),
    }
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

/// Whether `records` starts with a complete batch followed by more bytes (a header that does
/// not parse is left to the append's validation, which names the problem).
fn holds_more_than_one_batch(records: &[u8]) -> bool {
    BatchHeader::parse(records).is_ok_and(|h| h.total_size() < records.len())
}

/// Whether any batch in the blob is zstd-compressed (headers only; bad framing is caught later).
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
