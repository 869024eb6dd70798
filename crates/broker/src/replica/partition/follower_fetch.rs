//! The leader's side of follower fetches: a verified follower's position (divergence, the HW,
//! the low watermark) and the view of its replicas KIP-392 selects from.

use runnel_log::PartitionLog;
use runnel_replication::{diverging_epoch, EpochEndOffset};

use super::{publish_high_watermark, Partition};
use crate::clock::now_ms;

/// What a follower's fetch changed on the leader.
#[derive(Debug, Default)]
pub struct FollowerFetch {
    /// The HW moved: wake acks=all waiters and consumers.
    pub hw_changed: bool,
    /// The follower caught up: send this AlterPartition (the change is now pending).
    pub propose: Option<crate::controller::shell::AlterIsr>,
}

/// How the leader took a verified follower's fetch position ([`Partition::serve_follower_fetch`]).
#[derive(Debug)]
pub enum FollowerPosition {
    /// The follower's log diverged from ours (`runnel_replication::diverging_epoch`): answer
    /// this DivergingEpoch and no records; the position counts for nothing (as in Kafka).
    Diverging {
        epoch_end: EpochEndOffset,
        high_watermark: i64,
        log_start_offset: i64,
    },
    /// The position lies in our log and was recorded: read from it. `propose` is an ISR
    /// expansion to send (now pending).
    Recorded {
        propose: Option<crate::controller::shell::AlterIsr>,
    },
    /// Outside our log: the read answers OFFSET_OUT_OF_RANGE; nothing recorded.
    OutsideLog,
}

/// The leader's view of its replicas for KIP-392 ([`Partition::read_replica_view`]).
#[derive(Debug, Clone)]
pub struct ReadReplicaView {
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    /// (follower, its state on the leader, in the committed ISR).
    pub followers: Vec<(i32, runnel_replication::FollowerState, bool)>,
}

impl Partition {
    /// Leader side of a verified follower's fetch (the caller has checked that the fetcher is
    /// a replica with its broker epoch, and its leader epoch): one look at the log decides
    /// what the position means. A last fetched epoch (Fetch v12+, `None` before) our history
    /// contradicts is a divergence (`runnel_replication::diverging_epoch`); otherwise a
    /// position inside our log is the follower's LEO and `follower_log_start` its log start:
    /// they may move the HW, the ISR and the low watermark, and wake this partition's waiters.
    pub fn serve_follower_fetch(
        &self,
        replica: i32,
        fetch_offset: i64,
        last_fetched_epoch: Option<i32>,
        follower_log_start: i64,
    ) -> FollowerPosition {
        let mut log = self.log.lock();
        let diverged = last_fetched_epoch.and_then(|epoch| {
            diverging_epoch(log.epoch_cache(), log.log_end_offset(), epoch, fetch_offset)
        });
        if let Some(epoch_end) = diverged {
            return FollowerPosition::Diverging {
                epoch_end,
                high_watermark: log.high_watermark(),
                log_start_offset: log.log_start_offset(),
            };
        }
        if fetch_offset < log.log_start_offset() || fetch_offset > log.log_end_offset() {
            return FollowerPosition::OutsideLog;
        }
        let (fetched, log_start_moved) =
            self.record_follower_fetch_locked(&mut log, replica, fetch_offset, follower_log_start);
        self.publish(&mut log);
        drop(log);
        if log_start_moved {
            self.wake_waiters();
        }
        FollowerPosition::Recorded {
            propose: fetched.propose,
        }
    }

    /// Leader side: a follower fetched from `fetch_offset`, so it has everything below it
    /// (the position lies in this log and does not diverge). Tests drive the HW rules with it.
    #[cfg(test)]
    pub fn record_follower_fetch(&self, replica: i32, fetch_offset: i64) -> FollowerFetch {
        let mut log = self.log.lock();
        let (fetched, _) = self.record_follower_fetch_locked(&mut log, replica, fetch_offset, 0);
        self.publish(&mut log);
        fetched
    }

    /// The follower's position and log start into the leader state, the HW into the log.
    /// Returns what changed and whether the follower's log start moved.
    fn record_follower_fetch_locked(
        &self,
        log: &mut PartitionLog,
        replica: i32,
        fetch_offset: i64,
        follower_log_start: i64,
    ) -> (FollowerFetch, bool) {
        let mut state = self.leader_state.lock();
        let Some(s) = state.as_mut() else {
            return (FollowerFetch::default(), false);
        };
        let Ok(outcome) = s.on_follower_fetch(replica, fetch_offset, now_ms()) else {
            return (FollowerFetch::default(), false);
        };
        let log_start_moved = s.on_follower_log_start(replica, follower_log_start);
        let fetched = FollowerFetch {
            hw_changed: publish_high_watermark(s, log),
            propose: outcome.isr_expand.map(|isr| self.isr_request(s, isr)),
        };
        (fetched, log_start_moved)
    }

    /// Leader side, for KIP-392's replica selection: the leader's log start and end, and each
    /// follower's state (as of its last fetch) with its membership of the committed ISR (Kafka's
    /// `inSyncReplicaIds`); `None` when not the leader.
    pub fn read_replica_view(&self) -> Option<ReadReplicaView> {
        let log = self.log.lock();
        let state = self.leader_state.lock();
        let s = state.as_ref()?;
        let followers = s
            .replicas()
            .iter()
            .filter(|&&r| r != self.node_id)
            .filter_map(|&r| s.follower(r).map(|f| (r, *f, s.isr().contains(&r))))
            .collect();
        Some(ReadReplicaView {
            log_start_offset: log.log_start_offset(),
            log_end_offset: log.log_end_offset(),
            followers,
        })
    }

    /// Leader side: the low watermark (the smallest log start over this log and the live
    /// followers, [`LeaderPartitionState::low_watermark`]); `None` when not the leader.
    pub fn low_watermark(&self) -> Option<i64> {
        let log_start = self.log.lock().log_start_offset();
        let state = self.leader_state.lock();
        state.as_ref().map(|s| s.low_watermark(log_start))
    }
}
