//! The request, response and output types the broker shell exchanges with the coordinator.
//! They mirror the Kafka messages field by field but carry no version logic: the shell decodes
//! a request into these and copies the answers into the negotiated response version.

use bytes::Bytes;

/// The shell's handle for a parked (delayed) JoinGroup or SyncGroup response. The coordinator
/// only stores and returns it; the shell picks unique values.
pub type RequestId = u64;

/// JoinGroup (API 11) as the coordinator needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinRequest {
    pub group_id: String,
    /// Empty on a member's first join.
    pub member_id: String,
    /// `group.instance.id` (v5+): makes the member static (KIP-345).
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    /// Ignored for v0 (the field did not exist; Kafka uses the session timeout).
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    /// `(assignor name, subscription bytes)` in the member's preference order.
    pub protocols: Vec<(String, Bytes)>,
    /// Decides whether a first dynamic join gets 79 MEMBER_ID_REQUIRED (v4+).
    pub api_version: i16,
}

/// One member as listed to the leader in a JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// The member's subscription bytes for the chosen protocol.
    pub metadata: Bytes,
}

/// JoinGroup response. On errors `generation_id` is -1, `leader` empty and `members` empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinResponse {
    pub error_code: i16,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// Non-empty only for the leader.
    pub members: Vec<JoinMember>,
    /// KIP-814 (v9); always false here.
    pub skip_assignment: bool,
}

impl JoinResponse {
    /// Kafka's `JoinGroupResult(memberId, error)`: an error answer.
    pub fn error(member_id: impl Into<String>, error_code: i16) -> Self {
        JoinResponse {
            error_code,
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            member_id: member_id.into(),
            members: Vec::new(),
            skip_assignment: false,
        }
    }
}

/// SyncGroup (API 14).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// v5+: checked against the group's when present.
    pub protocol_type: Option<String>,
    /// v5+: checked against the group's when present.
    pub protocol_name: Option<String>,
    /// The leader's `(member id, assignment bytes)`; empty for followers.
    pub assignments: Vec<(String, Bytes)>,
}

/// SyncGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncResponse {
    pub error_code: i16,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncResponse {
    /// An error answer (no protocol, empty assignment).
    pub fn error(error_code: i16) -> Self {
        SyncResponse {
            error_code,
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
        }
    }
}

/// Heartbeat (API 12).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

/// OffsetCommit (API 8). `generation_id` < 0 is a "simple" (non-group-managed) commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub offsets: Vec<CommitOffset>,
}

/// TxnOffsetCommit (API 28): offsets committed as part of producer `producer_id`'s
/// transaction. v0-v2 carry no member: `generation_id` -1, `member_id` "".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnOffsetCommitRequest {
    pub group_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub offsets: Vec<CommitOffset>,
}

/// One entry of a `__consumer_offsets` partition as the loader replays it: a keyed record
/// (`producer_id` set when it came in a transactional batch) or a transaction marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadRecord {
    Record {
        producer_id: Option<i64>,
        record: OffsetsRecord,
    },
    Marker {
        producer_id: i64,
        commit: bool,
    },
}

impl From<OffsetsRecord> for LoadRecord {
    fn from(record: OffsetsRecord) -> Self {
        LoadRecord::Record {
            producer_id: None,
            record,
        }
    }
}

/// One partition of an OffsetCommit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitOffset {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// -1 when the client sent none (before v6).
    pub leader_epoch: i32,
    /// None is stored as "" (Kafka's `OffsetAndMetadata.NoMetadata`).
    pub metadata: Option<String>,
}

/// A committed offset as stored and as returned by OffsetFetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    /// -1 = unknown.
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
}

/// A record for `__consumer_offsets`: key and value bytes exactly as Kafka writes them
/// (spec H.5); `value: None` is a tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetsRecord {
    pub key: Bytes,
    pub value: Option<Bytes>,
}

/// What a coordinator call asks the shell to do besides its direct return value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Complete a parked (or immediately answered) JoinGroup.
    Join(RequestId, JoinResponse),
    /// Complete a parked SyncGroup.
    Sync(RequestId, SyncResponse),
    /// Records the shell must append to the `__consumer_offsets` partition of the group(s)
    /// they name (key order preserved). A call returns at most one, always as the first
    /// output; the shell appends it before sending any response of the same call (persist,
    /// then answer).
    Persist(Vec<OffsetsRecord>),
}

/// DescribeGroups (API 15) answer for one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    pub error_code: i16,
    pub group_id: String,
    /// Kafka's state names: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead.
    pub state: String,
    pub protocol_type: String,
    /// The chosen protocol; "" unless Stable (like Kafka).
    pub protocol: String,
    pub members: Vec<MemberDescription>,
}

/// One member in DescribeGroups. `metadata` and `assignment` are empty unless Stable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}
