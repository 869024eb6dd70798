//! Three real `runnel broker` processes forming a cluster: the Raft metadata quorum elects an
//! active controller, every broker serves the same metadata, admin requests sent to any broker
//! reach the controller, the controller fails over after `kill -9`, dead brokers are fenced and
//! come back unfenced, and a full restart keeps every topic.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use support::cluster::*;
use support::*;

#[test]
fn cluster_forms_serves_metadata_everywhere_and_forwards_admin_requests() {
    let cluster = Cluster::start(3, &[]);
    wait_until("a quorum leader with 3 voters", || {
        quorum(&cluster.addr(0)).is_some_and(|(_, _, voters)| voters.len() == 3)
    });
    wait_until("all three brokers registered and unfenced", || {
        (0..3).all(|i| live_broker_ids(&cluster.addr(i)) == Some(vec![1, 2, 3]))
    });
    // Sent to broker 2 whoever the controller is: forwarded.
    assert_eq!(create(&cluster.addr(1), "spread", 6, 3), 0);
    let mut seen = Vec::new();
    for i in 0..3 {
        let addr = cluster.addr(i);
        wait_until("the topic in this broker's metadata", || {
            topic_partitions(&addr, "spread")
                .is_some_and(|p| p.len() == 6 && p.iter().all(|(l, _)| *l > 0))
        });
        seen.push(topic_partitions(&addr, "spread").unwrap());
    }
    assert!(
        seen.windows(2).all(|w| w[0] == w[1]),
        "every broker converges on one image: {seen:?}"
    );
    for (leader, replicas) in &seen[0] {
        assert_eq!(replicas.len(), 3);
        assert!(replicas.contains(leader));
    }
    let mut leaders: Vec<i32> = seen[0].iter().map(|(l, _)| *l).collect();
    leaders.sort();
    assert_eq!(leaders, vec![1, 1, 2, 2, 3, 3], "leaders spread evenly");
    assert_eq!(
        create(&cluster.addr(2), "spread", 1, 1),
        36,
        "TOPIC_ALREADY_EXISTS from any broker"
    );
    assert_eq!(
        create(&cluster.addr(0), "too-wide", 1, 4),
        38,
        "RF above the live brokers"
    );
}

#[test]
fn controller_failover_after_kill9() {
    let mut cluster = Cluster::start(3, &[]);
    wait_until("a quorum leader", || quorum(&cluster.addr(0)).is_some());
    wait_until("all brokers live", || {
        live_broker_ids(&cluster.addr(0)) == Some(vec![1, 2, 3])
    });
    assert_eq!(create(&cluster.addr(0), "before", 3, 3), 0);
    let (leader, epoch, _) = quorum(&cluster.addr(0)).unwrap();
    cluster.kill9((leader - 1) as usize);
    let survivor = cluster.alive()[0];
    let started = Instant::now();
    wait_until("a new controller with a higher epoch", || {
        quorum(&cluster.addr(survivor)).is_some_and(|(l, e, _)| l != leader && e > epoch)
    });
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "failover took {:?}",
        started.elapsed()
    );
    let code = create(&cluster.addr(survivor), "after", 3, 2);
    assert_eq!(code, 0, "topic creation works again after the failover");
    for i in cluster.alive() {
        let addr = cluster.addr(i);
        wait_until("both topics on every live broker", || {
            topic_partitions(&addr, "before").is_some()
                && topic_partitions(&addr, "after").is_some()
        });
    }
}

