//! AlterPartitionReassignments (API 45, KIP-455): start, replace or cancel the move of a
//! partition's replicas. The controller only records the widened replica set (see
//! [`crate::reassignment`]); the new replicas catch up as followers, and [`Controller::on_commit`]
//! completes the move once all of them are in the ISR.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::events::EventInput;
use super::{active_broker_ids, Controller};
use crate::errors::codes;
use crate::image::{MetadataImage, PartitionImage};
use crate::placement::validate_manual_partition;
use crate::reassignment::{in_progress, reverted, ReassignmentReplicas};
use crate::records::MetadataRecord;
use crate::replication::election::reassign_election;
use crate::ApiError;

/// KIP-455's error for cancelling a partition that is not being moved.
pub use crate::errors::codes::NO_REASSIGNMENT_IN_PROGRESS;

/// One partition of an AlterPartitionReassignments request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReassignmentRequest {
    pub topic: String,
    pub partition: i32,
    /// The target replicas; `None` cancels the partition's ongoing reassignment.
    pub target: Option<Vec<i32>>,
}

/// One partition's result; `Ok(())` means the change is in the returned records.
pub type ReassignmentResult = (String, i32, Result<(), ApiError>);

impl Controller {
    /// Decides every partition of an AlterPartitionReassignments request.
    /// `allow_replication_factor_change` is v1's flag (KIP-860; v0 always allows).
    pub fn alter_partition_reassignments(
        &mut self,
        image: &MetadataImage,
        requests: &[ReassignmentRequest],
        allow_replication_factor_change: bool,
        now_ms: i64,
    ) -> (Vec<ReassignmentResult>, Vec<MetadataRecord>) {
        let registered: BTreeSet<i32> = image.brokers.keys().copied().collect();
        let active = active_broker_ids(image);
        let mut results = Vec::new();
        let mut records = Vec::new();
        let mut seen = BTreeSet::new();
        for request in requests {
            let key = (request.topic.clone(), request.partition);
            let outcome = if !seen.insert(key) {
                Err(ApiError::new(
                    codes::INVALID_REQUEST,
                    format!(
                        "The partition {}-{} appears more than once in the request.",
                        request.topic, request.partition
                    ),
                ))
            } else {
                self.reassign_one(
                    image,
                    request,
                    &registered,
                    &active,
                    allow_replication_factor_change,
                    now_ms,
                )
            };
            match outcome {
                Ok(Some(record)) => {
                    records.push(record);
                    results.push((request.topic.clone(), request.partition, Ok(())));
                }
                Ok(None) => results.push((request.topic.clone(), request.partition, Ok(()))),
                Err(e) => results.push((request.topic.clone(), request.partition, Err(e))),
            }
        }
        (results, records)
    }

    fn reassign_one(
        &mut self,
        image: &MetadataImage,
        request: &ReassignmentRequest,
        registered: &BTreeSet<i32>,
        active: &BTreeSet<i32>,
        allow_replication_factor_change: bool,
        now_ms: i64,
    ) -> Result<Option<MetadataRecord>, ApiError> {
        let (topic, partition) = (&request.topic, request.partition);
        let (Some(t), Some(p)) = (image.topic(topic), image.partition(topic, partition)) else {
            return Err(ApiError::new(
                codes::UNKNOWN_TOPIC_OR_PARTITION,
                format!("Unable to find partition {topic}:{partition}."),
            ));
        };
        let change = match &request.target {
            None => cancel(p, active).map_err(|message| {
                let code = if in_progress(&p.adding_replicas, &p.removing_replicas) {
                    codes::INVALID_REPLICA_ASSIGNMENT
                } else {
                    NO_REASSIGNMENT_IN_PROGRESS
                };
                ApiError::new(code, format!("{message} ({topic}-{partition})"))
            })?,
            Some(target) => {
                validate_manual_partition(target, registered, None)?;
                let current_rf =
                    crate::reassignment::target_replicas(&p.replicas, &p.removing_replicas).len();
                if !allow_replication_factor_change && target.len() != current_rf {
                    return Err(ApiError::new(
                        codes::INVALID_REPLICATION_FACTOR,
                        format!(
                            "The replication factor is changed from {current_rf} to {} but allowReplicationFactorChange is false",
                            target.len()
                        ),
                    ));
                }
                start(p, target, active)
            }
        };
        let Some(change) = change else {
            return Ok(None);
        };
        let detail = match &request.target {
            None => format!("reassignment cancelled: replicas {:?}", change.replicas),
            Some(target) => format!(
                "reassignment to {target:?}: replicas {:?}, adding {:?}, removing {:?}",
                change.replicas, change.adding, change.removing
            ),
        };
        self.events.push(EventInput {
            now_ms,
            topic,
            partition,
            replica: None,
            from: "OnlinePartition",
            to: "OnlinePartition",
            detail,
        });
        Ok(Some(change.into_record(t.id, partition)))
    }
}

/// A partition's replica fields after a reassignment decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ReplicaChange {
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
    /// `Some` when the leader must change (it leaves the replica set or the ISR).
    pub leader: Option<i32>,
}

