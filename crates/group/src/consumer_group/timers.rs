//! `tick`: the deadlines Kafka keeps in its timer wheel. A member whose session expired, or
//! that was asked to revoke partitions and did not confirm within its rebalance timeout, is
//! fenced, so one dead or stuck client cannot hold partitions away from the rest forever.
//! It is also the background step that resolves regex subscriptions (see `subscription`).

use super::api::TopicsView;
use super::member::{Member, MemberState};
use super::ConsumerGroups;

impl ConsumerGroups {
    /// Advances time to `now_ms` (the shell calls it every ~100 ms; a late tick fires
    /// everything due).
    pub fn tick(&mut self, now_ms: i64, topics: &TopicsView) {
        let mut changing = Vec::new();
        for g in self.groups.values_mut() {
            g.regexes.track(g.members.values());
            let expired = g.members.values().any(|m| is_due(m, now_ms));
            // Only groups this tick changes are noted for their records.
            if expired || g.regexes.refresh_due(now_ms, topics) {
                changing.push(g.id.clone());
            }
        }
        for id in &changing {
            self.touch(id);
        }
        for id in changing {
            let Some(g) = self.groups.get_mut(&id) else {
                continue;
            };
            g.refresh_regexes(now_ms, topics);
            let due: Vec<String> = g
                .members
                .values()
                .filter(|m| is_due(m, now_ms))
                .map(|m| m.id.clone())
                .collect();
            for member in due {
                tracing::info!(group = %id, %member, "member fenced: session, revocation, join or sync timeout");
                // A fence may turn the group into a classic one: its other members are gone
                // from here then.
                self.fence(&id, &member, topics);
            }
        }
        self.debug_check();
    }
}

/// Whether `m` is to be fenced at `now_ms`: its session expired, it did not confirm a
/// revocation within its rebalance timeout, or (a classic member) it did not join again or
/// sync within its rebalance timeout.
fn is_due(m: &Member, now_ms: i64) -> bool {
    let passed = |d: Option<i64>| d.is_some_and(|d| now_ms >= d);
    now_ms >= m.session_deadline_ms
        || (m.state == MemberState::UnrevokedPartitions && passed(m.revocation_deadline_ms))
        || passed(m.join_deadline_ms)
        || passed(m.sync_deadline_ms)
}
