//! Metadata records the replica module's tests build images from (one copy for
//! `manager` and `local_changes`).

use runnel_metadata::MetadataRecord;
use uuid::Uuid;

/// Broker `id` registered at `epoch`, `fenced` or not.
pub(crate) fn registration(id: i32, epoch: i64, fenced: bool) -> MetadataRecord {
    MetadataRecord::RegisterBroker {
        broker_id: id,
        incarnation_id: Uuid::from_u128(u128::from(id.unsigned_abs())),
        broker_epoch: epoch,
        host: "h".into(),
        port: 9092,
        rack: None,
        fenced,
        endpoints: Vec::new(),
    }
}

/// Partition `index` of `topic_id` on `replicas`, all in sync, led by the first.
pub(crate) fn partition(topic_id: Uuid, index: i32, replicas: Vec<i32>) -> MetadataRecord {
    MetadataRecord::Partition {
        topic_id,
        partition_id: index,
        isr: replicas.clone(),
        leader: replicas[0],
        replicas,
        leader_epoch: 0,
        partition_epoch: 0,
        adding_replicas: Vec::new(),
        removing_replicas: Vec::new(),
    }
}