#[test]
fn dead_broker_is_fenced_then_unfenced_and_full_restart_keeps_topics() {
    let mut cluster = Cluster::start(
        3,
        &[
            "broker.session.timeout.ms=2000",
            "broker.heartbeat.interval.ms=300",
        ],
    );
    wait_until("all brokers live", || {
        (0..3).all(|i| live_broker_ids(&cluster.addr(i)) == Some(vec![1, 2, 3]))
    });
    assert_eq!(create(&cluster.addr(0), "durable-meta", 4, 3), 0);
    let (controller, _, _) = quorum(&cluster.addr(0)).unwrap();
    // Kill a broker that is not the controller: only fencing should follow.
    let victim = (0..3).find(|i| *i as i32 + 1 != controller).unwrap();
    let victim_id = victim as i32 + 1;
    cluster.kill9(victim);
    for i in cluster.alive() {
        let addr = cluster.addr(i);
        wait_until("the dead broker fenced everywhere", || {
            live_broker_ids(&addr).is_some_and(|ids| !ids.contains(&victim_id))
        });
        wait_until("no partition led by the fenced broker", || {
            topic_partitions(&addr, "durable-meta")
                .is_some_and(|p| p.iter().all(|(l, _)| *l != victim_id && *l > 0))
        });
    }
    cluster.restart(victim);
    for i in 0..3 {
        let addr = cluster.addr(i);
        wait_until("the restarted broker unfenced everywhere", || {
            live_broker_ids(&addr) == Some(vec![1, 2, 3])
        });
    }
    // Full cluster restart: every topic survives.
    for i in 0..3 {
        cluster.kill9(i);
    }
    let waits: Vec<_> = (0..3).map(|i| cluster.spawn(i)).collect();
    for rx in waits {
        rx.recv_timeout(DEADLINE).expect("node restarted");
    }
    for i in 0..3 {
        let addr = cluster.addr(i);
        wait_until("the topic after a full restart", || {
            topic_partitions(&addr, "durable-meta").is_some_and(|p| p.len() == 4)
        });
    }
}

#[test]
fn inconsistent_cluster_configuration_is_refused_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str], data: &Path| {
        Command::new(env!("CARGO_BIN_EXE_runnel"))
            .arg("broker")
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--data-dir")
            .arg(data)
            .args(args)
            .output()
            .expect("run runnel")
    };
    let out = run(
        &[
            "--node-id",
            "4",
            "--controller-quorum-voters",
            "1@127.0.0.1:1,2@127.0.0.1:2",
        ],
        dir.path(),
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not in --controller-quorum-voters"), "{err}");
    let out = run(
        &[
            "--node-id",
            "1",
            "--controller-quorum-voters",
            "1@127.0.0.1:1,1@127.0.0.1:2",
        ],
        dir.path(),
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("twice"));
}

#[test]
fn restarted_broker_keeps_its_partition_data() {
    let mut cluster = Cluster::start(3, &[]);
    wait_until("all brokers live", || {
        (0..3).all(|i| live_broker_ids(&cluster.addr(i)) == Some(vec![1, 2, 3]))
    });
    // One partition, one replica, on broker 2.
    let mut wire = Wire::connect(&cluster.addr(0));
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![create_topics_request::CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("on-two")))
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_assignments(vec![
                create_topics_request::CreatableReplicaAssignment::default()
                    .with_partition_index(0)
                    .with_broker_ids(vec![BrokerId(2)]),
            ])]);
    let resp: CreateTopicsResponse = wire.call(ApiKey::CreateTopics, 5, &req);
    assert_eq!(resp.topics[0].error_code, 0);
    let addr = cluster.addr(1);
    wait_until("broker 2 leads the partition", || {
        topic_partitions(&addr, "on-two").is_some_and(|p| p == vec![(2, vec![2])])
    });
    let mut two = Wire::connect(&addr);
    for i in 0..20 {
        let v = format!("v{i}");
        let b = batch(
            &[(None, v.as_str())],
            kafka_protocol::records::Compression::None,
        );
        assert_eq!(two.produce("on-two", 0, b, 1).0, 0);
    }
    cluster.restart(1);
    let addr = cluster.addr(1);
    wait_until("broker 2 leads again after its restart", || {
        topic_partitions(&addr, "on-two").is_some_and(|p| p == vec![(2, vec![2])])
            && Wire::try_connect(&addr).is_some()
    });
    let mut two = Wire::connect(&addr);
    wait_until("the partition is served again", || {
        two.fetch("on-two", 0, 0, 100).0 == 0
    });
    let records = two.fetch_all("on-two", 0, 0);
    assert_eq!(
        values(&records),
        (0..20).map(|i| format!("v{i}")).collect::<Vec<_>>()
    );
}

