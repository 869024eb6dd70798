//! Classic members inside a consumer group (KIP-848's online migration): a consumer still on
//! the classic protocol keeps sending JoinGroup / SyncGroup / Heartbeat / LeaveGroup, and the
//! consumer group answers them (Kafka's `classicGroupJoinToConsumerGroup`,
//! `classicGroupSyncToConsumerGroup`, `classicGroupHeartbeatToConsumerGroup`,
//! `classicGroupLeaveToConsumerGroup`).
//!
//! A classic member is a member like any other for the assignor and the reconciliation: its
//! subscription comes from the embedded "consumer" protocol of its JoinGroup, what it owns
//! from that subscription's owned partitions, and its JoinGroup is the moment it reconciles
//! (the answer carries its member epoch as the generation). It learns about a new target the
//! only way a classic client can: Heartbeat and SyncGroup answer REBALANCE_IN_PROGRESS, and it
//! joins again. Its SyncGroup returns the partitions it may own now, in the embedded
//! assignment format. Timeouts: its own session timeout, and its rebalance timeout to rejoin
//! once told to (join deadline) and to sync once joined (sync deadline).

use uuid::Uuid;

use super::api::{Assignment, TopicsView};
use super::codes::*;
use super::group::ConsumerGroup;
use super::heartbeat::advance;
use super::member::{ClassicMemberMetadata, Member, MemberState};
use super::ConsumerGroups;
use crate::api::{HeartbeatRequest, JoinResponse, SyncRequest, SyncResponse};
use crate::consumer_protocol::{self, TopicPartitions};
use crate::errors::{
    ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL, MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS,
};
use crate::member::dedup_protocols;
use crate::subscription::CONSUMER_PROTOCOL_TYPE;
use crate::JoinRequest;

// UNKNOWN_SERVER_ERROR is what Kafka answers when a subscription it already accepted cannot be
// read (`IllegalStateException`).
use crate::errors::UNKNOWN_SERVER_ERROR;

/// Partitions by topic name (the embedded protocol) as partitions by topic id; topics the view
/// does not know are left out, as Kafka's `toTopicPartitionMap` does.
pub(crate) fn to_ids(parts: &TopicPartitions, topics: &TopicsView) -> Assignment {
    parts
        .iter()
        .filter_map(|(name, ps)| {
            let (id, _) = topics.topics.get(name)?;
            Some((*id, ps.clone()))
        })
        .filter(|(_, ps)| !ps.is_empty())
        .collect()
}

/// The other way round (Kafka's `toConsumerProtocolAssignment`); unknown topic ids are left
/// out.
pub(crate) fn to_names(a: &Assignment, topics: &TopicsView) -> TopicPartitions {
    let names: std::collections::BTreeMap<Uuid, &str> = topics
        .topics
        .iter()
        .map(|(name, (id, _))| (*id, name.as_str()))
        .collect();
    a.iter()
        .filter(|(_, ps)| !ps.is_empty())
        .filter_map(|(id, ps)| Some((names.get(id)?.to_string(), ps.clone())))
        .collect()
}

/// Kafka's `supportsClassicProtocols`: the "consumer" protocol type, and (unless the group is
/// empty) a protocol every classic member supports.
fn supports_classic_protocols(
    g: &ConsumerGroup,
    protocol_type: &str,
    protocols: &[(String, bytes::Bytes)],
) -> bool {
    if protocol_type != CONSUMER_PROTOCOL_TYPE {
        return false;
    }
    if g.members.is_empty() {
        return !protocols.is_empty();
    }
    protocols.iter().any(|(name, _)| {
        g.members
            .values()
            .filter_map(|m| m.classic.as_ref())
            .all(|c| c.protocols.iter().any(|(n, _)| n == name))
    })
}

