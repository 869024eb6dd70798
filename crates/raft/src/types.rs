//! openraft's type configuration for the metadata log.
//!
//! One Raft entry carries one *batch* of metadata records: the controller's decision for one
//! request (a topic and all its partitions, say) is committed atomically, so no node ever sees
//! half of it. Record offsets are not Raft indexes: Raft also logs blank (leader-change) and
//! membership entries that carry no records, so the state machine numbers records itself.

use std::io::Cursor;

use runnel_metadata::MetadataRecord;
use serde::{Deserialize, Serialize};

/// Raft node id: Kafka node ids are i32 >= 0, openraft wants an unsigned integer.
pub type NodeId = u64;

/// A quorum member as openraft stores it in the membership: its controller listener
/// `host:port`.
pub type Node = openraft::BasicNode;

openraft::declare_raft_types!(
    /// The Raft types of Runnel's metadata log.
    pub TypeConfig:
        D = Vec<MetadataRecord>,
        R = ApplyResult,
        NodeId = NodeId,
        Node = Node,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// A Raft entry of the metadata log.
pub type Entry = openraft::Entry<TypeConfig>;
/// A Raft log id (term, leader, index).
pub type LogId = openraft::LogId<NodeId>;
/// A persisted vote.
pub type Vote = openraft::Vote<NodeId>;
/// The Raft handle of one node.
pub type Raft = openraft::Raft<TypeConfig>;
/// A membership with its log id.
pub type StoredMembership = openraft::StoredMembership<NodeId, Node>;
/// Snapshot metadata.
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, Node>;
/// openraft's storage error for this config.
pub type StorageError = openraft::StorageError<NodeId>;

/// What applying one entry did, returned to the proposer by `client_write`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ApplyResult {
    /// The batch was applied; its records got `first_offset ..first_offset + count`.
    Applied { first_offset: i64, count: usize },
    /// The batch was inconsistent with the image (the controller should have caught it): it is
    /// in the Raft log but got no offsets, and no reader ever sees it. Every node rejects it
    /// identically because applying is deterministic.
    Rejected { reason: String },
    /// A blank or membership entry: no records.
    NoRecords,
}