#[test]
fn second_live_process_with_the_same_node_id_is_refused() {
    let overrides = [
        "broker.session.timeout.ms=1000",
        "broker.heartbeat.interval.ms=200",
    ];
    let cluster = Cluster::start(3, &overrides);
    wait_until("a quorum leader", || quorum(&cluster.addr(0)).is_some());
    let dir = tempfile::tempdir().unwrap();
    let broker_only = |data: &Path| broker_only_command(7, &cluster.voters, data, &overrides);
    let mut first = broker_only(&dir.path().join("a"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr = cluster.addr(0);
    wait_until("the broker-only node registered and unfenced", || {
        live_broker_ids(&addr).is_some_and(|ids| ids.contains(&7))
    });
    let started = Instant::now();
    let second = broker_only(&dir.path().join("b")).output().unwrap();
    let _ = first.kill();
    let _ = first.wait();
    assert!(
        !second.status.success(),
        "the second process must not start"
    );
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("already in use"), "one clear line: {err}");
    assert!(started.elapsed() < Duration::from_secs(25));
}

#[test]
fn acks_all_records_survive_the_leaders_kill9() {
    let mut cluster = Cluster::start(
        3,
        &[
            "broker.session.timeout.ms=2000",
            "broker.heartbeat.interval.ms=300",
        ],
    );
    wait_until("all brokers live", || {
        (0..3).all(|i| live_broker_ids(&cluster.addr(i)) == Some(vec![1, 2, 3]))
    });
    assert_eq!(create(&cluster.addr(0), "replicated", 1, 3), 0);
    let addr = cluster.addr(0);
    wait_until("a leader for the partition", || {
        topic_partitions(&addr, "replicated").is_some_and(|p| p.len() == 1 && p[0].0 > 0)
    });
    let leader = topic_partitions(&addr, "replicated").unwrap()[0].0;
    let mut wire = Wire::connect(&cluster.addr((leader - 1) as usize));
    let mut acked = Vec::new();
    for i in 0..100 {
        let v = format!("r{i}");
        let (code, _) = wire.produce(
            "replicated",
            0,
            batch(
                &[(None, v.as_str())],
                kafka_protocol::records::Compression::None,
            ),
            -1,
        );
        assert_eq!(code, 0, "acks=all with three live replicas");
        acked.push(v);
    }
    cluster.kill9((leader - 1) as usize);
    let survivor = cluster.alive()[0];
    let addr = cluster.addr(survivor);
    wait_until("a new leader among the survivors", || {
        topic_partitions(&addr, "replicated").is_some_and(|p| p[0].0 > 0 && p[0].0 != leader)
    });
    let new_leader = topic_partitions(&addr, "replicated").unwrap()[0].0;
    let mut wire = Wire::connect(&cluster.addr((new_leader - 1) as usize));
    wait_until("the new leader serves the partition", || {
        wire.fetch("replicated", 0, 0, 100).0 == 0
    });
    // The new leader's HW moves up once the remaining follower fetches from it (Kafka does the
    // same): wait for it, then every acknowledged record must be there, in order.
    wait_until(
        "the new leader's high watermark to cover every acknowledged record",
        || wire.fetch("replicated", 0, 0, 100).1 >= acked.len() as i64,
    );
    let records = wire.fetch_all("replicated", 0, 0);
    assert_eq!(
        values(&records),
        acked,
        "every acknowledged record is on the new leader, in order"
    );
    // And it keeps taking acks=all writes with the remaining in-sync replica.
    let (code, offset) = wire.produce(
        "replicated",
        0,
        batch(
            &[(None, "after")],
            kafka_protocol::records::Compression::None,
        ),
        -1,
    );
    assert_eq!((code, offset), (0, 100));
}

#[test]
fn lagging_follower_leaves_the_isr_and_rejoins_after_catching_up() {
    // Session timeout far above the lag time: the ISR shrink, not fencing, must unblock acks=all.
    let mut cluster = Cluster::start(
        3,
        &[
            "replica.lag.time.max.ms=500",
            "broker.session.timeout.ms=6000",
        ],
    );
    wait_until("all brokers live", || {
        (0..3).all(|i| live_broker_ids(&cluster.addr(i)) == Some(vec![1, 2, 3]))
    });
    let (controller, _, _) = quorum(&cluster.addr(0)).unwrap();
    assert_eq!(create(&cluster.addr(0), "lagging", 1, 3), 0);
    let addr = cluster.addr(0);
    wait_until("leader with a full ISR", || {
        leader_and_isr(&addr, "lagging").is_some_and(|(l, isr)| l > 0 && isr == vec![1, 2, 3])
    });
    let (leader, _) = leader_and_isr(&addr, "lagging").unwrap();
    let victim = (1..=3)
        .find(|id| *id != leader && *id != controller)
        .unwrap();
    cluster.kill9((victim - 1) as usize);
    let leader_addr = cluster.addr((leader - 1) as usize);
    let mut wire = Wire::connect(&leader_addr);
    let produce = |wire: &mut Wire, v: &str| {
        wire.produce(
            "lagging",
            0,
            batch(&[(None, v)], kafka_protocol::records::Compression::None),
            -1,
        )
    };
    // Keep writing until the leader drops the dead follower and acks=all succeeds again.
    let killed = Instant::now();
    wait_until("the ISR to shrink without the dead follower", || {
        // Writes keep the leader's LEO moving, which is what makes the dead follower lag.
        let _ = produce(&mut wire, "during");
        leader_and_isr(&leader_addr, "lagging").is_some_and(|(_, isr)| !isr.contains(&victim))
    });
    // Shrunk by the lag rule, not by fencing (which takes the 6 s session timeout).
    assert!(
        live_broker_ids(&leader_addr).is_some_and(|ids| ids.contains(&victim))
            || killed.elapsed() < Duration::from_secs(6)
    );
    assert_eq!(
        produce(&mut wire, "after-shrink").0,
        0,
        "acks=all works with the smaller ISR"
    );
    cluster.restart((victim - 1) as usize);
    wait_until("the restarted follower to rejoin the ISR", || {
        leader_and_isr(&leader_addr, "lagging").is_some_and(|(_, isr)| isr == vec![1, 2, 3])
    });
}

/// (error, coordinator id) for `group` asked at `addr`.
fn coordinator(addr: &str, group: &str) -> Option<(i16, i32)> {
    let mut wire = Wire::try_connect(addr)?;
    let req = FindCoordinatorRequest::default().with_key(StrBytes::from_string(group.into()));
    let resp: FindCoordinatorResponse = wire.try_call(ApiKey::FindCoordinator, 3, &req)?;
    Some((resp.error_code, resp.node_id.0))
}

fn commit_offset(addr: &str, group: &str, topic: &str, offset: i64) -> Option<i16> {
    let mut wire = Wire::try_connect(addr)?;
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.into())))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(StrBytes::from_static_str(""))
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.into())))
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset),
                ]),
        ]);
    let resp: OffsetCommitResponse = wire.try_call(ApiKey::OffsetCommit, 8, &req)?;
    Some(resp.topics[0].partitions[0].error_code)
}

