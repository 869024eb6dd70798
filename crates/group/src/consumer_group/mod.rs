//! The KIP-848 ("next generation", `group.protocol=consumer`) consumer group protocol as pure
//! code: ConsumerGroupHeartbeat (API 68, v0-1), ConsumerGroupDescribe (API 69), ListGroups and
//! the OffsetCommit v9 member-epoch check, modelled on Kafka 4's `GroupMetadataManager`,
//! `ConsumerGroup`, `TargetAssignmentBuilder` and `CurrentAssignmentBuilder`.
//!
//! Unlike the classic protocol there is no group-wide barrier: the coordinator computes the
//! target assignment itself (server-side `uniform` / `range` assignors) whenever the group
//! epoch moves, and each member converges to it on its own heartbeats, revoking before it is
//! given anything, so a partition never has two owners. Every call answers immediately.
//!
//! As in the classic coordinator, nothing here does I/O or reads a clock: `now_ms` and the
//! topic metadata ([`TopicsView`]) come in, member ids come from an injectable generator, and
//! client input maps to Kafka error codes, never a panic. Invariants are checked with
//! `debug_assert!` after every mutating call.

mod api;
mod assignor;
mod assignor_range;
mod assignor_uniform;
mod classic;
pub mod codes;
mod config;
mod describe;
mod group;
mod heartbeat;
mod leave;
mod member;
mod migration;
mod reconcile;
pub mod records;
mod regex;
mod subscription;
mod timers;
mod validate;

use std::collections::BTreeMap;

pub use api::{
    Assignment, ConsumerGroupDescription, ConsumerHeartbeat, ConsumerHeartbeatResponse,
    ConsumerMemberDescription, DescribedTopicPartitions, TopicsView,
};
pub use config::{ConsumerGroupConfig, MigrationPolicy, KNOWN_ASSIGNORS};
pub use group::ConsumerGroupState;
pub use heartbeat::ClientInfo;
pub use member::{
    ClassicMemberMetadata, MemberState, LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH,
};
/// The topic-pattern engine, shared with the tools that take Kafka's `--topic` regexes.
pub use regex::Regex as TopicRegex;
pub use validate::CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION;

use crate::api::OffsetsRecord;
use crate::coordinator::MemberIdGenerator;
use codes::*;
use group::ConsumerGroup;
pub use records::{is_consumer_group_key, DurableGroup};

/// The member-epoch rule of offset commits and fetches (Kafka's `validateMemberEpoch`): the
/// member exists (25 UNKNOWN_MEMBER_ID) and sends exactly its current epoch (113
/// STALE_MEMBER_EPOCH; 22 ILLEGAL_GENERATION for a classic member, whose epoch is its
/// generation).
fn check_member_epoch(g: &ConsumerGroup, member_id: &str, member_epoch: i32) -> Result<(), i16> {
    let Some(m) = g.members.get(member_id) else {
        return Err(UNKNOWN_MEMBER_ID);
    };
    if m.member_epoch != member_epoch {
        return Err(if m.classic.is_some() {
            crate::errors::ILLEGAL_GENERATION
        } else {
            STALE_MEMBER_EPOCH
        });
    }
    Ok(())
}

/// One group's `consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms` (Kafka 4.0
/// group configs, resource type 32): the group's overrides over the broker's
/// `group.consumer.*`, resolved by the shell from the metadata image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupTimeouts {
    pub session_timeout_ms: i32,
    pub heartbeat_interval_ms: i32,
}

/// All KIP-848 groups of one coordinator (one `__consumer_offsets` partition or one node).
pub struct ConsumerGroups {
    config: ConsumerGroupConfig,
    /// Groups whose timeouts differ from `config`'s (see [`GroupTimeouts`]).
    timeouts: BTreeMap<String, GroupTimeouts>,
    /// `config.assignors` filtered to known names; never empty, first is the default.
    assignors: Vec<String>,
    groups: BTreeMap<String, ConsumerGroup>,
    new_member_id: MemberIdGenerator,
    /// What the log holds for each group, as of the last [`take_records`](Self::take_records).
    durable: BTreeMap<String, DurableGroup>,
    /// Groups changed since the last `take_records`, with their state before the first change
    /// (`None`: the group did not exist), for [`revert_records`](Self::revert_records).
    touched: BTreeMap<String, Option<ConsumerGroup>>,
    /// What the last `take_records` covered: per group, its state and durable projection
    /// before, so a failed append can put both back.
    undo: BTreeMap<String, (Option<ConsumerGroup>, Option<DurableGroup>)>,
    /// Groups a fence turned back into classic groups, for the classic coordinator
    /// ([`crate::migration::Shard`] hands them over in the same step).
    downgrades: Vec<crate::migration::ConvertedGroup>,
}

