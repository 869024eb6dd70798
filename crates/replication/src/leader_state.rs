//! One partition as its leader sees it: the ISR and its pending changes, every follower's
//! position, the high watermark (spec E.2, E.3, E.4).
//!
//! The leader decides *proposals*; the controller decides the ISR. So an ISR change the leader
//! wants is held as pending until the controller's PartitionChange comes back through
//! [`LeaderPartitionState::apply_committed_isr`], and meanwhile the HW is computed over the
//! *maximal* ISR (committed plus proposed members). That is what makes it safe: a follower
//! being added already holds the HW back before the controller confirms it, and a follower
//! being removed keeps holding it back until the removal is durable, so a leader failover in
//! between can never elect a replica that lacks a record below the HW. As in Kafka 2.8, at
//! most one change is in flight; the next is proposed after it settles.

use std::collections::{BTreeMap, BTreeSet};

use crate::acks::{acks_all_outcome, check_min_isr, AcksOutcome, NotEnoughReplicas};
use crate::codes;
use crate::follower::FollowerState;

/// The topic-level settings the leader's decisions depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderConfig {
    /// `replica.lag.time.max.ms` (30000): how long a follower may go without catching up
    /// before it leaves the ISR.
    pub replica_lag_time_max_ms: i64,
    /// `min.insync.replicas` (1): the smallest ISR that may acknowledge acks=all.
    pub min_insync_replicas: i32,
}

impl Default for LeaderConfig {
    fn default() -> Self {
        Self {
            replica_lag_time_max_ms: 30_000,
            min_insync_replicas: 1,
        }
    }
}

/// What a metadata image says about a partition this broker already leads in the image's
/// leader epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderImage<'a> {
    pub replicas: &'a [i32],
    pub isr: &'a [i32],
    pub partition_epoch: i32,
    /// The assigned replicas whose brokers may not join the ISR (KIP-841).
    pub ineligible: BTreeSet<i32>,
}

/// The assigned replicas on brokers that are not `eligible` (registered, unfenced and not in
/// controlled shutdown).
pub fn ineligible_replicas(replicas: &[i32], eligible: impl Fn(i32) -> bool) -> BTreeSet<i32> {
    replicas.iter().copied().filter(|&r| !eligible(r)).collect()
}

/// What the broker knows when it becomes (or is confirmed as) the partition's leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BecomeLeader {
    /// This broker's id.
    pub leader: i32,
    /// The assignment; every replica other than `leader` is a follower.
    pub replicas: Vec<i32>,
    /// The committed ISR from the metadata image.
    pub isr: Vec<i32>,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    /// The local log's end offset. It is also the start offset of the new leader epoch, which
    /// a follower must reach to join the ISR (E.2): below it, it may still hold a divergent
    /// tail of an older epoch.
    pub log_end_offset: i64,
    /// The HW this replica had as a follower (clamped to `log_end_offset`).
    pub high_watermark: i64,
}

/// Why a follower fetch was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchError {
    /// The fetching broker is not a follower of this partition (6 NOT_LEADER_OR_FOLLOWER).
    NotAReplica,
    /// The fetch offset is beyond the leader's LEO (1 OFFSET_OUT_OF_RANGE).
    OffsetOutOfRange,
}

impl FetchError {
    pub fn code(self) -> i16 {
        match self {
            FetchError::NotAReplica => codes::NOT_LEADER_OR_FOLLOWER,
            FetchError::OffsetOutOfRange => codes::OFFSET_OUT_OF_RANGE,
        }
    }
}

/// What the leader does after the controller refused its ISR change
/// ([`LeaderPartitionState::on_alter_partition_error`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlterPartitionFailure {
    /// The change was not applied and never will be: it is forgotten, the next check may
    /// propose again.
    Dropped,
    /// Still pending: the next committed ISR from the metadata image settles it.
    AwaitMetadata,
    /// Still pending: send the same request again.
    Retry,
}