fn committed_offset(addr: &str, group: &str, topic: &str) -> Option<(i16, i64)> {
    let mut wire = Wire::try_connect(addr)?;
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.into())))
        .with_topics(Some(vec![
            offset_fetch_request::OffsetFetchRequestTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.into())))
                .with_partition_indexes(vec![0]),
        ]));
    let resp: OffsetFetchResponse = wire.try_call(ApiKey::OffsetFetch, 7, &req)?;
    if resp.error_code != 0 {
        return Some((resp.error_code, -1));
    }
    let p = resp.topics.first()?.partitions.first()?;
    Some((p.error_code, p.committed_offset))
}

#[test]
fn committed_offsets_survive_the_coordinators_kill9() {
    let mut cluster = Cluster::start(
        3,
        &[
            "broker.session.timeout.ms=2000",
            "broker.heartbeat.interval.ms=300",
            "offsets.topic.num.partitions=3",
        ],
    );
    wait_until("all brokers live", || {
        (0..3).all(|i| live_broker_ids(&cluster.addr(i)) == Some(vec![1, 2, 3]))
    });
    assert_eq!(create(&cluster.addr(0), "consumed", 1, 3), 0);
    let group = "durable-group";
    let addr = cluster.addr(0);
    wait_until("a group coordinator", || {
        coordinator(&addr, group).is_some_and(|(code, id)| code == 0 && id > 0)
    });
    let (_, coord) = coordinator(&addr, group).unwrap();
    let coord_addr = cluster.addr((coord - 1) as usize);
    wait_until("the offset commit to be accepted", || {
        commit_offset(&coord_addr, group, "consumed", 42) == Some(0)
    });
    // The commit is acknowledged once __consumer_offsets holds it; let the followers copy it.
    cluster.kill9((coord - 1) as usize);
    let survivor = cluster.alive()[0];
    let survivor_addr = cluster.addr(survivor);
    wait_until("a new coordinator among the survivors", || {
        coordinator(&survivor_addr, group).is_some_and(|(code, id)| code == 0 && id != coord)
    });
    let (_, new_coord) = coordinator(&survivor_addr, group).unwrap();
    let new_addr = cluster.addr((new_coord - 1) as usize);
    wait_until("the committed offset served by the new coordinator", || {
        committed_offset(&new_addr, group, "consumed") == Some((0, 42))
    });
}

