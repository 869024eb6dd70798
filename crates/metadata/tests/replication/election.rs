//! Spec D.3: the election strategies and ElectLeaders' result codes; properties over random
//! partitions; and agreement with the controller's own offline election (commit.rs).

use std::collections::BTreeSet;

use proptest::prelude::*;
use runnel_metadata::replication::*;
use runnel_metadata::*;
use uuid::Uuid;

fn set(ids: &[i32]) -> BTreeSet<i32> {
    ids.iter().copied().collect()
}

fn clean(leader: i32, isr: &[i32]) -> Option<Election> {
    Some(Election {
        leader,
        isr: isr.to_vec(),
        unclean: false,
    })
}

#[test]
fn offline_picks_the_first_live_isr_member_in_assignment_order() {
    // Assignment order decides, not ISR order.
    assert_eq!(
        offline_election(&[3, 1, 2], &[2, 1, 3], &set(&[1, 2]), false),
        clean(1, &[2, 1])
    );
    assert_eq!(
        offline_election(&[1, 2, 3], &[1, 2, 3], &set(&[1, 2, 3]), false),
        clean(1, &[1, 2, 3])
    );
    // Live but out of sync: not eligible when clean.
    assert_eq!(
        offline_election(&[1, 2, 3], &[3], &set(&[1, 2]), false),
        None
    );
}

#[test]
fn offline_unclean_picks_the_first_live_replica_alone() {
    assert_eq!(
        offline_election(&[1, 2, 3], &[3], &set(&[2, 1]), true),
        Some(Election {
            leader: 1,
            isr: vec![1],
            unclean: true
        })
    );
    // A live ISR member is still preferred over an unclean pick.
    assert_eq!(
        offline_election(&[1, 2, 3], &[3], &set(&[1, 3]), true),
        clean(3, &[3])
    );
    assert_eq!(offline_election(&[1, 2, 3], &[3], &set(&[]), true), None);
    assert_eq!(offline_election(&[1, 2, 3], &[3], &set(&[4]), true), None);
}

#[test]
fn initial_election_takes_every_live_replica() {
    assert_eq!(
        initial_election(&[3, 1, 2], &set(&[1, 2])),
        clean(1, &[1, 2])
    );
    assert_eq!(initial_election(&[3, 1, 2], &set(&[])), None);
}

#[test]
fn reassign_picks_from_the_target_replicas_and_keeps_the_isr() {
    // Target [4, 5, 1]: 4 not yet in the ISR, 5 in it.
    assert_eq!(
        reassign_election(&[4, 5, 1], &[1, 2, 5], &set(&[1, 2, 4, 5])),
        clean(5, &[1, 2, 5])
    );
    assert_eq!(
        reassign_election(&[4, 5], &[1, 2, 5], &set(&[1, 2, 4])),
        None
    );
}

#[test]
fn preferred_is_only_the_first_assigned_replica() {
    assert_eq!(
        preferred_election(&[2, 1, 3], &[1, 3, 2], &set(&[1, 2, 3])),
        clean(2, &[1, 3, 2])
    );
    assert_eq!(
        preferred_election(&[2, 1, 3], &[1, 3], &set(&[1, 2, 3])),
        None,
        "not in the ISR: no fallback to another replica"
    );
    assert_eq!(
        preferred_election(&[2, 1, 3], &[1, 2], &set(&[1, 3])),
        None,
        "not live"
    );
    assert_eq!(preferred_election(&[], &[], &set(&[1])), None);
}

#[test]
fn controlled_shutdown_moves_away_and_drops_shutting_down_brokers_from_the_isr() {
    let live = set(&[2, 3]);
    let down = set(&[1]);
    assert_eq!(
        controlled_shutdown_election(&[1, 2, 3], &[1, 2, 3], &live, &down),
        clean(2, &[2, 3])
    );
    // A dead (fenced) ISR member is not removed here; the offline path handles it.
    assert_eq!(
        controlled_shutdown_election(&[1, 2, 3], &[1, 2, 3], &set(&[3]), &down),
        clean(3, &[2, 3])
    );
    assert_eq!(
        controlled_shutdown_election(&[1, 2, 3], &[1, 2], &set(&[3]), &set(&[1, 2])),
        None,
        "every ISR member is shutting down"
    );
}

