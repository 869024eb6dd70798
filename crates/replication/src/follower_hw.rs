//! The follower's high watermark (spec E.3): what a fetch response's HW becomes on the
//! follower. Kafka's follower sets its HW to the leader's, capped at its own LEO
//! (`UnifiedLog.updateHighWatermark`), even when that is below the HW it had: after a leader
//! change the new leader's HW may start below the old leader's, and the follower follows it
//! (every offset below either is committed, so nothing committed is exposed or lost).

/// The follower's new HW for a fetch response carrying `leader_hw`, with the follower's log
/// ending at `log_end_offset` (the log also keeps it at or above its log start).
pub fn follower_high_watermark(leader_hw: i64, log_end_offset: i64) -> i64 {
    leader_hw.min(log_end_offset)
}
