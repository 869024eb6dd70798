//! ConsumerGroupHeartbeat for joins and regular heartbeats (Kafka's `consumerGroupHeartbeat`):
//! (1) create or update the member and bump the group epoch if its subscription or the
//! subscribed topics' metadata changed; (2) recompute the target if the group epoch moved past
//! it; (3) reconcile this member alone towards its target. Answered immediately: nobody waits
//! for the rest of the group, which is the point of KIP-848.

use std::collections::BTreeSet;

use uuid::Uuid;

use super::api::{Assignment, ConsumerHeartbeat, ConsumerHeartbeatResponse, TopicsView};
use super::codes::*;
use super::group::ConsumerGroup;
use super::member::LEAVE_GROUP_STATIC_MEMBER_EPOCH;
use super::member::{to_wire, Member, MemberState, LEAVE_GROUP_MEMBER_EPOCH};
use super::reconcile::{reconcile, Owned};
use super::validate::validate;
use super::ConsumerGroups;
use crate::errors::KafkaError;

/// An error answer: the code and message of the response.
pub(crate) type HbError = KafkaError;

/// Client identity shown by ConsumerGroupDescribe.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientInfo<'a> {
    pub client_id: &'a str,
    pub client_host: &'a str,
}

impl ConsumerGroups {
    /// ConsumerGroupHeartbeat (API 68). Never parks: the answer is final.
    pub fn heartbeat(
        &mut self,
        now_ms: i64,
        req: ConsumerHeartbeat,
        topics: &TopicsView,
    ) -> ConsumerHeartbeatResponse {
        self.heartbeat_from(now_ms, req, ClientInfo::default(), topics)
    }

    /// [`heartbeat`](Self::heartbeat) recording the client id and host for describe.
    pub fn heartbeat_from(
        &mut self,
        now_ms: i64,
        req: ConsumerHeartbeat,
        client: ClientInfo<'_>,
        topics: &TopicsView,
    ) -> ConsumerHeartbeatResponse {
        let interval = self.timeouts(&req.group_id).heartbeat_interval_ms;
        self.touch(&req.group_id);
        let resp = match self.heartbeat_inner(now_ms, &req, client, topics) {
            Ok(r) => r,
            Err(e) => ConsumerHeartbeatResponse::error(e.code, e.message, interval),
        };
        self.debug_check();
        resp
    }

    fn heartbeat_inner(
        &mut self,
        now_ms: i64,
        req: &ConsumerHeartbeat,
        client: ClientInfo<'_>,
        topics: &TopicsView,
    ) -> Result<ConsumerHeartbeatResponse, HbError> {
        validate(req, &self.assignors)?;
        if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH
            || req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH
        {
            return self.leave(req, topics);
        }
        let existed = self.groups.contains_key(&req.group_id);
        if !existed && req.member_epoch != 0 {
            return Err(KafkaError::new(
                UNKNOWN_MEMBER_ID,
                format!("Consumer group {} not found.", req.group_id),
            ));
        }
        // Work on the group outside the map so a failed first join leaves no empty group.
        let mut g = self
            .groups
            .remove(&req.group_id)
            .unwrap_or_else(|| ConsumerGroup::new(&req.group_id));
        let result = self.member_heartbeat(&mut g, now_ms, req, client, topics);
        if existed || result.is_ok() {
            self.groups.insert(g.id.clone(), g);
        }
        result
    }

    fn member_heartbeat(
        &mut self,
        g: &mut ConsumerGroup,
        now_ms: i64,
        req: &ConsumerHeartbeat,
        client: ClientInfo<'_>,
        topics: &TopicsView,
    ) -> Result<ConsumerHeartbeatResponse, HbError> {
        let timeouts = self.timeouts(&req.group_id);
        // A static member replacing one that left with -2 does not grow the group.
        let replaces_static = req.member_epoch == 0
            && req
                .instance_id
                .as_deref()
                .and_then(|i| g.static_member(i))
                .is_some_and(|m| m.id != req.member_id);
        if g.members.len() >= self.config.max_size
            && (req.member_id.is_empty() || !g.members.contains_key(&req.member_id))
            && !replaces_static
        {
            return Err(KafkaError::new(
                GROUP_MAX_SIZE_REACHED,
                format!(
                    "The consumer group has reached its maximum capacity of {} members.",
                    self.config.max_size
                ),
            ));
        }
        let member_id = if req.member_id.is_empty() {
            (self.new_member_id)()
        } else {
            req.member_id.clone()
        };
        let owned: Owned<'_> = req.topic_partitions.as_deref();
        let (old, replaced) = resolve_member(g, &member_id, req, owned)?;
        let updated = apply_request(&old, req, client);
        let mut next = advance(
            g,
            &self.assignors[0],
            &old,
            updated,
            replaced.as_deref(),
            owned,
            now_ms,
            topics,
        );
        next.session_deadline_ms =
            now_ms.saturating_add(i64::from(timeouts.session_timeout_ms.max(0)));
        let full = req.member_epoch == 0
            || (req.rebalance_timeout_ms != -1
                && (req.subscribed_topic_names.is_some() || req.subscribed_topic_regex.is_some())
                && req.topic_partitions.is_some());
        let assignment = (full || next.assigned != old.assigned).then(|| to_wire(&next.assigned));
        let resp = ConsumerHeartbeatResponse {
            error_code: NONE,
            error_message: None,
            member_id: Some(member_id),
            member_epoch: next.member_epoch,
            heartbeat_interval_ms: timeouts.heartbeat_interval_ms,
            assignment,
        };
        g.put_member(next);
        Ok(resp)
    }
}