impl std::fmt::Debug for ConsumerGroups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsumerGroups")
            .field("config", &self.config)
            .field("groups", &self.groups.len())
            .finish()
    }
}

impl ConsumerGroups {
    /// Member ids (v0 clients) are random v4 UUIDs, like Kafka's.
    pub fn new(config: ConsumerGroupConfig) -> Self {
        Self::with_member_id_generator(config, Box::new(|| uuid::Uuid::new_v4().to_string()))
    }

    /// With a custom member-id generator (deterministic tests).
    pub fn with_member_id_generator(
        config: ConsumerGroupConfig,
        generator: MemberIdGenerator,
    ) -> Self {
        ConsumerGroups {
            assignors: config.enabled_assignors(),
            config,
            timeouts: BTreeMap::new(),
            groups: BTreeMap::new(),
            new_member_id: generator,
            durable: BTreeMap::new(),
            touched: BTreeMap::new(),
            undo: BTreeMap::new(),
            downgrades: Vec::new(),
        }
    }

    pub fn config(&self) -> &ConsumerGroupConfig {
        &self.config
    }

    /// Replaces the per-group timeouts (groups absent use the broker's). A member's session
    /// deadline and the interval it is told take the new values from its next heartbeat, as
    /// Kafka applies a changed group config.
    pub fn set_group_timeouts(&mut self, timeouts: BTreeMap<String, GroupTimeouts>) {
        self.timeouts = timeouts;
    }

    /// The timeouts `group_id` runs with.
    pub fn timeouts(&self, group_id: &str) -> GroupTimeouts {
        self.timeouts
            .get(group_id)
            .copied()
            .unwrap_or(GroupTimeouts {
                session_timeout_ms: self.config.session_timeout_ms,
                heartbeat_interval_ms: self.config.heartbeat_interval_ms,
            })
    }

    /// Whether `group_id` is a KIP-848 group here (the shell routes classic requests
    /// elsewhere).
    pub fn contains(&self, group_id: &str) -> bool {
        self.groups.contains_key(group_id)
    }

    /// Whether `group_id` is a KIP-848 group with members (a classic JoinGroup to it is
    /// served by the group, see [`crate::migration::Shard`]).
    pub fn has_members(&self, group_id: &str) -> bool {
        self.groups
            .get(group_id)
            .is_some_and(|g| !g.members.is_empty())
    }

    /// The OffsetCommit v9+ / OffsetFetch check: the member must exist and send exactly its
    /// current epoch (113 STALE_MEMBER_EPOCH otherwise, 25 UNKNOWN_MEMBER_ID for an unknown
    /// member or group). A negative epoch is accepted while the group has no members: that is
    /// an admin or a manually assigned consumer committing, as Kafka allows.
    pub fn is_member_epoch_valid(
        &self,
        group_id: &str,
        member_id: &str,
        member_epoch: i32,
    ) -> Result<(), i16> {
        let Some(g) = self.groups.get(group_id) else {
            return Err(UNKNOWN_MEMBER_ID);
        };
        if member_epoch < 0 && g.members.is_empty() {
            return Ok(());
        }
        check_member_epoch(g, member_id, member_epoch)
    }

    /// OffsetFetch v9+ (Kafka's `ConsumerGroup.validateOffsetFetch`): a request without a
    /// member id and with a negative epoch is an admin's or an old client's and is accepted;
    /// otherwise the member must exist (25 UNKNOWN_MEMBER_ID) at exactly its epoch (113
    /// STALE_MEMBER_EPOCH). Groups that are not KIP-848 groups here are not checked.
    pub fn validate_offset_fetch(
        &self,
        group_id: &str,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), i16> {
        let Some(g) = self.groups.get(group_id) else {
            return Ok(());
        };
        match member_id {
            None if member_epoch < 0 => Ok(()),
            id => check_member_epoch(g, id.unwrap_or_default(), member_epoch),
        }
    }

