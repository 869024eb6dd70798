//! After each commit: drive the partition and replica state machines (spec D) from the new
//! image and return the leader/ISR changes to commit.
//!
//! * New partitions: NonExistent -> New (assignment recorded), replicas NonExistent -> New,
//!   then New -> Online with leader = first live replica in assignment order and ISR = all
//!   live replicas (D.1); replicas -> Online (live) or Offline (not live). No live replica:
//!   the election fails (logged) and the partition stays New until a later commit.
//! * Leader lost (fenced or shutting down): Online -> Offline, then the offline election of
//!   D.3 (first live in-sync replica; unclean only if the topic allows it). Dead followers
//!   leave the ISR (the last member is kept, D.2).
//! * A replica in a failed log dir of its broker (KIP-858, `offline_dirs`) counts as not live
//!   for its partition only: it leaves the ISR, and a partition it led gets the offline election.
//! * Removed topics: partitions -> Offline -> NonExistent, replicas -> Offline ->
//!   DeletionStarted -> DeletionSuccessful -> NonExistent, then forgotten.
//!
//! Every transition is checked against the tables; an illegal one is logged as an event and
//! not applied.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::events::{EventInput, EventLog};
use super::{active_broker_ids, Controller, TrackedPartition, TrackedTopic};
use crate::image::{MetadataImage, PartitionImage};
use crate::records::MetadataRecord;
use crate::replication::election::{initial_election, offline_election};
use crate::state_machine::{
    check_partition_transition, check_replica_transition, PartitionState, ReplicaState,
};
use crate::topic_config::effective_topic_config;

/// Where a partition's events go.
struct Ctx<'a> {
    log: &'a mut EventLog,
    now_ms: i64,
    topic: &'a str,
    partition: i32,
}

impl Ctx<'_> {
    fn event(&mut self, replica: Option<i32>, from: &str, to: &str, detail: String) {
        self.log.push(EventInput {
            now_ms: self.now_ms,
            topic: self.topic,
            partition: self.partition,
            replica,
            from,
            to,
            detail,
        });
    }

    /// Applies a checked partition transition; an illegal one is logged and skipped.
    fn move_partition(
        &mut self,
        part: &mut TrackedPartition,
        to: PartitionState,
        detail: String,
    ) -> bool {
        match check_partition_transition(self.topic, self.partition, part.state, to) {
            Ok(()) => {
                self.event(None, part.state.name(), to.name(), detail);
                part.state = to;
                true
            }
            Err(illegal) => {
                tracing::warn!(%illegal, "rejected partition state change");
                self.event(
                    None,
                    part.state.name(),
                    to.name(),
                    format!("rejected: {illegal}"),
                );
                false
            }
        }
    }

    /// Applies a checked replica transition; an illegal one is logged and skipped.
    fn move_replica(
        &mut self,
        part: &mut TrackedPartition,
        replica: i32,
        to: ReplicaState,
        detail: &str,
    ) -> bool {
        let from = part
            .replicas
            .get(&replica)
            .copied()
            .unwrap_or(ReplicaState::NonExistent);
        match check_replica_transition(self.topic, self.partition, replica, from, to) {
            Ok(()) => {
                self.event(Some(replica), from.name(), to.name(), detail.to_string());
                part.replicas.insert(replica, to);
                true
            }
            Err(illegal) => {
                tracing::warn!(%illegal, "rejected replica state change");
                self.event(
                    Some(replica),
                    from.name(),
                    to.name(),
                    format!("rejected: {illegal}"),
                );
                false
            }
        }
    }

    /// Logs a failed transition once per distinct reason, so a partition that cannot be
    /// elected does not flood the ring on every commit.
    fn failed(&mut self, part: &mut TrackedPartition, to: PartitionState, reason: String) {
        if part.last_failure.as_deref() != Some(reason.as_str()) {
            tracing::info!(topic = self.topic, partition = self.partition, %reason, "partition state change failed");
            self.event(
                None,
                part.state.name(),
                to.name(),
                format!("failed: {reason}"),
            );
            part.last_failure = Some(reason);
        }
    }
}