#[test]
fn elect_leaders_preferred_results() {
    let live = set(&[1, 2, 3]);
    let t = ElectLeadersType::Preferred;
    assert_eq!(
        elect_leaders(t, &[1, 2, 3], &[1, 2, 3], 1, &live)
            .unwrap_err()
            .code,
        84
    );
    assert_eq!(
        elect_leaders(t, &[1, 2, 3], &[1, 2, 3], 2, &live),
        Ok(Election {
            leader: 1,
            isr: vec![1, 2, 3],
            unclean: false
        })
    );
    assert_eq!(
        elect_leaders(t, &[1, 2, 3], &[2, 3], 2, &live)
            .unwrap_err()
            .code,
        80
    );
    assert_eq!(
        elect_leaders(t, &[1, 2, 3], &[1, 2, 3], 2, &set(&[2, 3]))
            .unwrap_err()
            .code,
        80
    );
    assert_eq!(ElectLeadersType::from_i8(0), Some(t));
    assert_eq!(
        ElectLeadersType::from_i8(1),
        Some(ElectLeadersType::Unclean)
    );
    assert_eq!(ElectLeadersType::from_i8(2), None);
}

#[test]
fn elect_leaders_unclean_results() {
    let t = ElectLeadersType::Unclean;
    assert_eq!(
        elect_leaders(t, &[1, 2, 3], &[1], 2, &set(&[2, 3]))
            .unwrap_err()
            .code,
        84,
        "a live leader exists"
    );
    assert_eq!(
        elect_leaders(t, &[1, 2, 3], &[1], -1, &set(&[2, 3])),
        Ok(Election {
            leader: 2,
            isr: vec![2],
            unclean: true
        })
    );
    assert_eq!(
        elect_leaders(t, &[1, 2, 3], &[1], 1, &set(&[]))
            .unwrap_err()
            .code,
        83
    );
}

// ---- properties -----------------------------------------------------------------------

/// A random partition over brokers 1..=6: distinct assignment, ISR a subset of it, and
/// random live / shutting-down sets.
fn partition() -> impl Strategy<Value = (Vec<i32>, Vec<i32>, BTreeSet<i32>, BTreeSet<i32>)> {
    (1usize..=5)
        .prop_flat_map(|rf| {
            (
                Just((1..=6).collect::<Vec<i32>>()).prop_shuffle(),
                Just(rf),
                proptest::collection::vec(any::<bool>(), 6),
                proptest::collection::btree_set(1i32..=6, 0..=6),
                proptest::collection::btree_set(1i32..=6, 0..=2),
            )
        })
        .prop_map(|(brokers, rf, in_isr, live, down)| {
            let assignment: Vec<i32> = brokers[..rf].to_vec();
            let isr = assignment
                .iter()
                .zip(&in_isr)
                .filter(|(_, keep)| **keep)
                .map(|(r, _)| *r)
                .collect();
            let live = live.difference(&down).copied().collect();
            (assignment, isr, live, down)
        })
}