impl ReplicaChange {
    pub(super) fn into_record(self, topic_id: uuid::Uuid, partition_id: i32) -> MetadataRecord {
        MetadataRecord::PartitionChange {
            topic_id,
            partition_id,
            leader: self.leader,
            isr: Some(self.isr),
            replicas: Some(self.replicas),
            adding_replicas: Some(self.adding),
            removing_replicas: Some(self.removing),
        }
    }
}

/// Starts (or replaces) a reassignment to `target`; completes it at once when nothing needs to
/// catch up (a reorder, or only removals). `None`: the partition already has exactly these
/// replicas and nothing is running.
fn start(p: &PartitionImage, target: &[i32], active: &BTreeSet<i32>) -> Option<ReplicaChange> {
    let r = ReassignmentReplicas::new(&p.replicas, &p.adding_replicas, target);
    if r.replicas == p.replicas && !in_progress(&r.adding, &r.removing) && !reassigning(p) {
        return None;
    }
    let isr: Vec<i32> = p
        .isr
        .iter()
        .copied()
        .filter(|b| r.replicas.contains(b))
        .collect();
    let widened = ReplicaChange {
        replicas: r.replicas,
        isr,
        adding: r.adding,
        removing: r.removing,
        leader: None,
    };
    Some(try_complete(p.leader, widened.clone(), active).unwrap_or(widened))
}

/// Cancels the ongoing reassignment; `Err` says why it cannot be.
fn cancel(p: &PartitionImage, active: &BTreeSet<i32>) -> Result<Option<ReplicaChange>, String> {
    if !reassigning(p) {
        return Err("No reassignment is in progress for the partition".into());
    }
    let (replicas, isr) = reverted(&p.replicas, &p.isr, &p.adding_replicas).ok_or_else(|| {
        "Unable to revert the partition assignment because it would require an unclean leader election"
            .to_string()
    })?;
    let leader = new_leader_if_needed(p.leader, &replicas, &isr, active);
    Ok(Some(ReplicaChange {
        replicas,
        isr,
        adding: Vec::new(),
        removing: Vec::new(),
        leader,
    }))
}

fn reassigning(p: &PartitionImage) -> bool {
    in_progress(&p.adding_replicas, &p.removing_replicas)
}

/// The completed form of `change`, if every replica being added is in its ISR.
pub(super) fn try_complete(
    leader: i32,
    change: ReplicaChange,
    active: &BTreeSet<i32>,
) -> Option<ReplicaChange> {
    let (replicas, isr) = crate::reassignment::completed(
        &change.replicas,
        &change.isr,
        &change.adding,
        &change.removing,
    )?;
    let new_leader = new_leader_if_needed(leader, &replicas, &isr, active);
    if leader != -1 && !isr.contains(&leader) && new_leader.is_none() {
        // The leader leaves, and no target replica in sync is live to take over: wait.
        return None;
    }
    Some(ReplicaChange {
        replicas,
        isr,
        adding: Vec::new(),
        removing: Vec::new(),
        leader: new_leader,
    })
}

/// The reassign election (spec D.3) when the current leader leaves the replicas or the ISR.
fn new_leader_if_needed(
    leader: i32,
    replicas: &[i32],
    isr: &[i32],
    active: &BTreeSet<i32>,
) -> Option<i32> {
    if leader != -1 && replicas.contains(&leader) && isr.contains(&leader) {
        return None;
    }
    reassign_election(replicas, isr, active).map(|e| e.leader)
}

/// Completes the reassignment of an online partition whose added replicas have all joined the
/// ISR (called from `on_commit`).
pub(super) fn completion(
    topic_id: uuid::Uuid,
    p: &PartitionImage,
    active: &BTreeSet<i32>,
) -> Option<MetadataRecord> {
    if !reassigning(p) {
        return None;
    }
    let current = ReplicaChange {
        replicas: p.replicas.clone(),
        isr: p.isr.clone(),
        adding: p.adding_replicas.clone(),
        removing: p.removing_replicas.clone(),
        leader: None,
    };
    try_complete(p.leader, current, active).map(|c| c.into_record(topic_id, p.partition))
}

/// The AlterPartitionReassignments operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlterReassignments {
    pub requests: Vec<ReassignmentRequest>,
    pub allow_replication_factor_change: bool,
}

impl super::ControllerOp for AlterReassignments {
    const NAME: &'static str = "AlterPartitionReassignments";
    type Response = Vec<ReassignmentResult>;

    fn decide(
        &self,
        ctx: &mut super::OpContext<'_>,
    ) -> Result<super::ControllerResult<Self::Response>, ApiError> {
        let (results, records) = ctx.controller.alter_partition_reassignments(
            ctx.image,
            &self.requests,
            self.allow_replication_factor_change,
            ctx.now_ms,
        );
        Ok(super::ControllerResult::new(records, results))
    }

    fn absorb(response: Self::Response, error: ApiError) -> Result<Self::Response, ApiError> {
        Ok(super::absorb_each(response, &error, |r| &mut r.2))
    }
}
