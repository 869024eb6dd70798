//! AddOffsetsToTxn (API 25): the group's `__consumer_offsets` partition (Java's hash of the
//! group id, the same rule FindCoordinator uses) joins the transaction, so its
//! TxnOffsetCommit records get the transaction's marker.

use std::sync::Arc;

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};
use runnel_txn::{errors, TopicPartition};

use crate::context::Broker;
use crate::group_manager::{COORDINATOR_NOT_AVAILABLE, OFFSETS_TOPIC};
use crate::txn_manager::Producer;

pub async fn handle(
    broker: &Arc<Broker>,
    request: AddOffsetsToTxnRequest,
    version: i16,
) -> AddOffsetsToTxnResponse {
    // The group's partition under the topic's partition count, or (not created yet: the
    // client's FindCoordinator for the group creates it) under `offsets.topic.num.partitions`,
    // as Kafka's `partitionFor` does.
    let partitions = broker
        .image()
        .topic(OFFSETS_TOPIC)
        .map(|t| i32::try_from(t.partitions.len()).unwrap_or(0))
        .unwrap_or(broker.settings.offsets_topic_num_partitions.max(1));
    let code = if partitions == 0 {
        COORDINATOR_NOT_AVAILABLE
    } else {
        let partition = runnel_group::partition_for_group(request.group_id.0.as_str(), partitions);
        let who = Producer {
            transactional_id: request.transactional_id.0.to_string(),
            producer_id: request.producer_id.0,
            producer_epoch: request.producer_epoch,
        };
        let tp = TopicPartition::new(OFFSETS_TOPIC, partition);
        // Kafka always passes TV_0 for AddOffsetsToTxn (a version 2 client does not send it).
        broker.txns.add_partitions(who, vec![tp], 0).await
    };
    AddOffsetsToTxnResponse::default().with_error_code(errors::for_version(code, version, 2))
}
