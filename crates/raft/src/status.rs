//! The quorum's state as `kafka-metadata-quorum.sh --describe --status` shows it.

use serde::{Deserialize, Serialize};

/// One member of the quorum and how far it has replicated (known on the leader only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaStatus {
    pub node_id: i32,
    /// The controller listener `host:port` Raft replicates to.
    pub address: String,
    /// The Raft log end offset (last replicated index + 1), as the leader last saw it.
    pub log_end_offset: Option<u64>,
    /// Entries behind the leader's log end.
    pub lag: Option<u64>,
}

/// The view of the quorum from one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumStatus {
    /// The node answering.
    pub node_id: i32,
    /// The leader (the active controller), if known.
    pub leader_id: Option<i32>,
    /// The Raft term: the controller epoch.
    pub leader_epoch: u64,
    /// Raft log entries applied on this node (= committed as far as it knows), as an end
    /// offset: Kafka's high watermark of `__cluster_metadata`.
    pub high_watermark: u64,
    /// The offset of the last committed metadata record on this node (-1: none).
    pub last_record_offset: i64,
    /// This node's Raft log end offset.
    pub log_end_offset: u64,
    /// True when this node is the leader and has applied an entry of its own term: then
    /// `last_record_offset` covers every record committed before the term began (Raft's
    /// leader completeness), which makes it the committed offset a restarted node must reach
    /// before it calls itself caught up (what a KRaft broker learns as the high watermark
    /// from the leader). A leader that has not yet applied its term's first entry may be
    /// behind what earlier leaders committed.
    #[serde(default)]
    pub leader_applied_own_term: bool,
    pub voters: Vec<ReplicaStatus>,
    /// Learners: brokers following the log without voting.
    pub observers: Vec<ReplicaStatus>,
}