/// Kafka's `validateConsumerGroupMember` + `throwIfMemberDoesNotUseClassicProtocol`: the
/// member named by id (or by instance id, which must map to that id) and using the classic
/// protocol.
fn classic_member<'a>(
    g: &'a ConsumerGroup,
    member_id: &str,
    instance_id: Option<&str>,
) -> Result<&'a Member, i16> {
    let m = match instance_id {
        None => g.members.get(member_id).ok_or(UNKNOWN_MEMBER_ID)?,
        Some(i) => {
            let m = g.static_member(i).ok_or(UNKNOWN_MEMBER_ID)?;
            if m.id != member_id {
                return Err(FENCED_INSTANCE_ID);
            }
            m
        }
    };
    if m.classic.is_none() {
        return Err(UNKNOWN_MEMBER_ID);
    }
    Ok(m)
}

/// Kafka's `waitingOnUnreleasedPartition`: some partition of the member's target is still
/// owned by another member.
fn waiting_on_unreleased(g: &ConsumerGroup, m: &Member) -> bool {
    let Some(target) = g.target.get(&m.id) else {
        return false;
    };
    let owners = g.owners();
    target.iter().any(|(t, ps)| {
        ps.iter().any(|p| {
            !m.assigned.get(t).is_some_and(|a| a.contains(p))
                && owners.get(&(*t, *p)).is_some_and(|o| *o != m.id)
        })
    })
}

/// The first protocol of a classic member: the one its JoinGroup answer named.
fn first_protocol(m: &Member) -> Option<&(String, bytes::Bytes)> {
    m.classic.as_ref().and_then(|c| c.protocols.first())
}

impl ConsumerGroups {
    /// JoinGroup of a classic member to this consumer group (which has members). Answered
    /// once its records are written; the answer's generation is the member's epoch after
    /// reconciling, and it names no leader (the coordinator assigns).
    pub fn classic_join(
        &mut self,
        now_ms: i64,
        req: &JoinRequest,
        topics: &TopicsView,
    ) -> JoinResponse {
        self.touch(&req.group_id);
        let Some(mut g) = self.groups.remove(&req.group_id) else {
            return JoinResponse::error(req.member_id.clone(), UNKNOWN_MEMBER_ID);
        };
        let answer = self
            .classic_join_group(&mut g, now_ms, req, topics)
            .unwrap_or_else(|code| JoinResponse::error(req.member_id.clone(), code));
        self.groups.insert(g.id.clone(), g);
        self.debug_check();
        answer
    }