/// What a follower fetch changed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FetchOutcome {
    /// The HW advanced: complete parked acks=all produces and wake waiting consumer fetches.
    pub hw_changed: bool,
    /// The follower caught up: send AlterPartition with this ISR (now pending).
    pub isr_expand: Option<Vec<i32>>,
}

/// One partition on its leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderPartitionState {
    leader: i32,
    replicas: Vec<i32>,
    isr: Vec<i32>,
    pending_isr: Option<Vec<i32>>,
    followers: BTreeMap<i32, FollowerState>,
    ineligible: BTreeSet<i32>,
    log_end_offset: i64,
    high_watermark: i64,
    leader_epoch: i32,
    partition_epoch: i32,
    leader_epoch_start_offset: i64,
    config: LeaderConfig,
}

impl LeaderPartitionState {
    /// The state right after becoming leader at `now_ms` (Kafka's `Partition.makeLeader`).
    pub fn new(init: BecomeLeader, config: LeaderConfig, now_ms: i64) -> Self {
        let followers = init
            .replicas
            .iter()
            .filter(|&&r| r != init.leader)
            .map(|&r| {
                let in_isr = init.isr.contains(&r);
                (
                    r,
                    FollowerState::new_for_leader(init.log_end_offset, now_ms, in_isr),
                )
            })
            .collect();
        let mut state = Self {
            leader: init.leader,
            replicas: init.replicas,
            isr: init.isr,
            pending_isr: None,
            followers,
            ineligible: BTreeSet::new(),
            log_end_offset: init.log_end_offset,
            high_watermark: init.high_watermark.min(init.log_end_offset),
            leader_epoch: init.leader_epoch,
            partition_epoch: init.partition_epoch,
            leader_epoch_start_offset: init.log_end_offset,
            config,
        };
        // Kafka's makeLeader increments the HW at once "since ISR could be down to 1": a leader
        // alone in its ISR (a restarted single replica) would otherwise hide its whole log
        // above the checkpointed HW until the next append or image.
        state.maybe_advance_hw(now_ms);
        state
    }

    pub fn leader(&self) -> i32 {
        self.leader
    }

    pub fn replicas(&self) -> &[i32] {
        &self.replicas
    }

    /// The ISR the controller committed (what Metadata reports and min.insync checks use).
    pub fn isr(&self) -> &[i32] {
        &self.isr
    }

    /// The ISR proposed to the controller and not yet confirmed, if any.
    pub fn pending_isr(&self) -> Option<&[i32]> {
        self.pending_isr.as_deref()
    }

    /// Committed ISR plus any members being added (E.3's "maximal ISR"). Members being
    /// removed are still in the committed ISR, so they are included too.
    pub fn maximal_isr(&self) -> Vec<i32> {
        let mut out = self.isr.clone();
        for r in self.pending_isr.iter().flatten() {
            if !out.contains(r) {
                out.push(*r);
            }
        }
        out
    }

