//! Leaving and fencing. A member leaves with epoch -1 (gone: its partitions are freed and the
//! group epoch bumps so the others take them) or, if static, with -2 (kept with its
//! assignment, so a restart under the same instance id gets the same partitions back without
//! a rebalance). Fencing (session or revocation timeout) is the same removal, done by `tick`.

use super::api::Assignment;
use super::api::{ConsumerHeartbeat, ConsumerHeartbeatResponse, TopicsView};
use super::codes::*;
use super::group::ConsumerGroup;
use super::heartbeat::HbError;
use super::member::LEAVE_GROUP_STATIC_MEMBER_EPOCH;
use super::ConsumerGroups;
use crate::errors::KafkaError;

impl ConsumerGroups {
    /// Epoch -1 / -2 heartbeats (Kafka's `consumerGroupLeave`).
    pub(crate) fn leave(
        &mut self,
        req: &ConsumerHeartbeat,
        topics: &TopicsView,
    ) -> Result<ConsumerHeartbeatResponse, HbError> {
        let interval = self.timeouts(&req.group_id).heartbeat_interval_ms;
        let Some(g) = self.groups.get_mut(&req.group_id) else {
            return Err(KafkaError::new(
                UNKNOWN_MEMBER_ID,
                format!("Consumer group {} not found.", req.group_id),
            ));
        };
        let member_id = match req.instance_id.as_deref() {
            None => {
                if !g.members.contains_key(&req.member_id) {
                    return Err(KafkaError::new(
                        UNKNOWN_MEMBER_ID,
                        format!(
                            "Member {} is not a member of group {}.",
                            req.member_id, g.id
                        ),
                    ));
                }
                req.member_id.clone()
            }
            Some(instance) => {
                let Some(m) = g.static_member(instance) else {
                    return Err(KafkaError::new(
                        UNKNOWN_MEMBER_ID,
                        format!("Instance id {instance} is unknown."),
                    ));
                };
                if m.id != req.member_id {
                    return Err(KafkaError::new(
                        FENCED_INSTANCE_ID,
                        format!(
                            "Static member {} with instance id {instance} was fenced by member {}.",
                            req.member_id, m.id
                        ),
                    ));
                }
                m.id.clone()
            }
        };
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
            if let Some(m) = g.members.get_mut(&member_id) {
                tracing::info!(group = %g.id, member = %member_id, "static member left temporarily");
                m.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH;
                m.pending_revocation = Assignment::new();
                m.revocation_deadline_ms = None;
            }
        } else {
            tracing::info!(group = %g.id, member = %member_id, "member left");
            let group_id = g.id.clone();
            self.fence(&group_id, &member_id, topics);
        }
        Ok(ConsumerHeartbeatResponse {
            error_code: NONE,
            error_message: None,
            member_id: Some(member_id),
            member_epoch: req.member_epoch,
            heartbeat_interval_ms: interval,
            assignment: None,
        })
    }
}

/// Removes a member and bumps the group epoch (Kafka's `consumerGroupFenceMember`); the new
/// target is computed by the next heartbeat of any member.
pub(crate) fn fence_member(g: &mut ConsumerGroup, member_id: &str, topics: &TopicsView) {
    if g.remove_member(member_id).is_none() {
        return;
    }
    g.subscription_metadata = g.compute_subscription_metadata(topics);
    g.group_epoch = g.group_epoch.saturating_add(1);
}