impl Controller {
    /// Drives the state machines for the partitions of `image` that need it and returns the
    /// `PartitionChange` records (leader / ISR) to commit. The returned records must be
    /// committed before the next decision (the shell does this); until the image shows them
    /// the affected partitions are left alone, so calling this twice is harmless.
    pub fn on_commit(&mut self, image: &MetadataImage, now_ms: i64) -> Vec<MetadataRecord> {
        let active = active_broker_ids(image);
        self.forget_removed_topics(image, now_ms);
        let mut records = Vec::new();
        for topic in image.topics.values() {
            let tracked = self.topics.entry(topic.id).or_insert_with(|| TrackedTopic {
                name: topic.name.clone(),
                partitions: BTreeMap::new(),
            });
            let mut unclean = None;
            for (pid, image_part) in &topic.partitions {
                let part = tracked
                    .partitions
                    .entry(*pid)
                    .or_insert_with(|| TrackedPartition {
                        state: PartitionState::NonExistent,
                        assignment: image_part.replicas.clone(),
                        replicas: BTreeMap::new(),
                        pending_epoch: None,
                        last_failure: None,
                    });
                let mut ctx = Ctx {
                    log: &mut self.events,
                    now_ms,
                    topic: &topic.name,
                    partition: *pid,
                };
                let mut unclean_allowed = || {
                    *unclean.get_or_insert_with(|| {
                        effective_topic_config(
                            &image.topic_overrides(&topic.name),
                            &self.config.defaults.with_dynamic(image, None),
                        )
                        .unclean_leader_election_enable
                    })
                };
                // A replica in a failed log dir is not live for its partition (KIP-858).
                let live = image.live_for_partition(topic.id, *pid, &active);
                if let Some(change) = drive_partition(
                    &mut ctx,
                    topic.id,
                    part,
                    image_part,
                    &live,
                    &mut unclean_allowed,
                ) {
                    records.push(change);
                }
            }
        }
        records
    }

    /// Walks the partitions and replicas of topics that left the image to NonExistent.
    fn forget_removed_topics(&mut self, image: &MetadataImage, now_ms: i64) {
        let removed: Vec<Uuid> = self
            .topics
            .keys()
            .filter(|id| !image.topic_ids.contains_key(id))
            .copied()
            .collect();
        for id in removed {
            let Some(mut topic) = self.topics.remove(&id) else {
                continue;
            };
            for (pid, part) in topic.partitions.iter_mut() {
                let mut ctx = Ctx {
                    log: &mut self.events,
                    now_ms,
                    topic: &topic.name,
                    partition: *pid,
                };
                for to in [PartitionState::Offline, PartitionState::NonExistent] {
                    ctx.move_partition(part, to, "topic deleted".into());
                }
                let replicas: Vec<i32> = part.replicas.keys().copied().collect();
                for r in replicas {
                    for to in [
                        ReplicaState::Offline,
                        ReplicaState::DeletionStarted,
                        ReplicaState::DeletionSuccessful,
                        ReplicaState::NonExistent,
                    ] {
                        if !ctx.move_replica(part, r, to, "topic deleted") {
                            break;
                        }
                    }
                }
            }
        }
    }
}

/// One partition's step; returns the change to commit, if any.
fn drive_partition(
    ctx: &mut Ctx<'_>,
    topic_id: Uuid,
    part: &mut TrackedPartition,
    image_part: &PartitionImage,
    active: &BTreeSet<i32>,
    unclean_allowed: &mut dyn FnMut() -> bool,
) -> Option<MetadataRecord> {
    if part.state == PartitionState::NonExistent {
        part.assignment = image_part.replicas.clone();
        ctx.move_partition(
            part,
            PartitionState::New,
            format!("assigned replicas {:?}", part.assignment),
        );
        for r in part.assignment.clone() {
            ctx.move_replica(part, r, ReplicaState::New, "new replica");
        }
    }
    if let Some(expected) = part.pending_epoch {
        if image_part.partition_epoch < expected {
            return None;
        }
        part.pending_epoch = None;
    }
    sync_assignment(ctx, part, image_part);

    let leader_live = image_part.leader != -1 && active.contains(&image_part.leader);
    let change = match part.state {
        PartitionState::New | PartitionState::Offline if leader_live => {
            ctx.move_partition(
                part,
                PartitionState::Online,
                format!("leader {} recorded in the image", image_part.leader),
            );
            None
        }
        PartitionState::New | PartitionState::Offline => {
            elect(ctx, topic_id, part, image_part, active, unclean_allowed)
        }
        PartitionState::Online if !leader_live => {
            let reason = if image_part.leader == -1 {
                "no leader".to_string()
            } else {
                format!("leader {} is not live", image_part.leader)
            };
            ctx.move_partition(part, PartitionState::Offline, reason);
            elect(ctx, topic_id, part, image_part, active, unclean_allowed)
        }
        PartitionState::Online => shrink_isr(topic_id, image_part, active)
            .or_else(|| super::reassign::completion(topic_id, image_part, active)),
        PartitionState::NonExistent => None,
    };
    if let Some(MetadataRecord::PartitionChange { .. }) = &change {
        part.pending_epoch = Some(image_part.partition_epoch.saturating_add(1));
    }
    if part.state != PartitionState::New {
        sync_replicas(ctx, part, active);
    }
    change
}

