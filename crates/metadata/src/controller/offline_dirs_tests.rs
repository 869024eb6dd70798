//! The failed-dir decision as data: a cluster of three brokers, a heartbeat's offline dirs,
//! and the records and leader / ISR changes that follow.

use super::*;
use crate::controller::{Controller, ControllerConfig};

const T: Uuid = Uuid::from_u128(7);
const DIR_A: Uuid = Uuid::from_u128(100);
const DIR_B: Uuid = Uuid::from_u128(101);

fn register(id: i32) -> MetadataRecord {
    MetadataRecord::RegisterBroker {
        broker_id: id,
        incarnation_id: Uuid::from_u128(id as u128),
        broker_epoch: id as i64,
        host: "h".into(),
        port: 9092,
        rack: None,
        fenced: false,
        endpoints: Vec::new(),
    }
}

/// Partitions of `T` as (replicas, isr, leader).
fn cluster(partitions: &[(&[i32], &[i32], i32)]) -> MetadataImage {
    let mut records = vec![register(1), register(2), register(3)];
    records.push(MetadataRecord::Topic {
        name: "t".into(),
        topic_id: T,
    });
    for (i, (replicas, isr, leader)) in partitions.iter().enumerate() {
        records.push(MetadataRecord::Partition {
            topic_id: T,
            partition_id: i as i32,
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            leader: *leader,
            leader_epoch: 3,
            partition_epoch: 3,
            adding_replicas: vec![],
            removing_replicas: vec![],
        });
    }
    apply(&MetadataImage::empty("c".into()), records)
}

fn apply(image: &MetadataImage, records: Vec<MetadataRecord>) -> MetadataImage {
    let numbered: Vec<(i64, MetadataRecord)> = records
        .into_iter()
        .enumerate()
        .map(|(i, r)| (image.offset + 1 + i as i64, r))
        .collect();
    image.apply(&numbered).expect("applies")
}

fn dir(id: Uuid, partitions: &[i32]) -> OfflineDir {
    OfflineDir {
        id,
        replicas: partitions.iter().map(|p| (T, *p)).collect(),
    }
}

/// (partition, leader, isr) of every change `on_commit` makes once `record` committed.
fn settle(image: &MetadataImage, record: MetadataRecord) -> Vec<(i32, Option<i32>, Vec<i32>)> {
    let mut controller = Controller::new(ControllerConfig::default(), 1, 7);
    assert!(controller.on_commit(image, 0).is_empty(), "settled before");
    let after = apply(image, vec![record]);
    controller
        .on_commit(&after, 1)
        .into_iter()
        .map(|r| match r {
            MetadataRecord::PartitionChange {
                partition_id,
                leader,
                isr,
                ..
            } => (partition_id, leader, isr.unwrap_or_default()),
            other => panic!("unexpected {other:?}"),
        })
        .collect()
}

#[test]
fn the_first_report_records_the_dir_and_the_assigned_replicas_it_held() {
    let image = cluster(&[(&[1, 2, 3], &[1, 2, 3], 1), (&[2, 3], &[2, 3], 2)]);
    // Partition 1 is not assigned to broker 1 and partition 9 does not exist: left out.
    let record = dirs_offline(&image, 1, 1, &[dir(DIR_A, &[0, 1, 9, 0])]);
    assert_eq!(
        record,
        Some(MetadataRecord::BrokerDirsOffline {
            broker_id: 1,
            broker_epoch: 1,
            dirs: vec![DIR_A],
            replicas: vec![(T, 0)],
        })
    );
}

#[test]
fn nothing_is_recorded_again_nor_for_another_registration() {
    let image = cluster(&[(&[1, 2, 3], &[1, 2, 3], 1)]);
    let reported = [dir(DIR_A, &[0])];
    assert_eq!(dirs_offline(&image, 1, 0, &reported), None, "stale epoch");
    assert_eq!(
        dirs_offline(&image, 4, 4, &reported),
        None,
        "unknown broker"
    );
    assert_eq!(dirs_offline(&image, 1, 1, &[]), None, "no offline dir");
    let record = dirs_offline(&image, 1, 1, &reported).expect("first report");
    let after = apply(&image, vec![record]);
    assert_eq!(dirs_offline(&after, 1, 1, &reported), None, "known already");
    // A second dir failing later is new.
    let both = [dir(DIR_A, &[0]), dir(DIR_B, &[])];
    assert!(matches!(
        dirs_offline(&after, 1, 1, &both),
        Some(MetadataRecord::BrokerDirsOffline { dirs, replicas, .. })
            if dirs == vec![DIR_B] && replicas.is_empty()
    ));
}

