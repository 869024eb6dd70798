//! AlterPartition (spec I.3 item 6): a partition leader's ISR change, validated against the
//! image (`replication::validate_alter_partition`) and turned into the record to commit. The
//! broker's controller shell and the replication simulation both call this one entry point.

use uuid::Uuid;

use super::Controller;
use crate::errors::{codes, ApiError};
use crate::image::MetadataImage;
use crate::records::MetadataRecord;
use crate::replication::{validate_alter_partition, AlterPartitionDecision, AlterPartitionRequest};

impl Controller {
    /// Decides one partition of an AlterPartition: UNKNOWN_TOPIC_ID (100) or
    /// UNKNOWN_TOPIC_OR_PARTITION (3) for a partition the image does not have, else the
    /// validation's answer. ISR members must be registered, unfenced and not in controlled
    /// shutdown (KIP-841), nor in a failed log dir (KIP-858). An accepted change comes with its `PartitionChange` record (none
    /// when the ISR already is the requested one); the answer is the ISR and partition epoch
    /// committed, as Kafka's AlterPartition response.
    pub fn alter_partition(
        &mut self,
        image: &MetadataImage,
        topic_id: &Uuid,
        partition: i32,
        request: &AlterPartitionRequest,
    ) -> Result<(AlterPartitionDecision, Vec<MetadataRecord>), ApiError> {
        let Some(topic) = image.topic_by_id(topic_id) else {
            return Err(ApiError::new(codes::UNKNOWN_TOPIC_ID, "unknown topic id"));
        };
        let Some(current) = topic.partitions.get(&partition) else {
            return Err(ApiError::new(
                codes::UNKNOWN_TOPIC_OR_PARTITION,
                "unknown partition",
            ));
        };
        // A replica in a failed log dir of its broker is not eligible either (KIP-858,
        // `crate::offline_dirs`): it no longer fetches, and its last fetch may still look
        // caught up to the leader.
        let eligible = |b: i32| {
            image.brokers.get(&b).is_some_and(|r| r.is_active())
                && !image.replica_in_offline_dir(*topic_id, partition, b)
        };
        let decision = validate_alter_partition(current, request, eligible)?;
        let records = if decision.changed {
            vec![MetadataRecord::PartitionChange {
                topic_id: *topic_id,
                partition_id: partition,
                leader: None,
                isr: Some(decision.isr.clone()),
                replicas: None,
                adding_replicas: None,
                removing_replicas: None,
            }]
        } else {
            Vec::new()
        };
        Ok((decision, records))
    }
}

/// The AlterPartition operation: a partition leader's ISR change (spec I.3 item 6). The answer
/// is the ISR and partition epoch now committed (unchanged when the ISR already was the
/// requested one), as Kafka's AlterPartition response.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AlterPartition {
    pub topic_id: Uuid,
    pub partition: i32,
    pub broker_id: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub new_isr: Vec<i32>,
}

impl super::ControllerOp for AlterPartition {
    const NAME: &'static str = "AlterPartition";
    type Response = (Vec<i32>, i32);

    fn validate(&self) -> Result<(), ApiError> {
        super::op::check_broker_id("broker_id", self.broker_id)?;
        if self.partition < 0 || self.leader_epoch < 0 || self.partition_epoch < 0 {
            return Err(super::op::bad_field("partition/epochs", "negative"));
        }
        if self.new_isr.len() > super::op::MAX_LIST_LEN {
            return Err(super::op::bad_field("new_isr", "too long"));
        }
        for &b in &self.new_isr {
            super::op::check_broker_id("new_isr", b)?;
        }
        Ok(())
    }

    fn decide(
        &self,
        ctx: &mut super::OpContext<'_>,
    ) -> Result<super::ControllerResult<Self::Response>, ApiError> {
        let (decision, records) = ctx.controller.alter_partition(
            ctx.image,
            &self.topic_id,
            self.partition,
            &AlterPartitionRequest {
                broker_id: self.broker_id,
                leader_epoch: self.leader_epoch,
                partition_epoch: self.partition_epoch,
                new_isr: self.new_isr.clone(),
            },
        )?;
        if !records.is_empty() {
            tracing::info!(topic_id = %self.topic_id, partition = self.partition, isr = ?decision.isr, "ISR change");
        }
        Ok(super::ControllerResult::new(
            records,
            (decision.isr, decision.partition_epoch),
        ))
    }
}
