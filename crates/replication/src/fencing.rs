//! Spec E.7: the leader-epoch check of Fetch v9+, ListOffsets v4+ and OffsetForLeaderEpoch
//! v2+. A stale epoch means the requester missed a leader change and must refresh metadata;
//! a newer one means *this* broker has not seen the change yet, so the requester retries.

use crate::codes;

/// Checks a request's `current_leader_epoch` against the partition's: -1 disables the check,
/// older -> 74 FENCED_LEADER_EPOCH, newer -> 75 UNKNOWN_LEADER_EPOCH.
pub fn check_leader_epoch(requested: i32, current: i32) -> Result<(), i16> {
    if requested == -1 || requested == current {
        Ok(())
    } else if requested < current {
        Err(codes::FENCED_LEADER_EPOCH)
    } else {
        Err(codes::UNKNOWN_LEADER_EPOCH)
    }
}
