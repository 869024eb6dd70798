//! One classic group's data and its bookkeeping (Kafka's `GroupMetadata`): members, static
//! instance ids, pending member ids, the chosen protocol, the leader, the rebalance timer and
//! the committed offsets. Decisions that span the protocol (when to rebalance, how a join
//! phase completes) live in `coordinator::rebalance`; this file only keeps the data consistent.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use crate::api::{CommittedOffset, GroupDescription, JoinMember, MemberDescription, OffsetsRecord};
use crate::codec::{self, GroupMetadataValue, MemberMetadataValue};
use crate::member::Member;
use crate::state::GroupState;
use crate::subscription::{union_of_topics, CONSUMER_PROTOCOL_TYPE};

/// The pending completion of a join phase (Kafka's delayed join operations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JoinTimer {
    /// `InitialDelayedJoin`: the first rebalance of an Empty group waits `delay_ms` even when
    /// everyone has joined, and is extended (up to `remaining_ms` more in total) while new
    /// members keep arriving.
    Initial {
        deadline_ms: i64,
        delay_ms: i64,
        remaining_ms: i64,
    },
    /// `DelayedJoin`: completes when every member has joined, or at the rebalance timeout.
    Rebalance { deadline_ms: i64 },
}

impl JoinTimer {
    pub fn deadline_ms(self) -> i64 {
        match self {
            JoinTimer::Initial { deadline_ms, .. } | JoinTimer::Rebalance { deadline_ms } => {
                deadline_ms
            }
        }
    }
}

/// A committed offset plus the explicit expiry of old (value v1) commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredOffset {
    pub committed: CommittedOffset,
    pub expire_timestamp: Option<i64>,
    /// Where the commit's record stands in the partition's log order (the commit token at
    /// run time, the record's index on load): a transactional offset is materialized by its
    /// COMMIT marker only over an older one (Kafka compares the records' log offsets).
    pub position: u64,
}

/// A transactional offset (TxnOffsetCommit) waiting for its transaction's marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PendingTxnOffset {
    pub stored: StoredOffset,
    /// The commit token of its write (a failed write drops the entries it added).
    pub token: u64,
}

#[derive(Debug, Clone)]
pub(crate) struct Group {
    pub id: String,
    pub state: GroupState,
    /// When the group entered its current state (persisted as `current_state_timestamp`;
    /// KIP-211 measures offset retention of an Empty group from it).
    pub state_timestamp: Option<i64>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub generation: i32,
    pub leader: Option<String>,
    pub members: BTreeMap<String, Member>,
    /// group.instance.id -> member id.
    pub static_members: BTreeMap<String, String>,
    /// Member ids handed out with 79 MEMBER_ID_REQUIRED, not yet joined, with the deadline
    /// after which they are forgotten (their session timeout).
    pub pending: BTreeMap<String, i64>,
    /// A member joined during the initial delay; extends it once more.
    pub new_member_added: bool,
    /// Set exactly while PreparingRebalance.
    pub join_timer: Option<JoinTimer>,
    /// Topics the members subscribe to (consumer protocol); None = unknown (all topics).
    pub subscribed_topics: Option<BTreeSet<String>>,
    /// The committed offsets OffsetFetch answers: only those whose records are in the log
    /// (replicated), never one still being written.
    pub offsets: BTreeMap<(String, i32), StoredOffset>,
    /// Offsets being written, by partition: the token of the latest commit of each (Kafka's
    /// `pendingOffsetCommits`). Invisible to OffsetFetch until the write completes.
    pub pending_offsets: BTreeMap<(String, i32), u64>,
    /// Transactional offsets per producer id, invisible to OffsetFetch until the
    /// transaction's COMMIT marker (Kafka's `pendingTransactionalOffsetCommits`); an ABORT
    /// drops them.
    pub pending_txn_offsets: BTreeMap<i64, BTreeMap<(String, i32), PendingTxnOffset>>,
    next_join_seq: u64,
}

impl Group {
    pub fn new(id: String, now_ms: i64) -> Self {
        Group {
            id,
            state: GroupState::Empty,
            state_timestamp: Some(now_ms),
            protocol_type: None,
            protocol_name: None,
            generation: 0,
            leader: None,
            members: BTreeMap::new(),
            static_members: BTreeMap::new(),
            pending: BTreeMap::new(),
            new_member_added: false,
            join_timer: None,
            subscribed_topics: None,
            offsets: BTreeMap::new(),
            pending_offsets: BTreeMap::new(),
            pending_txn_offsets: BTreeMap::new(),
            next_join_seq: 0,
        }
    }

