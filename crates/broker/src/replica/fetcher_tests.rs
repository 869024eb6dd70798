//! How one partition's answer moves the follower's fetch loop.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use runnel_log::LogManager;
use runnel_metadata::topic_config::{effective_topic_config, BrokerDefaults};

use super::apply_partition;
use crate::replica::partition::{log_config, Partition, Role};

/// `t-0` on broker 2, following broker 1.
fn follower(dir: &std::path::Path) -> Partition {
    let role = Role {
        leader: 1,
        leader_epoch: 0,
        isr: vec![1, 2],
        replicas: vec![1, 2],
        live_replicas: vec![1, 2],
        partition_epoch: 0,
        config: Arc::new(effective_topic_config(
            &Default::default(),
            &BrokerDefaults::default(),
        )),
    };
    let logs = LogManager::open(dir.to_path_buf(), log_config(&role.config)).unwrap();
    let topic_id = uuid::Uuid::from_u128(7);
    let log = logs
        .get_or_create("t", 0, topic_id, log_config(&role.config))
        .unwrap();
    Partition::new("t".into(), 0, topic_id, log, role, 2, 30_000)
}

/// A leader's batch of 3 records at offset 0, epoch 0.
fn leader_batch() -> BytesMut {
    let records: Vec<Record> = (0..3)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i,
            sequence: -1,
            timestamp: 1,
            key: None,
            value: Some(Bytes::from_static(b"value")),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, records.iter(), &options).unwrap();
    buf
}

fn answer(records: Bytes) -> PartitionData {
    PartitionData::default()
        .with_partition_index(0)
        .with_high_watermark(3)
        .with_records(Some(records))
}

#[test]
fn a_batch_the_follower_refuses_backs_off_instead_of_refetching_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let p = follower(dir.path());
    // One flipped byte (a damaged segment on the leader): the CRC check refuses the batch.
    let mut damaged = leader_batch();
    let last = damaged.len() - 1;
    damaged[last] ^= 0x01;
    let step = apply_partition(&p, answer(damaged.freeze()));
    assert!(step.error && !step.progressed, "{step:?}");
    assert_eq!(p.lock_log().log_end_offset(), 0);
    // The intact batch lands and counts as progress.
    let step = apply_partition(&p, answer(leader_batch().freeze()));
    assert!(step.progressed && !step.error, "{step:?}");
    assert_eq!(p.lock_log().log_end_offset(), 3);
}
