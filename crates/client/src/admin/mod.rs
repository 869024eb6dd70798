//! Cluster administration (the operations behind kafka-topics.sh, kafka-configs.sh,
//! kafka-consumer-groups.sh, kafka-metadata-quorum.sh, kafka-leader-election.sh and
//! kafka-reassign-partitions.sh), each one Kafka request, routed to
//! the controller or to partition leaders as Kafka requires; plus Runnel's own metadata view.

mod cluster;
mod configs;
mod elect_leaders;
mod group_offsets;
mod groups;
mod log_dirs;
pub(crate) mod offsets;
mod quorum;
mod reassignments;
pub mod runnel_metadata;
mod topics;
mod transactions;

use std::sync::Arc;

pub use cluster::ClusterDescription;
pub use configs::{
    AlterConfigOp, ConfigEntry, ConfigOpType, ConfigResource, ConfigSource, ConfigSynonym,
    ResourceType,
};
pub use elect_leaders::{elect_leaders_request, elect_leaders_results, ElectionType};
pub use groups::{GroupDescription, GroupListing, GroupMemberDescription};
pub use log_dirs::{LogDirInfo, ReplicaLogDirMove, ReplicaLogInfo};
pub(crate) use offsets as offsets_core;
pub use offsets::{ListedOffset, OffsetSpec};
pub use quorum::{describe_quorum_request, QuorumInfo, QuorumReplica, CLUSTER_METADATA_TOPIC};
pub use reassignments::{
    alter_reassignments_request, alter_reassignments_results, list_reassignments_request,
    list_reassignments_results, PartitionReassignment,
};
pub use runnel_metadata::{
    MetadataTree, SecurityCounters, StateChangeEvent, StateChangeEvents, TreeBroker, TreePartition,
    TreeTopic,
};
pub use topics::{NewPartitions, NewTopic};
pub use transactions::{ProducerDescription, TransactionDescription, TransactionListing};

use crate::client::Client;

/// Admin operations on a cluster. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Admin {
    client: Arc<Client>,
}

impl Admin {
    /// An admin handle on `client`.
    pub fn new(client: Arc<Client>) -> Self {
        Self { client }
    }

    /// The underlying cluster handle.
    pub fn client(&self) -> &Arc<Client> {
        &self.client
    }
}

/// Per-item outcome of a batch admin call (one entry per topic / resource, in request order).
pub type ItemResults<K, T = ()> = Vec<(K, crate::error::Result<T>)>;
