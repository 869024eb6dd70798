//! LeaveGroup (spec H.2 item 4; Kafka's `handleLeaveGroup`): v3+ batches of (member id,
//! instance id); v0-2 is a batch of one.

use super::rebalance::{remove_member_and_update_group, try_complete_join};
use super::GroupCoordinator;
use crate::api::Output;
use crate::errors::*;
use crate::state::GroupState;

impl GroupCoordinator {
    /// Removes the listed members. Returns the top-level code, one code per listed member (in
    /// order; empty when the top-level code is an error, as in Kafka's v3+ response) and the
    /// outputs of the resulting rebalance (parked joins it completes, the Empty-group record).
    /// For v0-2 the shell answers with the top-level code if non-zero, else the member's.
    ///
    /// A member may be named by instance id alone (member id ""), which is how admin tools
    /// remove static members. An unknown group gives per-member 25, like Kafka.
    pub fn leave(
        &mut self,
        now_ms: i64,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> (i16, Vec<i16>, Vec<Output>) {
        let mut out = Vec::new();
        if group_id.is_empty() {
            return (INVALID_GROUP_ID, Vec::new(), out);
        }
        let Some(g) = self.groups.get_mut(group_id) else {
            return (NONE, vec![UNKNOWN_MEMBER_ID; members.len()], out);
        };
        let cfg = &self.config;
        let mut codes = Vec::with_capacity(members.len());
        for (member_id, instance_id) in members {
            let instance = instance_id.as_deref();
            let code = if !member_id.is_empty() && g.is_static_member_fenced(member_id, instance) {
                FENCED_INSTANCE_ID
            } else if g.pending.contains_key(member_id) {
                if instance.is_some() {
                    // Pending ids are never static (Kafka throws here).
                    UNKNOWN_MEMBER_ID
                } else {
                    g.pending.remove(member_id);
                    if g.is(GroupState::PreparingRebalance) {
                        try_complete_join(cfg, g, now_ms, &mut out);
                    }
                    NONE
                }
            } else {
                let target = g
                    .static_member_id(instance)
                    .map(str::to_owned)
                    .or_else(|| g.has(member_id).then(|| member_id.clone()));
                match target {
                    Some(id) => {
                        remove_member_and_update_group(cfg, g, &id, now_ms, &mut out);
                        NONE
                    }
                    None => UNKNOWN_MEMBER_ID,
                }
            };
            codes.push(code);
        }
        self.debug_check();
        (NONE, codes, super::persist_first(out))
    }
}
