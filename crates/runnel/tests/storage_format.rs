//! `runnel storage format` (kafka-storage.sh format) against real broker processes: a
//! formatted directory's cluster id is the one the broker serves, even when two clusters use
//! the same voter string (before, both derived the same id from it); a node formatted for
//! another cluster cannot join; formatting twice needs `--ignore-formatted`; a directory
//! formatted for another node id is refused at startup with Kafka's text.

mod support;

use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;

use support::cluster::{broker_only_command, free_port, live_broker_ids, metadata};
use support::*;

/// A child process killed (and reaped) on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn runnel(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runnel"))
        .args(args)
        .output()
        .expect("run runnel")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn random_uuid() -> String {
    let o = runnel(&["storage", "random-uuid"]);
    assert!(o.status.success());
    let id = stdout(&o).trim().to_string();
    assert_eq!(id.len(), 22, "{id}");
    id
}

fn format(dir: &Path, node_id: i32, cluster_id: &str, extra: &[&str]) -> Output {
    let node = node_id.to_string();
    let mut args = vec![
        "storage",
        "format",
        "--cluster-id",
        cluster_id,
        "--data-dir",
        dir.to_str().unwrap(),
        "--node-id",
        &node,
    ];
    args.extend_from_slice(extra);
    runnel(&args)
}

/// Starts a combined node on `kafka_port` and waits until it listens.
/// `voters` empty: none on the command line (they come from the formatted directory).
fn start_node(dir: &Path, node_id: i32, voters: &str, kafka_port: u16, log: &Path) -> Proc {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_runnel"));
    cmd.arg("broker")
        .args(["--node-id", &node_id.to_string()])
        .args(["--listen", &format!("127.0.0.1:{kafka_port}")]);
    if !voters.is_empty() {
        cmd.args(["--controller-quorum-voters", voters]);
    }
    let mut child = cmd
        .arg("--data-dir")
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(File::create(log).unwrap()))
        .env("RUST_LOG", "warn")
        .env("NO_COLOR", "1")
        .spawn()
        .expect("spawn broker");
    let out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if line.contains("listening on") {
                let _ = tx.send(());
            }
        }
    });
    let proc = Proc(child);
    rx.recv_timeout(DEADLINE).unwrap_or_else(|_| {
        panic!(
            "node {node_id} did not start: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        )
    });
    proc
}

/// The cluster id the node at `addr` answers Metadata with.
fn served_cluster_id(addr: &str) -> String {
    let mut id = None;
    wait_until("a Metadata answer with a cluster id", || {
        id = metadata(addr).and_then(|m| m.cluster_id.map(|c| c.to_string()));
        id.is_some()
    });
    id.unwrap()
}

