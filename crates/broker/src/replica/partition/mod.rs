//! One partition replica hosted by this broker: its log, its role from the metadata image, the
//! idempotent-producer state, the group commit of fsyncs, and the waits of the data path
//! (until replicated, until readable) on the partition's own progress watch.
//!
//! The type and its state live here; its operations are split by job, one `impl Partition`
//! per file: `transitions` (the image's role, leader / follower), `append` (the leader's
//! append), `follower_fetch` (serving a follower's fetch), `isr` (ISR changes), `acks`
//! (acks=all), `follower` (the follower's side), `producers` (the idempotent-producer state),
//! `txn` (markers), `flush` (the fsync group commit), `wait` (the progress watch).
//!
//! Lock order, kept in this module only: log, then leader state, then producers. Other code
//! sees the log only through [`Partition::lock_log`], alone.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard, RwLock};
use runnel_log::{LogConfig, PartitionLog, SharedLog};
use runnel_metadata::EffectiveTopicConfig;
use runnel_replication::LeaderPartitionState;
use tokio::sync::watch;
use uuid::Uuid;

mod acks;
mod append;
mod flush;
mod follower;
mod follower_fetch;
mod isr;
mod producers;
mod transitions;
mod txn;
mod wait;

pub use append::{Appended, Refused};
pub use follower_fetch::{FollowerFetch, FollowerPosition, ReadReplicaView};
pub use isr::IsrAnswer;
pub use wait::{any_progress, join_all, Progress, ReadBound, Replicated};

use crate::producer_state::ProducerStateTable;
use producers::rebuild_producer_state;

/// The role this broker plays for the partition, as of the last applied image.
#[derive(Debug, Clone)]
pub struct Role {
    pub leader: i32,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
    pub replicas: Vec<i32>,
    /// The replicas whose brokers are registered, unfenced and not shutting down: the others
    /// may not join the ISR (KIP-841) nor hold the HW back from outside it (spec E.3).
    pub live_replicas: Vec<i32>,
    /// The partition epoch of the image this role comes from (AlterPartition must match it).
    pub partition_epoch: i32,
    pub config: Arc<EffectiveTopicConfig>,
}

pub struct Partition {
    pub topic: String,
    pub index: i32,
    pub topic_id: Uuid,
    log: SharedLog,
    /// This broker's id: the leader's own LEO counts for the high watermark.
    node_id: i32,
    /// `replica.lag.time.max.ms`: how long a follower counts as caught up (spec E.2, E.3).
    lag_max_ms: i64,
    /// While this broker leads: the pure leader state of spec E.2 - E.4 (follower positions
    /// and caught-up times, the committed and pending ISR, the HW), the same code the
    /// replication simulation checks. The log's HW follows it. Lock order: log, then this.
    leader_state: Mutex<Option<LeaderPartitionState>>,
    role: RwLock<Role>,
    producers: Mutex<ProducerStateTable>,
    /// Offset up to which the log is known to be fsynced (exclusive).
    flushed: watch::Sender<i64>,
    flushing: AtomicBool,
    /// LEO, HW and leadership as last published: waiters of this partition (acks=all
    /// produces, long-polling fetches, group commits, DeleteRecords) wake on its changes only.
    progress: watch::Sender<Progress>,
}

/// Moves the log's HW up to the leader state's; returns whether it moved.
fn publish_high_watermark(state: &LeaderPartitionState, log: &mut PartitionLog) -> bool {
    let hw = state.high_watermark().min(log.log_end_offset());
    if hw > log.high_watermark() {
        log.set_high_watermark(hw);
        true
    } else {
        false
    }
}

/// Maps the effective topic configuration onto the log's settings.
pub fn log_config(c: &EffectiveTopicConfig) -> LogConfig {
    LogConfig {
        segment_bytes: c.segment_bytes,
        segment_ms: c.segment_ms,
        retention_ms: c.retention_ms,
        retention_bytes: c.retention_bytes,
        index_interval_bytes: c.index_interval_bytes,
        max_index_bytes: c.segment_index_bytes,
        file_delete_delay_ms: c.file_delete_delay_ms.max(0) as u64,
        flush_interval_messages: if c.flush_messages <= 0 {
            1
        } else {
            c.flush_messages as u64
        },
    }
}

impl Partition {
    pub fn new(
        topic: String,
        index: i32,
        topic_id: Uuid,
        log: SharedLog,
        role: Role,
        node_id: i32,
        lag_max_ms: i64,
    ) -> Self {
        let flushed_to = log.lock().recovery_point();
        let producers = rebuild_producer_state(&mut log.lock());
        let first_unstable = producers.first_unstable_offset();
        let progress = watch::Sender::new(Progress::of(&log.lock(), &role, first_unstable));
        let partition = Partition {
            topic,
            index,
            topic_id,
            log,
            node_id,
            lag_max_ms,
            leader_state: Mutex::new(None),
            role: RwLock::new(role),
            producers: Mutex::new(producers),
            flushed: watch::Sender::new(flushed_to),
            flushing: AtomicBool::new(false),
            progress,
        };
        let mut log = partition.log.lock();
        partition.sync_leader_state(&partition.role(), &mut log);
        partition.publish(&mut log);
        drop(log);
        partition
    }

    /// The log, for reads and maintenance that need nothing else of the partition (offset
    /// lookups, retention, compaction, DeleteRecords, loaders). Hold it alone: the
    /// partition's own operations take its other locks after it.
    pub fn lock_log(&self) -> MutexGuard<'_, PartitionLog> {
        self.log.lock()
    }

    /// The high watermark (offsets below it are committed).
    pub fn high_watermark(&self) -> i64 {
        self.progress.borrow().high_watermark
    }

    /// The log end offset (the next offset an append gets).
    pub fn log_end_offset(&self) -> i64 {
        self.progress.borrow().log_end_offset
    }

    /// The last stable offset: read_committed consumers read below it (KIP-98).
    pub fn last_stable_offset(&self) -> i64 {
        self.progress.borrow().last_stable_offset
    }

    /// A receiver of this partition's progress, its current value marked seen: a change
    /// after this call wakes `changed()`. Subscribe before checking a condition.
    pub fn subscribe(&self) -> watch::Receiver<Progress> {
        self.progress.subscribe()
    }

    /// Publishes the log's LEO and HW and the role's leadership; wakes this partition's
    /// waiters if any of them moved; tells the log where its first open transaction starts.
    /// Called with the log locked after every change.
    pub(super) fn publish(&self, log: &mut PartitionLog) {
        let first_unstable = self.producers.lock().first_unstable_offset();
        // The cleaner stays below the first open transaction (its outcome is not known yet).
        log.set_first_unstable_offset(first_unstable);
        let now = Progress::of(log, &self.role.read(), first_unstable);
        self.progress.send_if_modified(|p| {
            let changed = p.position() != now.position();
            if changed {
                *p = Progress {
                    changes: p.changes,
                    ..now
                };
            }
            changed
        });
    }

    /// Wakes this partition's waiters although LEO, HW and leadership stayed (a follower's log
    /// start moved, the partition left this broker): they re-check their own conditions.
    pub fn wake_waiters(&self) {
        self.progress
            .send_modify(|p| p.changes = p.changes.wrapping_add(1));
    }

    pub fn role(&self) -> Role {
        self.role.read().clone()
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod txn_tests;
