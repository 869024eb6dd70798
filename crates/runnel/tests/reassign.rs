//! Partition reassignment (KIP-455) on real processes: a topic moves onto a broker that joined
//! the cluster after it was created, with `runnel reassign-partitions --execute / --verify`
//! (kafka-reassign-partitions.sh's flags); the data is on the new replicas, the old replicas'
//! logs are gone, and a reassignment that cannot finish can be listed and cancelled.

mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};

use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::{
    delete_records_request, AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse, ApiKey, BrokerId, DeleteRecordsRequest,
    DeleteRecordsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use support::cluster::*;
use support::*;

/// A broker-only node (not a quorum voter) that joins the running cluster; killed on drop.
struct ExtraBroker {
    child: Child,
    addr: String,
}

impl ExtraBroker {
    fn start(cluster: &Cluster, node_id: i32, data_dir: &Path, log: &Path) -> ExtraBroker {
        let port = free_port();
        let log = std::fs::File::create(log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_runnel"))
            .arg("broker")
            .args(["--node-id", &node_id.to_string()])
            .args(["--process-roles", "broker"])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--controller-quorum-voters", &cluster.voters])
            .arg("--data-dir")
            .arg(data_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .env("NO_COLOR", "1")
            .spawn()
            .expect("spawn the extra broker");
        ExtraBroker {
            child,
            addr: format!("127.0.0.1:{port}"),
        }
    }
}

impl Drop for ExtraBroker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `runnel reassign-partitions` with `args`; (exit success, stdout + stderr).
fn reassign_cli(bootstrap: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_runnel"))
        .arg("reassign-partitions")
        .args(["--bootstrap-server", bootstrap])
        .args(args)
        .output()
        .expect("run runnel reassign-partitions");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn produce_all(cluster: &Cluster, topic: &str, partition: i32, values: &[String]) {
    let addr = cluster.addr(0);
    wait_until("a leader for the partition", || {
        partition_states(&addr, topic)
            .is_some_and(|p| p.iter().any(|s| s.partition == partition && s.leader > 0))
    });
    let leader = partition_states(&addr, topic).unwrap()[partition as usize].leader;
    let mut wire = Wire::connect(&cluster.addr(cluster.index_of(leader)));
    for v in values {
        let (code, _) = wire.produce(
            topic,
            partition,
            batch(&[(None, v.as_str())], Compression::None),
            -1,
        );
        assert_eq!(code, 0, "acks=all produce of {v}");
    }
}

#[test]
fn a_topic_moves_onto_a_new_broker_and_keeps_every_record() {
    let cluster = Cluster::start(3, &[]);
    wait_until("three live brokers", || {
        live_broker_ids(&cluster.addr(0)) == Some(vec![1, 2, 3])
    });
    let addr = cluster.addr(0);
    assert_eq!(create(&addr, "moving", 2, 2), 0);
    let sent: Vec<String> = (0..200).map(|i| format!("m{i}")).collect();
    produce_all(&cluster, "moving", 0, &sent[..100]);
    produce_all(&cluster, "moving", 1, &sent[100..]);

    // Broker 4 joins after the topic exists.
    let dir = tempfile::tempdir().unwrap();
    let extra = ExtraBroker::start(
        &cluster,
        4,
        &dir.path().join("node-4"),
        &dir.path().join("node-4.log"),
    );
    wait_until("broker 4 registered and unfenced", || {
        live_broker_ids(&addr) == Some(vec![1, 2, 3, 4])
    });

    // Move both partitions onto 4 plus one old broker; 4 becomes the preferred leader.
    let before = partition_states(&addr, "moving").unwrap();
    let targets: Vec<Vec<i32>> = before.iter().map(|p| vec![4, p.replicas[1]]).collect();
    let plan = format!(
        r#"{{"version":1,"partitions":[{{"topic":"moving","partition":0,"replicas":[{},{}]}},{{"topic":"moving","partition":1,"replicas":[{},{}]}}]}}"#,
        targets[0][0], targets[0][1], targets[1][0], targets[1][1]
    );
    let plan_path = dir.path().join("plan.json");
    std::fs::write(&plan_path, plan).unwrap();
    let plan_arg = plan_path.to_str().unwrap();
    let (ok, out) = reassign_cli(&addr, &["--execute", "--reassignment-json-file", plan_arg]);
    assert!(ok, "{out}");
    assert!(
        out.contains("Successfully started partition reassignments for moving-0,moving-1"),
        "{out}"
    );
    wait_until("--verify reports both moves completed", || {
        let (ok, out) = reassign_cli(&addr, &["--verify", "--reassignment-json-file", plan_arg]);
        ok && out.contains("Reassignment of partition moving-0 is completed.")
            && out.contains("Reassignment of partition moving-1 is completed.")
    });
    let (_, verify) = reassign_cli(&addr, &["--verify", "--reassignment-json-file", plan_arg]);
    assert!(
        !verify.contains("WARNING"),
        "clearing throttles works: {verify}"
    );

    // Every broker's metadata shows the targets, with the removed replicas gone from the ISR.
    for (p, target) in targets.iter().enumerate() {
        wait_until("the target replicas in sync, leader 4", || {
            partition_states(&extra.addr, "moving").is_some_and(|s| {
                let mut sorted = target.clone();
                sorted.sort();
                s[p].replicas == *target && s[p].isr == sorted && s[p].leader == 4
            })
        });
    }
    // The new leader (broker 4, which never saw a produce) has every record, in order.
    let mut wire = Wire::connect(&extra.addr);
    for (p, expected) in [(0, &sent[..100]), (1, &sent[100..])] {
        wait_until("broker 4 serves the partition up to its HW", || {
            wire.fetch("moving", p, 0, 100).1 >= expected.len() as i64
        });
        assert_eq!(values(&wire.fetch_all("moving", p, 0)), expected);
    }
    // The replicas that left deleted their logs.
    for (p, old) in before.iter().enumerate() {
        for gone in old.replicas.iter().filter(|r| !targets[p].contains(r)) {
            let log_dir = cluster.nodes[cluster.index_of(*gone)]
                .data_dir
                .join(format!("moving-{p}"));
            wait_until("the removed replica's log is deleted", || !log_dir.exists());
        }
    }
    // Nothing is running any more.
    let (ok, out) = reassign_cli(&addr, &["--list"]);
    assert!(ok, "{out}");
    assert!(!out.contains("moving-"), "{out}");
}

#[test]
fn a_reassignment_waiting_on_a_dead_broker_is_listed_and_cancelled() {
    let mut cluster = Cluster::start(
        3,
        &[
            "broker.session.timeout.ms=2000",
            "broker.heartbeat.interval.ms=300",
        ],
    );
    let addr = cluster.addr(0);
    wait_until("three live brokers", || {
        live_broker_ids(&addr) == Some(vec![1, 2, 3])
    });
    assert_eq!(create(&addr, "stuck", 1, 2), 0);
    let sent: Vec<String> = (0..20).map(|i| format!("s{i}")).collect();
    produce_all(&cluster, "stuck", 0, &sent);
    let before = partition_states(&addr, "stuck").unwrap()[0].clone();
    let outsider = (1..=3).find(|b| !before.replicas.contains(b)).unwrap();
    // The broker that should receive the replica is down: the move cannot finish.
    cluster.kill9(cluster.index_of(outsider));
    let alive = cluster.addr(cluster.alive()[0]);
    wait_until("the dead broker is fenced", || {
        live_broker_ids(&alive).is_some_and(|ids| !ids.contains(&outsider))
    });
    let dir = tempfile::tempdir().unwrap();
    let plan_path = dir.path().join("plan.json");
    std::fs::write(
        &plan_path,
        format!(
            r#"{{"version":1,"partitions":[{{"topic":"stuck","partition":0,"replicas":[{outsider},{}]}}]}}"#,
            before.replicas[0]
        ),
    )
    .unwrap();
    let plan_arg = plan_path.to_str().unwrap();
    // The tool (like Kafka's) refuses brokers that are not live; the API, like KRaft's, takes
    // any registered broker, which is how a move comes to wait on a dead one.
    let (ok, out) = reassign_cli(&alive, &["--execute", "--reassignment-json-file", plan_arg]);
    assert!(
        !ok && out.contains(&format!("Unknown broker id {outsider}")),
        "{out}"
    );
    let mut wire = Wire::connect(&alive);
    let response: AlterPartitionReassignmentsResponse = wire.call(
        ApiKey::AlterPartitionReassignments,
        0,
        &AlterPartitionReassignmentsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(vec![ReassignableTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("stuck")))
                .with_partitions(vec![ReassignablePartition::default()
                    .with_partition_index(0)
                    .with_replicas(Some(vec![
                        BrokerId(outsider),
                        BrokerId(before.replicas[0]),
                    ]))])]),
    );
    assert_eq!(response.error_code, 0);
    assert_eq!(response.responses[0].partitions[0].error_code, 0);
    let (ok, out) = reassign_cli(&alive, &["--list"]);
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!("stuck-0: replicas: {outsider},")),
        "{out}"
    );
    assert!(out.contains(&format!("adding: {outsider}.")), "{out}");
    let (ok, out) = reassign_cli(&alive, &["--verify", "--reassignment-json-file", plan_arg]);
    assert!(ok, "{out}");
    assert!(out.contains("is still in progress"), "{out}");

    let (ok, out) = reassign_cli(&alive, &["--cancel", "--reassignment-json-file", plan_arg]);
    assert!(ok, "{out}");
    assert!(
        out.contains("Successfully cancelled partition reassignment for: stuck-0"),
        "{out}"
    );
    wait_until("the original replicas are back", || {
        partition_states(&alive, "stuck").is_some_and(|s| {
            let mut replicas = s[0].replicas.clone();
            replicas.sort();
            let mut original = before.replicas.clone();
            original.sort();
            replicas == original
        })
    });
    let (_, out) = reassign_cli(&alive, &["--cancel", "--reassignment-json-file", plan_arg]);
    assert!(
        out.contains("None of the specified partition reassignments are active."),
        "{out}"
    );
    // Nothing was lost on the way.
    let leader = partition_states(&alive, "stuck").unwrap()[0].leader;
    let mut wire = Wire::connect(&cluster.addr(cluster.index_of(leader)));
    assert_eq!(values(&wire.fetch_all("stuck", 0, 0)), sent);
}

