//! One partition replica hosted by this broker: its log, its role from the metadata image, the
//! idempotent-producer state, and the group commit of fsyncs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use runnel_log::batch::{self, BatchHeader};
use runnel_log::{AppendInfo, LogConfig, LogError, PartitionLog, SharedLog};
use runnel_metadata::EffectiveTopicConfig;
use tokio::sync::watch;
use uuid::Uuid;

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
    /// The replicas whose brokers are registered and unfenced: only these may hold the HW back
    /// without being in the ISR (spec E.3).
    pub live_replicas: Vec<i32>,
    /// The partition epoch of the image this role comes from (AlterPartition must match it).
    pub partition_epoch: i32,
    pub config: Arc<EffectiveTopicConfig>,
}

pub struct Partition {
    pub topic: String,
    pub index: i32,
    pub topic_id: Uuid,
    pub log: SharedLog,
    /// This broker's id: the leader's own LEO counts for the high watermark.
    node_id: i32,
    /// `replica.lag.time.max.ms`: how long a follower counts as caught up (spec E.2, E.3).
    lag_max_ms: i64,
    /// Leader side: each follower's log end offset, as its last fetch position said (E.2).
    followers: Mutex<std::collections::HashMap<i32, i64>>,
    /// Leader side: when each follower last fetched up to the leader's LEO (E.2).
    caught_up_ms: Mutex<std::collections::HashMap<i32, i64>>,
    /// The ISR change in flight, if any (one at a time, as Kafka's leaders do), with the
    /// partition epoch it was proposed against. Until the image shows a newer epoch, the HW
    /// counts the *maximal* ISR (current plus proposed members): a follower being added must
    /// hold the HW back from the moment it is proposed, or it could join the ISR without
    /// records consumers have already read and then be elected leader (Kafka's KIP-497 rule).
    pending_isr: Mutex<Option<(Vec<i32>, i32)>>,
    role: RwLock<Role>,
    producers: Mutex<ProducerStateTable>,
    /// Offset up to which the log is known to be fsynced (exclusive).
    flushed: watch::Sender<i64>,
    flushing: AtomicBool,
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
        let producers = rebuild_producer_state(&log.lock());
        Partition {
            topic,
            index,
            topic_id,
            log,
            node_id,
            lag_max_ms,
            followers: Mutex::new(std::collections::HashMap::new()),
            caught_up_ms: Mutex::new(std::collections::HashMap::new()),
            pending_isr: Mutex::new(None),
            role: RwLock::new(role),
            producers: Mutex::new(producers),
            flushed: watch::Sender::new(flushed_to),
            flushing: AtomicBool::new(false),
        }
    }

    pub fn role(&self) -> Role {
        self.role.read().clone()
    }

    pub fn set_role(&self, role: Role) {
        let config_changed = *self.role.read().config != *role.config;
        if config_changed {
            self.log.lock().update_config(log_config(&role.config));
        }
        let epoch = role.partition_epoch;
        *self.role.write() = role;
        let mut pending = self.pending_isr.lock();
        if pending.as_ref().is_some_and(|(_, base)| epoch > *base) {
            *pending = None;
        }
    }

    /// Appends a Produce request's records as the leader. Errors are Kafka error codes.
    pub fn append_as_leader(
        &self,
        records: &[u8],
        node_id: i32,
        acks: i16,
    ) -> Result<Appended, (i16, String)> {
        let role = self.role();
        if role.leader != node_id {
            return Err((code::NOT_LEADER_OR_FOLLOWER, String::new()));
        }
        // acks=all is refused before anything is written when the ISR is too small (spec E.4).
        let min_isr = role.config.min_insync_replicas.max(1) as usize;
        if acks == -1 && role.isr.len() < min_isr {
            return Err((
                code::NOT_ENOUGH_REPLICAS,
                format!(
                    "The in-sync replica set {:?} is smaller than min.insync.replicas={min_isr}",
                    role.isr
                ),
            ));
        }
        let max = role.config.max_message_bytes.max(0) as usize;
        let headers = batch::validate_batches(records, max)
            .map_err(|e| (e.kafka_error_code(), e.to_string()))?;
        if role.config.compacts() {
            check_keys_present(records, &headers)?;
        }
        if role.config.message_timestamp_type != "LogAppendTime" {
            check_timestamps(&headers, &role.config, now_ms())?;
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
        let mut producers = self.producers.lock();
        // Idempotence: decide for every batch before writing any of them.
        let mut duplicate_of = None;
        for h in headers.iter().filter(|h| h.producer_id >= 0) {
            let last = last_seq(h.base_sequence, h.record_count);
            match producers.check(h.producer_id, h.producer_epoch, h.base_sequence, last) {
                SequenceCheck::Append => {}
                SequenceCheck::Duplicate { first_offset } if headers.len() == 1 => {
                    duplicate_of = Some((first_offset, h.last_offset_delta));
                }
                SequenceCheck::Duplicate { .. } => {
                    return Err((code::DUPLICATE_SEQUENCE_NUMBER, String::new()))
                }
                SequenceCheck::Reject { error_code } => return Err((error_code, String::new())),
            }
        }
        if let Some((first_offset, delta)) = duplicate_of {
            return Ok(Appended {
                base_offset: first_offset,
                last_offset: first_offset + delta as i64,
                log_start_offset: log.log_start_offset(),
                duplicate: true,
                log_append_time,
            });
        }
        let info: AppendInfo = log
            .append(records, &headers, role.leader_epoch)
            .map_err(|e| (code::KAFKA_STORAGE_ERROR, e.to_string()))?;
        record_producers(&mut producers, &headers, info.first_offset);
        drop(producers);
        self.advance_high_watermark(&role, &mut log);
        Ok(Appended {
            base_offset: info.first_offset,
            last_offset: info.last_offset,
            log_start_offset: info.log_start_offset,
            duplicate: false,
            log_append_time,
        })
    }

    /// Leader side: a follower fetched from `fetch_offset`, so it has everything below it.
    /// Returns whether the high watermark moved.
    pub fn record_follower_fetch(&self, replica: i32, fetch_offset: i64) -> bool {
        let role = self.role();
        if role.leader != self.node_id || !role.replicas.contains(&replica) {
            return false;
        }
        self.followers.lock().insert(replica, fetch_offset);
        let mut log = self.log.lock();
        if fetch_offset >= log.log_end_offset() {
            self.caught_up_ms.lock().insert(replica, now_ms());
        }
        self.advance_high_watermark(&role, &mut log)
    }

    /// E.2 expansion: a follower outside the ISR whose position reached the HW and the start
    /// of the leader's current epoch rejoins (the second condition means it has truncated to
    /// and replicated this leader's log, not just an old one of equal length).
    pub fn isr_expansion(&self, replica: i32) -> Option<Vec<i32>> {
        let role = self.role();
        if role.leader != self.node_id
            || role.isr.contains(&replica)
            || !role.replicas.contains(&replica)
        {
            return None;
        }
        let position = self.followers.lock().get(&replica).copied()?;
        let (hw, epoch_start) = {
            let log = self.log.lock();
            let epoch_start = log
                .epoch_entries()
                .iter()
                .find(|(epoch, _)| *epoch == role.leader_epoch)
                .map(|(_, start)| *start)
                // Nothing written in this epoch yet: it starts at the LEO.
                .unwrap_or_else(|| log.log_end_offset());
            (log.high_watermark(), epoch_start)
        };
        (position >= hw && position >= epoch_start).then(|| {
            let mut isr = role.isr.clone();
            isr.push(replica);
            isr
        })
    }

    /// E.2 shrink: in-sync followers behind the leader's LEO that have not caught up for
    /// `lag_max_ms` leave the ISR. The leader never removes itself.
    pub fn isr_shrink(&self, now: i64, lag_max_ms: i64) -> Option<Vec<i32>> {
        let role = self.role();
        if role.leader != self.node_id {
            return None;
        }
        let leo = self.log.lock().log_end_offset();
        let followers = self.followers.lock();
        let mut caught_up = self.caught_up_ms.lock();
        let lagging: Vec<i32> = role
            .isr
            .iter()
            .copied()
            .filter(|r| *r != self.node_id)
            .filter(|r| {
                // A follower not heard from since this node became leader gets a full window.
                let since = *caught_up.entry(*r).or_insert(now);
                followers.get(r).copied().unwrap_or(0) < leo && now - since > lag_max_ms
            })
            .collect();
        (!lagging.is_empty()).then(|| {
            role.isr
                .iter()
                .copied()
                .filter(|r| !lagging.contains(r))
                .collect()
        })
    }

    /// Builds the AlterPartition request for `new_isr`, unless one is already in flight.
    pub fn begin_isr_change(&self, new_isr: Vec<i32>) -> Option<crate::controller_shell::AlterIsr> {
        let role = self.role();
        {
            let mut pending = self.pending_isr.lock();
            if pending.is_some() {
                return None;
            }
            *pending = Some((new_isr.clone(), role.partition_epoch));
        }
        Some(crate::controller_shell::AlterIsr {
            topic_id: self.topic_id,
            partition: self.index,
            broker_id: self.node_id,
            leader_epoch: role.leader_epoch,
            partition_epoch: role.partition_epoch,
            new_isr,
        })
    }

    /// The AlterPartition answer arrived. A refused change is forgotten at once; an accepted
    /// one stays pending until the image with its epoch is applied here (`set_role`), or
    /// `accepted_wait` passed (the controller found nothing to change, or the image is late).
    pub async fn end_isr_change(&self, accepted: bool, accepted_wait: std::time::Duration) {
        if accepted {
            let deadline = tokio::time::Instant::now() + accepted_wait;
            while self.pending_isr.lock().is_some() && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
        *self.pending_isr.lock() = None;
    }

    /// The ISR the HW must respect: the current one plus members of a pending expansion.
    fn maximal_isr(&self, role: &Role) -> Vec<i32> {
        let mut isr = role.isr.clone();
        if let Some((proposed, _)) = self.pending_isr.lock().as_ref() {
            isr.extend(proposed.iter().filter(|r| !role.isr.contains(r)));
        }
        isr
    }

    /// Recomputes the high watermark after an ISR change (a removed member no longer holds it).
    pub fn refresh_high_watermark(&self) -> bool {
        let role = self.role();
        if role.leader != self.node_id {
            return false;
        }
        let mut log = self.log.lock();
        self.advance_high_watermark(&role, &mut log)
    }

    /// HW = the smallest LEO among the maximal ISR and the live followers that caught up within
    /// `replica.lag.time.max.ms` (the leader's own included), never moving back (spec E.3).
    /// Counting caught-up followers outside the ISR keeps the HW from running ahead of a
    /// follower that is about to rejoin. ISR followers not heard from yet count as 0.
    fn advance_high_watermark(&self, role: &Role, log: &mut runnel_log::PartitionLog) -> bool {
        if role.leader != self.node_id {
            return false;
        }
        let leo = log.log_end_offset();
        let mut holders = self.maximal_isr(role);
        let now = now_ms();
        {
            let caught_up = self.caught_up_ms.lock();
            holders.extend(role.replicas.iter().copied().filter(|r| {
                !role.isr.contains(r)
                    && role.live_replicas.contains(r)
                    && caught_up
                        .get(r)
                        .is_some_and(|at| now - *at <= self.lag_max_ms)
            }));
        }
        let followers = self.followers.lock();
        let hw = holders
            .iter()
            .filter(|r| **r != self.node_id)
            .map(|r| followers.get(r).copied().unwrap_or(0).min(leo))
            .fold(leo, i64::min);
        if hw > log.high_watermark() {
            log.set_high_watermark(hw);
            true
        } else {
            false
        }
    }

    /// Follower side: appends the leader's batches as they are (offsets and epochs kept) and
    /// takes the leader's high watermark, capped by what this replica has.
    pub fn append_as_follower(&self, records: &[u8], leader_hw: i64) -> Result<(), LogError> {
        let mut log = self.log.lock();
        if !records.is_empty() {
            log.append_as_follower(records)?;
        }
        let hw = leader_hw.min(log.log_end_offset());
        if hw > log.high_watermark() {
            log.set_high_watermark(hw);
        }
        Ok(())
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

/// Compacted topics keep the last record per key, so a record without a key has no meaning
/// there: Kafka rejects it with INVALID_RECORD. This decodes the batches (decompressing if
/// needed) only to look at keys; the stored bytes remain the producer's.
fn check_keys_present(records: &[u8], headers: &[BatchHeader]) -> Result<(), (i16, String)> {
    let mut at = 0;
    for h in headers {
        let mut one = bytes::Bytes::copy_from_slice(&records[at..at + h.total_size()]);
        at += h.total_size();
        let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut one)
            .map_err(|e| (code::CORRUPT_MESSAGE, format!("cannot decode batch: {e}")))?;
        if set.records.iter().any(|r| r.key.is_none()) {
            return Err((
                code::INVALID_RECORD,
                "Compacted topic cannot accept message without key".to_string(),
            ));
        }
    }
    Ok(())
}

/// How far back (in offsets) producer state is rebuilt from the log on open. Kafka keeps
/// snapshots; rescanning the recent tail covers the retries that matter after a restart (a
/// producer retries within its delivery timeout) at a bounded startup cost.
const PRODUCER_STATE_SCAN_OFFSETS: i64 = 100_000;

/// Replays idempotent batch headers from the log's tail so retries that straddle a restart are
/// still recognised as duplicates.
fn rebuild_producer_state(log: &PartitionLog) -> ProducerStateTable {
    let mut table = ProducerStateTable::default();
    let leo = log.log_end_offset();
    let mut offset = log
        .log_start_offset()
        .max(leo - PRODUCER_STATE_SCAN_OFFSETS);
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
            if h.producer_id >= 0 && h.last_offset() >= offset {
                let last = last_seq(h.base_sequence, h.record_count);
                table.record(
                    h.producer_id,
                    h.producer_epoch,
                    h.base_sequence,
                    last,
                    h.base_offset,
                );
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
            );
        }
        offset += h.last_offset_delta as i64 + 1;
    }
}

#[cfg(test)]
#[path = "partition_tests.rs"]
mod tests;