    fn classic_join_group(
        &mut self,
        g: &mut ConsumerGroup,
        now_ms: i64,
        req: &JoinRequest,
        topics: &TopicsView,
    ) -> Result<JoinResponse, i16> {
        let unknown = req.member_id.is_empty();
        let member_id = if unknown {
            (self.new_member_id)()
        } else {
            req.member_id.clone()
        };
        if g.members.len() >= self.config.max_size && !g.members.contains_key(&member_id) {
            return Err(GROUP_MAX_SIZE_REACHED);
        }
        let protocols = dedup_protocols(&req.protocols);
        if !supports_classic_protocols(g, &req.protocol_type, &protocols) {
            return Err(INCONSISTENT_GROUP_PROTOCOL);
        }
        if unknown && req.group_instance_id.is_none() && req.api_version >= 4 {
            return Ok(JoinResponse::error(member_id, MEMBER_ID_REQUIRED));
        }
        let (old, replaced) = resolve_classic_member(g, &member_id, req, unknown)?;
        let subscription = protocols
            .first()
            .and_then(|(_, meta)| consumer_protocol::decode_subscription(meta).ok())
            .ok_or(UNKNOWN_SERVER_ERROR)?;
        let mut updated = old.clone();
        if let Some(i) = &req.group_instance_id {
            updated.instance_id = Some(i.clone());
        }
        if let Some(r) = &subscription.rack_id {
            updated.rack_id = Some(r.clone());
        }
        // v0 had no rebalance timeout; like the classic coordinator, the session timeout.
        let rebalance_timeout_ms = if req.api_version == 0 {
            req.session_timeout_ms
        } else {
            req.rebalance_timeout_ms
        };
        if rebalance_timeout_ms != -1 {
            updated.rebalance_timeout_ms = rebalance_timeout_ms;
        }
        updated.subscribed_topic_names = subscription.topics.iter().cloned().collect();
        updated.client_id = req.client_id.clone();
        updated.client_host = req.client_host.clone();
        updated.classic = Some(ClassicMemberMetadata {
            session_timeout_ms: req.session_timeout_ms,
            protocols,
        });
        let owned = super::member::to_wire(&to_ids(&subscription.owned_partitions, topics));
        let mut next = advance(
            g,
            &self.assignors[0],
            &old,
            updated,
            replaced.as_deref(),
            Some(owned.as_slice()),
            now_ms,
            topics,
        );
        next.revocation_deadline_ms = None;
        next.join_deadline_ms = None;
        next.sync_deadline_ms =
            Some(now_ms.saturating_add(i64::from(next.rebalance_timeout_ms.max(0))));
        next.session_deadline_ms = now_ms.saturating_add(i64::from(req.session_timeout_ms.max(0)));
        let protocol_name = first_protocol(&next).map(|(n, _)| n.clone());
        let answer = JoinResponse {
            error_code: NONE,
            generation_id: next.member_epoch,
            protocol_type: Some(CONSUMER_PROTOCOL_TYPE.to_string()),
            protocol_name,
            leader: String::new(),
            member_id,
            members: Vec::new(),
            skip_assignment: false,
        };
        g.put_member(next);
        Ok(answer)
    }

    /// SyncGroup of a classic member: its current partitions, unless a newer target wants it
    /// to join again first (REBALANCE_IN_PROGRESS). Writes nothing; the shell answers once the
    /// records before it are replicated.
    pub fn classic_sync(
        &mut self,
        now_ms: i64,
        req: &SyncRequest,
        topics: &TopicsView,
    ) -> SyncResponse {
        let answer = self
            .classic_sync_inner(now_ms, req, topics)
            .unwrap_or_else(SyncResponse::error);
        self.debug_check();
        answer
    }

    fn classic_sync_inner(
        &mut self,
        now_ms: i64,
        req: &SyncRequest,
        topics: &TopicsView,
    ) -> Result<SyncResponse, i16> {
        let g = self
            .groups
            .get_mut(&req.group_id)
            .filter(|g| !g.members.is_empty())
            .ok_or(UNKNOWN_MEMBER_ID)?;
        let m = classic_member(g, &req.member_id, req.group_instance_id.as_deref())?;
        if m.member_epoch != req.generation_id {
            return Err(ILLEGAL_GENERATION);
        }
        let (protocol, metadata) = first_protocol(m).cloned().unwrap_or_default();
        if req
            .protocol_type
            .as_deref()
            .is_some_and(|t| t != CONSUMER_PROTOCOL_TYPE)
            || req.protocol_name.as_deref().is_some_and(|n| n != protocol)
        {
            return Err(INCONSISTENT_GROUP_PROTOCOL);
        }
        let rejoin = g.group_epoch > m.member_epoch && m.state != MemberState::UnrevokedPartitions;
        let assignment = to_names(&m.assigned, topics);
        let id = m.id.clone();
        let Some(m) = g.members.get_mut(&id) else {
            return Err(UNKNOWN_MEMBER_ID);
        };
        if rejoin {
            told_to_rejoin(m, now_ms);
            return Err(REBALANCE_IN_PROGRESS);
        }
        m.sync_deadline_ms = None;
        let session = m.session_timeout_ms(0);
        m.session_deadline_ms = now_ms.saturating_add(i64::from(session.max(0)));
        let version = consumer_protocol::subscription_version(&metadata).unwrap_or(0);
        Ok(SyncResponse {
            error_code: NONE,
            protocol_type: req.protocol_type.clone(),
            protocol_name: req.protocol_name.clone(),
            assignment: consumer_protocol::encode_assignment(version, &assignment),
        })
    }