#[test]
fn a_new_replica_starts_at_the_leaders_log_start() {
    // The leader no longer has offsets 0..50 (DeleteRecords; retention does the same): the new
    // replica cannot fetch from 0 and must restart its log where the leader's begins.
    let cluster = Cluster::start(3, &[]);
    let addr = cluster.addr(0);
    wait_until("three live brokers", || {
        live_broker_ids(&addr) == Some(vec![1, 2, 3])
    });
    assert_eq!(create(&addr, "trimmed", 1, 2), 0);
    let sent: Vec<String> = (0..100).map(|i| format!("t{i}")).collect();
    produce_all(&cluster, "trimmed", 0, &sent);
    let before = partition_states(&addr, "trimmed").unwrap()[0].clone();
    let mut wire = Wire::connect(&cluster.addr(cluster.index_of(before.leader)));
    let deleted: DeleteRecordsResponse = wire.call(
        ApiKey::DeleteRecords,
        2,
        &DeleteRecordsRequest::default()
            .with_timeout_ms(5000)
            .with_topics(vec![delete_records_request::DeleteRecordsTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("trimmed")))
                .with_partitions(vec![
                    delete_records_request::DeleteRecordsPartition::default()
                        .with_partition_index(0)
                        .with_offset(50),
                ])]),
    );
    assert_eq!(deleted.topics[0].partitions[0].error_code, 0);
    let outsider = (1..=3).find(|b| !before.replicas.contains(b)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    std::fs::write(
        &plan,
        format!(
            r#"{{"version":1,"partitions":[{{"topic":"trimmed","partition":0,"replicas":[{outsider},{}]}}]}}"#,
            before.leader
        ),
    )
    .unwrap();
    let plan_arg = plan.to_str().unwrap();
    let (ok, out) = reassign_cli(&addr, &["--execute", "--reassignment-json-file", plan_arg]);
    assert!(ok, "{out}");
    wait_until("the move completed with the new replica in sync", || {
        partition_states(&addr, "trimmed").is_some_and(|s| {
            let mut target = vec![outsider, before.leader];
            target.sort();
            s[0].replicas == vec![outsider, before.leader] && s[0].isr == target
        })
    });
    let log_dir = cluster.nodes[cluster.index_of(outsider)]
        .data_dir
        .join("trimmed-0");
    assert!(log_dir.exists(), "the new replica has the partition");
    // Make the new replica the leader and read everything from it: exactly the records the
    // old leader still had.
    let mut elect = Wire::connect(&addr);
    let _ = elect.call::<_, kafka_protocol::messages::ElectLeadersResponse>(
        ApiKey::ElectLeaders,
        1,
        &kafka_protocol::messages::ElectLeadersRequest::default()
            .with_election_type(0)
            .with_timeout_ms(5000)
            .with_topic_partitions(Some(vec![
                kafka_protocol::messages::elect_leaders_request::TopicPartitions::default()
                    .with_topic(TopicName(StrBytes::from_static_str("trimmed")))
                    .with_partitions(vec![0]),
            ])),
    );
    wait_until("the new replica leads", || {
        partition_states(&addr, "trimmed").is_some_and(|s| s[0].leader == outsider)
    });
    let mut to_new = Wire::connect(&cluster.addr(cluster.index_of(outsider)));
    wait_until("the new leader serves up to its HW", || {
        to_new.fetch("trimmed", 0, 50, 100).1 >= 100
    });
    assert_eq!(values(&to_new.fetch_all("trimmed", 0, 50)), &sent[50..]);
}