proptest! {
    #![proptest_config(crate::config(2048, "tests/replication/regressions/election.txt"))]

    #[test]
    fn elections_never_pick_a_dead_or_clean_out_of_sync_leader(
        (assignment, isr, live, down) in partition(),
        unclean in any::<bool>(),
    ) {
        let first_live_isr = assignment.iter().find(|r| live.contains(r) && isr.contains(r));
        match offline_election(&assignment, &isr, &live, unclean) {
            Some(e) => {
                prop_assert!(live.contains(&e.leader) && assignment.contains(&e.leader));
                prop_assert!(e.isr.contains(&e.leader));
                prop_assert!(e.isr.iter().all(|r| live.contains(r)));
                if e.unclean {
                    prop_assert!(unclean && first_live_isr.is_none());
                    prop_assert_eq!(&e.isr, &vec![e.leader]);
                } else {
                    prop_assert_eq!(Some(&e.leader), first_live_isr);
                }
            }
            None => {
                prop_assert!(first_live_isr.is_none());
                prop_assert!(!unclean || !assignment.iter().any(|r| live.contains(r)));
            }
        }
        if let Some(e) = preferred_election(&assignment, &isr, &live) {
            prop_assert_eq!(e.leader, assignment[0]);
            prop_assert!(live.contains(&e.leader) && isr.contains(&e.leader));
            prop_assert_eq!(&e.isr, &isr);
        } else {
            prop_assert!(!(live.contains(&assignment[0]) && isr.contains(&assignment[0])));
        }
        match controlled_shutdown_election(&assignment, &isr, &live, &down) {
            Some(e) => {
                prop_assert!(live.contains(&e.leader) && isr.contains(&e.leader));
                prop_assert!(!down.contains(&e.leader));
                prop_assert!(e.isr.iter().all(|r| !down.contains(r) && isr.contains(r)));
                prop_assert!(e.isr.contains(&e.leader));
            }
            None => prop_assert!(!isr.iter().any(|r| live.contains(r) && !down.contains(r))),
        }
        if let Some(e) = reassign_election(&assignment, &isr, &live) {
            prop_assert!(live.contains(&e.leader) && isr.contains(&e.leader));
        }
    }
}

// ---- agreement with the controller --------------------------------------------------

fn register(image: &mut MetadataImage, controller: &mut Controller, now: &mut i64, id: i32) {
    let recs = controller
        .register_broker(
            image,
            runnel_metadata::controller::RegisterBroker {
                broker_id: id,
                incarnation_id: Uuid::from_u128(id as u128 + 1),
                host: format!("h{id}"),
                port: 9092,
                rack: None,
                endpoints: Vec::new(),
            },
        )
        .expect("register");
    commit(image, controller, now, recs);
    let recs = controller.unfence_broker(image, id);
    commit(image, controller, now, recs);
}

fn commit(
    image: &mut MetadataImage,
    controller: &mut Controller,
    now: &mut i64,
    recs: Vec<MetadataRecord>,
) {
    let mut batch = recs;
    for _ in 0..10 {
        if !batch.is_empty() {
            let start = image.offset + 1;
            let with: Vec<(i64, MetadataRecord)> = batch
                .into_iter()
                .enumerate()
                .map(|(i, r)| (start + i as i64, r))
                .collect();
            *image = image.apply(&with).expect("records apply");
        }
        *now += 1;
        batch = controller.on_commit(image, *now);
        if batch.is_empty() {
            return;
        }
    }
    panic!("no fixed point");
}

proptest! {
    #![proptest_config(crate::config(48, "tests/replication/regressions/election.txt"))]

    /// Fencing brokers one at a time: every partition whose leader died gets exactly the
    /// leader and ISR that `offline_election` computes from the image before the fence.
    #[test]
    fn controller_offline_election_agrees(fence_order in Just(vec![1, 2, 3, 4, 5]).prop_shuffle(), fences in 1usize..=4) {
        let mut image = MetadataImage::empty("c".into());
        let mut controller = Controller::new(ControllerConfig::default(), 1, 7);
        let mut now = 1_000;
        for id in 1..=5 {
            register(&mut image, &mut controller, &mut now, id);
        }
        let (_, recs) = controller.create_topics(
            &image,
            &[CreateTopicRequest { name: "t".into(), num_partitions: 12, replication_factor: 3, ..Default::default() }],
            false,
        );
        commit(&mut image, &mut controller, &mut now, recs);
        for &b in &fence_order[..fences] {
            let before = image.clone();
            let recs = controller.fence_broker(&image, b);
            commit(&mut image, &mut controller, &mut now, recs);
            let live: BTreeSet<i32> = image.brokers.values().filter(|x| x.is_active()).map(|x| x.id).collect();
            for (pid, old) in &before.topic("t").unwrap().partitions {
                if old.leader != b {
                    continue;
                }
                let new = image.partition("t", *pid).unwrap();
                match offline_election(&old.replicas, &old.isr, &live, false) {
                    Some(e) => {
                        prop_assert_eq!(new.leader, e.leader);
                        prop_assert_eq!(&new.isr, &e.isr);
                    }
                    None => prop_assert_eq!(new.leader, -1),
                }
            }
        }
    }
}
