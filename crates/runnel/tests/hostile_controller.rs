//! The controller under hostile or unlucky conditions (issue 9 items 9, 12, 13), against real
//! `runnel broker` processes: a stalled commit fences no healthy broker; after a `kill -9` of
//! the active controller a second process cannot take a live node id; raw frames on the
//! controller port cannot exhaust producer ids or hijack a broker's endpoint; CreateTopics is
//! bounded; `__consumer_offsets` cannot grow partitions.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use serde_json::{json, Value};
use support::cluster::*;
use support::*;

/// The controller address of node `id` from the `--controller-quorum-voters` string.
fn controller_addr(cluster: &Cluster, id: i32) -> String {
    cluster
        .voters
        .split(',')
        .find_map(|e| e.strip_prefix(&format!("{id}@")))
        .expect("voter address")
        .to_string()
}

/// The cluster id the nodes wrote to `meta.properties` (every quorum frame carries it).
fn cluster_id(cluster: &Cluster) -> String {
    let text = std::fs::read_to_string(cluster.nodes[0].data_dir.join("meta.properties"))
        .expect("meta.properties");
    text.lines()
        .find_map(|l| l.strip_prefix("cluster.id="))
        .expect("cluster.id in meta.properties")
        .trim()
        .to_string()
}

/// Sends one raw quorum request, stamped with `cluster`, to a controller port; returns the
/// decoded answer.
fn stamped_frame(addr: &str, cluster: &str, request: &Value) -> Option<Value> {
    raw_frame(addr, &json!({ "cluster_id": cluster, "request": request }))
}

/// Sends one raw JSON frame to a controller port, returns the decoded answer.
fn raw_frame(addr: &str, body: &Value) -> Option<Value> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(DEADLINE)).ok()?;
    let bytes = serde_json::to_vec(body).ok()?;
    s.write_all(&(bytes.len() as u32).to_be_bytes()).ok()?;
    s.write_all(&bytes).ok()?;
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let mut buf = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut buf).ok()?;
    serde_json::from_slice(&buf).ok()
}

