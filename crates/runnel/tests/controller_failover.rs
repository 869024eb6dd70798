//! Issue 15 on three real processes: Metadata and DescribeCluster name a live broker that
//! forwards as controller, the answering broker itself (KRaft brokers name a random live one),
//! never the dead quorum leader, and admin requests sent to any broker wait out an election,
//! also when the old leader is frozen (SIGSTOP) rather than dead.

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use kafka_protocol::messages::*;
use support::cluster::*;
use support::*;

fn metadata_controller(addr: &str) -> Option<i32> {
    metadata(addr).map(|m| m.controller_id.0)
}

fn describe_cluster_controller(addr: &str) -> Option<(i32, Vec<i32>)> {
    let mut wire = Wire::try_connect(addr)?;
    let resp: DescribeClusterResponse = wire.try_call(
        ApiKey::DescribeCluster,
        1,
        &DescribeClusterRequest::default(),
    )?;
    (resp.error_code == 0).then(|| {
        (
            resp.controller_id.0,
            resp.brokers.iter().map(|b| b.broker_id.0).collect(),
        )
    })
}

/// The controller ids `addr` names over `n` Metadata and `n` DescribeCluster requests.
fn named_controllers(addr: &str, n: usize) -> BTreeSet<i32> {
    let mut named = BTreeSet::new();
    for _ in 0..n {
        named.insert(metadata_controller(addr).expect("metadata"));
        let (id, brokers) = describe_cluster_controller(addr).expect("describe cluster");
        assert!(
            brokers.contains(&id),
            "controller {id} not among {brokers:?}"
        );
        named.insert(id);
    }
    named
}

#[test]
fn every_live_broker_names_itself_never_the_dead_leader() {
    let mut cluster = Cluster::start(3, &[]);
    wait_until("all brokers live", || {
        (0..3).all(|i| live_broker_ids(&cluster.addr(i)) == Some(vec![1, 2, 3]))
    });
    for i in 0..3 {
        let id = cluster.nodes[i].id;
        assert_eq!(
            named_controllers(&cluster.addr(i), 10),
            BTreeSet::from([id]),
            "broker {id} names itself, not the quorum leader"
        );
    }
    let (leader, _, _) = quorum(&cluster.addr(0)).expect("a quorum leader");
    let leader_index = cluster.index_of(leader);
    cluster.kill9(leader_index);
    // At once, before the election and while the dead broker is still unfenced (for its
    // 9 s session), the case a random choice gets wrong: the survivors never name it.
    for i in cluster.alive() {
        let id = cluster.nodes[i].id;
        assert_eq!(
            named_controllers(&cluster.addr(i), 10),
            BTreeSet::from([id])
        );
    }
}

#[test]
fn admin_requests_wait_out_the_election_when_the_leader_freezes() {
    let cluster = Cluster::start(3, &[]);
    wait_until("all brokers live", || {
        (0..3).all(|i| live_broker_ids(&cluster.addr(i)) == Some(vec![1, 2, 3]))
    });
    let (leader, _, _) = quorum(&cluster.addr(0)).expect("a quorum leader");
    let leader_index = cluster.index_of(leader);
    let survivors: Vec<usize> = (0..3).filter(|&i| i != leader_index).collect();
    // A frozen leader accepts connections (the kernel completes them) and never answers, so
    // a forwarded request that waited on it would take the whole per-call bound (10 s).
    cluster.pause(leader_index);
    let frozen = Instant::now();
    let answers: Vec<(i16, Duration)> = std::thread::scope(|s| {
        let calls: Vec<_> = survivors
            .iter()
            .map(|&i| {
                let addr = cluster.addr(i);
                s.spawn(move || {
                    let code = create(&addr, &format!("after-freeze-{i}"), 2, 2);
                    (code, frozen.elapsed())
                })
            })
            .collect();
        calls.into_iter().map(|c| c.join().expect("join")).collect()
    });
    cluster.resume(leader_index);
    for (code, took) in answers {
        eprintln!("a survivor answered CreateTopics {took:?} after the leader froze");
        assert_eq!(code, 0, "created through a survivor");
        // Election (1-2 s after the followers miss the leader) plus a few seconds.
        assert!(
            took < Duration::from_secs(8),
            "the survivor answered {took:?} after the freeze"
        );
    }
}
