//! The request, response and description types the broker shell exchanges with
//! [`ConsumerGroups`](super::ConsumerGroups). They mirror ConsumerGroupHeartbeat (API 68) and
//! ConsumerGroupDescribe (API 69) field by field, with Kafka's nullable fields as `Option`, so
//! the shell only copies values; version differences are the shell's business except where
//! the semantics differ (`api_version` decides who generates member ids).

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

/// A member's partitions by topic id; ordered so responses and comparisons are deterministic.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// ConsumerGroupHeartbeat request (API 68, v0-1).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerHeartbeat {
    pub group_id: String,
    /// v0: empty on the first join (the server generates one). v1: a client-generated UUID.
    pub member_id: String,
    /// 0 = join, -1 = leave, -2 = static leave (keep the assignment for a restart), > 0 =
    /// the epoch the member last received.
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// -1 when unchanged since the last heartbeat; required on join.
    pub rebalance_timeout_ms: i32,
    /// None when unchanged since the last heartbeat.
    pub subscribed_topic_names: Option<Vec<String>>,
    /// v1; None when unchanged. Empty string clears it.
    pub subscribed_topic_regex: Option<String>,
    /// None when unchanged (or never chosen: the group's default applies).
    pub server_assignor: Option<String>,
    /// The partitions the member owns; None when unchanged since the last heartbeat.
    pub topic_partitions: Option<Vec<(Uuid, Vec<i32>)>>,
    pub api_version: i16,
}

/// ConsumerGroupHeartbeat response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerHeartbeatResponse {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub member_id: Option<String>,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// The member's full current assignment, present only on a full request (join) or when it
    /// changed: the client treats absence as "keep what you have".
    pub assignment: Option<Vec<(Uuid, Vec<i32>)>>,
}

impl ConsumerHeartbeatResponse {
    pub(crate) fn error(code: i16, message: impl Into<String>, heartbeat_interval_ms: i32) -> Self {
        ConsumerHeartbeatResponse {
            error_code: code,
            error_message: Some(message.into()),
            member_id: None,
            member_epoch: 0,
            heartbeat_interval_ms,
            assignment: None,
        }
    }
}

/// Topic metadata the assignors need: name -> (topic id, partition count), from the broker's
/// metadata image. Passed into every call so the pure code never reads shared state.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicsView {
    /// Changes whenever `topics` does: a group's resolved regexes are matched again only
    /// against a view with another version (the shell bumps it per changed image).
    pub version: u64,
    pub topics: BTreeMap<String, (Uuid, i32)>,
}

impl TopicsView {
    /// The name of a topic id (linear: only used by describe).
    pub fn name_of(&self, id: &Uuid) -> Option<&str> {
        self.topics
            .iter()
            .find(|(_, (tid, _))| tid == id)
            .map(|(n, _)| n.as_str())
    }
}

/// One topic of a described assignment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedTopicPartitions {
    pub topic_id: Uuid,
    pub topic_name: String,
    pub partitions: Vec<i32>,
}

/// One member in ConsumerGroupDescribe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerMemberDescription {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub member_epoch: i32,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    /// What the member owns now (partitions pending revocation excluded, like Kafka).
    pub assignment: Vec<DescribedTopicPartitions>,
    /// What the assignor wants it to own.
    pub target_assignment: Vec<DescribedTopicPartitions>,
}

/// One group in ConsumerGroupDescribe; unknown groups come back with 69 GROUP_ID_NOT_FOUND.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupDescription {
    pub group_id: String,
    pub error_code: i16,
    pub error_message: Option<String>,
    /// Kafka's names: "Empty", "Assigning", "Reconciling", "Stable", "Dead".
    pub state: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor_name: String,
    pub members: Vec<ConsumerMemberDescription>,
}
