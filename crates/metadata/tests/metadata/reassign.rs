//! AlterPartitionReassignments (KIP-455) through the pure controller: widen, catch up,
//! complete; replace; cancel; errors.

use runnel_metadata::*;

use crate::common::{code, Harness};

fn reassign(h: &mut Harness, topic: &str, partition: i32, target: Option<Vec<i32>>) -> i16 {
    let now = h.now_ms;
    let (results, records) = h.controller.alter_partition_reassignments(
        &h.image,
        &[ReassignmentRequest {
            topic: topic.into(),
            partition,
            target,
        }],
        true,
        now,
    );
    h.commit(records);
    code(&results[0].2)
}

/// What an AlterPartition from the leader would commit: `isr` as the new ISR.
fn set_isr(h: &mut Harness, topic: &str, isr: Vec<i32>) {
    let topic_id = h.image.topic(topic).unwrap().id;
    h.commit(vec![MetadataRecord::PartitionChange {
        topic_id,
        partition_id: 0,
        leader: None,
        isr: Some(isr),
        replicas: None,
        adding_replicas: None,
        removing_replicas: None,
    }]);
}

fn manual(h: &mut Harness, name: &str, replicas: Vec<i32>) {
    let mut request = crate::common::req(name, -1, -1);
    request.assignment = vec![(0, replicas)];
    let (out, records) = h.controller.create_topics(&h.image, &[request], false);
    assert!(out[0].result.is_ok(), "{:?}", out[0].result);
    h.commit(records);
}

#[test]
fn moving_a_replica_waits_for_it_to_join_the_isr_then_drops_the_old_one() {
    let mut h = Harness::with_brokers(&[1, 2, 3, 4]);
    manual(&mut h, "move", vec![1, 2, 3]);
    assert_eq!(reassign(&mut h, "move", 0, Some(vec![4, 2, 3])), 0);
    let p = h.image.partition("move", 0).unwrap().clone();
    assert_eq!(p.replicas, vec![4, 2, 3, 1]);
    assert_eq!(p.adding_replicas, vec![4]);
    assert_eq!(p.removing_replicas, vec![1]);
    assert_eq!(p.isr, vec![1, 2, 3], "the new replica is not in sync yet");
    assert_eq!(p.leader, 1, "leadership stays until the move completes");

    // Replica 4 caught up: the leader adds it to the ISR; the controller completes the move
    // and, since the leader leaves, elects the first in-sync target replica.
    set_isr(&mut h, "move", vec![1, 2, 3, 4]);
    let p = h.image.partition("move", 0).unwrap();
    assert_eq!(p.replicas, vec![4, 2, 3]);
    assert_eq!(p.isr, vec![2, 3, 4]);
    assert!(p.adding_replicas.is_empty() && p.removing_replicas.is_empty());
    assert_eq!(
        p.leader, 4,
        "first replica of the target list that is live and in sync"
    );
    let events: Vec<String> = h.controller.events().map(|e| e.detail.clone()).collect();
    assert!(
        events
            .iter()
            .any(|d| d.contains("replica removed by a reassignment")),
        "{events:?}"
    );
}

#[test]
fn a_reorder_or_a_shrink_completes_at_once() {
    let mut h = Harness::with_brokers(&[1, 2, 3]);
    manual(&mut h, "t", vec![1, 2, 3]);
    assert_eq!(reassign(&mut h, "t", 0, Some(vec![3, 1, 2])), 0);
    let p = h.image.partition("t", 0).unwrap();
    assert_eq!(p.replicas, vec![3, 1, 2]);
    assert_eq!(p.leader, 1, "a reorder only changes the preferred replica");
    assert_eq!(reassign(&mut h, "t", 0, Some(vec![2, 3])), 0);
    let p = h.image.partition("t", 0).unwrap();
    assert_eq!(p.replicas, vec![2, 3]);
    assert_eq!(p.isr, vec![2, 3]);
    assert_eq!(p.leader, 2, "the old leader left");
    // Same replicas again: nothing to do, still success.
    let offset = h.image.offset;
    assert_eq!(reassign(&mut h, "t", 0, Some(vec![2, 3])), 0);
    assert_eq!(h.image.offset, offset, "no record for a no-op");
}

#[test]
fn cancelling_restores_the_original_replicas() {
    let mut h = Harness::with_brokers(&[1, 2, 3, 4, 5]);
    manual(&mut h, "c", vec![1, 2, 3]);
    assert_eq!(reassign(&mut h, "c", 0, Some(vec![4, 5, 3])), 0);
    assert_eq!(
        h.image.partition("c", 0).unwrap().replicas,
        vec![4, 5, 3, 1, 2]
    );
    set_isr(&mut h, "c", vec![1, 2, 3, 4]);
    assert_eq!(reassign(&mut h, "c", 0, None), 0);
    let p = h.image.partition("c", 0).unwrap();
    assert_eq!(p.replicas, vec![3, 1, 2]);
    assert_eq!(p.isr, vec![1, 2, 3]);
    assert!(p.adding_replicas.is_empty() && p.removing_replicas.is_empty());
    // Nothing running any more.
    assert_eq!(
        reassign(&mut h, "c", 0, None),
        runnel_metadata::controller::NO_REASSIGNMENT_IN_PROGRESS
    );
}

