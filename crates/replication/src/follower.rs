//! What a partition leader knows about one follower, and spec E.2's "caught up" rule.
//!
//! The leader never sees a follower's log directly: a follower's fetch offset *is* its log
//! end offset (it asks for the next offset it lacks). From the sequence of fetches the leader
//! derives when the follower was last caught up, which drives both ISR shrinking and the
//! high watermark.

/// A log end offset the leader has not learned yet (Kafka's `UnknownOffset`): a follower has
/// not fetched since this broker became leader.
pub const UNKNOWN_OFFSET: i64 = -1;

/// The leader's view of one follower (Kafka's `Replica` on the leader).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerState {
    /// The follower's log end offset, as reported by its last fetch ([`UNKNOWN_OFFSET`] until
    /// it fetches from this leader).
    pub log_end_offset: i64,
    /// The last time the follower was known to be caught up with the leader.
    pub last_caught_up_time_ms: i64,
    /// When its previous fetch arrived.
    pub last_fetch_time_ms: i64,
    /// The leader's LEO when the previous fetch arrived.
    pub last_fetch_leader_leo: i64,
    /// The follower's log start offset, as reported by its last fetch ([`UNKNOWN_OFFSET`]
    /// until it fetches from this leader): DeleteRecords waits for it (the low watermark).
    pub log_start_offset: i64,
}

impl FollowerState {
    /// The state a new leader starts from (Kafka's `resetReplicaState` for a new leader).
    ///
    /// The follower's position is unknown until it fetches. A follower in the ISR counts as
    /// caught up *now*, so it is given a full `replica.lag.time.max.ms` to fetch before it
    /// may be shrunk; one outside the ISR was never caught up (time 0). The "previous fetch"
    /// is pretended to have happened now at the leader's current LEO, so a first fetch at
    /// that position counts as caught up.
    pub fn new_for_leader(leader_leo: i64, now_ms: i64, in_isr: bool) -> Self {
        Self {
            log_end_offset: UNKNOWN_OFFSET,
            last_caught_up_time_ms: if in_isr { now_ms } else { 0 },
            last_fetch_time_ms: now_ms,
            last_fetch_leader_leo: leader_leo,
            log_start_offset: UNKNOWN_OFFSET,
        }
    }

    /// Records a fetch at `fetch_offset` that arrived at `now_ms` while the leader's LEO was
    /// `leader_leo` (Kafka's `Replica.updateFetchState`).
    ///
    /// A fetch that reads up to the leader's current LEO proves the follower was caught up
    /// now. One that only reaches the LEO the leader had at the *previous* fetch proves it
    /// was caught up then: a follower that keeps up with a busy leader is always one fetch
    /// behind, and must not be treated as lagging for that. The caught-up time never moves
    /// backwards.
    pub fn record_fetch(&mut self, fetch_offset: i64, leader_leo: i64, now_ms: i64) {
        if fetch_offset >= leader_leo {
            self.last_caught_up_time_ms = self.last_caught_up_time_ms.max(now_ms);
        } else if fetch_offset >= self.last_fetch_leader_leo {
            self.last_caught_up_time_ms = self.last_caught_up_time_ms.max(self.last_fetch_time_ms);
        }
        self.log_end_offset = fetch_offset;
        self.last_fetch_leader_leo = leader_leo;
        self.last_fetch_time_ms = now_ms;
    }

    /// Kafka's `Replica.isCaughtUp`: the follower has the leader's whole log, or was caught up
    /// no longer than `lag_max_ms` ago. Used both to keep a follower in the ISR (E.2) and to
    /// let a caught-up non-ISR follower hold the HW back so it can rejoin (E.3).
    pub fn is_caught_up(&self, leader_leo: i64, now_ms: i64, lag_max_ms: i64) -> bool {
        self.log_end_offset == leader_leo
            || now_ms.saturating_sub(self.last_caught_up_time_ms) <= lag_max_ms
    }
}
