//! The consumer-group half of the online migration between the classic protocol and KIP-848
//! (Kafka's `ConsumerGroup.fromClassicGroup`, `validateOnlineDowngradeWithFencedMember` and the
//! consumer half of `convertToClassicGroup`). The classic half is in
//! `coordinator::migration`; [`crate::migration::Shard`] runs both as one decision.

use super::api::TopicsView;
use super::api::{ConsumerHeartbeat, ConsumerHeartbeatResponse};
use super::classic::{to_ids, to_names};
use super::group::ConsumerGroup;
use super::leave::fence_member;
use super::member::{ClassicMemberMetadata, Member, MemberState};
use super::validate::validate;
use super::ConsumerGroups;
use crate::consumer_protocol;
use crate::migration::{ConvertedGroup, ConvertedMember};

impl ConsumerGroups {
    /// Removes `member_id` (it left with epoch -1, or its session, revocation, join or sync
    /// timeout passed). If it was the last member using the consumer protocol and the policy
    /// allows, the whole group becomes a classic one instead (the members left are handed over
    /// through [`take_downgrades`](Self::take_downgrades), the group's records tombstoned).
    pub(crate) fn fence(&mut self, group_id: &str, member_id: &str, topics: &TopicsView) {
        let Some(g) = self.groups.get(group_id) else {
            return;
        };
        if let Some(classic) = self.downgrade_of(g, member_id, topics) {
            tracing::info!(
                group = group_id,
                "last consumer-protocol member left: back to a classic group"
            );
            self.groups.remove(group_id);
            self.downgrades.push(classic);
            return;
        }
        if let Some(g) = self.groups.get_mut(group_id) {
            fence_member(g, member_id, topics);
        }
    }

    /// Kafka's `validateOnlineDowngradeWithFencedMember`, then the classic group the members
    /// left would form: its generation is the group epoch; each member brings its classic
    /// metadata and its target assignment (which the rebalance that follows starts from).
    /// Runnel adds one check Kafka's JoinGroup validation makes unnecessary there: the
    /// members have a protocol in common (a classic group cannot exist without one).
    fn downgrade_of(
        &self,
        g: &ConsumerGroup,
        leaving: &str,
        topics: &TopicsView,
    ) -> Option<ConvertedGroup> {
        let leaving_member = g.members.get(leaving)?;
        let others: Vec<&Member> = g.members.values().filter(|m| m.id != leaving).collect();
        let all_classic = leaving_member.classic.is_none()
            && others.iter().all(|m| m.classic.is_some())
            && !others.is_empty();
        if !all_classic
            || !self.config.migration_policy.downgrade_enabled()
            || others.len() > self.config.classic_max_size
        {
            return None;
        }
        let classic: Vec<&ClassicMemberMetadata> =
            others.iter().filter_map(|m| m.classic.as_ref()).collect();
        let common = classic.first()?.protocols.iter().any(|(name, _)| {
            classic
                .iter()
                .all(|c| c.protocols.iter().any(|(n, _)| n == name))
        });
        if !common {
            return None;
        }
        let members = others
            .iter()
            .filter_map(|m| {
                let c = m.classic.as_ref()?;
                Some(ConvertedMember {
                    id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: c.session_timeout_ms,
                    protocols: c.protocols.clone(),
                    assignment: g
                        .target
                        .get(&m.id)
                        .map(|t| to_names(t, topics))
                        .unwrap_or_default(),
                })
            })
            .collect();
        Some(ConvertedGroup {
            group_id: g.id.clone(),
            generation: g.group_epoch,
            protocol_name: None,
            members,
        })
    }

    /// The groups fences turned into classic groups since the last call; the classic
    /// coordinator must take them over in the same step (their records are one batch).
    pub(crate) fn take_downgrades(&mut self) -> Vec<ConvertedGroup> {
        std::mem::take(&mut self.downgrades)
    }

    /// Kafka's `ConsumerGroup.fromClassicGroup`: a classic group's members become members of
    /// a new consumer group at the classic generation (group, assignment and member epochs),
    /// Stable, each owning (and targeted with) its last classic assignment, subscribed to
    /// its subscription's topics. `Err` (a message) when a subscription cannot be read or two
    /// members' assignments overlap (the classic assignment came from a client; the consumer
    /// group must never have a partition owned twice): the group stays classic.
    pub(crate) fn adopt_upgraded(
        &mut self,
        now_ms: i64,
        classic: &ConvertedGroup,
        topics: &TopicsView,
    ) -> Result<(), String> {
        let protocol = classic
            .protocol_name
            .as_deref()
            .ok_or("the group has not chosen a protocol yet")?;
        let mut g = ConsumerGroup::new(&classic.group_id);
        g.group_epoch = classic.generation;
        g.assignment_epoch = classic.generation;
        for c in &classic.members {
            let subscription = c
                .protocols
                .iter()
                .find(|(n, _)| n == protocol)
                .and_then(|(_, meta)| consumer_protocol::decode_subscription(meta).ok())
                .ok_or_else(|| format!("the subscription of member {} is malformed", c.id))?;
            let assigned = to_ids(&c.assignment, topics);
            let mut m = Member::new(c.id.clone());
            m.member_epoch = classic.generation;
            m.previous_member_epoch = classic.generation;
            m.state = MemberState::Stable;
            m.instance_id = c.instance_id.clone();
            m.rack_id = subscription.rack_id;
            m.rebalance_timeout_ms = c.rebalance_timeout_ms;
            m.client_id = c.client_id.clone();
            m.client_host = c.client_host.clone();
            m.subscribed_topic_names = subscription.topics.into_iter().collect();
            m.assigned = assigned.clone();
            m.classic = Some(ClassicMemberMetadata {
                session_timeout_ms: c.session_timeout_ms,
                protocols: c.protocols.clone(),
            });
            m.session_deadline_ms = now_ms.saturating_add(i64::from(c.session_timeout_ms.max(0)));
            g.target.insert(c.id.clone(), assigned);
            g.put_member(m);
        }
        g.check_invariants()?;
        self.touch(&classic.group_id);
        self.groups.insert(classic.group_id.clone(), g);
        Ok(())
    }

    /// Drops a group [`adopt_upgraded`](Self::adopt_upgraded) created when the heartbeat that
    /// caused it was refused (nothing of it was written).
    pub(crate) fn forget_adopted(&mut self, group_id: &str) {
        self.groups.remove(group_id);
    }

    /// The request checks a heartbeat starts with, for callers that must check it before
    /// anything else (an upgrade happens only for a valid request).
    pub(crate) fn validate_heartbeat(
        &self,
        req: &ConsumerHeartbeat,
    ) -> Result<(), ConsumerHeartbeatResponse> {
        let interval = self.timeouts(&req.group_id).heartbeat_interval_ms;
        validate(req, &self.assignors)
            .map_err(|e| ConsumerHeartbeatResponse::error(e.code, e.message, interval))
    }
}