    /// Heartbeat of a classic member: refreshes its session; REBALANCE_IN_PROGRESS when it
    /// must join again to catch up (Kafka's three conditions: the group epoch moved past it,
    /// it has partitions to give back, or partitions it waited for are free now).
    pub fn classic_heartbeat(&mut self, now_ms: i64, req: &HeartbeatRequest) -> i16 {
        let code = self
            .classic_heartbeat_inner(now_ms, req)
            .unwrap_or_else(|c| c);
        self.debug_check();
        code
    }

    fn classic_heartbeat_inner(&mut self, now_ms: i64, req: &HeartbeatRequest) -> Result<i16, i16> {
        let g = self
            .groups
            .get_mut(&req.group_id)
            .ok_or(UNKNOWN_MEMBER_ID)?;
        let m = classic_member(g, &req.member_id, req.group_instance_id.as_deref())?;
        if m.member_epoch != req.generation_id {
            return Err(ILLEGAL_GENERATION);
        }
        let rejoin = m.member_epoch < g.group_epoch
            || m.state == MemberState::UnrevokedPartitions
            || (m.state == MemberState::UnreleasedPartitions && !waiting_on_unreleased(g, m));
        let id = m.id.clone();
        let Some(m) = g.members.get_mut(&id) else {
            return Err(UNKNOWN_MEMBER_ID);
        };
        let session = m.session_timeout_ms(0);
        m.session_deadline_ms = now_ms.saturating_add(i64::from(session.max(0)));
        if rejoin {
            told_to_rejoin(m, now_ms);
            return Ok(REBALANCE_IN_PROGRESS);
        }
        Ok(NONE)
    }

    /// LeaveGroup of classic members (by member id, or by instance id alone for an admin's
    /// removal): each is removed with its tombstones; the group epoch is bumped once if any
    /// left. Returns the top-level code and one code per listed member.
    pub fn classic_leave(
        &mut self,
        group_id: &str,
        members: &[(String, Option<String>)],
        topics: &TopicsView,
    ) -> (i16, Vec<i16>) {
        self.touch(group_id);
        let Some(g) = self.groups.get_mut(group_id) else {
            return (UNKNOWN_MEMBER_ID, Vec::new());
        };
        let mut codes = Vec::with_capacity(members.len());
        let mut removed = false;
        for (member_id, instance_id) in members {
            let found = match instance_id.as_deref() {
                None => classic_member(g, member_id, None).map(|m| m.id.clone()),
                Some(i) => match g.static_member(i) {
                    None => Err(UNKNOWN_MEMBER_ID),
                    Some(m) if !member_id.is_empty() && m.id != *member_id => {
                        Err(FENCED_INSTANCE_ID)
                    }
                    Some(m) if m.classic.is_none() => Err(UNKNOWN_MEMBER_ID),
                    Some(m) => Ok(m.id.clone()),
                },
            };
            match found {
                Ok(id) => {
                    tracing::info!(group = %g.id, member = %id, "classic member left");
                    g.remove_member(&id);
                    removed = true;
                    codes.push(NONE);
                }
                Err(code) => codes.push(code),
            }
        }
        if removed {
            g.subscription_metadata = g.compute_subscription_metadata(topics);
            g.group_epoch = g.group_epoch.saturating_add(1);
        }
        self.debug_check();
        (NONE, codes)
    }
}

/// A classic member told to join again must do so within its rebalance timeout (Kafka's join
/// timeout, scheduled only if none is pending).
fn told_to_rejoin(m: &mut Member, now_ms: i64) {
    if m.join_deadline_ms.is_none() {
        m.join_deadline_ms = Some(now_ms.saturating_add(i64::from(m.rebalance_timeout_ms.max(0))));
    }
}

