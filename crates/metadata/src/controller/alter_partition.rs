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
    /// shutdown (KIP-841). An accepted change comes with its `PartitionChange` record (none
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
        let eligible = |b: i32| image.brokers.get(&b).is_some_and(|r| r.is_active());
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