    pub fn is(&self, state: GroupState) -> bool {
        self.state == state
    }

    pub fn transition_to(&mut self, to: GroupState, now_ms: i64) {
        debug_assert!(
            self.state.can_transition_to(to),
            "illegal group transition {:?} -> {:?} for {}",
            self.state,
            to,
            self.id
        );
        self.state = to;
        self.state_timestamp = Some(now_ms);
        if to != GroupState::PreparingRebalance {
            self.join_timer = None;
        }
    }

    pub fn has(&self, member_id: &str) -> bool {
        self.members.contains_key(member_id)
    }

    pub fn is_leader(&self, member_id: &str) -> bool {
        self.leader.as_deref() == Some(member_id)
    }

    pub fn static_member_id(&self, instance_id: Option<&str>) -> Option<&str> {
        instance_id
            .and_then(|i| self.static_members.get(i))
            .map(String::as_str)
    }

    pub fn has_static_member(&self, instance_id: Option<&str>) -> bool {
        self.static_member_id(instance_id).is_some()
    }

    /// Kafka's `isStaticMemberFenced`: the instance id is owned by a different member id.
    pub fn is_static_member_fenced(&self, member_id: &str, instance_id: Option<&str>) -> bool {
        matches!(self.static_member_id(instance_id), Some(owner) if owner != member_id)
    }

    pub fn num_awaiting_join(&self) -> usize {
        self.members
            .values()
            .filter(|m| m.awaiting_join.is_some())
            .count()
    }

    /// Every member has re-joined and no handed-out member id is still expected.
    pub fn all_members_joined(&self) -> bool {
        self.pending.is_empty() && self.members.values().all(|m| m.awaiting_join.is_some())
    }

    /// The largest rebalance timeout of the members: how long a join phase may wait.
    pub fn rebalance_timeout_ms(&self) -> i64 {
        self.members
            .values()
            .map(|m| i64::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
            .max(0)
    }

    /// Kafka's `supportsProtocols`: an Empty group accepts any non-empty protocol type and
    /// list; otherwise the type must match and one protocol must be supported by all members.
    pub fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.is(GroupState::Empty) {
            !protocol_type.is_empty() && !protocols.is_empty()
        } else {
            self.protocol_type.as_deref() == Some(protocol_type)
                && protocols.iter().any(|(name, _)| {
                    self.members.values().filter(|m| m.supports(name)).count() == self.members.len()
                })
        }
    }

    /// Adds a new member (Kafka's `GroupMetadata.add`): the first member sets the protocol
    /// type, and becomes leader if there is none.
    pub fn add(&mut self, mut member: Member) {
        debug_assert!(!self.has(&member.id));
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        if self.leader.is_none() {
            self.leader = Some(member.id.clone());
        }
        member.join_seq = self.next_join_seq;
        self.next_join_seq += 1;
        if let Some(instance) = &member.instance_id {
            self.static_members
                .insert(instance.clone(), member.id.clone());
        }
        self.pending.remove(&member.id);
        self.members.insert(member.id.clone(), member);
    }

    /// Removes a member; a removed leader is succeeded by the earliest-joined remaining one.
    /// The caller answers the member's parked requests.
    pub fn remove(&mut self, member_id: &str) -> Option<Member> {
        let member = self.members.remove(member_id)?;
        if let Some(instance) = &member.instance_id {
            if self.static_members.get(instance).map(String::as_str) == Some(member_id) {
                self.static_members.remove(instance);
            }
        }
        if self.is_leader(member_id) {
            self.leader = self
                .members
                .values()
                .min_by_key(|m| m.join_seq)
                .map(|m| m.id.clone());
        }
        Some(member)
    }

    /// Moves a static member's slot to a new member id (KIP-345), keeping leadership.
    /// Returns the member's previous parked requests, which the caller fences.
    pub fn replace_static_member(
        &mut self,
        old_id: &str,
        new_id: &str,
    ) -> Option<(Option<u64>, Option<u64>)> {
        let mut member = self.members.remove(old_id)?;
        let parked = (member.awaiting_join.take(), member.awaiting_sync.take());
        member.id = new_id.to_owned();
        if let Some(instance) = &member.instance_id {
            self.static_members
                .insert(instance.clone(), new_id.to_owned());
        }
        if self.is_leader(old_id) {
            self.leader = Some(new_id.to_owned());
        }
        self.members.insert(new_id.to_owned(), member);
        Some(parked)
    }