/// The member a classic JoinGroup is about (Kafka's `getOrMaybeSubscribe*ConsumerGroupMember`
/// for the classic protocol): a dynamic member is found or created; a static member joining
/// with an unknown member id takes over its instance id's slot (the previous incarnation is
/// replaced, whatever protocol it used); a known static member id must still own its
/// instance id. Returns the member as it was and the member id it replaces.
fn resolve_classic_member(
    g: &ConsumerGroup,
    member_id: &str,
    req: &JoinRequest,
    unknown: bool,
) -> Result<(Member, Option<String>), i16> {
    let existing = || {
        g.members
            .get(member_id)
            .cloned()
            .unwrap_or_else(|| Member::new(member_id.to_string()))
    };
    let Some(instance) = req.group_instance_id.as_deref() else {
        return Ok((existing(), None));
    };
    match g.static_member(instance) {
        None if unknown => Ok((existing(), None)),
        None => Err(UNKNOWN_MEMBER_ID),
        Some(e) if unknown => {
            let mut m = e.clone();
            m.id = member_id.to_string();
            m.member_epoch = 0;
            m.previous_member_epoch = 0;
            Ok((m, Some(e.id.clone())))
        }
        Some(e) if e.id != member_id => Err(FENCED_INSTANCE_ID),
        Some(e) => Ok((e.clone(), None)),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn view() -> TopicsView {
        TopicsView {
            version: 1,
            topics: [
                ("a".to_string(), (Uuid::from_u128(1), 2)),
                ("b".to_string(), (Uuid::from_u128(2), 3)),
            ]
            .into_iter()
            .collect(),
        }
    }

    /// Topic names the metadata does not know (deleted topics) are dropped both ways, as
    /// Kafka's conversions drop them; empty partition lists are not carried.
    #[test]
    fn names_and_ids_convert_and_drop_unknown_topics() {
        let by_name: TopicPartitions = [
            ("a".to_string(), BTreeSet::from([0, 1])),
            ("gone".to_string(), BTreeSet::from([0])),
            ("b".to_string(), BTreeSet::new()),
        ]
        .into_iter()
        .collect();
        let ids = to_ids(&by_name, &view());
        assert_eq!(ids.len(), 1);
        assert_eq!(ids[&Uuid::from_u128(1)], BTreeSet::from([0, 1]));
        let mut with_unknown = ids.clone();
        with_unknown.insert(Uuid::from_u128(9), BTreeSet::from([4]));
        let back = to_names(&with_unknown, &view());
        assert_eq!(back.keys().collect::<Vec<_>>(), vec!["a"]);
    }

    /// Kafka's `supportsClassicProtocols`: the consumer protocol type, and for a group with
    /// classic members a protocol all of them list.
    #[test]
    fn classic_protocol_support() {
        let p = |names: &[&str]| -> Vec<(String, bytes::Bytes)> {
            names
                .iter()
                .map(|n| (n.to_string(), bytes::Bytes::new()))
                .collect()
        };
        let mut g = ConsumerGroup::new("g");
        assert!(supports_classic_protocols(&g, "consumer", &p(&["range"])));
        assert!(!supports_classic_protocols(&g, "consumer", &p(&[])));
        assert!(!supports_classic_protocols(&g, "connect", &p(&["range"])));
        let mut m = Member::new("m".into());
        m.classic = Some(ClassicMemberMetadata {
            session_timeout_ms: 10_000,
            protocols: p(&["range", "roundrobin"]),
        });
        g.put_member(m);
        g.put_member(Member::new("k".into())); // a consumer-protocol member has no say
        assert!(supports_classic_protocols(
            &g,
            "consumer",
            &p(&["sticky", "roundrobin"])
        ));
        assert!(!supports_classic_protocols(&g, "consumer", &p(&["sticky"])));
    }
}
