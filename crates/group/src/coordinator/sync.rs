//! SyncGroup (spec H.2 item 2; Kafka's `doSyncGroup`): followers park until the leader sends
//! the assignment; the leader's sync persists the group record and answers everyone.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::rebalance::propagate_assignment;
use super::GroupCoordinator;
use crate::api::{Output, RequestId, SyncRequest, SyncResponse};
use crate::errors::*;
use crate::state::GroupState;

impl GroupCoordinator {
    /// SyncGroup. Errors and the Stable-group answer come back at once as
    /// `Output::Sync(req_id, ..)`. In CompletingRebalance the request is parked; the leader's
    /// sync emits `Output::Persist` (the group record with every member's assignment; members
    /// the leader left out get an empty one) followed by an `Output::Sync` for every parked
    /// member, and the group becomes Stable.
    pub fn sync(&mut self, now_ms: i64, req_id: RequestId, req: SyncRequest) -> Vec<Output> {
        let mut out = Vec::new();
        let code = self.sync_inner(now_ms, req_id, req, &mut out);
        if let Some(code) = code {
            out.push(Output::Sync(req_id, SyncResponse::error(code)));
        }
        self.debug_check();
        super::persist_first(out)
    }

    /// Returns an error code to answer with, or None when answered/parked via `out`.
    fn sync_inner(
        &mut self,
        now_ms: i64,
        req_id: RequestId,
        req: SyncRequest,
        out: &mut Vec<Output>,
    ) -> Option<i16> {
        if req.group_id.is_empty() {
            return Some(INVALID_GROUP_ID);
        }
        let Some(g) = self.groups.get_mut(&req.group_id) else {
            return Some(UNKNOWN_MEMBER_ID);
        };
        let member_id = req.member_id.as_str();
        if g.is_static_member_fenced(member_id, req.group_instance_id.as_deref()) {
            return Some(FENCED_INSTANCE_ID);
        }
        if !g.has(member_id) {
            return Some(UNKNOWN_MEMBER_ID);
        }
        if req.generation_id != g.generation {
            return Some(ILLEGAL_GENERATION);
        }
        if req
            .protocol_type
            .as_ref()
            .is_some_and(|t| g.protocol_type.as_ref() != Some(t))
            || req
                .protocol_name
                .as_ref()
                .is_some_and(|n| g.protocol_name.as_ref() != Some(n))
        {
            return Some(INCONSISTENT_GROUP_PROTOCOL);
        }
        match g.state {
            GroupState::Empty | GroupState::Dead => Some(UNKNOWN_MEMBER_ID),
            GroupState::PreparingRebalance => Some(REBALANCE_IN_PROGRESS),
            GroupState::Stable => {
                let m = g.members.get_mut(member_id)?;
                m.refresh_session(now_ms);
                out.push(Output::Sync(
                    req_id,
                    SyncResponse {
                        error_code: NONE,
                        protocol_type: g.protocol_type.clone(),
                        protocol_name: g.protocol_name.clone(),
                        assignment: m.assignment.clone(),
                    },
                ));
                None
            }
            GroupState::CompletingRebalance => {
                let m = g.members.get_mut(member_id)?;
                if let Some(old) = m.awaiting_sync.replace(req_id) {
                    // A retry from another connection supersedes the parked one.
                    out.push(Output::Sync(
                        old,
                        SyncResponse::error(REBALANCE_IN_PROGRESS),
                    ));
                }
                if g.is_leader(member_id) {
                    // Later entries win, like Kafka's map built from the list.
                    let assignments: BTreeMap<String, Bytes> =
                        req.assignments.into_iter().collect();
                    for m in g.members.values_mut() {
                        m.assignment = assignments.get(&m.id).cloned().unwrap_or_default();
                    }
                    out.push(Output::Persist(vec![g.metadata_record()]));
                    propagate_assignment(g, now_ms, out);
                    g.transition_to(GroupState::Stable, now_ms);
                }
                None
            }
        }
    }
}