/// Steps 1-3 of a heartbeat, shared with a classic member's JoinGroup (Kafka's
/// `consumerGroupHeartbeat` / `classicGroupJoinToConsumerGroup`): (1) store `updated` (in place
/// of `replaced`, a static member's previous incarnation, whose target it inherits) and bump
/// the group epoch if its subscription or the subscribed topics' metadata changed; (2)
/// recompute the target if the group epoch moved past it; (3) reconcile the member towards its
/// target given what the client reports owning. Returns the reconciled member, which the
/// caller stores once it has set its deadlines. A consumer-protocol member that must revoke
/// gets a revocation deadline; classic members are timed by their join and sync deadlines.
#[allow(clippy::too_many_arguments)]
pub(crate) fn advance(
    g: &mut ConsumerGroup,
    default_assignor: &str,
    old: &Member,
    updated: Member,
    replaced: Option<&str>,
    owned: Owned<'_>,
    now_ms: i64,
    topics: &TopicsView,
) -> Member {
    let member_id = updated.id.clone();
    let mut bump = g.group_epoch == 0 || old.subscription_differs(&updated);
    if let Some(prev) = replaced {
        let target = g.target.remove(prev);
        g.remove_member(prev);
        if let Some(t) = target {
            g.target.insert(member_id.clone(), t);
        }
    }
    g.put_member(updated.clone());
    let metadata = g.compute_subscription_metadata(topics);
    if metadata != g.subscription_metadata {
        g.subscription_metadata = metadata;
        bump = true;
    }
    if bump {
        g.group_epoch = g.group_epoch.saturating_add(1);
        tracing::info!(group = %g.id, epoch = g.group_epoch, "bumped group epoch");
    }
    if g.group_epoch > g.assignment_epoch {
        g.update_target(default_assignor);
    }
    if updated.is_reconciled_to(g.assignment_epoch) {
        return updated;
    }
    let empty = Assignment::new();
    let target = g.target.get(&member_id).unwrap_or(&empty);
    let owners = g.owners();
    let busy = |t: Uuid, p: i32| owners.get(&(t, p)).is_some_and(|o| *o != member_id);
    let mut next = reconcile(&updated, g.assignment_epoch, target, &busy, owned);
    if next != updated && next.classic.is_none() {
        next.revocation_deadline_ms = (next.state == MemberState::UnrevokedPartitions)
            .then(|| now_ms.saturating_add(i64::from(next.rebalance_timeout_ms.max(0))));
    }
    next
}

