//! Request handlers, one module per API family. Each takes the decoded request and returns the
//! response body; errors inside a response are Kafka error codes, never a closed connection.

pub mod acls;
pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod admin_authz;
pub mod alter_replica_log_dirs;
pub mod api_versions;
pub mod client_quotas;
pub mod cluster_authz;
pub mod configs;
pub mod consumer_group;
pub mod delete_records;
pub mod describe_cluster;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_quorum;
pub mod describe_topic_partitions;
pub mod describe_transactions;
pub mod elect_leaders;
pub mod end_txn;
pub mod features;
pub mod fetch;
mod fetch_authz;
mod fetch_follower_read;
pub mod groups;
pub mod groups_authz;
pub mod init_producer_id;
pub mod list_config_resources;
pub mod list_offsets;
pub mod list_transactions;
pub mod metadata;
pub mod offset_for_leader_epoch;
pub mod offset_topic_ids;
pub mod partition_view;
pub mod produce;
pub mod reassignments;
pub mod runnel_describe;
pub mod scram_credentials;
pub mod telemetry;
#[cfg(test)]
mod test_images;
pub mod topics;
pub mod txn_authz;
pub mod txn_offset_commit;
pub mod write_txn_markers;

use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

/// Owned string from a protocol string.
pub fn topic_str(name: &TopicName) -> &str {
    name.0.as_str()
}

pub fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

pub fn topic_name(s: &str) -> TopicName {
    TopicName(str_bytes(s))
}

/// The partition if this broker leads it, else the Kafka error for the client: not hosted
/// here but known -> NOT_LEADER_OR_FOLLOWER (refresh metadata), unknown -> UNKNOWN_TOPIC_OR_PARTITION,
/// in a failed log dir -> KAFKA_STORAGE_ERROR.
pub fn led_partition(
    broker: &crate::context::Broker,
    topic: &str,
    index: i32,
) -> Result<std::sync::Arc<crate::replica::partition::Partition>, i16> {
    use crate::errors::code;
    match broker.replicas.get(topic, index) {
        // A replica in a failed log dir is offline, led or not (Kafka's
        // `getPartitionOrException` answers an offline partition so first).
        Some(p) if p.lock_log().is_offline() => Err(code::KAFKA_STORAGE_ERROR),
        Some(p) if p.role().leader == broker.node_id => Ok(p),
        Some(_) => Err(code::NOT_LEADER_OR_FOLLOWER),
        None if broker.image().partition(topic, index).is_some() => {
            Err(code::NOT_LEADER_OR_FOLLOWER)
        }
        None => Err(code::UNKNOWN_TOPIC_OR_PARTITION),
    }
}

/// Checks a client's leader epoch against ours (KIP-320, the one rule
/// `runnel_replication::check_leader_epoch`) as an error code, `NONE` when it passes.
pub fn check_leader_epoch(requested: i32, current: i32) -> i16 {
    runnel_replication::check_leader_epoch(requested, current)
        .err()
        .unwrap_or(crate::errors::code::NONE)
}

/// The current leader of a partition as KIP-951 tells a client that got NOT_LEADER_OR_FOLLOWER
/// (Produce v10+, Fetch v16+): leader id and epoch, and the leader's endpoint on the client's
/// listener. `None` when the partition is unknown, has no leader, or its leader has no
/// endpoint on that listener.
pub struct LeaderHint {
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

pub fn leader_hint(
    broker: &crate::context::Broker,
    image: &runnel_metadata::image::MetadataImage,
    topic: &str,
    index: i32,
    listener: &str,
) -> Option<LeaderHint> {
    let p = image.partition(topic, index)?;
    let b = image.live_brokers().find(|b| b.id == p.leader)?;
    let (host, port) = broker.endpoint_of(b, listener)?;
    Some(LeaderHint {
        leader_id: p.leader,
        leader_epoch: p.leader_epoch,
        host,
        port: i32::from(port),
        rack: b.rack.clone(),
    })
}
