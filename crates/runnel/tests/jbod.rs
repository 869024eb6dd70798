//! Several log dirs per broker (JBOD, `log.dirs=a,b`): new replicas spread over them,
//! DescribeLogDirs answers per dir, AlterReplicaLogDirs moves a replica while a producer runs
//! and a kill -9 in the middle of a move loses nothing.

mod support;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use kafka_protocol::messages::alter_replica_log_dirs_request::{
    AlterReplicaLogDir, AlterReplicaLogDirTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use support::*;

fn dirs(root: &Path) -> (PathBuf, PathBuf) {
    (root.join("a"), root.join("b"))
}

fn start(root: &Path, extra: &[&str]) -> TestBroker {
    let (a, b) = dirs(root);
    let log_dirs = format!("log.dirs={},{}", a.display(), b.display());
    let mut overrides = vec![log_dirs.as_str()];
    overrides.extend_from_slice(extra);
    TestBroker::start(&root.join("meta"), &overrides)
}

fn describe(wire: &mut Wire) -> DescribeLogDirsResponse {
    wire.call(
        ApiKey::DescribeLogDirs,
        4,
        &DescribeLogDirsRequest::default().with_topics(None),
    )
}

/// One dir of a DescribeLogDirs answer: its path and its (topic, partition, is_future).
type DirLayout = (String, Vec<(String, i32, bool)>);

fn layout(r: &DescribeLogDirsResponse) -> Vec<DirLayout> {
    r.results
        .iter()
        .map(|d| {
            let parts = d
                .topics
                .iter()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(|p| (t.name.0.to_string(), p.partition_index, p.is_future_key))
                })
                .collect();
            (d.log_dir.to_string(), parts)
        })
        .collect()
}

fn alter(wire: &mut Wire, path: &Path, topic: &str, partition: i32) -> i16 {
    let req = AlterReplicaLogDirsRequest::default().with_dirs(vec![AlterReplicaLogDir::default()
        .with_path(StrBytes::from_string(path.display().to_string()))
        .with_topics(vec![AlterReplicaLogDirTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![partition])])]);
    let resp: AlterReplicaLogDirsResponse = wire.call(ApiKey::AlterReplicaLogDirs, 2, &req);
    resp.results[0].partitions[0].error_code
}

fn meta_properties(dir: &Path) -> (String, String) {
    let text = std::fs::read_to_string(dir.join("meta.properties")).unwrap();
    let get = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .unwrap_or_default()
            .to_string()
    };
    (get("cluster.id"), get("directory.id"))
}

fn produce_values(wire: &mut Wire, topic: &str, from: usize, n: usize) -> Vec<String> {
    let pad = "x".repeat(400);
    (from..from + n)
        .map(|i| {
            let v = format!("v{i}-{pad}");
            let (code, _) =
                wire.produce(topic, 0, batch(&[(None, v.as_str())], Compression::None), 1);
            assert_eq!(code, 0, "produce {i}");
            v
        })
        .collect()
}

#[test]
fn replicas_spread_over_the_dirs_and_each_dir_is_described() {
    let root = tempfile::tempdir().unwrap();
    let broker = start(root.path(), &[]);
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("spread", 4, 1, &[]).0, 0);
    let (a, b) = dirs(root.path());
    for (dir, parts) in [(&a, [0, 2]), (&b, [1, 3])] {
        for p in parts {
            assert!(
                dir.join(format!("spread-{p}")).is_dir(),
                "spread-{p} in {dir:?}"
            );
        }
    }
    // KIP-858: every log dir has the node's cluster id and a directory id of its own.
    let (ca, ida) = meta_properties(&a);
    let (cb, idb) = meta_properties(&b);
    assert_eq!(ca, cb);
    assert!(!ida.is_empty() && ida != idb);
    let r = describe(&mut wire);
    let got = layout(&r);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].0, a.display().to_string());
    assert_eq!(got[1].0, b.display().to_string());
    let names = |i: usize| -> Vec<i32> { got[i].1.iter().map(|(_, p, _)| *p).collect() };
    assert_eq!((names(0), names(1)), (vec![0, 2], vec![1, 3]));
    assert!(r
        .results
        .iter()
        .all(|d| d.total_bytes > 0 && d.error_code == 0));
}

#[test]
fn alter_replica_log_dirs_refuses_like_kafka_and_a_move_home_is_a_no_op() {
    let root = tempfile::tempdir().unwrap();
    let broker = start(root.path(), &[]);
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("t", 1, 1, &[]).0, 0);
    let (a, _) = dirs(root.path());
    assert_eq!(alter(&mut wire, &root.path().join("nope"), "t", 0), 57);
    assert_eq!(alter(&mut wire, &a, "missing", 0), 3);
    assert_eq!(alter(&mut wire, &a, "t", 0), 0);
    assert!(a.join("t-0").is_dir());
    assert!(layout(&describe(&mut wire))
        .iter()
        .all(|(_, parts)| parts.iter().all(|(_, _, future)| !future)));
}

