//! Spec E.5: where a follower truncates so its log becomes a prefix of the leader's, and the
//! leader's side of Fetch v12+ (DivergingEpoch).
//!
//! The follower's records past the truncation point were written by a leader whose history
//! lost; keeping them would let two replicas serve different records at the same offset.
//! Both protocols reduce to the same step: the leader says "my epoch `E'` ended at `end`",
//! the follower keeps what it has of `E'` up to `end`. If the follower never saw `E'`, it
//! first cuts back to the end of the largest epoch it does know below `E'` and asks again
//! (KIP-279), because one round only compares one epoch boundary.

use crate::epoch_cache::{EpochEndOffset, LeaderEpochCache};

/// Where to truncate, and whether that is final or another round is needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TruncationState {
    /// Truncate the log (and the epoch cache, [`LeaderEpochCache::truncate_from_end`]) here.
    pub offset: i64,
    /// `true`: fetch from `offset`. `false`: ask again with the cache's new latest epoch
    /// (OffsetForLeaderEpoch, or the next Fetch's `LastFetchedEpoch`).
    pub completed: bool,
}

/// The follower's truncation step (Kafka's `getOffsetTruncationState`), given its epoch
/// cache, LEO and HW, and the leader's `reply` for the follower's latest epoch
/// (OffsetForLeaderEpoch) or its DivergingEpoch.
///
/// * Leader does not know the epoch (end offset -1): truncate to the follower's HW, the
///   pre-epoch rule, which is all that is left. A follower without any cached epoch uses
///   the same rule without asking.
/// * Leader answered without an epoch: truncate to `min(end, LEO)`.
/// * The follower knows `E'` as its floor epoch: truncate to `min(its end of E', end, LEO)`.
/// * Its floor epoch `F` for `E'` differs: truncate to `min(its end of F, LEO)`, not final.
/// * It knows no epoch `<= E'`: truncate to `min(end, LEO)`.
pub fn truncation_point(
    follower: &LeaderEpochCache,
    follower_leo: i64,
    follower_hw: i64,
    reply: EpochEndOffset,
) -> TruncationState {
    let done = |offset: i64| TruncationState {
        offset,
        completed: true,
    };
    if reply.is_undefined_offset() {
        return done(follower_hw.min(follower_leo));
    }
    if reply.epoch < 0 {
        return done(reply.end_offset.min(follower_leo));
    }
    let own = follower.end_offset_for(reply.epoch, follower_leo);
    if own.is_undefined_offset() {
        return done(reply.end_offset.min(follower_leo));
    }
    if own.epoch != reply.epoch {
        return TruncationState {
            offset: own.end_offset.min(follower_leo),
            completed: false,
        };
    }
    done(own.end_offset.min(reply.end_offset).min(follower_leo))
}

/// The leader's check of a Fetch v12+ partition (Kafka's
/// `validateFetchOffsetAndMaybeGetDivergingEpoch`): the follower says its log ends at
/// `fetch_offset` with a last batch of `last_fetched_epoch`. If the leader's own history
/// shows that epoch ended earlier, or that it never had it, the logs diverge and the answer
/// carries the leader's `(epoch, end offset)` for the follower to truncate with
/// [`truncation_point`] (no records are returned). `last_fetched_epoch < 0` (not sent) skips
/// the check.
///
/// The follower must start `LastFetchedEpoch` from its epoch cache's latest epoch (as Kafka
/// does), not from its last record's: a replica that was elected and wrote nothing has that
/// epoch only in its cache, and its next append of an older epoch would otherwise rewrite the
/// cache over a divergent record (the property test in `tests/replication/truncation.rs`
/// finds exactly that history).
pub fn diverging_epoch(
    leader: &LeaderEpochCache,
    leader_leo: i64,
    last_fetched_epoch: i32,
    fetch_offset: i64,
) -> Option<EpochEndOffset> {
    if last_fetched_epoch < 0 {
        return None;
    }
    let reply = leader.end_offset_for(last_fetched_epoch, leader_leo);
    (reply.epoch < last_fetched_epoch || reply.end_offset < fetch_offset).then_some(reply)
}