    pub fn follower(&self, replica: i32) -> Option<&FollowerState> {
        self.followers.get(&replica)
    }

    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }

    /// Offsets below it are committed; consumers read only below it.
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }

    pub fn partition_epoch(&self) -> i32 {
        self.partition_epoch
    }

    /// The leader's LEO when this leader epoch began.
    pub fn leader_epoch_start_offset(&self) -> i64 {
        self.leader_epoch_start_offset
    }

    pub fn config(&self) -> LeaderConfig {
        self.config
    }

    /// The assignment changed under the same leader epoch (a reassignment added or removed
    /// replicas). New followers start unknown and out of sync, as on becoming leader; removed
    /// ones are forgotten. Known followers keep their positions, and a pending ISR change
    /// stays pending: the image that settles it is still to come.
    pub fn update_replicas(&mut self, replicas: Vec<i32>, now_ms: i64) {
        let leo = self.log_end_offset;
        self.followers.retain(|r, _| replicas.contains(r));
        for &r in replicas.iter().filter(|&&r| r != self.leader) {
            self.followers
                .entry(r)
                .or_insert_with(|| FollowerState::new_for_leader(leo, now_ms, false));
        }
        self.replicas = replicas;
    }

    /// Every image the leader sees while it keeps its leader epoch: the assignment (a
    /// reassignment), the topic config, the ineligible brokers, then the committed ISR
    /// ([`Self::apply_committed_isr`], which ignores an older partition epoch). Returns
    /// whether the HW moved.
    pub fn on_image(&mut self, image: LeaderImage<'_>, config: LeaderConfig, now_ms: i64) -> bool {
        if self.replicas != image.replicas {
            self.update_replicas(image.replicas.to_vec(), now_ms);
        }
        self.set_config(config);
        self.set_ineligible_replicas(image.ineligible);
        self.apply_committed_isr(image.isr.to_vec(), image.partition_epoch, now_ms)
            .unwrap_or(false)
    }

    /// A new topic configuration (dynamic `min.insync.replicas` / lag changes).
    pub fn set_config(&mut self, config: LeaderConfig) {
        self.config = config;
    }

    /// Brokers that may not join the ISR (fenced or in controlled shutdown, KIP-841): the
    /// controller would reject them with 107 INELIGIBLE_REPLICA, so the leader neither
    /// proposes them nor lets them hold the HW back as mere catch-up candidates.
    pub fn set_ineligible_replicas(&mut self, ineligible: BTreeSet<i32>) {
        self.ineligible = ineligible;
    }

    /// A follower fetched from `fetch_offset` (= its LEO) at `now_ms` (Kafka's
    /// `updateFollowerFetchState`): update its position and caught-up time (E.2), propose
    /// adding it to the ISR if it qualifies, then re-evaluate the HW (E.3).
    pub fn on_follower_fetch(
        &mut self,
        replica: i32,
        fetch_offset: i64,
        now_ms: i64,
    ) -> Result<FetchOutcome, FetchError> {
        if fetch_offset > self.log_end_offset || fetch_offset < 0 {
            return Err(FetchError::OffsetOutOfRange);
        }
        let leader_leo = self.log_end_offset;
        let follower = self
            .followers
            .get_mut(&replica)
            .ok_or(FetchError::NotAReplica)?;
        follower.record_fetch(fetch_offset, leader_leo, now_ms);
        let isr_expand = self.maybe_expand_isr(replica);
        let hw_changed = self.maybe_advance_hw(now_ms);
        Ok(FetchOutcome {
            hw_changed,
            isr_expand,
        })
    }

    /// A follower's fetch reported its log start offset (Kafka keeps it in the replica's
    /// fetch state). The leader calls it only for fetches it accepted, after
    /// [`Self::on_follower_fetch`]. Returns whether the follower's log start moved (the low
    /// watermark may have: completes waiting DeleteRecords). Unknown followers are ignored.
    pub fn on_follower_log_start(&mut self, replica: i32, log_start_offset: i64) -> bool {
        match self.followers.get_mut(&replica) {
            Some(f) if f.log_start_offset != log_start_offset => {
                f.log_start_offset = log_start_offset;
                true
            }
            _ => false,
        }
    }

    /// Kafka's `Partition.lowWatermarkIfLeader`: the smallest log start offset over the
    /// leader (`leader_log_start`) and every follower whose broker is alive (here: not
    /// fenced and not shutting down). A live follower that has not fetched since this broker
    /// became leader counts as [`crate::follower::UNKNOWN_OFFSET`], so it holds the low
    /// watermark back until it reports. DeleteRecords completes once this reaches its target
    /// (Kafka's `DelayedDeleteRecords`): then no live replica still holds deleted records that
    /// a failover could bring back.
    pub fn low_watermark(&self, leader_log_start: i64) -> i64 {
        self.followers
            .iter()
            .filter(|(r, _)| !self.ineligible.contains(r))
            .map(|(_, f)| f.log_start_offset)
            .fold(leader_log_start, i64::min)
    }

    /// E.2 expand: a follower outside the ISR whose position is at least the HW and at least
    /// the start of this leader's epoch (so it holds no divergent tail of an older epoch).
    /// Nothing is proposed while another change is in flight.
    fn maybe_expand_isr(&mut self, replica: i32) -> Option<Vec<i32>> {
        if self.pending_isr.is_some()
            || self.isr.contains(&replica)
            || self.ineligible.contains(&replica)
        {
            return None;
        }
        let leo = self.followers.get(&replica)?.log_end_offset;
        if leo < self.high_watermark || leo < self.leader_epoch_start_offset {
            return None;
        }
        let mut proposed = self.isr.clone();
        proposed.push(replica);
        self.pending_isr = Some(proposed.clone());
        Some(proposed)
    }

    /// The leader appended; its LEO is now `new_leo`. The HW may advance (a lone leader's HW
    /// follows its own appends; acks != all still advance the HW this way).
    pub fn on_leader_append(&mut self, new_leo: i64, now_ms: i64) -> bool {
        self.log_end_offset = self.log_end_offset.max(new_leo);
        self.maybe_advance_hw(now_ms)
    }

    /// The periodic E.2 shrink (every `replica.lag.time.max.ms / 2`): ISR followers that do
    /// not have the leader's whole log and have not caught up for longer than the lag time.
    /// Returns the ISR to propose (now pending), or `None` if nothing changes or another
    /// change is in flight. The leader itself is never removed.
    pub fn maybe_shrink_isr(&mut self, now_ms: i64) -> Option<Vec<i32>> {
        if self.pending_isr.is_some() {
            return None;
        }
        let lag = self.config.replica_lag_time_max_ms;
        let leo = self.log_end_offset;
        let proposed: Vec<i32> = self
            .isr
            .iter()
            .copied()
            .filter(|r| {
                *r == self.leader
                    || self
                        .followers
                        .get(r)
                        .is_some_and(|f| f.is_caught_up(leo, now_ms, lag))
            })
            .collect();
        if proposed.len() == self.isr.len() {
            return None;
        }
        self.pending_isr = Some(proposed.clone());
        Some(proposed)
    }

    /// The controller committed `isr` at `partition_epoch` (the AlterPartition response, or a
    /// PartitionChange seen in the metadata image). A change older than the one already
    /// applied is ignored (`None`). Otherwise the HW is re-evaluated, since removed members no
    /// longer hold it back: `Some(hw_changed)`.
    ///
    /// A newer partition epoch settles whatever was pending: the pending change was proposed
    /// against an older epoch, so either this is it, or it was rejected, or its effect is
    /// already part of this state. The *same* epoch again brings nothing new, so it settles
    /// a pending change only if it is that change (the controller found nothing to change).
    /// Otherwise the pending change may have been proposed *after* this state was learned
    /// (the AlterPartition answer came before the image with the same epoch) and may be
    /// committed right now: forgetting it would let the HW pass a follower the controller
    /// is about to put in the ISR, which a later election could pick.
    pub fn apply_committed_isr(
        &mut self,
        isr: Vec<i32>,
        partition_epoch: i32,
        now_ms: i64,
    ) -> Option<bool> {
        if partition_epoch < self.partition_epoch {
            return None;
        }
        let settles = partition_epoch > self.partition_epoch
            || self.pending_isr.as_ref().is_some_and(|p| *p == isr);
        if settles {
            self.pending_isr = None;
        }
        self.isr = isr;
        self.partition_epoch = partition_epoch;
        Some(self.maybe_advance_hw(now_ms))
    }

    /// Forgets the pending change so the next check can propose again. Only safe when the
    /// controller said the change was not applied and never will be (107
    /// INELIGIBLE_REPLICA); for any other refusal use [`Self::on_alter_partition_error`].
    pub fn abandon_pending_isr(&mut self) {
        self.pending_isr = None;
    }

    /// The controller refused the pending change with `code` (Kafka's
    /// `Partition.handleAlterPartitionError`). A refusal does not prove that the change was
    /// not committed: an earlier attempt of the same request (whose answer was lost) may
    /// have been, and only the metadata image tells. So the change stays pending (and keeps
    /// holding the HW back) until [`Self::apply_committed_isr`] brings a newer partition epoch,
    /// except:
    ///
    /// * 107 INELIGIBLE_REPLICA: the controller checked this very request against its current
    ///   partition epoch (the epoch checks come first) and refused it, so no attempt was
    ///   applied: forgotten ([`AlterPartitionFailure::Dropped`]);
    /// * 95 INVALID_UPDATE_VERSION, 74 FENCED_LEADER_EPOCH, 42 INVALID_REQUEST (not the
    ///   leader), 3 UNKNOWN_TOPIC_OR_PARTITION, 100 UNKNOWN_TOPIC_ID (deleted): the image is
    ///   newer than this state and will settle it ([`AlterPartitionFailure::AwaitMetadata`]);
    /// * anything else (41 NOT_CONTROLLER, a timeout): send the same request again
    ///   ([`AlterPartitionFailure::Retry`]).
    ///
    /// `code` must answer the *latest* attempt of the pending change, with the answers to
    /// earlier attempts already in (one connection, in order) or lost. A 107 that answers an
    /// earlier attempt only arrives late: it says nothing about a later attempt, which the
    /// controller may have accepted once the broker became eligible. (The simulation in
    /// `tests/replication/sim.rs` finds exactly that history when the shell skips this rule.)
    pub fn on_alter_partition_error(&mut self, code: i16) -> AlterPartitionFailure {
        match code {
            codes::INELIGIBLE_REPLICA => {
                self.pending_isr = None;
                AlterPartitionFailure::Dropped
            }
            codes::INVALID_UPDATE_VERSION
            | codes::FENCED_LEADER_EPOCH
            | codes::INVALID_REQUEST
            | codes::UNKNOWN_TOPIC_OR_PARTITION
            | codes::UNKNOWN_TOPIC_ID => AlterPartitionFailure::AwaitMetadata,
            _ => AlterPartitionFailure::Retry,
        }
    }

    /// E.3: the minimum LEO over the leader, every maximal-ISR follower, and every eligible
    /// follower outside it that is caught up within the lag time (so a recovering follower
    /// can reach the HW and rejoin). A follower whose position is still unknown holds the HW
    /// where it is.
    pub fn candidate_high_watermark(&self, now_ms: i64) -> i64 {
        let maximal = self.maximal_isr();
        let lag = self.config.replica_lag_time_max_ms;
        let leo = self.log_end_offset;
        self.followers
            .iter()
            .filter(|(r, f)| {
                maximal.contains(r)
                    || (!self.ineligible.contains(r) && f.is_caught_up(leo, now_ms, lag))
            })
            .map(|(_, f)| f.log_end_offset)
            .fold(leo, i64::min)
    }

    /// Moves the HW to the candidate if that is higher; it never moves backwards.
    fn maybe_advance_hw(&mut self, now_ms: i64) -> bool {
        let candidate = self.candidate_high_watermark(now_ms);
        if candidate > self.high_watermark {
            self.high_watermark = candidate;
            true
        } else {
            false
        }
    }

    /// E.4 before appending an acks=all produce: 19 NOT_ENOUGH_REPLICAS if the committed ISR
    /// is smaller than `min.insync.replicas`.
    pub fn can_accept_acks_all(&self) -> Result<(), NotEnoughReplicas> {
        check_min_isr(self.isr.len(), self.config.min_insync_replicas)
    }

    /// E.4 for a parked acks=all produce that needs the HW at `required_offset` (its last
    /// offset + 1).
    pub fn acks_all_outcome(&self, required_offset: i64) -> AcksOutcome {
        acks_all_outcome(
            self.high_watermark,
            required_offset,
            self.isr.len(),
            self.config.min_insync_replicas,
        )
    }
}
