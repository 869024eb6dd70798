//! Consumer groups end to end against the real `runnel broker` binary (single node, so
//! `offsets.topic.replication.factor=1`): the group consumer joins, reads from committed
//! offsets, commits, splits partitions with a second member, and the admin API lists,
//! describes, resets and deletes the group.
//!
//! The broker binary is `$RUNNEL_BIN`, else `runnel` next to this test's `deps` directory
//! (built by `cargo build -p runnel` or any workspace build).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use runnel_client::admin::NewTopic;
use runnel_client::{
    Admin, Client, ClientConfig, GroupConfig, GroupConsumer, OffsetAndMetadata, Producer,
    ProducerConfig, ProducerRecord, TopicPartition,
};

const DEADLINE: Duration = Duration::from_secs(30);

fn runnel_bin() -> PathBuf {
    if let Ok(p) = std::env::var("RUNNEL_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("test exe path");
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|dir| dir.join("runnel"))
        .expect("target dir");
    assert!(
        bin.exists(),
        "{} is missing: build the broker first (cargo build -p runnel) or set RUNNEL_BIN",
        bin.display()
    );
    bin
}

/// A broker process with its own data dir; killed and cleaned up on drop.
struct Broker {
    child: Child,
    addr: String,
    dir: PathBuf,
}

