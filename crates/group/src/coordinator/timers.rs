//! `tick`: everything Kafka drives with purgatory timers and scheduled tasks: pending-member
//! expiry, session expiry, join-phase completion (initial delay, rebalance timeout) and the
//! periodic offset expiry.

use super::rebalance::{on_join_timer, remove_member_and_update_group, try_complete_join};
use super::GroupCoordinator;
use crate::api::Output;
use crate::state::GroupState;

impl GroupCoordinator {
    /// Advances time to `now_ms`. The shell calls it every ~100 ms; deadlines are checked
    /// against `now_ms`, so a late tick simply fires everything that is due.
    pub fn tick(&mut self, now_ms: i64) -> Vec<Output> {
        let mut out = Vec::new();
        let cfg = &self.config;
        for g in self.groups.values_mut() {
            // Member ids handed out with 79 whose owner never came back.
            let before = g.pending.len();
            g.pending.retain(|_, deadline| now_ms < *deadline);
            if g.pending.len() != before && g.is(GroupState::PreparingRebalance) {
                try_complete_join(cfg, g, now_ms, &mut out);
            }
            // Sessions. Re-check each one: removing a member can complete a join phase,
            // which refreshes everyone else's session.
            let expired: Vec<String> = g
                .members
                .values()
                .filter(|m| m.is_expired(now_ms))
                .map(|m| m.id.clone())
                .collect();
            for id in expired {
                if g.members.get(&id).is_some_and(|m| m.is_expired(now_ms)) {
                    tracing::info!(group = %g.id, member = %id, "member session expired");
                    remove_member_and_update_group(cfg, g, &id, now_ms, &mut out);
                }
            }
            if g.join_timer.is_some_and(|t| now_ms >= t.deadline_ms()) {
                on_join_timer(cfg, g, now_ms, &mut out);
            }
        }
        if self.next_offset_expiry_ms.is_none_or(|at| now_ms >= at) {
            self.next_offset_expiry_ms =
                Some(now_ms.saturating_add(self.config.offsets_retention_check_interval_ms.max(1)));
            let tombstones = self.expire_offsets(now_ms);
            if !tombstones.is_empty() {
                out.push(Output::Persist(tombstones));
            }
        }
        self.debug_check();
        super::persist_first(out)
    }
}