    /// DeleteGroups: only an empty group can go (68 NON_EMPTY_GROUP, 69 GROUP_ID_NOT_FOUND).
    pub fn delete(&mut self, group_id: &str) -> i16 {
        match self.groups.get(group_id) {
            None => GROUP_ID_NOT_FOUND,
            Some(g) if !g.members.is_empty() => NON_EMPTY_GROUP,
            Some(_) => {
                self.touch(group_id);
                self.groups.remove(group_id);
                NONE
            }
        }
    }

    /// Notes that `group_id` may change: its state before the first change since the last
    /// [`take_records`](Self::take_records) is kept for [`revert_records`](Self::revert_records).
    pub(crate) fn touch(&mut self, group_id: &str) {
        if !self.touched.contains_key(group_id) {
            let before = self.groups.get(group_id).cloned();
            self.touched.insert(group_id.to_string(), before);
        }
    }

    /// The records the decisions since the last call produced (Kafka's formats, see
    /// [`records`]): for every group they changed, the difference between what the log holds
    /// and the group's durable state now. The shell appends them to the group's
    /// `__consumer_offsets` partition before answering; if the append fails it calls
    /// [`revert_records`](Self::revert_records) so memory is never ahead of the log.
    pub fn take_records(&mut self) -> Vec<OffsetsRecord> {
        self.undo.clear();
        let mut out = Vec::new();
        for (id, before) in std::mem::take(&mut self.touched) {
            let now = self.groups.get(&id).map(DurableGroup::of);
            let old = self.durable.get(&id);
            if now.as_ref() == old {
                continue;
            }
            out.extend(records::records_between(&id, old, now.as_ref()));
            let old = match now {
                Some(d) => self.durable.insert(id.clone(), d),
                None => self.durable.remove(&id),
            };
            self.undo.insert(id, (before, old));
        }
        out
    }

    /// Undoes the decisions whose records the last [`take_records`](Self::take_records)
    /// returned (their append failed): those groups are back as they were before, the other
    /// groups are untouched.
    pub fn revert_records(&mut self) {
        self.downgrades.clear();
        for (id, (group, durable)) in std::mem::take(&mut self.undo) {
            match group {
                Some(g) => self.groups.insert(id.clone(), g),
                None => self.groups.remove(&id),
            };
            match durable {
                Some(d) => self.durable.insert(id, d),
                None => self.durable.remove(&id),
            };
        }
        self.debug_check();
    }

    /// Rebuilds the groups of a `__consumer_offsets` partition from its records (in log
    /// order; classic-group and offset records are ignored) when this coordinator becomes its
    /// leader. Members get a fresh session from `now_ms` (and a fresh revocation deadline if
    /// they were revoking), and the groups' regexes are resolved against `topics` at once, so
    /// the first heartbeats after a failover see the same subscriptions as before it. Groups
    /// already held under the same ids are replaced.
    pub fn load<'a>(
        &mut self,
        now_ms: i64,
        records: impl IntoIterator<Item = &'a OffsetsRecord>,
        topics: &TopicsView,
    ) {
        for (id, durable) in records::replay(records) {
            let session = self.timeouts(&id).session_timeout_ms;
            let mut g = durable.clone().into_group(&id, now_ms, session);
            g.regexes.track(g.members.values());
            g.regexes.refresh(now_ms, topics);
            self.durable.insert(id.clone(), DurableGroup::of(&g));
            self.touched.remove(&id);
            self.groups.insert(id, g);
        }
        self.debug_check();
    }

    /// Every group's durable state (what a reload from the log rebuilds).
    pub fn durable_view(&self) -> BTreeMap<String, DurableGroup> {
        self.groups
            .iter()
            .map(|(id, g)| (id.clone(), DurableGroup::of(g)))
            .collect()
    }

    /// Checks every group's invariants (no partition with two owners, targets disjoint,
    /// instance-id index consistent). `Err` describes the first violation.
    pub fn check_invariants(&self) -> Result<(), String> {
        for (id, g) in &self.groups {
            if id != &g.id {
                return Err(format!("group stored under {id:?} is {:?}", g.id));
            }
            g.check_invariants()?;
        }
        Ok(())
    }

    fn debug_check(&self) {
        debug_assert_eq!(self.check_invariants(), Ok(()));
    }
}
