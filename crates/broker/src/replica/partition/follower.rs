//! The follower's side: the leader's batches appended as they are, its HW and log start
//! followed, truncation on divergence.

use runnel_log::LogError;

use super::producers::{rebuild_producer_state, record_replicated_producers, snapshot_on_roll};
use super::Partition;

impl Partition {
    /// Follower side: appends the leader's batches as they are (offsets and epochs kept) and
    /// takes the leader's high watermark, capped by what this replica has.
    pub fn append_as_follower(&self, records: &[u8], leader_hw: i64) -> Result<(), LogError> {
        let mut log = self.log.lock();
        if !records.is_empty() {
            if let Some(info) = log.append_as_follower(records)? {
                // Keep the idempotent-producer state as the leader's, so this replica checks
                // sequences correctly the moment it becomes the leader (Kafka updates its
                // ProducerStateManager on replication too).
                let mut producers = self.producers.lock();
                record_replicated_producers(&mut producers, &mut log, records, info.last_offset);
                snapshot_on_roll(&mut log, &producers);
            }
        }
        let hw = runnel_replication::follower_high_watermark(leader_hw, log.log_end_offset());
        log.set_high_watermark(hw);
        self.publish(&mut log);
        Ok(())
    }

    /// Follower side, after every fetch response: Kafka's follower
    /// `maybeIncrementLogStartOffset(leaderLogStartOffset)`. What the leader deleted
    /// (DeleteRecords, retention) goes here too, whole segments below it with it, or a later
    /// failover would bring the records back. Never past our HW (the log refuses that); a
    /// later fetch finishes the job.
    pub fn follow_leader_log_start(&self, leader_log_start: i64) -> Result<(), LogError> {
        let mut log = self.log.lock();
        let start = leader_log_start.min(log.high_watermark());
        if start > log.log_start_offset() {
            log.delete_records_before(start)?;
            self.publish(&mut log);
        }
        Ok(())
    }

    /// Follower side: cuts the log back to `offset` (a diverging tail, or past an unclean
    /// leader's end) and rebuilds the producer state from what remains, so sequences of the
    /// removed batches are not taken for duplicates.
    /// The state is rebuilt even when the truncation fails: a failure (a full disk refusing
    /// the index or epoch checkpoint rewrite) can come after the batches were already cut, and
    /// a state still holding them would answer a producer's retry as a duplicate of a batch
    /// the log no longer has (an acknowledged write lost).
    pub fn truncate_to(&self, offset: i64) -> Result<(), LogError> {
        let mut log = self.log.lock();
        let truncated = log.truncate_to(offset);
        *self.producers.lock() = rebuild_producer_state(&mut log);
        self.publish(&mut log);
        truncated
    }

    /// Follower side: our end is below the leader's log start: empty the log and restart it at
    /// `offset` (no producer state survives: the batches it described are gone).
    pub fn truncate_fully_and_start_at(&self, offset: i64) -> Result<(), LogError> {
        let mut log = self.log.lock();
        let restarted = log.truncate_fully_and_start_at(offset);
        *self.producers.lock() = rebuild_producer_state(&mut log);
        self.publish(&mut log);
        restarted
    }
}
