//! One partition replica hosted by this broker: its log, its role from the metadata image, the
//! idempotent-producer state, the group commit of fsyncs, and the waits of the data path
//! (until replicated, until readable) on the partition's own progress watch.
//!
//! Lock order, kept in this file only: log, then leader state, then producers. Other files
//! see the log only through [`Partition::lock_log`], alone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard, RwLock};
use runnel_log::batch::{self, BatchHeader};
use runnel_log::control::{self, Marker};
use runnel_log::validate;
use runnel_log::{AppendInfo, LogConfig, LogError, PartitionLog, SharedLog};
use runnel_metadata::EffectiveTopicConfig;
use runnel_replication::{
    check_min_isr, diverging_epoch, ineligible_replicas, AcksOutcome, AlterPartitionFailure,
    BecomeLeader, EpochEndOffset, LeaderConfig, LeaderImage, LeaderPartitionState,
};
use tokio::sync::watch;
use uuid::Uuid;

#[path = "partition_wait.rs"]
mod wait;
pub use wait::{any_progress, join_all, Progress, ReadBound, Replicated};

use crate::clock::now_ms;
use crate::errors::code;
use crate::producer_state::{last_seq, ProducerStateTable, SequenceCheck};

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

/// What a follower's fetch changed on the leader.
#[derive(Debug, Default)]
pub struct FollowerFetch {
    /// The HW moved: wake acks=all waiters and consumers.
    pub hw_changed: bool,
    /// The follower caught up: send this AlterPartition (the change is now pending).
    pub propose: Option<crate::controller_shell::AlterIsr>,
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
        propose: Option<crate::controller_shell::AlterIsr>,
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

/// What the controller's answer to an ISR change means for the leader.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct IsrAnswer {
    /// Send the same request again (after a pause).
    pub retry: bool,
    /// The committed ISR let the HW move: wake acks=all waiters and consumers.
    pub hw_changed: bool,
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

/// Result of a leader append, per partition of a Produce request.
#[derive(Debug, Clone, Copy)]
pub struct Appended {
    pub base_offset: i64,
    pub last_offset: i64,
    pub log_start_offset: i64,
    /// True when nothing was written because every batch was a retry of an appended one.
    pub duplicate: bool,
    /// The broker time stamped on the batches (LogAppendTime topics), else -1.
    pub log_append_time: i64,
    /// The leader epoch the records were appended (or found) in: acks=all must still be the
    /// leader of this epoch when the high watermark covers them.
    pub leader_epoch: i32,
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
    fn publish(&self, log: &mut PartitionLog) {
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

    pub fn set_role(&self, role: Role) {
        let config_changed = *self.role.read().config != *role.config;
        if config_changed {
            self.log.lock().update_config(log_config(&role.config));
        }
        *self.role.write() = role.clone();
        let mut log = self.log.lock();
        self.sync_leader_state(&role, &mut log);
        self.publish(&mut log);
    }

    /// Brings the leader state in line with the image's role: created on becoming leader
    /// (a new leader epoch), dropped on becoming a follower, otherwise given the committed ISR,
    /// the assignment, the config and the ineligible brokers. Returns whether the HW moved.
    fn sync_leader_state(&self, role: &Role, log: &mut PartitionLog) -> bool {
        let mut state = self.leader_state.lock();
        if role.leader != self.node_id {
            *state = None;
            return false;
        }
        let now = now_ms();
        let config = LeaderConfig {
            replica_lag_time_max_ms: self.lag_max_ms,
            min_insync_replicas: role.config.min_insync_replicas,
        };
        let ineligible = ineligible_replicas(&role.replicas, |r| role.live_replicas.contains(&r));
        let current = state
            .as_mut()
            .filter(|s| s.leader_epoch() == role.leader_epoch);
        let s = match current {
            Some(s) => {
                let image = LeaderImage {
                    replicas: &role.replicas,
                    isr: &role.isr,
                    partition_epoch: role.partition_epoch,
                    ineligible,
                };
                s.on_image(image, config, now);
                s
            }
            None => {
                if let Err(e) = log.assign_leader_epoch(role.leader_epoch) {
                    tracing::error!(topic = %self.topic, partition = self.index, error = %e, "cannot record the new leader epoch");
                }
                let mut fresh = LeaderPartitionState::new(
                    BecomeLeader {
                        leader: self.node_id,
                        replicas: role.replicas.clone(),
                        isr: role.isr.clone(),
                        leader_epoch: role.leader_epoch,
                        partition_epoch: role.partition_epoch,
                        log_end_offset: log.log_end_offset(),
                        high_watermark: log.high_watermark(),
                    },
                    config,
                    now,
                );
                fresh.set_ineligible_replicas(ineligible);
                state.insert(fresh)
            }
        };
        publish_high_watermark(s, log)
    }

    /// Appends a Produce request's records as the leader. Errors are Kafka error codes.
    pub fn append_as_leader(
        &self,
        records: &[u8],
        node_id: i32,
        acks: i16,
    ) -> Result<Appended, (i16, String)> {
        self.append_as_leader_reporting(records, node_id, acks)
            .map_err(|(code, message, _)| (code, message))
    }

    /// [`Self::append_as_leader`], with the records refused for their content (Produce v8+
    /// `record_errors`, KIP-467) when the batch is refused for them.
    pub fn append_as_leader_reporting(
        &self,
        records: &[u8],
        node_id: i32,
        acks: i16,
    ) -> Result<Appended, (i16, String, Vec<validate::RecordError>)> {
        self.append_leader(records, node_id, acks, true)
    }

    /// A coordinator's own batch (a TxnOffsetCommit's transactional records): appended like
    /// a client's, but the producer's sequence numbers are not checked, only its epoch
    /// (Kafka's `AppendOrigin.COORDINATOR`).
    pub fn append_as_coordinator(
        &self,
        records: &[u8],
        node_id: i32,
    ) -> Result<Appended, (i16, String)> {
        self.append_leader(records, node_id, 1, false)
            .map_err(|(code, message, _)| (code, message))
    }

    fn append_leader(
        &self,
        records: &[u8],
        node_id: i32,
        acks: i16,
        check_sequences: bool,
    ) -> Result<Appended, (i16, String, Vec<validate::RecordError>)> {
        let no_records = |(code, message)| (code, message, Vec::new());
        let role = self.role();
        if role.leader != node_id {
            return Err((code::NOT_LEADER_OR_FOLLOWER, String::new(), Vec::new()));
        }
        // acks=all is refused before anything is written when the committed ISR is too small
        // (spec E.4, `runnel_replication::acks`).
        if acks == -1 {
            self.can_accept_acks_all(&role)
                .map_err(|e| (code::NOT_ENOUGH_REPLICAS, e.to_string(), Vec::new()))?;
        }
        let max = role.config.max_message_bytes.max(0) as usize;
        // Headers and every record (streamed, bounded decompression; keys on compacted topics;
        // on CreateTime topics each record's timestamp against KIP-937's bounds).
        let mut rules = validate::RecordRules::new(role.config.compacts());
        if role.config.message_timestamp_type != "LogAppendTime" {
            rules = rules.with_timestamp_bounds(
                now_ms(),
                role.config.message_timestamp_before_max_ms,
                role.config.message_timestamp_after_max_ms,
            );
        }
        let headers = validate::validate_produce(records, max, rules).map_err(|e| {
            let record_errors = e.record_errors().to_vec();
            (e.kafka_error_code(), e.to_string(), record_errors)
        })?;
        // The headers' own first and max timestamps too: the records passed, so only a batch
        // whose header disagrees with its records (forged) can fail here; the header's max
        // timestamp feeds the time index and retention.
        if role.config.message_timestamp_type != "LogAppendTime" {
            check_timestamps(&headers, &role.config, now_ms()).map_err(no_records)?;
        }
        // LogAppendTime topics: the broker's clock replaces the producer's (a copy, because the
        // CRC must change); every other topic stores the producer's bytes untouched.
        let mut log_append_time = -1;
        let stamped;
        let records = if role.config.message_timestamp_type == "LogAppendTime" {
            log_append_time = now_ms();
            let mut copy = records.to_vec();
            let mut at = 0;
            for h in &headers {
                batch::set_log_append_time(&mut copy[at..at + h.total_size()], log_append_time);
                at += h.total_size();
            }
            stamped = copy;
            &stamped[..]
        } else {
            records
        };
        let mut log = self.log.lock();
        // A failed log (or log directory) answers KAFKA_STORAGE_ERROR before any sequence is
        // looked at, as Kafka's offline partition does: answering a gap left by a refused
        // batch with OUT_OF_ORDER_SEQUENCE_NUMBER makes librdkafka bump its epoch and resend
        // possibly written batches as new ones (known case 6, docs/faults.md).
        log.check_writable()
            .map_err(|e| (e.kafka_error_code(), e.to_string(), Vec::new()))?;
        let mut producers = self.producers.lock();
        // Idempotence: decide for every batch before writing any of them.
        let mut duplicate_of = None;
        for h in headers.iter().filter(|h| h.producer_id >= 0) {
            let last = last_seq(h.base_sequence, h.record_count);
            let check = if check_sequences {
                producers.check(h.producer_id, h.producer_epoch, h.base_sequence, last)
            } else {
                producers.check_epoch(h.producer_id, h.producer_epoch)
            };
            match check {
                SequenceCheck::Append => {}
                SequenceCheck::Duplicate { first_offset } if headers.len() == 1 => {
                    duplicate_of = Some((first_offset, h.last_offset_delta));
                }
                SequenceCheck::Duplicate { .. } => {
                    return Err((code::DUPLICATE_SEQUENCE_NUMBER, String::new(), Vec::new()))
                }
                SequenceCheck::Reject { error_code } => {
                    return Err((error_code, String::new(), Vec::new()))
                }
            }
        }
        if let Some((first_offset, delta)) = duplicate_of {
            return Ok(Appended {
                base_offset: first_offset,
                last_offset: first_offset + delta as i64,
                log_start_offset: log.log_start_offset(),
                duplicate: true,
                log_append_time,
                leader_epoch: role.leader_epoch,
            });
        }
        let info: AppendInfo = log
            .append(records, &headers, role.leader_epoch)
            .map_err(|e| (e.kafka_error_code(), e.to_string(), Vec::new()))?;
        record_producers(&mut producers, &headers, info.first_offset);
        snapshot_on_roll(&mut log, &producers);
        drop(producers);
        self.after_leader_append(&mut log, info.last_offset);
        Ok(Appended {
            base_offset: info.first_offset,
            last_offset: info.last_offset,
            log_start_offset: info.log_start_offset,
            duplicate: false,
            log_append_time,
            leader_epoch: role.leader_epoch,
        })
    }

    /// The leader's own LEO counts for the HW; waiters learn of the append.
    fn after_leader_append(&self, log: &mut PartitionLog, last_offset: i64) {
        if let Some(state) = self.leader_state.lock().as_mut() {
            state.on_leader_append(last_offset + 1, now_ms());
            publish_high_watermark(state, log);
        }
        self.publish(log);
    }

    /// Leader side of WriteTxnMarkers (API 27): appends the coordinator's COMMIT / ABORT
    /// marker, which ends the producer's transaction here (an abort enters the `.txnindex`).
    /// Refused with the Kafka code when a newer producer or coordinator epoch was seen.
    pub fn write_marker(&self, marker: &Marker, node_id: i32) -> Result<Appended, (i16, String)> {
        let role = self.role();
        if role.leader != node_id {
            return Err((code::NOT_LEADER_OR_FOLLOWER, String::new()));
        }
        let now = now_ms();
        let bytes = control::marker_batch(marker, now);
        let header =
            BatchHeader::parse(&bytes).map_err(|e| (e.kafka_error_code(), e.to_string()))?;
        let mut log = self.log.lock();
        let mut producers = self.producers.lock();
        producers.check_marker(marker).map_err(|c| {
            (
                c,
                format!("stale marker for producer {}", marker.producer_id),
            )
        })?;
        let info = log
            .append(&bytes, &[header], role.leader_epoch)
            .map_err(|e| (e.kafka_error_code(), e.to_string()))?;
        if let Some(aborted) = producers.apply_marker(marker, info.first_offset, now) {
            index_aborted(&mut log, aborted);
        }
        snapshot_on_roll(&mut log, &producers);
        drop(producers);
        self.after_leader_append(&mut log, info.last_offset);
        Ok(Appended {
            base_offset: info.first_offset,
            last_offset: info.last_offset,
            log_start_offset: info.log_start_offset,
            duplicate: false,
            log_append_time: -1,
            leader_epoch: role.leader_epoch,
        })
    }

    /// The producers this partition knows (DescribeProducers).
    pub fn describe_producers(&self) -> Vec<crate::producer_state::ProducerView> {
        self.producers.lock().describe()
    }

    /// Whether `producer_id` has an open transaction on this partition (the produce path's
    /// verification guard keeps it from asking the coordinator again).
    pub fn in_transaction(&self, producer_id: i64) -> bool {
        self.producers.lock().in_transaction(producer_id)
    }

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

    /// E.2 shrink: in-sync followers that have not caught up for `replica.lag.time.max.ms`
    /// leave the ISR (the change is then pending). The leader never removes itself.
    pub fn isr_shrink(&self, now: i64) -> Option<crate::controller_shell::AlterIsr> {
        let mut state = self.leader_state.lock();
        let s = state.as_mut()?;
        let isr = s.maybe_shrink_isr(now)?;
        Some(self.isr_request(s, isr))
    }

    /// The AlterPartition request for the pending `new_isr`, against the epochs the leader
    /// state proposed it on.
    fn isr_request(
        &self,
        s: &LeaderPartitionState,
        new_isr: Vec<i32>,
    ) -> crate::controller_shell::AlterIsr {
        crate::controller_shell::AlterIsr {
            topic_id: self.topic_id,
            partition: self.index,
            broker_id: self.node_id,
            leader_epoch: s.leader_epoch(),
            partition_epoch: s.partition_epoch(),
            new_isr,
        }
    }

    /// The controller's answer to `request`: the committed ISR and partition epoch, or an
    /// error code. Says whether to send the same request again (Kafka's
    /// `handleAlterPartitionError`: only for errors that say nothing about the change). An
    /// answer to a request that is no longer the pending one (a newer leader epoch, or the
    /// image settled it) changes nothing.
    pub fn isr_change_answered(
        &self,
        request: &crate::controller_shell::AlterIsr,
        answer: Result<(Vec<i32>, i32), i16>,
    ) -> IsrAnswer {
        let mut log = self.log.lock();
        let mut state = self.leader_state.lock();
        let Some(s) = state.as_mut() else {
            return IsrAnswer::default();
        };
        if s.leader_epoch() != request.leader_epoch
            || s.pending_isr() != Some(request.new_isr.as_slice())
        {
            return IsrAnswer::default();
        }
        match answer {
            Ok((isr, partition_epoch)) => {
                s.apply_committed_isr(isr, partition_epoch, now_ms());
                let hw_changed = publish_high_watermark(s, &mut log);
                drop(state);
                self.publish(&mut log);
                // The committed ISR can also settle a parked acks=all (too few replicas now).
                drop(log);
                self.wake_waiters();
                IsrAnswer {
                    retry: false,
                    hw_changed,
                }
            }
            Err(code) => IsrAnswer {
                retry: s.on_alter_partition_error(code) == AlterPartitionFailure::Retry,
                hw_changed: false,
            },
        }
    }

    /// The ISR change waiting for the controller, if any.
    #[cfg(test)]
    pub fn pending_isr(&self) -> Option<Vec<i32>> {
        self.leader_state
            .lock()
            .as_ref()
            .and_then(|s| s.pending_isr().map(<[i32]>::to_vec))
    }

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

    /// Clean shutdown: the producer state as of the LEO, fsynced, so the next start replays
    /// nothing (Kafka's `ProducerStateManager.takeSnapshot` on close).
    pub fn snapshot_producers(&self) {
        let mut log = self.log.lock();
        let producers = self.producers.lock();
        log.write_producer_snapshot(&producers.snapshot_entries(), true);
    }

    /// Forgets the idempotent producers whose last batch is `expiration_ms` old (Kafka's
    /// `producer.id.expiration.ms`); returns how many.
    pub fn expire_producers(&self, now_ms: i64, expiration_ms: i64) -> usize {
        self.producers.lock().remove_expired(now_ms, expiration_ms)
    }

    /// E.4 before appending an acks=all produce: the committed ISR (the leader state's, which
    /// AlterPartition answers update before the image does) must hold `min.insync.replicas`.
    fn can_accept_acks_all(
        &self,
        role: &Role,
    ) -> Result<(), runnel_replication::NotEnoughReplicas> {
        match self.leader_state.lock().as_ref() {
            Some(s) => s.can_accept_acks_all(),
            None => check_min_isr(role.isr.len(), role.config.min_insync_replicas),
        }
    }

    /// How a parked acks=all produce that needs the HW at `required_offset` stands, as long
    /// as this broker still leads in `leader_epoch` (`runnel_replication::acks`); `None`
    /// while pending.
    fn replication_outcome(&self, required_offset: i64, leader_epoch: i32) -> Option<Replicated> {
        let state = self.leader_state.lock();
        let Some(s) = state.as_ref().filter(|s| s.leader_epoch() == leader_epoch) else {
            return Some(Replicated::LeadershipMoved);
        };
        match s.acks_all_outcome(required_offset) {
            AcksOutcome::Pending => None,
            AcksOutcome::Done => Some(Replicated::Done),
            AcksOutcome::NotEnoughReplicasAfterAppend => {
                Some(Replicated::NotEnoughReplicasAfterAppend)
            }
        }
    }

    /// acks=all (Kafka's `DelayedProduce` for one partition): waits until the HW covers
    /// `required_offset` (every ISR member has the batch) while this broker leads in
    /// `leader_epoch`, or until `deadline`. Woken only by this partition's progress.
    pub async fn wait_replicated(
        &self,
        required_offset: i64,
        leader_epoch: i32,
        deadline: tokio::time::Instant,
    ) -> Replicated {
        let mut rx = self.subscribe();
        loop {
            if let Some(done) = self.replication_outcome(required_offset, leader_epoch) {
                return done;
            }
            tokio::select! {
                _ = rx.changed() => {}
                _ = tokio::time::sleep_until(deadline) => {
                    return self
                        .replication_outcome(required_offset, leader_epoch)
                        .unwrap_or(Replicated::TimedOut);
                }
            }
        }
    }

    /// Whether `flush.messages` says the appended data must be fsynced before acknowledging.
    pub fn needs_flush(&self) -> bool {
        let every = self.role.read().config.flush_messages;
        every > 0 && every != i64::MAX && self.log.lock().unflushed_messages() >= every as u64
    }

    /// Waits until everything below `offset` is fsynced. One fsync serves every waiter
    /// (group commit): whoever finds no flush running becomes the flusher; the rest wait for it.
    pub async fn wait_flushed(&self, offset: i64) -> Result<(), LogError> {
        let mut rx = self.flushed.subscribe();
        loop {
            if *rx.borrow_and_update() >= offset {
                return Ok(());
            }
            if self
                .flushing
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                let result = self.flush_once().await;
                // Clear before publishing so a woken waiter can take over the next flush.
                self.flushing.store(false, Ordering::Release);
                match result {
                    Ok(up_to) => {
                        self.flushed.send_replace(up_to);
                    }
                    Err(e) => return Err(e),
                }
            } else if rx.changed().await.is_err() {
                return Ok(());
            }
        }
    }