#[test]
fn formatted_clusters_on_the_same_voters_have_their_own_ids() {
    let tmp = tempfile::tempdir().unwrap();
    let (controller_port, kafka_port) = (free_port(), free_port());
    let voters = format!("1@127.0.0.1:{controller_port}");
    let addr = format!("127.0.0.1:{kafka_port}");
    let log = tmp.path().join("node.log");
    // One cluster at a time on the same ports: the same voter string every time.
    let serve = |dir: &Path| {
        let _node = start_node(dir, 1, &voters, kafka_port, &log);
        served_cluster_id(&addr)
    };
    let (a, b) = (random_uuid(), random_uuid());
    assert_ne!(a, b);
    for (name, id) in [("a", &a), ("b", &b)] {
        let dir = tmp.path().join(name);
        let o = format(&dir, 1, id, &["--controller-quorum-voters", &voters]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(
            stdout(&o),
            format!(
                "Formatting metadata directory {} with metadata.version 4.0-IV3.\n",
                dir.display()
            )
        );
        assert_eq!(&serve(&dir), id, "cluster {name} serves its formatted id");
        // And keeps it across a restart.
        assert_eq!(&serve(&dir), id);
    }
    // Unformatted directories still derive their id from the voters (the one-command start).
    let u1 = serve(&tmp.path().join("u1"));
    let u2 = serve(&tmp.path().join("u2"));
    assert_eq!(u1, u2);
    assert!(u1 != a && u1 != b);
    let info = runnel(&[
        "storage",
        "info",
        "--data-dir",
        tmp.path().join("u1").to_str().unwrap(),
    ]);
    assert!(info.status.success(), "{}", stdout(&info));
    assert!(stdout(&info).contains(&format!("Found metadata: {{cluster.id={u1}, directory.id=")));
}

#[test]
fn a_node_formatted_for_another_cluster_cannot_join() {
    let tmp = tempfile::tempdir().unwrap();
    let (controller_port, kafka_port) = (free_port(), free_port());
    let voters = format!("1@127.0.0.1:{controller_port}");
    let addr = format!("127.0.0.1:{kafka_port}");
    let controller_log = tmp.path().join("node-1.log");
    let b = random_uuid();
    let o = format(
        &tmp.path().join("n1"),
        1,
        &b,
        &["--controller-quorum-voters", &voters],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let _controller = start_node(
        &tmp.path().join("n1"),
        1,
        &voters,
        kafka_port,
        &controller_log,
    );
    assert_eq!(served_cluster_id(&addr), b);

    let a = random_uuid();
    let broker_args = [
        "--process-roles",
        "broker",
        "--controller-quorum-voters",
        &voters,
    ];
    let foreign = tmp.path().join("n2");
    let o = format(&foreign, 2, &a, &broker_args);
    assert!(o.status.success(), "{}", stderr(&o));
    let _foreign = Proc(
        broker_only_command(2, &voters, &foreign, &[])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // The cluster refuses its quorum frames (INCONSISTENT_CLUSTER_ID) ...
    wait_until("the controller refusing the foreign node's frames", || {
        std::fs::read_to_string(&controller_log).is_ok_and(|l| {
            l.contains("refused a quorum frame from another cluster") && l.contains(&a)
        })
    });
    // ... while a node formatted for this cluster joins it.
    let member = tmp.path().join("n3");
    let o = format(&member, 3, &b, &broker_args);
    assert!(o.status.success(), "{}", stderr(&o));
    let _member = Proc(
        broker_only_command(3, &voters, &member, &[])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_until("node 3 registered", || {
        live_broker_ids(&addr).is_some_and(|ids| ids.contains(&3))
    });
    assert_eq!(
        live_broker_ids(&addr),
        Some(vec![1, 3]),
        "node 2 never joined"
    );
}

#[test]
fn format_twice_needs_ignore_formatted_and_node_ids_must_match() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let id = random_uuid();
    let o = format(&dir, 1, &id, &["--standalone"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = format(&dir, 1, &id, &["--standalone"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains(&format!(
        "Log directory {} is already formatted. Use --ignore-formatted to ignore this directory and format the others.",
        dir.display()
    )));
    let o = format(&dir, 1, &id, &["--standalone", "--ignore-formatted"]);
    assert!(o.status.success());
    assert_eq!(
        stdout(&o),
        "All of the log directories are already formatted.\n"
    );

    // A single node formatted for node 1 serves the formatted id ...
    let mut broker = TestBroker::start(&dir, &[]);
    assert_eq!(served_cluster_id(&broker.addr), id);
    assert!(broker.stop());
    // ... and the same directory refuses to start as node 2, with Kafka's message.
    let out = Command::new(env!("CARGO_BIN_EXE_runnel"))
        .args([
            "broker",
            "--node-id",
            "2",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(&dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(&format!(
            "Stored node id 1 doesn't match previous node id 2 in {}",
            dir.join("meta.properties").display()
        )),
        "{}",
        stderr(&out)
    );
}

#[test]
fn formatted_scram_users_reach_the_metadata_salted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let o = format(
        &dir,
        1,
        &random_uuid(),
        &[
            "--standalone",
            "--add-scram",
            "SCRAM-SHA-256=[name=alice,password=alice-secret]",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!std::fs::read_to_string(dir.join("bootstrap.json"))
        .unwrap()
        .contains("alice-secret"));
    let sasl_port = free_port();
    let listeners =
        format!("listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port}");
    let broker = TestBroker::start(&dir, &[&listeners, "sasl.enabled.mechanisms=SCRAM-SHA-256"]);
    // The credential is in the cluster's metadata once the broker applied the bootstrap file.
    wait_until("alice's credential described", || {
        let o = runnel(&[
            "configs",
            "--bootstrap-server",
            &broker.addr,
            "--describe",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
        ]);
        stdout(&o).contains("SCRAM-SHA-256=iterations=4096")
    });
    // ... and a client really authenticates with the formatted user and password over SASL
    // SCRAM-SHA-256 (a wrong password is refused).
    let list_as = |password: &str| {
        let props = tmp.path().join(format!("client-{password}.properties"));
        std::fs::write(
            &props,
            format!(
                "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n\
                 sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
                 username=\"alice\" password=\"{password}\";\n"
            ),
        )
        .unwrap();
        runnel(&[
            "topics",
            "--bootstrap-server",
            &format!("127.0.0.1:{sasl_port}"),
            "--command-config",
            props.to_str().unwrap(),
            "--list",
        ])
    };
    let o = list_as("alice-secret");
    assert!(
        o.status.success(),
        "SCRAM login with the formatted password: {}",
        stderr(&o)
    );
    let o = list_as("wrong-secret");
    assert!(!o.status.success(), "a wrong password must fail");
    assert!(
        stderr(&o).contains("SASL_AUTHENTICATION_FAILED")
            || stderr(&o).contains("58")
            || stderr(&o).to_lowercase().contains("authentication"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn initial_controllers_are_the_quorum_of_a_formatted_node() {
    let tmp = tempfile::tempdir().unwrap();
    let (controller_port, kafka_port) = (free_port(), free_port());
    let dir = tmp.path().join("n1");
    let id = random_uuid();
    let voter = format!("1@127.0.0.1:{controller_port}:{}", random_uuid());
    let o = format(
        &dir,
        1,
        &id,
        &["--initial-controllers", &voter, "--release-version", "3.8"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // No --controller-quorum-voters: the node runs the quorum it was formatted with.
    let _node = start_node(&dir, 1, "", kafka_port, &tmp.path().join("n1.log"));
    let addr = format!("127.0.0.1:{kafka_port}");
    assert_eq!(served_cluster_id(&addr), id);
    wait_until("node 1 leads the formatted quorum", || {
        support::cluster::quorum(&addr)
            .is_some_and(|(leader, _, voters)| leader == 1 && voters == vec![1])
    });
    // The formatted levels go through the Raft log as well (3.8 is 3.8-IV0, level 20).
    wait_until("metadata.version finalized at 3.8-IV0", || {
        finalized_levels(&addr) == vec![("metadata.version".to_string(), 20)]
    });
}

/// The finalized levels an ApiVersions v3 answer carries (name -> level).
fn finalized_levels(addr: &str) -> Vec<(String, i16)> {
    use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
    let resp: ApiVersionsResponse =
        Wire::connect(addr).call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    resp.finalized_features
        .iter()
        .map(|f| (f.name.to_string(), f.max_version_level))
        .collect()
}

fn features_describe(addr: &str) -> String {
    stdout(&runnel(&[
        "features",
        "--bootstrap-server",
        addr,
        "describe",
    ]))
}

/// `--release-version` / `--feature` (kafka-storage.sh 3.8+): unknown versions, unsupported
/// features and levels, and inconsistent combinations are refused with Kafka's messages before
/// anything is written; accepted levels are the cluster's finalized ones (ApiVersions and
/// `runnel features describe`), also after a restart.
#[test]
fn formatted_feature_levels_are_the_finalized_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let refused: [(&[&str], &str); 5] = [
        (&["--release-version", "9.9"], "Version 9.9 is not a valid version"),
        (
            &["--release-version", "3.2"],
            "metadata.version 3.2-IV0 is too old to be supported.",
        ),
        (
            &["--feature", "share.version=1"],
            "Unsupported feature: share.version. Supported features are: group.version, kraft.version, transaction.version",
        ),
        (
            &["--feature", "transaction.version=3"],
            "No feature:transaction.version with feature level 3",
        ),
        (
            &["--release-version", "3.9", "--feature", "group.version=1"],
            "group.version could not be set to 1 because it depends on metadata.version level 22",
        ),
    ];
    for (extra, why) in refused {
        let dir = tmp.path().join("refused");
        let mut args = vec!["--standalone"];
        args.extend_from_slice(extra);
        let o = format(&dir, 1, &random_uuid(), &args);
        assert!(!o.status.success(), "{extra:?}: {}", stdout(&o));
        assert!(stderr(&o).contains(why), "{extra:?}: {}", stderr(&o));
        assert!(!dir.join("meta.properties").exists(), "{extra:?}");
        assert!(!dir.join("bootstrap.json").exists(), "{extra:?}");
    }
    let dir = tmp.path().join("d");
    let o = format(
        &dir,
        1,
        &random_uuid(),
        &["--standalone", "--release-version", "3.9-IV0"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("with metadata.version 3.9-IV0."),
        "{}",
        stdout(&o)
    );
    let mut broker = TestBroker::start(&dir, &[]);
    // 3.9's group.version and transaction.version default to 0 (GV_1 needs 4.0-IV0, TV_2's
    // default 4.0-IV2): not finalized, as Kafka omits a feature at level 0.
    let expected = vec![("metadata.version".to_string(), 21)];
    wait_until("metadata.version finalized at 3.9-IV0", || {
        finalized_levels(&broker.addr) == expected
    });
    let lines = features_describe(&broker.addr);
    assert!(
        lines.contains("Feature: metadata.version\tSupportedMinVersion: 3.3-IV3\tSupportedMaxVersion: 4.0-IV3\tFinalizedVersionLevel: 3.9-IV0\t"),
        "{lines}"
    );
    assert!(
        lines.contains("Feature: group.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 0\t"),
        "{lines}"
    );
    assert!(
        lines.contains("Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\tFinalizedVersionLevel: 0\t"),
        "{lines}"
    );
    broker.restart();
    assert_eq!(finalized_levels(&broker.addr), expected);

    // --feature alone: metadata.version stays the newest, the features take the given levels.
    let dir = tmp.path().join("e");
    let o = format(
        &dir,
        1,
        &random_uuid(),
        &[
            "--standalone",
            "--feature",
            "group.version=0",
            "--feature",
            "transaction.version=1",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("with metadata.version 4.0-IV3."));
    let broker = TestBroker::start(&dir, &[]);
    let expected = vec![
        ("metadata.version".to_string(), 25),
        ("transaction.version".to_string(), 1),
    ];
    wait_until(
        "group.version 0 and transaction.version 1 finalized",
        || finalized_levels(&broker.addr) == expected,
    );
}
