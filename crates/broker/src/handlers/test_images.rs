//! Test fixtures: metadata images built from records, as the state machine applies them.

use runnel_metadata::{MetadataImage, MetadataRecord};
use uuid::Uuid;

/// The image of `records` applied in order at offsets 0, 1, ... to an empty cluster "c".
pub(crate) fn image_of(records: Vec<MetadataRecord>) -> MetadataImage {
    let numbered: Vec<(i64, MetadataRecord)> = (0_i64..).zip(records).collect();
    MetadataImage::empty("c".into())
        .apply(&numbered)
        .expect("valid records")
}

/// Brokers 1 (live) and 2 (fenced) registered at localhost:9092 with no listener endpoints.
pub(crate) fn live_1_fenced_2() -> Vec<MetadataRecord> {
    [(1, false), (2, true)]
        .into_iter()
        .map(|(id, fenced)| MetadataRecord::RegisterBroker {
            broker_id: id,
            incarnation_id: Uuid::from_u128(id as u128),
            broker_epoch: 1,
            host: "localhost".into(),
            port: 9092,
            rack: None,
            fenced,
            endpoints: Vec::new(),
        })
        .collect()
}