    /// Kafka's `maybeElectNewJoinedLeader`: at the end of a join phase the leader must be a
    /// member that re-joined; keep the current one if it did, else take the earliest-joined
    /// member that did. False when nobody re-joined.
    pub fn maybe_elect_new_joined_leader(&mut self) -> bool {
        let Some(leader) = self.leader.clone() else {
            return false;
        };
        if self
            .members
            .get(&leader)
            .is_some_and(|m| m.awaiting_join.is_some())
        {
            return true;
        }
        match self
            .members
            .values()
            .filter(|m| m.awaiting_join.is_some())
            .min_by_key(|m| m.join_seq)
        {
            Some(m) => {
                self.leader = Some(m.id.clone());
                true
            }
            None => false,
        }
    }

    /// Kafka's `selectProtocol`: among the protocols every member supports, each member votes
    /// for its most preferred; most votes wins. Ties go to the leader's (first joiner's)
    /// preference order so the choice is deterministic. None if there is no common protocol.
    pub fn select_protocol(&self) -> Option<String> {
        let first = self
            .leader
            .as_deref()
            .and_then(|l| self.members.get(l))
            .or_else(|| self.members.values().min_by_key(|m| m.join_seq))?;
        let candidates: Vec<&str> = first
            .protocols
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| self.members.values().all(|m| m.supports(n)))
            .collect();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(v) = m.vote(&candidates) {
                *votes.entry(v).or_default() += 1;
            }
        }
        let mut best: Option<(&str, usize)> = None;
        for c in &candidates {
            let n = votes.get(c).copied().unwrap_or(0);
            if best.is_none_or(|(_, b)| n > b) {
                best = Some((c, n));
            }
        }
        best.map(|(c, _)| c.to_owned())
    }

    /// Kafka's `computeSubscribedTopics`.
    pub fn compute_subscribed_topics(&self) -> Option<BTreeSet<String>> {
        if self.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) {
            return None;
        }
        if self.members.is_empty() {
            return Some(BTreeSet::new());
        }
        let protocol = self.protocol_name.as_deref()?;
        let subs: Vec<Bytes> = self
            .members
            .values()
            .map(|m| m.metadata(protocol))
            .collect();
        union_of_topics(subs.iter().map(|b| &b[..]))
    }

    /// Kafka's `isSubscribedToTopic`.
    pub fn is_subscribed_to_topic(&self, topic: &str) -> bool {
        self.subscribed_topics
            .as_ref()
            .is_none_or(|t| t.contains(topic))
    }

    /// The member list the leader receives: every member with its subscription for the
    /// chosen protocol.
    pub fn current_member_metadata(&self) -> Vec<JoinMember> {
        let protocol = self.protocol_name.as_deref().unwrap_or("");
        self.members
            .values()
            .map(|m| JoinMember {
                member_id: m.id.clone(),
                group_instance_id: m.instance_id.clone(),
                metadata: m.metadata(protocol),
            })
            .collect()
    }

    /// The group metadata record (key v2, value v3) with each member's current assignment.
    pub fn metadata_record(&self) -> OffsetsRecord {
        let protocol = self.protocol_name.as_deref().unwrap_or("");
        debug_assert!(self.members.is_empty() || self.protocol_name.is_some());
        let value = GroupMetadataValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol_name.clone(),
            leader: self.leader.clone(),
            current_state_timestamp: self.state_timestamp.unwrap_or(-1),
            members: self
                .members
                .values()
                .map(|m| MemberMetadataValue {
                    member_id: m.id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout: m.rebalance_timeout_ms,
                    session_timeout: m.session_timeout_ms,
                    subscription: m.metadata(protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        };
        OffsetsRecord {
            key: codec::group_key(&self.id),
            value: Some(codec::group_value(&value)),
        }
    }

    /// Kafka's `GroupMetadata.summary`: metadata and assignments only when Stable.
    pub fn describe(&self) -> GroupDescription {
        let stable = self.is(GroupState::Stable);
        let protocol = if stable {
            self.protocol_name.clone().unwrap_or_default()
        } else {
            String::new()
        };
        GroupDescription {
            error_code: 0,
            group_id: self.id.clone(),
            state: self.state.name().to_owned(),
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            members: self
                .members
                .values()
                .map(|m| MemberDescription {
                    member_id: m.id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: if stable {
                        m.metadata(&protocol)
                    } else {
                        Bytes::new()
                    },
                    assignment: if stable {
                        m.assignment.clone()
                    } else {
                        Bytes::new()
                    },
                })
                .collect(),
            protocol,
        }
    }

    /// Internal consistency; `Err` names the first violation. Checked by `debug_assert!` after
    /// every coordinator call and by the property tests.
    pub fn check_invariants(&self) -> Result<(), String> {
        let fail = |what: &str| Err(format!("group {:?}: {what}", self.id));
        if self.is(GroupState::Dead) {
            return fail("Dead group kept");
        }
        if self.members.is_empty() != self.leader.is_none() {
            return fail("leader set iff members exist");
        }
        if let Some(l) = &self.leader {
            if !self.has(l) {
                return fail("leader is not a member");
            }
        }
        match self.state {
            GroupState::Empty => {
                if !self.members.is_empty() {
                    return fail("Empty group with members");
                }
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                if self.members.is_empty() || self.protocol_name.is_none() {
                    return fail("active group without members or protocol");
                }
                if self.members.values().any(|m| m.awaiting_join.is_some()) {
                    return fail("parked join outside PreparingRebalance");
                }
            }
            GroupState::PreparingRebalance | GroupState::Dead => {}
        }
        if self.is(GroupState::PreparingRebalance) != self.join_timer.is_some() {
            return fail("join timer set iff PreparingRebalance");
        }
        if !self.is(GroupState::CompletingRebalance)
            && self.members.values().any(|m| m.awaiting_sync.is_some())
        {
            return fail("parked sync outside CompletingRebalance");
        }
        for (instance, id) in &self.static_members {
            match self.members.get(id) {
                Some(m) if m.instance_id.as_deref() == Some(instance.as_str()) => {}
                _ => return fail("static member map out of sync"),
            }
        }
        let statics = self
            .members
            .values()
            .filter(|m| m.instance_id.is_some())
            .count();
        if statics != self.static_members.len() {
            return fail("static member missing from the map");
        }
        if self.pending.keys().any(|p| self.has(p)) {
            return fail("pending member is also a member");
        }
        if let Some(pt) = &self.protocol_type {
            if self.members.values().any(|m| &m.protocol_type != pt) {
                return fail("member protocol type differs");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, protocols: &[&str]) -> Member {
        Member {
            id: id.into(),
            instance_id: None,
            client_id: "c".into(),
            client_host: "h".into(),
            rebalance_timeout_ms: 1000,
            session_timeout_ms: 1000,
            protocol_type: "consumer".into(),
            protocols: protocols
                .iter()
                .map(|p| (p.to_string(), Bytes::new()))
                .collect(),
            assignment: Bytes::new(),
            awaiting_join: Some(1),
            awaiting_sync: None,
            is_new: false,
            deadline_ms: 0,
            join_seq: 0,
        }
    }

    #[test]
    fn vote_ties_follow_the_leaders_preference() {
        let mut g = Group::new("g".into(), 0);
        g.add(member("b", &["roundrobin", "range"]));
        g.add(member("a", &["range", "roundrobin"]));
        // One vote each: the leader ("b", first to join) prefers roundrobin.
        assert_eq!(g.select_protocol().as_deref(), Some("roundrobin"));
        g.add(member("c", &["range", "roundrobin"]));
        assert_eq!(g.select_protocol().as_deref(), Some("range"));
        // Only protocols every member supports are candidates.
        g.add(member("d", &["range"]));
        assert_eq!(g.select_protocol().as_deref(), Some("range"));
        // (An Empty group accepts any protocol; a group with members needs a common one.)
        g.state = GroupState::Stable;
        assert!(g.supports_protocols("consumer", &[("range".into(), Bytes::new())]));
        assert!(!g.supports_protocols("consumer", &[("roundrobin".into(), Bytes::new())]));
    }

    #[test]
    fn removed_leader_is_succeeded_by_earliest_joiner() {
        let mut g = Group::new("g".into(), 0);
        for id in ["z", "y", "x"] {
            g.add(member(id, &["range"]));
        }
        assert!(g.is_leader("z"));
        g.remove("z");
        assert!(g.is_leader("y"), "earliest joined, not smallest id");
        g.remove("y");
        g.remove("x");
        assert_eq!(g.leader, None);
    }

    #[test]
    fn new_joined_leader_election() {
        let mut g = Group::new("g".into(), 0);
        g.add(member("a", &["range"]));
        g.add(member("b", &["range"]));
        g.members.get_mut("a").unwrap().awaiting_join = None;
        assert!(g.maybe_elect_new_joined_leader());
        assert!(g.is_leader("b"));
        g.members.get_mut("b").unwrap().awaiting_join = None;
        assert!(!g.maybe_elect_new_joined_leader());
    }
}
