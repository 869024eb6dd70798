//! Controlled shutdown (spec D.2 / I.3 item 5): a broker about to stop asks the controller to
//! move its leaderships first, so clients see a metadata refresh instead of errors.

use std::collections::BTreeSet;

use super::Controller;
use crate::image::MetadataImage;
use crate::records::MetadataRecord;
use crate::replication::election::controlled_shutdown_election;

impl Controller {
    /// Marks `broker_id` as shutting down and moves every partition it leads to the first live,
    /// in-sync replica that is not shutting down (the ISR loses the broker). Partitions with no
    /// such replica (e.g. RF 1) keep their leader until the broker is gone. Returns the records
    /// and how many leaderships stay with the broker.
    pub fn controlled_shutdown(
        &mut self,
        image: &MetadataImage,
        broker_id: i32,
    ) -> (Vec<MetadataRecord>, usize) {
        let Some(broker) = image.brokers.get(&broker_id) else {
            return (Vec::new(), 0);
        };
        let mut records = Vec::new();
        if !broker.in_controlled_shutdown {
            records.push(MetadataRecord::BrokerRegistrationChange {
                broker_id,
                broker_epoch: broker.epoch,
                fenced: None,
                in_controlled_shutdown: Some(true),
            });
        }
        let shutting_down: BTreeSet<i32> = image
            .brokers
            .values()
            .filter(|b| b.in_controlled_shutdown || b.id == broker_id)
            .map(|b| b.id)
            .collect();
        let live: BTreeSet<i32> = image
            .brokers
            .values()
            .filter(|b| !b.fenced && !shutting_down.contains(&b.id))
            .map(|b| b.id)
            .collect();
        let mut remaining = 0;
        for topic in image.topics.values() {
            for p in topic.partitions.values().filter(|p| p.leader == broker_id) {
                match controlled_shutdown_election(&p.replicas, &p.isr, &live, &shutting_down) {
                    Some(e) => records.push(MetadataRecord::PartitionChange {
                        topic_id: topic.id,
                        partition_id: p.partition,
                        leader: Some(e.leader),
                        isr: Some(e.isr),
                        replicas: None,
                        adding_replicas: None,
                        removing_replicas: None,
                    }),
                    None => remaining += 1,
                }
            }
        }
        (records, remaining)
    }
}

/// The ControlledShutdown operation; the answer is how many leaderships stay with the broker
/// (no in-sync replica to take them).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ControlledShutdown {
    pub broker_id: i32,
}

impl super::ControllerOp for ControlledShutdown {
    const NAME: &'static str = "ControlledShutdown";
    type Response = usize;

    fn validate(&self) -> Result<(), crate::ApiError> {
        super::op::check_broker_id("broker_id", self.broker_id)
    }

    fn decide(
        &self,
        ctx: &mut super::OpContext<'_>,
    ) -> Result<super::ControllerResult<usize>, crate::ApiError> {
        let (records, remaining) = ctx
            .controller
            .controlled_shutdown(ctx.image, self.broker_id);
        Ok(super::ControllerResult::new(records, remaining))
    }
}