/// A producer keeps writing (acks=1) while the replica moves; every acknowledged record is
/// read back, in order, from the new dir, also after a kill -9.
#[test]
fn a_move_with_a_producer_running_keeps_every_acknowledged_record() {
    let root = tempfile::tempdir().unwrap();
    // A slow copy, so the move overlaps the producer and shows as a future replica.
    let mut broker = start(
        root.path(),
        &["replica.alter.log.dirs.io.max.bytes.per.second=400000"],
    );
    let mut wire = broker.connect();
    assert_eq!(
        wire.create_topic("m", 1, 1, &[("segment.bytes", "65536")])
            .0,
        0
    );
    let (a, b) = dirs(root.path());
    assert!(a.join("m-0").is_dir());
    let mut sent = produce_values(&mut wire, "m", 0, 2000);
    let stop = Arc::new(AtomicBool::new(false));
    let producer = {
        let stop = Arc::clone(&stop);
        let addr = broker.addr.clone();
        std::thread::spawn(move || {
            let mut wire = Wire::connect(&addr);
            let mut acked = Vec::new();
            let mut i = 2000;
            while !stop.load(Ordering::Acquire) {
                acked.extend(produce_values(&mut wire, "m", i, 1));
                i += 1;
            }
            acked
        })
    };
    assert_eq!(alter(&mut wire, &b, "m", 0), 0);
    // Asked again while it runs: still success, still one move.
    assert_eq!(alter(&mut wire, &b, "m", 0), 0);
    let future_seen = layout(&describe(&mut wire))[1]
        .1
        .iter()
        .any(|(t, p, future)| t == "m" && *p == 0 && *future);
    assert!(
        future_seen,
        "DescribeLogDirs shows the future replica in the target dir"
    );
    wait_until("the move completes", || {
        let l = layout(&describe(&mut wire));
        l[0].1.is_empty() && l[1].1 == vec![("m".to_string(), 0, false)]
    });
    stop.store(true, Ordering::Release);
    sent.extend(producer.join().unwrap());
    assert!(b.join("m-0").is_dir() && !a.join("m-0").exists());
    assert_eq!(values(&wire.fetch_all("m", 0, 0)), sent);
    broker.restart();
    let mut wire = broker.connect();
    assert_eq!(values(&wire.fetch_all("m", 0, 0)), sent);
}

/// kill -9 while the copy runs: the restart serves the current copy whole and restarts the
/// move, which completes; a kill -9 after it loses nothing either.
#[test]
fn kill9_in_the_middle_of_a_move_loses_nothing() {
    let root = tempfile::tempdir().unwrap();
    let mut broker = start(
        root.path(),
        &["replica.alter.log.dirs.io.max.bytes.per.second=200000"],
    );
    let mut wire = broker.connect();
    assert_eq!(
        wire.create_topic("k", 1, 1, &[("segment.bytes", "65536")])
            .0,
        0
    );
    let (a, b) = dirs(root.path());
    let sent = produce_values(&mut wire, "k", 0, 3000);
    assert_eq!(alter(&mut wire, &b, "k", 0), 0);
    wait_until("some of the copy is done", || {
        describe(&mut wire).results[1]
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .any(|p| p.is_future_key && p.partition_size > 100_000)
    });
    broker.kill9();
    let future_left = std::fs::read_dir(&b).unwrap().any(|e| {
        e.unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with("-future")
    });
    assert!(future_left, "the kill left the future copy behind");
    broker.restart();
    let mut wire = broker.connect();
    // The current copy serves everything at once; the move restarts by itself (as Kafka's
    // future replica resumes) and completes.
    assert_eq!(values(&wire.fetch_all("k", 0, 0)), sent);
    // Complete: the copy in b, none in a, no future or moved copy left anywhere.
    let leftovers = || -> Vec<String> {
        [&a, &b]
            .iter()
            .flat_map(|d| std::fs::read_dir(d).unwrap())
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("k-0."))
            .collect()
    };
    wait_until("the restarted move completes", || {
        b.join("k-0").is_dir() && !a.join("k-0").exists() && leftovers().is_empty()
    });
    broker.restart();
    let mut wire = broker.connect();
    assert_eq!(values(&wire.fetch_all("k", 0, 0)), sent);
}

/// `runnel reassign-partitions --execute` with a `log_dirs` entry moves the replica there
/// (kafka-reassign-partitions.sh's executeMoves) and says so as the tool does.
#[test]
fn reassign_execute_moves_a_replica_to_its_log_dir() {
    let root = tempfile::tempdir().unwrap();
    let broker = start(root.path(), &[]);
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("r", 1, 1, &[]).0, 0);
    let sent = produce_values(&mut wire, "r", 0, 100);
    let (a, b) = dirs(root.path());
    assert!(a.join("r-0").is_dir());
    let plan = root.path().join("plan.json");
    std::fs::write(
        &plan,
        format!(
            r#"{{"version":1,"partitions":[{{"topic":"r","partition":0,"replicas":[1],"log_dirs":["{}"]}}]}}"#,
            b.display()
        ),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_runnel"))
        .arg("reassign-partitions")
        .args(["--bootstrap-server", &broker.addr])
        .args(["--execute", "--reassignment-json-file"])
        .arg(&plan)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("Successfully started log directory move for: r-0-1"),
        "{text}"
    );
    wait_until("the move completes", || {
        b.join("r-0").is_dir() && !a.join("r-0").exists()
    });
    assert_eq!(values(&wire.fetch_all("r", 0, 0)), sent);
}
