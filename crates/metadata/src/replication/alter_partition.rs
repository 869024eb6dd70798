//! Spec I.3 item 6: the controller's validation of an AlterPartition (ISR change) from a
//! partition leader, in KRaft's order (`ReplicationControlManager.validateAlterPartitionData`).
//!
//! The partition epoch acts as a compare-and-set version: the leader proposes a change to the
//! state it last saw, and any change committed since (an election, a controller-side ISR
//! shrink, another AlterPartition) makes the proposal stale, so it is rejected instead of
//! silently overwriting newer state.

use crate::errors::ApiError;
use crate::image::PartitionImage;

use super::codes;

/// One partition of an AlterPartition request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartitionRequest {
    /// The requesting broker.
    pub broker_id: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub new_isr: Vec<i32>,
}

/// An accepted change: the ISR and partition epoch to commit and answer with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartitionDecision {
    pub isr: Vec<i32>,
    pub partition_epoch: i32,
    /// `false`: the ISR is already this one; no record is written and the epoch stays.
    pub changed: bool,
}

/// Validates `request` against the partition's current state. `eligible(broker)` says whether
/// a broker may be in an ISR: registered, unfenced and not in controlled shutdown (KIP-841),
/// e.g. [`crate::image::BrokerRegistration::is_active`].
///
/// In order: epochs *ahead* of the controller's -> 41 NOT_CONTROLLER (this controller is
/// behind; the leader retries elsewhere); a requester that is not the leader -> 42
/// INVALID_REQUEST; older leader epoch -> 74 FENCED_LEADER_EPOCH; older partition epoch ->
/// 95 INVALID_UPDATE_VERSION; an ISR with non-replicas, duplicates, without the leader, or
/// with ineligible brokers -> 107 INELIGIBLE_REPLICA; otherwise the new ISR at
/// `partition_epoch + 1`.
pub fn validate_alter_partition(
    partition: &PartitionImage,
    request: &AlterPartitionRequest,
    eligible: impl Fn(i32) -> bool,
) -> Result<AlterPartitionDecision, ApiError> {
    if request.leader_epoch > partition.leader_epoch
        || request.partition_epoch > partition.partition_epoch
    {
        return Err(ApiError::new(
            codes::NOT_CONTROLLER,
            format!(
                "The request's leader epoch {} / partition epoch {} is newer than the controller's {} / {}",
                request.leader_epoch,
                request.partition_epoch,
                partition.leader_epoch,
                partition.partition_epoch
            ),
        ));
    }
    if request.broker_id != partition.leader {
        return Err(ApiError::new(
            codes::INVALID_REQUEST,
            format!(
                "Broker {} is not the leader ({}) of the partition",
                request.broker_id, partition.leader
            ),
        ));
    }
    if request.leader_epoch < partition.leader_epoch {
        return Err(ApiError::new(
            codes::FENCED_LEADER_EPOCH,
            format!(
                "Leader epoch {} is older than the current {}",
                request.leader_epoch, partition.leader_epoch
            ),
        ));
    }
    if request.partition_epoch < partition.partition_epoch {
        return Err(ApiError::new(
            codes::INVALID_UPDATE_VERSION,
            format!(
                "Partition epoch {} is older than the current {}",
                request.partition_epoch, partition.partition_epoch
            ),
        ));
    }
    let isr = &request.new_isr;
    let ineligible = |message: String| Err(ApiError::new(codes::INELIGIBLE_REPLICA, message));
    if let Some(r) = isr.iter().find(|r| !partition.replicas.contains(r)) {
        return ineligible(format!(
            "The new ISR {isr:?} contains {r}, which is not a replica of the partition {:?}",
            partition.replicas
        ));
    }
    if let Some((_, r)) = isr.iter().enumerate().find(|(i, r)| isr[..*i].contains(r)) {
        return ineligible(format!("The new ISR {isr:?} contains {r} more than once"));
    }
    if !isr.contains(&partition.leader) {
        return ineligible(format!(
            "The new ISR {isr:?} must include the current leader {}",
            partition.leader
        ));
    }
    if let Some(r) = isr.iter().find(|r| !eligible(**r)) {
        return ineligible(format!(
            "The new ISR {isr:?} contains broker {r}, which is fenced, shutting down or not registered"
        ));
    }
    let changed = *isr != partition.isr;
    Ok(AlterPartitionDecision {
        isr: isr.clone(),
        partition_epoch: if changed {
            partition.partition_epoch + 1
        } else {
            partition.partition_epoch
        },
        changed,
    })
}