    async fn flush_once(&self) -> Result<i64, LogError> {
        let target = self.log.lock().flush_target();
        let up_to = target.up_to_offset();
        let target = tokio::task::spawn_blocking(move || target.sync())
            .await
            .map_err(|e| LogError::Io(std::io::Error::other(e)))?;
        target?;
        self.log.lock().mark_flushed(up_to);
        Ok(up_to)
    }
}

/// `message.timestamp.before.max.ms` / `after.max.ms` (KIP-937) against the batch's first and
/// largest timestamps: records too far from the broker's clock get INVALID_TIMESTAMP.
fn check_timestamps(
    headers: &[BatchHeader],
    config: &EffectiveTopicConfig,
    now: i64,
) -> Result<(), (i16, String)> {
    for h in headers {
        for ts in [h.base_timestamp, h.max_timestamp] {
            if ts < 0 {
                continue;
            }
            let too_old = now.saturating_sub(ts) > config.message_timestamp_before_max_ms;
            let too_new = ts.saturating_sub(now) > config.message_timestamp_after_max_ms;
            if too_old || too_new {
                return Err((
                    code::INVALID_TIMESTAMP,
                    format!(
                        "Timestamp {ts} is out of range: it must be within message.timestamp.before.max.ms={} \
                         and message.timestamp.after.max.ms={} of the broker time {now}",
                        config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The producer state of the log on open or after a truncation: the newest snapshot
/// (`<offset>.snapshot`, written at every segment roll and at clean shutdown) plus a replay of
/// the batches after it; without one, a replay from the log start (Kafka's
/// `ProducerStateManager.truncateAndReload` + `UnifiedLog.rebuildProducerState`). The whole
/// log counts: an open transaction that began long ago still holds the LSO after a restart.
fn rebuild_producer_state(log: &mut PartitionLog) -> ProducerStateTable {
    let (mut offset, mut table) = match log.latest_producer_snapshot() {
        Some((offset, entries)) => (offset, ProducerStateTable::from_snapshot(&entries)),
        None => (log.log_start_offset(), ProducerStateTable::default()),
    };
    let leo = log.log_end_offset();
    while offset < leo {
        let read = match log.read(offset, 4 << 20, leo, true) {
            Ok(read) if !read.records.is_empty() => read,
            Ok(_) => break,
            Err(e) => {
                tracing::warn!(error = %e, "cannot rebuild producer state; duplicates across the restart may be appended");
                break;
            }
        };
        let mut rest = &read.records[..];
        let before = offset;
        while let Ok(h) = BatchHeader::parse(rest) {
            if h.total_size() > rest.len() {
                break;
            }
            if h.last_offset() >= offset {
                replay_batch(&mut table, log, &h, &rest[..h.total_size()]);
            }
            offset = offset.max(h.last_offset() + 1);
            rest = &rest[h.total_size()..];
        }
        if offset == before {
            break;
        }
    }
    table
}

/// Kafka snapshots the producer state when a segment rolls, so a restart replays only the
/// active segment; `producers` must describe exactly the batches below the LEO.
fn snapshot_on_roll(log: &mut PartitionLog, producers: &ProducerStateTable) {
    if log.rolled_since_snapshot() {
        log.write_producer_snapshot(&producers.snapshot_entries(), false);
    }
}

/// Records the idempotent batches a follower appended (each with the offsets the leader gave
/// it), up to `last_offset` (a fetch response may end with a partial batch, never appended).
fn record_replicated_producers(
    producers: &mut ProducerStateTable,
    log: &mut PartitionLog,
    records: &[u8],
    last_offset: i64,
) {
    let mut rest = records;
    while let Ok(h) = BatchHeader::parse(rest) {
        if h.total_size() > rest.len() || h.last_offset() > last_offset {
            break;
        }
        replay_batch(producers, log, &h, &rest[..h.total_size()]);
        rest = &rest[h.total_size()..];
    }
}

/// One batch already in the log (`batch`: its bytes), as a replica or the replay on open
/// sees it: a data batch records its producer, a marker ends the transaction (an abort
/// enters the `.txnindex`, if not there already).
fn replay_batch(
    producers: &mut ProducerStateTable,
    log: &mut PartitionLog,
    h: &BatchHeader,
    batch: &[u8],
) {
    if h.producer_id < 0 {
        return;
    }
    if h.is_control() {
        if let Some(marker) = control::parse_marker(h, batch) {
            if let Some(aborted) = producers.apply_marker(&marker, h.base_offset, h.max_timestamp) {
                index_aborted(log, aborted);
            }
        }
        return;
    }
    let last = last_seq(h.base_sequence, h.record_count);
    producers.record(
        h.producer_id,
        h.producer_epoch,
        h.base_sequence,
        last,
        h.base_offset,
        h.max_timestamp,
        h.is_transactional(),
    );
}

/// A failed `.txnindex` write loses nothing the log does not hold: the replay on open re-adds it.
fn index_aborted(log: &mut PartitionLog, aborted: runnel_log::txn::AbortedTxn) {
    if let Err(e) = log.index_aborted_txn(aborted) {
        tracing::warn!(error = %e, "cannot write the transaction index; it is rebuilt on restart");
    }
}

fn record_producers(
    producers: &mut ProducerStateTable,
    headers: &[BatchHeader],
    first_offset: i64,
) {
    let mut offset = first_offset;
    for h in headers {
        if h.producer_id >= 0 {
            let last = last_seq(h.base_sequence, h.record_count);
            producers.record(
                h.producer_id,
                h.producer_epoch,
                h.base_sequence,
                last,
                offset,
                h.max_timestamp,
                h.is_transactional(),
            );
        }
        offset += h.last_offset_delta as i64 + 1;
    }
}

#[cfg(test)]
#[path = "partition_tests.rs"]
mod tests;
#[cfg(test)]
#[path = "partition_txn_tests.rs"]
mod txn_tests;