#[test]
fn sigterm_moves_leadership_before_the_broker_stops() {
    // A session far longer than the bound below: only the controlled shutdown can move the
    // leadership in time, and a loaded machine still has room.
    let mut cluster = Cluster::start(3, &["broker.session.timeout.ms=60000"]);
    wait_until("all brokers live", || {
        (0..3).all(|i| live_broker_ids(&cluster.addr(i)) == Some(vec![1, 2, 3]))
    });
    assert_eq!(create(&cluster.addr(0), "handover", 1, 3), 0);
    let addr = cluster.addr(0);
    wait_until("a leader", || {
        leader_and_isr(&addr, "handover").is_some_and(|(l, isr)| l > 0 && isr.len() == 3)
    });
    let (leader, _) = leader_and_isr(&addr, "handover").unwrap();
    assert!(cluster.stop((leader - 1) as usize), "SIGTERM exits cleanly");
    let survivor = cluster.alive()[0];
    let addr = cluster.addr(survivor);
    // Without a controlled shutdown the leader would only move after the 60 s session timeout.
    let started = Instant::now();
    wait_until("the leadership handed over", || {
        leader_and_isr(&addr, "handover").is_some_and(|(l, _)| l > 0 && l != leader)
    });
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "handover took {:?}",
        started.elapsed()
    );
}

#[test]
fn a_broker_restarted_after_sigterm_rejoins_without_waiting_out_its_session() {
    // A session far longer than the test's wait: only a session ended by the clean shutdown
    // lets the new process register in time (a kill -9 would have to wait the full minute).
    let mut cluster = Cluster::start(3, &["broker.session.timeout.ms=60000"]);
    let addr = cluster.addr(0);
    wait_until("all brokers live", || {
        live_broker_ids(&addr) == Some(vec![1, 2, 3])
    });
    assert!(cluster.stop(2), "SIGTERM exits cleanly");
    wait_until(
        "broker 3 fenced at the end of its controlled shutdown",
        || live_broker_ids(&addr) == Some(vec![1, 2]),
    );
    cluster.restart(2);
    wait_until("broker 3 registered and unfenced again", || {
        live_broker_ids(&addr) == Some(vec![1, 2, 3])
    });
}

#[test]
fn leadership_returns_to_the_preferred_replica_after_it_rejoins() {
    let mut cluster = Cluster::start(
        3,
        &[
            "leader.imbalance.check.interval.seconds=1",
            "broker.session.timeout.ms=2000",
            "broker.heartbeat.interval.ms=300",
        ],
    );
    wait_until("all brokers live", || {
        (0..3).all(|i| live_broker_ids(&cluster.addr(i)) == Some(vec![1, 2, 3]))
    });
    assert_eq!(create(&cluster.addr(0), "preferred", 1, 3), 0);
    let addr = cluster.addr(0);
    wait_until("a leader", || {
        leader_and_isr(&addr, "preferred").is_some_and(|(l, isr)| l > 0 && isr.len() == 3)
    });
    let (preferred, _) = leader_and_isr(&addr, "preferred").unwrap();
    assert!(cluster.stop((preferred - 1) as usize));
    let survivor = cluster.alive()[0];
    let addr = cluster.addr(survivor);
    wait_until("leadership moved away", || {
        leader_and_isr(&addr, "preferred").is_some_and(|(l, _)| l > 0 && l != preferred)
    });
    cluster.restart((preferred - 1) as usize);
    wait_until(
        "the preferred replica back in the ISR and leading again",
        || {
            leader_and_isr(&addr, "preferred")
                .is_some_and(|(l, isr)| l == preferred && isr.len() == 3)
        },
    );
}
