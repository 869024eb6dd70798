//! Fetch from the closest replica (KIP-392), the shell around the pure
//! `runnel_replication::preferred_read_replica`:
//!
//! * on the leader, a consumer fetch v11+ with a `rack_id` may be answered with no records and
//!   `preferred_read_replica` = an in-sync follower in the client's rack
//!   (`replica.selector.class`), reconsidered on every fetch, so a follower that left the ISR
//!   (`replica.lag.time.max.ms`) or whose broker is fenced is not named again;
//! * a follower serves consumer fetches v11+ (Kafka's `fetchOnlyLeader` is false for them) up
//!   to *its* high watermark, read_committed up to its own last stable offset; beyond its log
//!   end the answer is OFFSET_OUT_OF_RANGE, which sends Kafka's clients back to the leader. Older
//!   consumer fetches and follower fetches still need the leader (NOT_LEADER_OR_FOLLOWER).
//!
//! Each consumer fetch that returns records logs one line at debug level under this module's
//! target (`runnel_broker::handlers::fetch_follower_read`): "consumer fetch served" with
//! `role=leader|follower`, topic, partition, offset and bytes; the leader's choice of a
//! preferred replica logs "preferred read replica". Tests count those lines per broker.

use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{BrokerId, FetchRequest};
use runnel_replication::{preferred_read_replica, ReplicaCandidate};

use crate::clock::now_ms;
use crate::context::Broker;
use crate::replica::partition::{Partition, Role};

/// The rack of a consumer fetch that may be redirected or served by a follower: Fetch v11+
/// from a consumer (`rack_id` may be empty: such a fetch may still read at a follower).
pub(super) struct ClientMetadata {
    pub rack: Option<String>,
}

/// Kafka's `FetchParams.clientMetadata`: present for consumer fetches v11+.
pub(super) fn client_metadata(
    request: &FetchRequest,
    version: i16,
    from_follower: bool,
) -> Option<ClientMetadata> {
    (version >= 11 && !from_follower).then(|| ClientMetadata {
        rack: Some(request.rack_id.to_string()).filter(|r| !r.is_empty()),
    })
}

/// Whether this broker, not the leader of `role`, may answer the fetch itself: a consumer
/// fetch v11+ at one of the partition's replicas.
pub(super) fn may_read_at_follower(
    client: Option<&ClientMetadata>,
    role: &Role,
    node_id: i32,
) -> bool {
    client.is_some() && role.replicas.contains(&node_id)
}

/// On the leader: the follower the consumer should read from at `fetch_offset`, if any.
pub(super) fn preferred_replica(
    broker: &Broker,
    partition: &Partition,
    client: Option<&ClientMetadata>,
    fetch_offset: i64,
) -> Option<i32> {
    let rack = client?.rack.as_deref()?;
    let selector = broker.config.replica_selector().ok()?;
    let view = partition.read_replica_view()?;
    let image = broker.image();
    let rack_of = |id: i32| image.brokers.get(&id).and_then(|b| b.rack.as_deref());
    let live = |id: i32| image.brokers.get(&id).is_some_and(|b| !b.fenced);
    let now = now_ms();
    let leader = ReplicaCandidate {
        broker_id: broker.node_id,
        rack: rack_of(broker.node_id),
        log_end_offset: view.log_end_offset,
        log_start_offset: view.log_start_offset,
        last_caught_up_time_ms: now,
        in_isr: true,
        live: true,
    };
    let followers: Vec<ReplicaCandidate<'_>> = view
        .followers
        .iter()
        .map(|(id, state, in_isr)| ReplicaCandidate {
            broker_id: *id,
            rack: rack_of(*id),
            log_end_offset: state.log_end_offset,
            log_start_offset: state.log_start_offset,
            last_caught_up_time_ms: state.last_caught_up_time_ms,
            in_isr: *in_isr,
            live: live(*id),
        })
        .collect();
    let chosen =
        preferred_read_replica(selector, Some(rack), &leader, &followers, fetch_offset, now)?;
    tracing::debug!(
        topic = %partition.topic,
        partition = partition.index,
        client_rack = rack,
        replica = chosen,
        "preferred read replica"
    );
    Some(chosen)
}

/// The leader's answer naming a preferred read replica: no records, the leader's offsets
/// (Kafka's `fetchOffsetSnapshot`).
pub(super) fn redirect(partition: &Partition, index: i32, replica: i32) -> PartitionData {
    let (hw, log_start) = {
        let log = partition.lock_log();
        (log.high_watermark(), log.log_start_offset())
    };
    PartitionData::default()
        .with_partition_index(index)
        .with_high_watermark(hw)
        .with_last_stable_offset(partition.last_stable_offset().min(hw))
        .with_log_start_offset(log_start)
        .with_preferred_read_replica(BrokerId(replica))
        .with_records(Some(Default::default()))
}

/// The debug line tests count: a consumer fetch that returned `bytes` of records.
pub(super) fn served(partition: &Partition, node_id: i32, role: &Role, offset: i64, bytes: usize) {
    if bytes == 0 {
        return;
    }
    let as_role = if role.leader == node_id {
        "leader"
    } else {
        "follower"
    };
    tracing::debug!(
        role = as_role,
        topic = %partition.topic,
        partition = partition.index,
        offset,
        bytes,
        "consumer fetch served"
    );
}