impl Broker {
    fn start() -> Self {
        let dir = std::env::temp_dir().join(format!("runnel-groups-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("data dir");
        let mut child = Command::new(runnel_bin())
            .args(["broker", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&dir)
            .args([
                "--override",
                "offsets.topic.replication.factor=1",
                "--override",
                "offsets.topic.num.partitions=4",
                "--override",
                "group.initial.rebalance.delay.ms=0",
            ])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn runnel broker");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(addr) = line.split("listening on ").nth(1) {
                    let _ = tx.send(addr.trim().to_string());
                }
            }
        });
        let addr = rx
            .recv_timeout(DEADLINE)
            .expect("broker prints its address");
        Broker { child, addr, dir }
    }

    fn cli(&self, args: &[&str]) -> (bool, String, String) {
        let out = Command::new(runnel_bin())
            .args(args)
            .args(["--bootstrap-server", &self.addr])
            .output()
            .expect("run runnel");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn client(addr: &str) -> Arc<Client> {
    Client::connect(ClientConfig::new(addr))
        .await
        .expect("connect")
}

async fn topic(admin: &Admin, name: &str, partitions: i32) {
    for (_, r) in admin
        .create_topics(&[NewTopic::new(name, partitions, 1)], false, DEADLINE)
        .await
        .expect("create topics")
    {
        r.expect("topic created");
    }
}

async fn produce(client: &Arc<Client>, topic: &str, partitions: i32, n: usize, tag: &str) {
    let producer = Producer::new(client.clone(), ProducerConfig::default())
        .await
        .expect("producer");
    let mut acks = Vec::new();
    for i in 0..n {
        let mut record = ProducerRecord::new(topic, Bytes::from(format!("{tag}-{i}")));
        record.partition = Some(i as i32 % partitions);
        acks.push(producer.send(record).await.expect("send"));
    }
    for a in acks {
        a.wait().await.expect("acked");
    }
    producer.close().await;
}

fn config(group: &str) -> GroupConfig {
    let mut c = GroupConfig::new(group);
    c.set("auto.offset.reset", "earliest").unwrap();
    c.set("heartbeat.interval.ms", "200").unwrap();
    c.set("session.timeout.ms", "6000").unwrap();
    c.set("max.poll.interval.ms", "10000").unwrap();
    c.set("enable.auto.commit", "false").unwrap();
    c
}

/// Polls until `n` records arrived (or the deadline passes).
async fn read(consumer: &mut GroupConsumer, n: usize) -> Vec<String> {
    let deadline = Instant::now() + DEADLINE;
    let mut got = Vec::new();
    while got.len() < n && Instant::now() < deadline {
        for r in consumer
            .poll(Duration::from_millis(500))
            .await
            .expect("poll")
        {
            got.push(String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned());
        }
    }
    got
}

/// The group is Stable with one member owning all three partitions of "orders", and listed
/// as a consumer group.
async fn assert_stable_with_one_member(admin: &Admin, group: &str) {
    let (_, d) = admin
        .describe_groups(&[group.to_string()])
        .await
        .expect("describe")
        .pop()
        .expect("one group");
    let d = d.expect("described");
    assert_eq!(d.state, "Stable");
    assert_eq!(d.protocol, "range");
    assert_eq!(d.members.len(), 1);
    assert_eq!(d.members[0].assignment.len(), 3);
    assert_eq!(d.members[0].subscription, ["orders"]);
    let listed = admin.list_groups(&[]).await.expect("list");
    assert!(listed
        .iter()
        .any(|g| g.group_id == group && g.protocol_type == "consumer"));
}

/// A simple (admin) commit is refused while the group has members.
async fn assert_simple_commit_refused(admin: &Admin, group: &str) {
    let refused = admin
        .alter_group_offsets(
            group,
            &[(TopicPartition::new("orders", 0), OffsetAndMetadata::new(0))],
        )
        .await;
    let refused_code = match refused {
        Ok(results) => results
            .into_iter()
            .find_map(|(_, r)| r.err())
            .and_then(|e| e.code()),
        Err(e) => e.code(),
    };
    assert!(
        refused_code.is_some(),
        "simple commit must fail on an active group"
    );
}

/// The group is Empty: admin resets, offset deletes and the group's deletion are allowed.
async fn reset_and_delete_the_empty_group(admin: &Admin, group: &str) {
    let (_, d) = admin
        .describe_groups(&[group.into()])
        .await
        .unwrap()
        .pop()
        .unwrap();
    assert_eq!(d.unwrap().state, "Empty");
    for (_, r) in admin
        .alter_group_offsets(
            group,
            &[(TopicPartition::new("orders", 0), OffsetAndMetadata::new(4))],
        )
        .await
        .expect("reset")
    {
        r.expect("reset accepted on an Empty group");
    }
    let offsets = admin
        .list_group_offsets(group, Some(&[TopicPartition::new("orders", 0)]))
        .await
        .expect("offsets");
    assert_eq!(offsets[0].1.as_ref().map(|o| o.offset), Some(4));
    let (top, parts) = admin
        .delete_group_offsets(group, &[TopicPartition::new("orders", 1)])
        .await
        .expect("delete offsets");
    top.expect("group-level ok");
    assert!(parts.iter().all(|(_, r)| r.is_ok()));
    let offsets = admin
        .list_group_offsets(group, None)
        .await
        .expect("offsets");
    assert!(offsets.iter().all(|(tp, _)| tp.partition != 1));
    for (_, r) in admin.delete_groups(&[group.into()]).await.expect("delete") {
        r.expect("deleted");
    }
    let listed = admin.list_groups(&[]).await.expect("list");
    assert!(!listed.iter().any(|g| g.group_id == group));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_consumer_commits_and_resumes_from_committed_offsets() {
    let broker = Broker::start();
    let client = client(&broker.addr).await;
    let admin = Admin::new(client.clone());
    topic(&admin, "orders", 3).await;
    produce(&client, "orders", 3, 30, "a").await;

    let mut c = GroupConsumer::new(client.clone(), config("g1")).expect("consumer");
    c.subscribe(&["orders"]);
    let got = read(&mut c, 30).await;
    assert_eq!(got.len(), 30, "read everything from the earliest offset");
    assert_eq!(c.assignment().len(), 3);
    assert!(c.generation() >= 1);
    assert_eq!(c.protocol(), Some("range"));
    c.commit().await.expect("commit");

    assert_stable_with_one_member(&admin, "g1").await;
    assert_simple_commit_refused(&admin, "g1").await;

    c.close().await.expect("close commits and leaves");
    let offsets = admin.list_group_offsets("g1", None).await.expect("offsets");
    let total: i64 = offsets
        .iter()
        .filter_map(|(_, o)| o.as_ref().map(|o| o.offset))
        .sum();
    assert_eq!(
        total, 30,
        "committed the end of every partition: {offsets:?}"
    );

    // A new member resumes after the commits: only the new records arrive.
    produce(&client, "orders", 3, 6, "b").await;
    let mut c2 = GroupConsumer::new(client.clone(), config("g1")).expect("consumer");
    c2.subscribe(&["orders"]);
    let mut got = read(&mut c2, 6).await;
    got.sort();
    assert_eq!(got, ["b-0", "b-1", "b-2", "b-3", "b-4", "b-5"]);
    c2.close().await.expect("close");

    reset_and_delete_the_empty_group(&admin, "g1").await;
}

/// A member of "g2" on "events" with `strategy`, polled until it held two partitions for 2 s
/// (the group settled on two members), with its assignment then.
async fn settled_member(
    client: Arc<Client>,
    strategy: &'static str,
) -> (GroupConsumer, Vec<TopicPartition>) {
    let mut cfg = config("g2");
    cfg.set("partition.assignment.strategy", strategy).unwrap();
    let mut c = GroupConsumer::new(client, cfg).expect("consumer");
    c.subscribe(&["events"]);
    let deadline = Instant::now() + DEADLINE;
    let mut stable_since: Option<Instant> = None;
    while Instant::now() < deadline {
        c.poll(Duration::from_millis(200)).await.expect("poll");
        if c.assignment().len() == 2 {
            let since = *stable_since.get_or_insert_with(Instant::now);
            if since.elapsed() > Duration::from_secs(2) {
                break;
            }
        } else {
            stable_since = None;
        }
    }
    let assignment = c.assignment();
    (c, assignment)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_members_split_the_partitions() {
    let broker = Broker::start();
    let client = client(&broker.addr).await;
    let admin = Admin::new(client.clone());
    topic(&admin, "events", 4).await;
    produce(&client, "events", 4, 8, "x").await;

    let a = tokio::spawn(settled_member(client.clone(), "cooperative-sticky"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let b = tokio::spawn(settled_member(client.clone(), "cooperative-sticky"));
    let (ca, pa) = a.await.expect("member a");
    let (cb, pb) = b.await.expect("member b");
    assert!(ca.is_cooperative());
    assert_eq!(pa.len(), 2, "a: {pa:?}");
    assert_eq!(pb.len(), 2, "b: {pb:?}");
    let all: BTreeSet<_> = pa.iter().chain(pb.iter()).cloned().collect();
    assert_eq!(all.len(), 4, "disjoint and complete: {pa:?} {pb:?}");
    assert_eq!(ca.protocol(), Some("cooperative-sticky"));

    // kafka-consumer-groups --describe --members shows both.
    let (ok, out, err) = broker.cli(&["groups", "--describe", "--members", "--group", "g2"]);
    assert!(ok, "{err}");
    let header = out
        .lines()
        .find(|l| l.starts_with("GROUP"))
        .expect("header");
    assert!(
        header.contains("CONSUMER-ID") && header.contains("#PARTITIONS"),
        "{out}"
    );
    assert_eq!(
        out.lines().filter(|l| l.starts_with("g2 ")).count(),
        2,
        "{out}"
    );

    // Resetting an active group is refused with Kafka's message.
    let (ok, _, err) = broker.cli(&[
        "groups",
        "--reset-offsets",
        "--group",
        "g2",
        "--all-topics",
        "--to-earliest",
        "--execute",
    ]);
    assert!(!ok);
    assert!(
        err.contains("Assignments can only be reset if the group 'g2' is inactive, but the current state is Stable."),
        "{err}"
    );
    ca.close().await.expect("close a");
    cb.close().await.expect("close b");
}

/// `groups --describe` of a group without members: its committed offsets (5 of 5 on each
/// partition of "logs"), no lag, no consumer.
fn assert_describe_shows_committed_offsets(broker: &Broker, group: &str) {
    let (ok, out, err) = broker.cli(&["groups", "--describe", "--group", group]);
    assert!(ok, "{err}");
    assert!(
        err.contains(&format!("Consumer group '{group}' has no active members.")),
        "{err}"
    );
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        [
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID"
        ]
    );
    for row in &lines[1..] {
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols[0], group);
        assert_eq!(cols[3], "5", "current offset: {row}");
        assert_eq!(cols[4], "5", "log end offset: {row}");
        assert_eq!(cols[5], "0", "lag: {row}");
        assert_eq!(&cols[6..], ["-", "-", "-"]);
    }
}

/// Dry run prints the plan and changes nothing; --execute applies it.
async fn reset_dry_run_then_execute(broker: &Broker, admin: &Admin, group: &str) {
    let (ok, out, err) = broker.cli(&[
        "groups",
        "--reset-offsets",
        "--group",
        group,
        "--topic",
        "logs:0",
        "--shift-by",
        "-2",
        "--dry-run",
    ]);
    assert!(ok, "{err}");
    let row = out.lines().find(|l| l.starts_with(group)).expect("row");
    assert_eq!(
        row.split_whitespace().collect::<Vec<_>>(),
        [group, "logs", "0", "3"]
    );
    let committed = admin
        .list_group_offsets(group, Some(&[TopicPartition::new("logs", 0)]))
        .await
        .unwrap();
    assert_eq!(committed[0].1.as_ref().map(|o| o.offset), Some(5));
    let (ok, _, err) = broker.cli(&[
        "groups",
        "--reset-offsets",
        "--group",
        group,
        "--all-topics",
        "--to-earliest",
        "--execute",
    ]);
    assert!(ok, "{err}");
    let committed = admin.list_group_offsets(group, None).await.unwrap();
    assert!(committed
        .iter()
        .all(|(_, o)| o.as_ref().map(|o| o.offset) == Some(0)));
}

/// `groups --list --state` shows the group Empty; `--delete` removes it.
fn list_state_then_delete(broker: &Broker, group: &str) {
    let (ok, out, err) = broker.cli(&["groups", "--list", "--state"]);
    assert!(ok, "{err}");
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == [group, "Empty"]),
        "{out}"
    );
    let (ok, out, err) = broker.cli(&["groups", "--delete", "--group", group]);
    assert!(ok, "{err}");
    assert!(
        out.contains(&format!(
            "Deletion of requested consumer groups ('{group}') was successful."
        )),
        "{out}"
    );
    let (ok, _, err) = broker.cli(&["groups", "--describe", "--group", group]);
    assert!(!ok);
    assert!(
        err.contains(&format!("Consumer group '{group}' does not exist.")),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_describe_and_reset_offsets() {
    let broker = Broker::start();
    let client = client(&broker.addr).await;
    let admin = Admin::new(client.clone());
    topic(&admin, "logs", 2).await;
    produce(&client, "logs", 2, 10, "l").await;

    // `runnel consume --group` reads everything and commits on exit.
    let (ok, out, err) = broker.cli(&[
        "consume",
        "--topic",
        "logs",
        "--group",
        "g3",
        "--from-beginning",
        "--max-messages",
        "10",
        "--timeout-ms",
        "20000",
    ]);
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), 10, "{out}");

    let (ok, out, err) = broker.cli(&["groups", "--list"]);
    assert!(ok, "{err}");
    assert!(out.lines().any(|l| l == "g3"), "{out}");

    assert_describe_shows_committed_offsets(&broker, "g3");
    reset_dry_run_then_execute(&broker, &admin, "g3").await;
    list_state_then_delete(&broker, "g3");
}
