//! A KIP-848 member (Kafka's `ConsumerGroupMember`): what it subscribes to, what it owns, and
//! where it is in its own reconciliation. Each member converges to the target assignment on
//! its own heartbeats, so this per-member state replaces the classic group-wide barrier.

use std::collections::BTreeSet;

use super::api::Assignment;
pub use super::records::ClassicMemberMetadata;

/// Epoch a static member holds after leaving with -2: it keeps its assignment for a restart.
pub const LEAVE_GROUP_STATIC_MEMBER_EPOCH: i32 = -2;
/// Epoch sent to leave for good.
pub const LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;

/// Where a member is in reconciling towards the target (Kafka's `MemberState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// Owns exactly what it may own at its epoch; moves on when a newer target appears.
    Stable,
    /// Was asked to give partitions back and has not confirmed yet; its epoch stays old
    /// until it does, so nobody else gets those partitions meanwhile.
    UnrevokedPartitions,
    /// At the target epoch, but some target partitions are still owned by others; they are
    /// added on a later heartbeat once released.
    UnreleasedPartitions,
}

impl MemberState {
    pub fn name(self) -> &'static str {
        match self {
            MemberState::Stable => "stable",
            MemberState::UnrevokedPartitions => "unrevoked_partitions",
            MemberState::UnreleasedPartitions => "unreleased_partitions",
        }
    }
}

/// One member of a consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Member {
    pub id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: BTreeSet<String>,
    /// Never `Some("")`: an empty regex in a request clears it.
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    pub state: MemberState,
    pub member_epoch: i32,
    /// Kafka tolerates a heartbeat at this epoch (the response carrying the bump was lost).
    pub previous_member_epoch: i32,
    /// Partitions the member owns and may keep.
    pub assigned: Assignment,
    /// Partitions the member still owns but must give back; they count as owned.
    pub pending_revocation: Assignment,
    /// Fenced by `tick` once `now >= session_deadline_ms`.
    pub session_deadline_ms: i64,
    /// Set while in `UnrevokedPartitions`: fenced if the revocation is not acknowledged by
    /// then, so a stuck member cannot block the others forever.
    pub revocation_deadline_ms: Option<i64>,
    /// Set for a member that speaks the classic protocol (JoinGroup / SyncGroup / Heartbeat)
    /// inside this group (Kafka's `classicMemberMetadata`); durable.
    pub classic: Option<ClassicMemberMetadata>,
    /// A classic member told to rejoin (REBALANCE_IN_PROGRESS) is fenced if it has not
    /// joined by then (Kafka's join timeout, the member's rebalance timeout).
    pub join_deadline_ms: Option<i64>,
    /// A classic member that joined is fenced if it has not synced by then (Kafka's sync
    /// timeout, the member's rebalance timeout).
    pub sync_deadline_ms: Option<i64>,
}

impl Member {
    /// A member that just joined: epoch 0, owns nothing (Kafka's `Builder(memberId)`).
    pub fn new(id: String) -> Self {
        Member {
            id,
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            rebalance_timeout_ms: -1,
            subscribed_topic_names: BTreeSet::new(),
            subscribed_topic_regex: None,
            server_assignor: None,
            state: MemberState::Stable,
            member_epoch: 0,
            previous_member_epoch: -1,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
            session_deadline_ms: 0,
            revocation_deadline_ms: None,
            classic: None,
            join_deadline_ms: None,
            sync_deadline_ms: None,
        }
    }

    /// The session timeout the member runs with: its own for a classic member (it chose it in
    /// JoinGroup), the group's otherwise.
    pub fn session_timeout_ms(&self, group_session_timeout_ms: i32) -> i32 {
        self.classic
            .as_ref()
            .map_or(group_session_timeout_ms, |c| c.session_timeout_ms)
    }

    /// Kafka's `updateMemberEpoch`: the previous epoch always becomes the current one, even if
    /// the epoch does not change.
    pub fn update_epoch(&mut self, epoch: i32) {
        self.previous_member_epoch = self.member_epoch;
        self.member_epoch = epoch;
    }

    /// Fully caught up with the target of `epoch`.
    pub fn is_reconciled_to(&self, epoch: i32) -> bool {
        self.state == MemberState::Stable && self.member_epoch == epoch
    }

    /// Whether subscriptions differ (what bumps the group epoch).
    pub fn subscription_differs(&self, other: &Member) -> bool {
        self.subscribed_topic_names != other.subscribed_topic_names
            || self.subscribed_topic_regex != other.subscribed_topic_regex
    }

    /// Every partition the member owns, assigned or pending revocation.
    pub fn owned(&self) -> impl Iterator<Item = (uuid::Uuid, i32)> + '_ {
        self.assigned
            .iter()
            .chain(self.pending_revocation.iter())
            .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
    }
}

/// Flattens an assignment for a response: topics by id, partitions ascending.
pub(crate) fn to_wire(a: &Assignment) -> Vec<(uuid::Uuid, Vec<i32>)> {
    a.iter()
        .filter(|(_, ps)| !ps.is_empty())
        .map(|(t, ps)| (*t, ps.iter().copied().collect()))
        .collect()
}