#[test]
fn a_led_partition_in_the_failed_dir_gets_a_new_leader_from_the_rest_of_the_isr() {
    // Broker 1 leads 0 (failed dir) and 1 (healthy dir), follows 2 (failed dir).
    let image = cluster(&[
        (&[1, 2, 3], &[1, 2, 3], 1),
        (&[1, 2, 3], &[1, 2, 3], 1),
        (&[2, 1, 3], &[2, 1, 3], 2),
    ]);
    let record = dirs_offline(&image, 1, 1, &[dir(DIR_A, &[0, 2])]).expect("new");
    assert_eq!(
        settle(&image, record),
        vec![(0, Some(2), vec![2, 3]), (2, None, vec![2, 3])],
        "partition 1 stays led by broker 1"
    );
}

#[test]
fn the_last_in_sync_replica_in_a_failed_dir_leaves_the_partition_leaderless() {
    // Only broker 1 is in sync: no clean election; the ISR keeps its last member (D.2).
    let image = cluster(&[(&[1, 2], &[1], 1)]);
    let record = dirs_offline(&image, 1, 1, &[dir(DIR_A, &[0])]).expect("new");
    assert_eq!(settle(&image, record), vec![(0, Some(-1), vec![1])]);
}

#[test]
fn a_heartbeat_with_a_nil_dir_or_too_many_dirs_is_refused() {
    assert!(validate(&[dir(DIR_A, &[0])]).is_ok());
    assert!(validate(&[dir(Uuid::nil(), &[0])]).is_err());
    assert!(validate(&[OfflineDir {
        id: DIR_A,
        replicas: vec![(T, -1)]
    }])
    .is_err());
    let many: Vec<OfflineDir> = (0..=MAX_OFFLINE_DIRS as u128)
        .map(|i| dir(Uuid::from_u128(i + 1), &[]))
        .collect();
    assert!(validate(&many).is_err());
}

/// The heartbeat is answered at once; only its first report of a dir is queued for a decision.
#[test]
fn a_heartbeat_naming_a_new_offline_dir_is_queued_and_decides_the_record() {
    use crate::controller::{BrokerHeartbeat, BrokerSessions, ControllerOp};
    let image = cluster(&[(&[1, 2, 3], &[1, 2, 3], 1)]);
    let mut sessions = BrokerSessions::activate(&image, 9_000, 0);
    let beat = |dirs: Vec<OfflineDir>| BrokerHeartbeat {
        broker_id: 1,
        broker_epoch: 1,
        metadata_offset: image.offset,
        offline_dirs: dirs,
    };
    let queued = |b: &BrokerHeartbeat, s: &mut BrokerSessions, i: &MetadataImage| {
        b.answer_early(s, i, 10)
            .expect("answered early")
            .expect("valid")
            .then_queue
    };
    assert!(!queued(&beat(vec![]), &mut sessions, &image));
    let reporting = beat(vec![dir(DIR_A, &[0])]);
    assert!(reporting.validate().is_ok());
    assert!(queued(&reporting, &mut sessions, &image));
    let record = dirs_offline(&image, 1, 1, &reporting.offline_dirs).expect("new");
    let after = apply(&image, vec![record]);
    assert!(!queued(&reporting, &mut sessions, &after), "known already");
}

/// Caught by the cluster test (`log_dir_offline.rs`): the new leader saw the failed replica's
/// last fetch as caught up and put it back in the ISR at once. A replica in a failed dir is
/// not eligible for the ISR.
#[test]
fn an_isr_expansion_with_a_replica_in_a_failed_dir_is_refused() {
    use crate::replication::AlterPartitionRequest;
    let image = cluster(&[(&[2, 1, 3], &[2, 3], 2)]);
    let record = dirs_offline(&image, 1, 1, &[dir(DIR_A, &[0])]).expect("new");
    let after = apply(&image, vec![record]);
    let request = |new_isr: Vec<i32>| AlterPartitionRequest {
        broker_id: 2,
        leader_epoch: 3,
        partition_epoch: 3,
        new_isr,
    };
    let mut controller = Controller::new(ControllerConfig::default(), 1, 7);
    let refused = controller.alter_partition(&after, &T, 0, &request(vec![2, 3, 1]));
    assert_eq!(
        refused.map(|_| ()).map_err(|e| e.code),
        Err(crate::errors::codes::INELIGIBLE_REPLICA)
    );
    assert!(controller
        .alter_partition(&image, &T, 0, &request(vec![2, 3, 1]))
        .is_ok());
}
