//! Heartbeat (spec H.2 item 3; Kafka's `handleHeartbeat`): refreshes the member's session and
//! tells it whether a rebalance is under way.

use super::GroupCoordinator;
use crate::api::HeartbeatRequest;
use crate::errors::*;
use crate::state::GroupState;

impl GroupCoordinator {
    /// Heartbeat; returns the error code. 0 in Stable and CompletingRebalance (a member may
    /// heartbeat between its JoinGroup answer and its SyncGroup), 27 in PreparingRebalance
    /// (the session is refreshed anyway, so a member on its way to re-join is not expired).
    pub fn heartbeat(&mut self, now_ms: i64, req: &HeartbeatRequest) -> i16 {
        let code = self.heartbeat_inner(now_ms, req);
        self.debug_check();
        code
    }

    fn heartbeat_inner(&mut self, now_ms: i64, req: &HeartbeatRequest) -> i16 {
        if req.group_id.is_empty() {
            return INVALID_GROUP_ID;
        }
        let Some(g) = self.groups.get_mut(&req.group_id) else {
            return UNKNOWN_MEMBER_ID;
        };
        if g.is_static_member_fenced(&req.member_id, req.group_instance_id.as_deref()) {
            return FENCED_INSTANCE_ID;
        }
        let generation = g.generation;
        let state = g.state;
        let Some(m) = g.members.get_mut(&req.member_id) else {
            return UNKNOWN_MEMBER_ID;
        };
        if req.generation_id != generation {
            return ILLEGAL_GENERATION;
        }
        match state {
            GroupState::Empty | GroupState::Dead => UNKNOWN_MEMBER_ID,
            GroupState::CompletingRebalance | GroupState::Stable => {
                m.refresh_session(now_ms);
                NONE
            }
            GroupState::PreparingRebalance => {
                m.refresh_session(now_ms);
                REBALANCE_IN_PROGRESS
            }
        }
    }
}
