//! Spec I.3 item 6: the controller's validation of AlterPartition.

use runnel_metadata::replication::*;
use runnel_metadata::PartitionImage;

fn partition() -> PartitionImage {
    PartitionImage {
        partition: 0,
        replicas: vec![1, 2, 3],
        isr: vec![1, 2, 3],
        leader: 1,
        leader_epoch: 4,
        partition_epoch: 9,
        adding_replicas: vec![],
        removing_replicas: vec![],
    }
}

fn req(broker: i32, leader_epoch: i32, partition_epoch: i32, isr: &[i32]) -> AlterPartitionRequest {
    AlterPartitionRequest {
        broker_id: broker,
        leader_epoch,
        partition_epoch,
        new_isr: isr.to_vec(),
    }
}

fn code(r: &Result<AlterPartitionDecision, runnel_metadata::ApiError>) -> i16 {
    r.as_ref().map_or_else(|e| e.code, |_| 0)
}

fn all_eligible(_: i32) -> bool {
    true
}

#[test]
fn accepted_shrink_bumps_the_partition_epoch() {
    let r = validate_alter_partition(&partition(), &req(1, 4, 9, &[1, 3]), all_eligible);
    assert_eq!(
        r,
        Ok(AlterPartitionDecision {
            isr: vec![1, 3],
            partition_epoch: 10,
            changed: true
        })
    );
}

#[test]
fn unchanged_isr_keeps_the_epoch() {
    let r = validate_alter_partition(&partition(), &req(1, 4, 9, &[1, 2, 3]), all_eligible);
    assert_eq!(
        r,
        Ok(AlterPartitionDecision {
            isr: vec![1, 2, 3],
            partition_epoch: 9,
            changed: false
        })
    );
}

#[test]
fn stale_and_fenced_epochs() {
    let p = partition();
    assert_eq!(
        code(&validate_alter_partition(
            &p,
            &req(1, 4, 8, &[1]),
            all_eligible
        )),
        95
    );
    assert_eq!(
        code(&validate_alter_partition(
            &p,
            &req(1, 3, 9, &[1]),
            all_eligible
        )),
        74
    );
    assert_eq!(
        code(&validate_alter_partition(
            &p,
            &req(1, 3, 8, &[1]),
            all_eligible
        )),
        74,
        "the leader epoch is checked first"
    );
    assert_eq!(
        code(&validate_alter_partition(
            &p,
            &req(1, 5, 9, &[1]),
            all_eligible
        )),
        41,
        "newer than the controller: it is behind"
    );
    assert_eq!(
        code(&validate_alter_partition(
            &p,
            &req(1, 4, 10, &[1]),
            all_eligible
        )),
        41
    );
    assert_eq!(
        code(&validate_alter_partition(
            &p,
            &req(2, 4, 9, &[1, 2]),
            all_eligible
        )),
        42,
        "only the leader alters the ISR"
    );
}

#[test]
fn ineligible_isrs() {
    let p = partition();
    let c = |isr: &[i32], eligible: &dyn Fn(i32) -> bool| {
        code(&validate_alter_partition(&p, &req(1, 4, 9, isr), eligible))
    };
    assert_eq!(c(&[1, 4], &all_eligible), 107, "4 is not a replica");
    assert_eq!(c(&[1, 2, 2], &all_eligible), 107, "duplicate");
    assert_eq!(c(&[2, 3], &all_eligible), 107, "without the leader");
    assert_eq!(c(&[], &all_eligible), 107, "empty");
    assert_eq!(c(&[1, 3], &|b| b != 3), 107, "3 is fenced or shutting down");
    assert_eq!(c(&[1, 2], &|b| b != 3), 0, "3 is not in the new ISR");
}