/// Finds (or creates) the member a heartbeat is about, with Kafka's static-membership and
/// epoch checks. Returns the member as it was, and the member id it replaces (a static member
/// that left with -2 and now rejoins under a new member id).
fn resolve_member(
    g: &ConsumerGroup,
    member_id: &str,
    req: &ConsumerHeartbeat,
    owned: Owned<'_>,
) -> Result<(Member, Option<String>), HbError> {
    let epoch = req.member_epoch;
    let unknown = || {
        Err(KafkaError::new(
            UNKNOWN_MEMBER_ID,
            format!("Member {member_id} is not a member of group {}.", g.id),
        ))
    };
    let Some(instance) = req.instance_id.as_deref() else {
        return match g.members.get(member_id) {
            // Epoch 0 from a known member: a rejoin after being fenced (KAFKA-19233).
            Some(m) => {
                if epoch != 0 {
                    check_epoch(m, epoch, owned)?;
                }
                Ok((rejoined(m, epoch), None))
            }
            None if epoch == 0 => Ok((Member::new(member_id.to_string()), None)),
            None => unknown(),
        };
    };
    let existing = g.static_member(instance);
    if epoch == 0 {
        return match existing {
            None => Ok((
                g.members
                    .get(member_id)
                    .map(|m| rejoined(m, 0))
                    .unwrap_or_else(|| Member::new(member_id.to_string())),
                None,
            )),
            Some(e) if e.id == member_id => Ok((rejoined(e, 0), None)),
            Some(e) if e.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH => Err(KafkaError::new(
                UNRELEASED_INSTANCE_ID,
                format!(
                    "Static member {member_id} with instance id {instance} cannot join the group \
                     because the instance id is owned by {} member.",
                    e.id
                ),
            )),
            Some(e) => {
                let mut m = e.clone();
                m.id = member_id.to_string();
                m.member_epoch = 0;
                m.previous_member_epoch = 0;
                Ok((m, Some(e.id.clone())))
            }
        };
    }
    let Some(e) = existing else {
        return Err(KafkaError::new(
            UNKNOWN_MEMBER_ID,
            format!("Instance id {instance} is unknown."),
        ));
    };
    if e.id != member_id {
        return Err(KafkaError::new(
            FENCED_INSTANCE_ID,
            format!(
                "Static member {member_id} with instance id {instance} was fenced by member {}.",
                e.id
            ),
        ));
    }
    check_epoch(e, epoch, owned)?;
    Ok((e.clone(), None))
}

/// A known member joining again with epoch 0: kept as is, except that a static member that
/// left with -2 restarts from epoch 0 (its -2 is a marker, not an epoch to reconcile from).
fn rejoined(m: &Member, epoch: i32) -> Member {
    let mut m = m.clone();
    if epoch == 0 && m.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
        m.member_epoch = 0;
        m.previous_member_epoch = 0;
    }
    m
}

/// Kafka's `throwIfConsumerGroupMemberEpochIsInvalid`: the epoch must be the member's, or its
/// previous one when the client only owns a subset of the current assignment (the response
/// that carried the bump was lost).
fn check_epoch(m: &Member, received: i32, owned: Owned<'_>) -> Result<(), HbError> {
    if received > m.member_epoch {
        return Err(KafkaError::new(
            FENCED_MEMBER_EPOCH,
            format!(
                "The consumer group member has a greater member epoch ({received}) than the one \
                 known by the group coordinator ({}). The member must abandon all its partitions \
                 and rejoin.",
                m.member_epoch
            ),
        ));
    }
    if received < m.member_epoch
        && (received != m.previous_member_epoch || !is_subset(owned, &m.assigned))
    {
        return Err(KafkaError::new(
            FENCED_MEMBER_EPOCH,
            format!(
                "The consumer group member has a smaller member epoch ({received}) than the one \
                 known by the group coordinator ({}). The member must abandon all its partitions \
                 and rejoin.",
                m.member_epoch
            ),
        ));
    }
    Ok(())
}

/// Whether every reported partition is in `assigned` (an unreported set is not a subset).
fn is_subset(owned: Owned<'_>, assigned: &Assignment) -> bool {
    let Some(owned) = owned else {
        return false;
    };
    let empty = BTreeSet::new();
    owned.iter().all(|(t, ps)| {
        let set = assigned.get(t).unwrap_or(&empty);
        ps.iter().all(|p| set.contains(p))
    })
}

/// The member with the request's non-null fields applied (null means "unchanged").
fn apply_request(old: &Member, req: &ConsumerHeartbeat, client: ClientInfo<'_>) -> Member {
    let mut m = old.clone();
    if let Some(i) = &req.instance_id {
        m.instance_id = Some(i.clone());
    }
    if let Some(r) = &req.rack_id {
        m.rack_id = Some(r.clone());
    }
    if req.rebalance_timeout_ms != -1 {
        m.rebalance_timeout_ms = req.rebalance_timeout_ms;
    }
    if let Some(a) = &req.server_assignor {
        m.server_assignor = Some(a.clone());
    }
    if let Some(names) = &req.subscribed_topic_names {
        m.subscribed_topic_names = names.iter().cloned().collect();
    }
    if let Some(r) = &req.subscribed_topic_regex {
        m.subscribed_topic_regex = (!r.is_empty()).then(|| r.clone());
    }
    if !client.client_id.is_empty() {
        m.client_id = client.client_id.to_string();
    }
    if !client.client_host.is_empty() {
        m.client_host = client.client_host.to_string();
    }
    // A member heartbeating with this API uses the consumer protocol (Kafka clears it too).
    m.classic = None;
    m.join_deadline_ms = None;
    m.sync_deadline_ms = None;
    m
}
