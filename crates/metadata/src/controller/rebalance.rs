//! Automatic preferred-leader rebalance (spec F, `auto.leader.rebalance.enable`): when a
//! broker leads too few of the partitions it is preferred for, leadership goes back to the
//! preferred replicas that are live and in sync.

use std::collections::BTreeSet;

use uuid::Uuid;

use super::Controller;
use crate::image::MetadataImage;
use crate::records::MetadataRecord;
use crate::replication::imbalance::{auto_rebalance, PartitionLeadership};

impl Controller {
    /// The PartitionChange records of one rebalance check (`percentage` is
    /// `leader.imbalance.per.broker.percentage`).
    pub fn rebalance_leaders(
        &mut self,
        image: &MetadataImage,
        percentage: u32,
    ) -> Vec<MetadataRecord> {
        let live: BTreeSet<i32> = image
            .brokers
            .values()
            .filter(|b| !b.fenced && !b.in_controlled_shutdown)
            .map(|b| b.id)
            .collect();
        let partitions: Vec<PartitionLeadership<'_, (Uuid, i32)>> = image
            .topics
            .values()
            .flat_map(|t| {
                t.partitions.values().map(move |p| PartitionLeadership {
                    key: (t.id, p.partition),
                    assignment: &p.replicas,
                    isr: &p.isr,
                    leader: Some(p.leader),
                    deleting: false,
                })
            })
            .collect();
        let reassigning = image
            .topics
            .values()
            .flat_map(|t| t.partitions.values())
            .any(|p| !p.adding_replicas.is_empty() || !p.removing_replicas.is_empty());
        auto_rebalance(&partitions, &live, percentage, reassigning)
            .elections
            .into_iter()
            .map(
                |((topic_id, partition_id), e)| MetadataRecord::PartitionChange {
                    topic_id,
                    partition_id,
                    leader: Some(e.leader),
                    isr: None,
                    replicas: None,
                    adding_replicas: None,
                    removing_replicas: None,
                },
            )
            .collect()
    }
}