/// An `App` controller operation (`{"op": name, "request": ...}`) to the active controller
/// (NOT_CONTROLLER answers are retried at the next voter); the controller's answer
/// (`{"Ok": response}` or `{"Err": error}`).
fn controller_call(cluster: &Cluster, op: &str, request: Value) -> Value {
    let request = json!({ "op": op, "request": request });
    let deadline = Instant::now() + DEADLINE;
    let id = cluster_id(cluster);
    loop {
        for node in &cluster.nodes {
            let Some(answer) = stamped_frame(
                &controller_addr(cluster, node.id),
                &id,
                &json!({ "App": request.clone() }),
            ) else {
                continue;
            };
            let app = answer.get("App").cloned().unwrap_or(Value::Null);
            if app["Err"]["code"] != json!(41) {
                return app;
            }
        }
        assert!(Instant::now() < deadline, "no active controller answered");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn init_producer_id(addr: &str) -> Option<(i16, i64)> {
    let mut wire = Wire::try_connect(addr)?;
    let init: InitProducerIdResponse = wire.try_call(
        ApiKey::InitProducerId,
        4,
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    )?;
    Some((init.error_code, init.producer_id.0))
}

fn broker_port(addr: &str, id: i32) -> Option<i32> {
    metadata(addr)?
        .brokers
        .iter()
        .find(|b| b.node_id.0 == id)
        .map(|b| b.port)
}

fn session_expiries(cluster: &Cluster) -> usize {
    cluster
        .nodes
        .iter()
        .map(|n| {
            std::fs::read_to_string(&n.log_path)
                .unwrap_or_default()
                .matches("broker session expired")
                .count()
        })
        .sum()
}

/// Caught: heartbeats waited in the controller's command queue behind a commit (up to
/// 30 s + 30 s), and the session check could run before the queued heartbeats: every broker
/// of a healthy cluster was fenced after one slow commit (today: in about 7 of 8 runs of one
/// stall, so the test stalls twice). The hook makes every CreateTopics commit wait 7 s, longer
/// than the session timeout (and shorter than CreateTopics' 10 s timeout), while brokers keep
/// heartbeating. The session is 4 s, not shorter: a broker process starved of CPU for a whole
/// session on a loaded machine is fenced rightly, and with 2 s that happened once in a full
/// run on 2 cores.
#[test]
fn a_stalled_controller_commit_fences_no_healthy_broker() {
    let cluster = Cluster::start_with_env(
        3,
        &[
            "broker.session.timeout.ms=4000",
            "broker.heartbeat.interval.ms=400",
        ],
        &[("RUNNEL_TEST_STALL_CREATE_TOPICS_MS", "7000")],
    );
    let addr = cluster.addr(0);
    wait_until("three live brokers", || {
        live_broker_ids(&addr).is_some_and(|ids| ids == vec![1, 2, 3])
    });
    let before = session_expiries(&cluster);
    for topic in ["stalled-1", "stalled-2"] {
        assert_eq!(create(&addr, topic, 1, 3), 0, "{topic}");
    }
    // Wait out a session check after the stall, then look at every node's log.
    wait_until("the topics' leaders", || {
        leader_and_isr(&addr, "stalled-2").is_some_and(|(l, _)| l > 0)
    });
    std::thread::sleep(Duration::from_millis(3000));
    assert_eq!(
        session_expiries(&cluster) - before,
        0,
        "no healthy broker may be fenced"
    );
    assert_eq!(live_broker_ids(&addr), Some(vec![1, 2, 3]));
}

/// Caught (after `kill -9` of the active controller, which a fresh controller followed with
/// an empty session table): a second process with a live broker's node id registered and took
/// over its endpoint (its Join moved the observer's address, and the leader's openraft core
/// panicked on the "reverted" log of the empty newcomer), a raw RegisterBroker frame did the
/// same, and a raw AllocateProducerIds
/// with a count of 2^62 moved the next producer id to the end of the id space, so every later
/// InitProducerId failed. Also: CreateTopics of 10,001 partitions was accepted (now 44) and
/// CreatePartitions on `__consumer_offsets` remapped every group (now refused).
#[test]
fn hostile_controller_requests_after_a_failover_are_refused() {
    let overrides = [
        "broker.session.timeout.ms=2000",
        "broker.heartbeat.interval.ms=200",
    ];
    let mut cluster = Cluster::start(3, &overrides);
    wait_until("a quorum leader", || quorum(&cluster.addr(0)).is_some());
    let dir = tempfile::tempdir().unwrap();
    let voters = cluster.voters.clone();
    let broker_only = |data: &Path| broker_only_command(7, &voters, data, &overrides);
    let mut first = broker_only(&dir.path().join("a"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the broker-only node registered and unfenced", || {
        live_broker_ids(&cluster.addr(0)).is_some_and(|ids| ids.contains(&7))
    });
    // Failover: kill -9 the active controller.
    let (old_leader, _, _) = quorum(&cluster.addr(0)).unwrap();
    cluster.kill9(cluster.index_of(old_leader));
    let survivor = (1..=3).find(|&i| i != old_leader).unwrap();
    let addr = cluster.addr(cluster.index_of(survivor));
    wait_until("a new quorum leader", || {
        quorum(&addr).is_some_and(|(l, _, _)| l != old_leader)
    });
    let port_of_7 = broker_port(&addr, 7).expect("broker 7 listed");

    // A second process with the live node id 7 is refused (it gives up with one line).
    let mut second = broker_only(&dir.path().join("b"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(40);
    let status = loop {
        if let Some(status) = second.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = second.kill();
            let _ = second.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    if let Some(mut e) = second.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    assert!(
        status.is_some_and(|s| !s.success()),
        "the second process with node id 7 must not start: {err}"
    );
    assert!(err.contains("already in use"), "one clear line: {err}");

    // A raw Join that moves live observer 7 to another address is refused (before, the
    // leader replaced the address and its replication to the empty newcomer panicked openraft:
    // "follower log reversion", the quorum leader dead).
    let (leader_now, _, _) = quorum(&addr).unwrap();
    let join = stamped_frame(
        &controller_addr(&cluster, leader_now),
        &cluster_id(&cluster),
        &json!({"Join": {"node_id": 7, "address": "127.0.0.1:1"}}),
    )
    .expect("Join answered");
    assert!(join["Join"].get("Failed").is_some(), "{join}");

    // A frame of another cluster (or with no cluster id at all) is refused before it is read
    // (before, any frame was served: a misconfigured node of another cluster could vote here).
    let foreign = stamped_frame(
        &controller_addr(&cluster, leader_now),
        "another-cluster",
        &json!({"Join": {"node_id": 9, "address": "127.0.0.1:1"}}),
    )
    .expect("answered with a refusal");
    assert!(
        foreign["Error"]
            .as_str()
            .is_some_and(|e| e.starts_with("INCONSISTENT_CLUSTER_ID")),
        "{foreign}"
    );
    let unstamped = raw_frame(
        &controller_addr(&cluster, leader_now),
        &json!({"Join": {"node_id": 9, "address": "127.0.0.1:1"}}),
    );
    assert!(
        unstamped.is_none(),
        "an unstamped frame gets no answer: {unstamped:?}"
    );

    // A raw RegisterBroker for live broker 7 with another incarnation: 101, endpoint kept.
    let hijack = controller_call(
        &cluster,
        "RegisterBroker",
        json!({
            "broker_id": 7,
            "incarnation_id": "00000000-0000-0000-0000-00000000beef",
            "host": "127.0.0.1",
            "port": 1,
            "rack": null
        }),
    );
    assert_eq!(hijack["Err"]["code"], json!(101), "{hijack}");
    assert_eq!(broker_port(&addr, 7), Some(port_of_7));

    // AllocateProducerIds with a huge count is refused; InitProducerId keeps working.
    let huge = controller_call(
        &cluster,
        "AllocateProducerIds",
        json!({"broker_id": survivor, "count": 1i64 << 62}),
    );
    assert_eq!(huge["Err"]["code"], json!(42), "{huge}");
    let negative = controller_call(
        &cluster,
        "BrokerHeartbeat",
        json!({"broker_id": -4, "broker_epoch": 1, "metadata_offset": 0}),
    );
    assert_eq!(negative["Err"]["code"], json!(42), "{negative}");
    let (code, pid) = init_producer_id(&addr).expect("InitProducerId answered");
    assert_eq!(code, 0);
    assert!((0..1_000_000).contains(&pid), "producer id {pid}");

    // CreateTopics of 10,001 partitions: 44, and the broker still serves.
    let (code, msg) = Wire::connect(&addr).create_topic("too-big", 10_001, 1, &[]);
    assert_eq!(code, 44, "{msg:?}");
    assert_eq!(create(&addr, "fine", 1, 1), 0);

    // CreatePartitions on __consumer_offsets is refused.
    wait_until("__consumer_offsets exists", || {
        let mut wire = Wire::connect(&addr);
        let req = FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g"));
        let resp: FindCoordinatorResponse = wire.call(ApiKey::FindCoordinator, 3, &req);
        resp.error_code == 0
    });
    let req = CreatePartitionsRequest::default()
        .with_topics(vec![
            create_partitions_request::CreatePartitionsTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("__consumer_offsets")))
                .with_count(1000),
        ])
        .with_timeout_ms(10_000);
    let resp: CreatePartitionsResponse =
        Wire::connect(&addr).call(ApiKey::CreatePartitions, 1, &req);
    assert_eq!(resp.results[0].error_code, 42, "{:?}", resp.results[0]);

    let _ = first.kill();
    let _ = first.wait();
}

/// Caught (docs/hostile-inputs.md finding 9's open half): the quorum listener took every
/// connection offered, each holding a file descriptor the logs share for up to the idle
/// timeout. Now a connection past `listener.name.controller.max.connections` is closed on
/// accept, the quorum keeps working over the connections it has, and a slot freed by a closed
/// connection is served again.
#[test]
fn the_quorum_listener_closes_connections_past_its_cap() {
    const CAP: usize = 24;
    let cap = format!("listener.name.controller.max.connections={CAP}");
    let cluster = Cluster::start(3, &[cap.as_str()]);
    let addr = cluster.addr(0);
    wait_until("three live brokers", || {
        live_broker_ids(&addr).is_some_and(|ids| ids == vec![1, 2, 3])
    });
    let target = controller_addr(&cluster, 1);
    let mut held = Vec::new();
    let mut closed_at_once = None;
    for attempt in 0..CAP + 8 {
        let mut s = TcpStream::connect(&target).expect("connect to the quorum listener");
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut byte = [0u8; 1];
        match s.read(&mut byte) {
            Ok(0) => {
                closed_at_once = Some(attempt);
                break;
            }
            _ => held.push(s),
        }
    }
    let attempt = closed_at_once.expect("a connection past the cap is closed on accept");
    assert!(attempt <= CAP, "closed only after {attempt} connections");
    assert_eq!(
        create(&addr, "past-the-cap", 1, 3),
        0,
        "the quorum keeps committing over its open connections"
    );
    drop(held);
    let id = cluster_id(&cluster);
    wait_until("a fresh connection is served again", || {
        stamped_frame(&target, &id, &json!("Identify"))
            .is_some_and(|answer| answer["Identity"]["node_id"] == 1)
    });
}