#[test]
fn a_new_target_replaces_the_running_reassignment() {
    let mut h = Harness::with_brokers(&[1, 2, 3, 4, 5]);
    manual(&mut h, "r", vec![1, 2, 3]);
    assert_eq!(reassign(&mut h, "r", 0, Some(vec![4, 5, 3])), 0);
    assert_eq!(reassign(&mut h, "r", 0, Some(vec![1, 2, 4])), 0);
    let p = h.image.partition("r", 0).unwrap();
    assert_eq!(p.replicas, vec![1, 2, 4, 5, 3]);
    assert_eq!(p.adding_replicas, vec![4], "4 has not caught up yet");
    assert_eq!(p.removing_replicas, vec![5, 3]);
    set_isr(&mut h, "r", vec![1, 2, 3, 4]);
    let p = h.image.partition("r", 0).unwrap();
    assert_eq!(p.replicas, vec![1, 2, 4]);
    assert_eq!(p.isr, vec![1, 2, 4]);
    assert_eq!(p.leader, 1);
}

#[test]
fn errors_carry_kafka_codes() {
    let mut h = Harness::with_brokers(&[1, 2, 3]);
    manual(&mut h, "e", vec![1, 2, 3]);
    assert_eq!(reassign(&mut h, "nope", 0, Some(vec![1])), 3);
    assert_eq!(reassign(&mut h, "e", 7, Some(vec![1])), 3);
    assert_eq!(reassign(&mut h, "e", 0, Some(vec![])), 39);
    assert_eq!(reassign(&mut h, "e", 0, Some(vec![1, 1])), 39);
    assert_eq!(reassign(&mut h, "e", 0, Some(vec![1, 9])), 39);
    assert_eq!(reassign(&mut h, "e", 0, None), 85);
    // v1 with allowReplicationFactorChange=false refuses an RF change.
    let now = h.now_ms;
    let (results, records) = h.controller.alter_partition_reassignments(
        &h.image,
        &[ReassignmentRequest {
            topic: "e".into(),
            partition: 0,
            target: Some(vec![1, 2]),
        }],
        false,
        now,
    );
    assert_eq!(code(&results[0].2), 38);
    assert!(records.is_empty());
    // The same partition twice in one request.
    let two = ReassignmentRequest {
        topic: "e".into(),
        partition: 0,
        target: Some(vec![3, 2, 1]),
    };
    let (results, records) =
        h.controller
            .alter_partition_reassignments(&h.image, &[two.clone(), two], true, now);
    assert_eq!(code(&results[0].2), 0);
    assert_eq!(code(&results[1].2), 42);
    assert_eq!(records.len(), 1);
}

#[test]
fn completion_waits_while_no_live_target_replica_can_lead() {
    let mut h = Harness::with_brokers(&[1, 2]);
    manual(&mut h, "w", vec![1]);
    assert_eq!(reassign(&mut h, "w", 0, Some(vec![2])), 0);
    // 2 is fenced; a stale ISR with it in (as from a late AlterPartition) is shrunk by the
    // controller rather than completing the move onto a dead replica.
    let recs = h.controller.fence_broker(&h.image, 2);
    h.commit(recs);
    set_isr(&mut h, "w", vec![1, 2]);
    let p = h.image.partition("w", 0).unwrap();
    assert_eq!(p.leader, 1);
    assert_eq!(p.isr, vec![1]);
    assert_eq!(p.replicas, vec![2, 1], "still moving");
    // 2 comes back and catches up: now the move completes and 2 leads.
    let recs = h.controller.unfence_broker(&h.image, 2);
    h.commit(recs);
    set_isr(&mut h, "w", vec![1, 2]);
    let p = h.image.partition("w", 0).unwrap();
    assert_eq!(
        (p.leader, p.replicas.clone(), p.isr.clone()),
        (2, vec![2], vec![2])
    );
}

#[test]
fn a_move_waits_until_every_staying_replica_is_in_sync_too() {
    let mut h = Harness::with_brokers(&[1, 2, 3]);
    manual(&mut h, "lag", vec![1, 2, 3]);
    set_isr(&mut h, "lag", vec![1, 3]);
    // Shrinking to [1, 2] while 2 lags would leave a single in-sync copy: it waits.
    assert_eq!(reassign(&mut h, "lag", 0, Some(vec![1, 2])), 0);
    let p = h.image.partition("lag", 0).unwrap();
    assert_eq!(p.replicas, vec![1, 2, 3]);
    assert_eq!(p.removing_replicas, vec![3]);
    set_isr(&mut h, "lag", vec![1, 2, 3]);
    let p = h.image.partition("lag", 0).unwrap();
    assert_eq!(
        (p.replicas.clone(), p.isr.clone()),
        (vec![1, 2], vec![1, 2])
    );
}