/// Replicas added to the assignment (by a reassignment) enter as New; replicas a completed
/// reassignment removed go Offline -> DeletionStarted -> DeletionSuccessful -> NonExistent
/// (their brokers delete the logs when the image no longer assigns them).
fn sync_assignment(ctx: &mut Ctx<'_>, part: &mut TrackedPartition, image_part: &PartitionImage) {
    if part.assignment == image_part.replicas {
        return;
    }
    part.assignment = image_part.replicas.clone();
    for r in part.assignment.clone() {
        if !part.replicas.contains_key(&r) {
            ctx.move_replica(
                part,
                r,
                ReplicaState::New,
                "replica added to the assignment",
            );
        }
    }
    let removed: Vec<i32> = part
        .replicas
        .keys()
        .copied()
        .filter(|r| !part.assignment.contains(r))
        .collect();
    for r in removed {
        for to in [
            ReplicaState::Offline,
            ReplicaState::DeletionStarted,
            ReplicaState::DeletionSuccessful,
            ReplicaState::NonExistent,
        ] {
            if part.replicas.get(&r) == Some(&to) {
                continue;
            }
            if !ctx.move_replica(part, r, to, "replica removed by a reassignment") {
                break;
            }
        }
        part.replicas.remove(&r);
    }
}

/// Replicas on live brokers are Online, the others Offline.
fn sync_replicas(ctx: &mut Ctx<'_>, part: &mut TrackedPartition, active: &BTreeSet<i32>) {
    for r in part.assignment.clone() {
        let current = part
            .replicas
            .get(&r)
            .copied()
            .unwrap_or(ReplicaState::NonExistent);
        let target = if active.contains(&r) {
            ReplicaState::Online
        } else {
            ReplicaState::Offline
        };
        if current != target && target.can_transition_from(current) {
            let detail = if target == ReplicaState::Online {
                "broker is live"
            } else {
                "broker is not live"
            };
            ctx.move_replica(part, r, target, detail);
        }
    }
}

fn change(topic_id: Uuid, partition: i32, leader: Option<i32>, isr: Vec<i32>) -> MetadataRecord {
    MetadataRecord::PartitionChange {
        topic_id,
        partition_id: partition,
        leader,
        isr: Some(isr),
        replicas: None,
        adding_replicas: None,
        removing_replicas: None,
    }
}

/// Elects a leader for a New or Offline partition.
///
/// A partition that never had an ISR gets D.1's initial election (first live replica, all
/// live replicas in sync). Otherwise D.3's offline strategy: the first live replica that is
/// in the ISR, the ISR filtered to live brokers; if none, an unclean pick (first live replica,
/// ISR = [leader]) when the topic allows it. Failing all, a dead recorded leader is cleared
/// (leader -1; the ISR keeps its last member so a clean election stays possible later).
fn elect(
    ctx: &mut Ctx<'_>,
    topic_id: Uuid,
    part: &mut TrackedPartition,
    p: &PartitionImage,
    active: &BTreeSet<i32>,
    unclean_allowed: &mut dyn FnMut() -> bool,
) -> Option<MetadataRecord> {
    if p.isr.is_empty() && p.leader == -1 {
        let Some(e) = initial_election(&p.replicas, active) else {
            ctx.failed(
                part,
                PartitionState::Online,
                format!("no live replica among assigned replicas {:?}", p.replicas),
            );
            return None;
        };
        ctx.move_partition(
            part,
            PartitionState::Online,
            format!("initial election: leader {}, isr {:?}", e.leader, e.isr),
        );
        part.last_failure = None;
        return Some(change(topic_id, p.partition, Some(e.leader), e.isr));
    }
    // The topic config is read only when a clean election is impossible.
    let elected = offline_election(&p.replicas, &p.isr, active, false)
        .or_else(|| offline_election(&p.replicas, &p.isr, active, unclean_allowed()));
    if let Some(e) = elected {
        let detail = if e.unclean {
            format!(
                "unclean election: leader {}, isr {:?}; records acknowledged by the lost in-sync replicas {:?} may have been lost",
                e.leader, e.isr, p.isr
            )
        } else {
            format!("offline election: leader {}, isr {:?}", e.leader, e.isr)
        };
        ctx.move_partition(part, PartitionState::Online, detail);
        part.last_failure = None;
        return Some(change(topic_id, p.partition, Some(e.leader), e.isr));
    }
    ctx.failed(
        part,
        PartitionState::Online,
        format!("no live in-sync replica (isr {:?})", p.isr),
    );
    if part.state == PartitionState::New {
        // Only a New partition can get here with a recorded leader (failover onto an image
        // whose leader died): it becomes Offline like any partition that lost its leader.
        ctx.move_partition(
            part,
            PartitionState::Offline,
            "recorded leader is not live".into(),
        );
    }
    if p.leader == -1 {
        return None;
    }
    let kept = if p.isr.len() <= 1 {
        p.isr.clone()
    } else if p.isr.contains(&p.leader) {
        vec![p.leader]
    } else {
        p.isr[..1].to_vec()
    };
    Some(change(topic_id, p.partition, Some(-1), kept))
}

/// Online partition with a live leader: followers that are no longer live leave the ISR.
fn shrink_isr(
    topic_id: Uuid,
    p: &PartitionImage,
    active: &BTreeSet<i32>,
) -> Option<MetadataRecord> {
    let live_isr: Vec<i32> = p
        .isr
        .iter()
        .copied()
        .filter(|r| active.contains(r))
        .collect();
    (live_isr.len() != p.isr.len()).then(|| change(topic_id, p.partition, None, live_isr))
}
