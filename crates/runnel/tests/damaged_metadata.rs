//! Damaged metadata never costs partition data (issue 9, items 4 and 5), on real processes:
//! a single node whose metadata log is corrupt in the middle, and a cluster node whose Raft log
//! is, refuse to start with the file and byte offset and touch no partition directory; a
//! broker-only node whose metadata directory was wiped keeps its partition logs, catches up
//! and serves them; a partition directory the metadata does not know is renamed `-stray` and
//! kept.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, UNIX_EPOCH};

use kafka_protocol::records::Compression;
use support::cluster::*;
use support::*;

/// Every file under the partition directories of `data_dir` (everything but the metadata
/// logs), with its size and modification time: what "nothing touched" compares.
fn partition_listing(data_dir: &Path) -> BTreeMap<PathBuf, (u64, u128)> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<PathBuf, (u64, u128)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let meta = entry.metadata().unwrap();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            if meta.is_dir() {
                out.insert(rel, (0, 0));
                walk(&path, root, out);
            } else {
                let mtime = meta.modified().unwrap().duration_since(UNIX_EPOCH).unwrap();
                out.insert(rel, (meta.len(), mtime.as_nanos()));
            }
        }
    }
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(data_dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().unwrap().is_dir() && name != "metadata" && name != "metadata-quorum" {
            out.insert(PathBuf::from(&name), (0, 0));
            walk(&entry.path(), data_dir, &mut out);
        }
    }
    out
}

/// Waits (bounded) for `child` to exit: its status, or `None` if it was still running (then
/// it is killed).
fn wait_exit(child: &mut Child) -> Option<ExitStatus> {
    let deadline = Instant::now() + DEADLINE;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

fn flip_byte(path: &Path, at: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at] ^= 0x01;
    std::fs::write(path, bytes).unwrap();
}

/// Caught (issue 9, item 4): a byte flipped in the middle of a single node's metadata log used
/// to be taken for a torn tail; everything after it was truncated and the replica manager
/// deleted the partition logs of every topic created afterwards. A single node now keeps its
/// metadata in a one-voter Raft log (damage there: the cluster test below); the file log an
/// earlier build wrote (the golden fixture) is still read once, by the importer, with the same
/// check: the broker refuses to start, naming the file and byte offset, and no partition
/// directory is touched; with the byte repaired it imports and serves the topics.
#[test]
fn single_node_refuses_a_metadata_log_damaged_in_the_middle() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("metadata")).unwrap();
    std::fs::create_dir_all(data.join("kept-0")).unwrap();
    std::fs::write(data.join("kept-0/00000000000000000000.log"), b"x").unwrap();
    let log = data.join("metadata").join("metadata.log");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/data/golden-metadata/v1/file-log/metadata.log"),
        &log,
    )
    .unwrap();
    let text = std::fs::read(&log).unwrap();
    let starts: Vec<usize> = std::iter::once(0)
        .chain(
            text.iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .map(|(i, _)| i + 1),
        )
        .filter(|&i| i < text.len())
        .collect();
    assert!(starts.len() >= 4, "{} lines", starts.len());
    let middle = starts[starts.len() / 2];
    let line_number = starts.len() / 2 + 1;
    flip_byte(&log, middle + 20);
    let before = partition_listing(&data);

    let stderr_path = dir.path().join("stderr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_runnel"))
        .args(["broker", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .env("RUST_LOG", "warn")
        .spawn()
        .unwrap();
    let status = wait_exit(&mut child);
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    assert!(
        status.is_some_and(|s| !s.success()),
        "the broker must refuse to start: {stderr}"
    );
    let expected = format!(
        "{}: the record at byte offset {middle} (line {line_number}) is corrupt",
        log.display()
    );
    assert!(stderr.contains(&expected), "{expected} in: {stderr}");
    assert_eq!(partition_listing(&data), before, "partition dirs untouched");
    assert!(!data.join("metadata-quorum").exists(), "nothing imported");

    // Repaired, it is imported and served.
    flip_byte(&log, middle + 20);
    let broker = TestBroker::start(&data, &[]);
    let mut wire = broker.connect();
    let (code, _) = wire.produce(
        "golden-a",
        0,
        batch(&[(Some("k"), "v")], Compression::None),
        -1,
    );
    assert_eq!(code, 0);
    assert_eq!(values(&wire.fetch_all("golden-a", 0, 0)), ["v"]);
}

/// The start offsets of the framed `[len][crc][body]` records of a Raft log.
fn raft_record_starts(bytes: &[u8]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut pos = 0;
    while pos + 8 <= bytes.len() {
        starts.push(pos);
        let len = u32::from_be_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
        pos += 8 + len;
    }
    starts
}

/// Caught (issue 9, item 5): a byte flipped in the middle of a voter's Raft log cut the log
/// there on the next start, so the voter forgot entries it had acknowledged. Now the node
/// refuses to start, naming the file and byte offset, and its partition directories are
/// untouched.
#[test]
fn cluster_node_refuses_a_raft_log_damaged_in_the_middle() {
    let mut cluster = Cluster::start(3, &[]);
    let addr = cluster.addr(0);
    wait_until("three live brokers", || {
        live_broker_ids(&addr) == Some(vec![1, 2, 3])
    });
    for t in ["r1", "r2", "r3"] {
        assert_eq!(create(&addr, t, 3, 3), 0);
    }
    wait_until("leaders everywhere", || {
        ["r1", "r2", "r3"].iter().all(|t| {
            partition_states(&cluster.addr(2), t)
                .is_some_and(|p| p.len() == 3 && p.iter().all(|s| s.leader > 0))
        })
    });
    assert!(cluster.stop(2));
    let data = cluster.nodes[2].data_dir.clone();
    let log = data.join("metadata-quorum").join("raft.log");
    let bytes = std::fs::read(&log).unwrap();
    let starts = raft_record_starts(&bytes);
    assert!(starts.len() >= 3, "{} records", starts.len());
    let k = starts.len() / 2;
    let middle = starts[k];
    flip_byte(&log, middle + 8 + 5);
    let before = partition_listing(&data);
    assert!(before.keys().any(|p| p.to_string_lossy() == "r1-0"));

    let _ = cluster.spawn(2);
    let status = cluster.wait_exit(2);
    let output = cluster.log_tail(2, 20);
    assert!(
        status.is_some_and(|s| !s.success()),
        "the node must refuse to start: {output}"
    );
    let expected = format!(
        "{}: the record at byte offset {middle} (record {}) is corrupt",
        log.display(),
        k + 1
    );
    assert!(output.contains(&expected), "{expected} in: {output}");
    assert_eq!(partition_listing(&data), before, "partition dirs untouched");
}

/// A broker-only node (a Raft observer, not a voter) with a fixed address, restartable.
struct Observer {
    child: Option<Child>,
    addr: String,
    args: Vec<String>,
    log: PathBuf,
}

impl Observer {
    fn start(cluster: &Cluster, node_id: i32, data_dir: &Path, log: &Path) -> Observer {
        let args = vec![
            "broker".to_string(),
            "--node-id".into(),
            node_id.to_string(),
            "--process-roles".into(),
            "broker".into(),
            "--listen".into(),
            format!("127.0.0.1:{}", free_port()),
            "--controller-listen".into(),
            format!("127.0.0.1:{}", free_port()),
            "--controller-quorum-voters".into(),
            cluster.voters.clone(),
            "--data-dir".into(),
            data_dir.display().to_string(),
        ];
        let mut observer = Observer {
            child: None,
            addr: args[6].clone(),
            args,
            log: log.to_path_buf(),
        };
        observer.spawn();
        observer
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        self.child = Some(
            Command::new(env!("CARGO_BIN_EXE_runnel"))
                .args(&self.args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .env("NO_COLOR", "1")
                .env("RUST_LOG", QUIET_RAFT)
                .spawn()
                .unwrap(),
        );
    }

    fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Caught (issue 9, item 5): a node declared itself caught up at its *own* committed offset;
/// with its metadata directory wiped (a routine recovery step in Kafka) that is -1, so the
/// first, empty image deleted every partition log on the broker, including partitions whose
/// only replica it held. Now it is caught up only at the leader's committed offset: its logs
/// stay, it catches up and serves every record.
#[test]
fn a_broker_with_a_wiped_metadata_dir_keeps_its_partition_data() {
    let cluster = Cluster::start(3, &[]);
    let addr = cluster.addr(0);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("node-4");
    let log_path = dir.path().join("node-4.log");
    let mut observer = Observer::start(&cluster, 4, &data, &log_path);
    wait_until("broker 4 registered and unfenced", || {
        live_broker_ids(&addr) == Some(vec![1, 2, 3, 4])
    });
    assert_eq!(create(&addr, "solo", 8, 1), 0);
    wait_until("a leader for every partition", || {
        partition_states(&observer.addr, "solo")
            .is_some_and(|p| p.len() == 8 && p.iter().all(|s| s.leader > 0))
    });
    let mine: Vec<i32> = partition_states(&addr, "solo")
        .unwrap()
        .iter()
        .filter(|s| s.replicas == [4])
        .map(|s| s.partition)
        .collect();
    assert!(!mine.is_empty(), "some partition only on broker 4");
    let mut wire = Wire::connect(&observer.addr);
    let mut sent = BTreeMap::new();
    for &p in &mine {
        let vals: Vec<String> = (0..20).map(|i| format!("p{p}-{i}")).collect();
        for v in &vals {
            let (code, _) = wire.produce("solo", p, batch(&[(None, v)], Compression::None), -1);
            assert_eq!(code, 0);
        }
        sent.insert(p, vals);
    }
    drop(wire);

    observer.kill9();
    std::fs::remove_dir_all(data.join("metadata-quorum")).unwrap();
    let dirs_before: Vec<PathBuf> = partition_listing(&data)
        .into_keys()
        .filter(|p| p.components().count() == 1)
        .collect();
    observer.spawn();
    wait_until("broker 4 leads its partitions again", || {
        partition_states(&observer.addr, "solo").is_some_and(|s| {
            s.len() == 8
                && mine
                    .iter()
                    .all(|&p| s[p as usize].leader == 4 && s[p as usize].replicas == [4])
        })
    });
    let mut wire = Wire::connect(&observer.addr);
    // The image can name broker 4 the leader a moment before its replica serves (a client
    // retries NOT_LEADER_OR_FOLLOWER): wait until each partition answers, then read it all.
    wait_until("broker 4 serves its partitions", || {
        mine.iter().all(|&p| wire.fetch("solo", p, 0, 0).0 == 0)
    });
    for (&p, vals) in &sent {
        assert_eq!(&values(&wire.fetch_all("solo", p, 0)), vals, "solo-{p}");
    }
    let dirs_after: Vec<PathBuf> = partition_listing(&data)
        .into_keys()
        .filter(|p| p.components().count() == 1)
        .collect();
    assert_eq!(
        dirs_after, dirs_before,
        "no partition dir deleted or renamed"
    );
}

/// Caught (issue 9, "What to build"): a partition directory on disk that the caught-up image
/// does not know was deleted. Now it is renamed `<topic>-<partition>.<uuid>-stray` (Kafka's
/// name) with its files, kept across restarts, and the real partitions are untouched.
#[test]
fn a_stray_partition_directory_is_renamed_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut broker = TestBroker::start(&data, &[]);
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("real", 1, 1, &[]).0, 0);
    assert_eq!(
        wire.produce("real", 0, batch(&[(None, "v")], Compression::None), -1)
            .0,
        0
    );
    assert!(broker.stop());
    // A partition directory the metadata never had (e.g. copied from another broker).
    let ghost = data.join("ghost-0");
    std::fs::create_dir(&ghost).unwrap();
    for entry in std::fs::read_dir(data.join("real-0")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), ghost.join(entry.file_name())).unwrap();
    }
    let files = |d: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let ghost_files = files(&ghost);
    let strays = || -> Vec<PathBuf> {
        std::fs::read_dir(&data)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let n = p.file_name().unwrap().to_string_lossy().into_owned();
                n.starts_with("ghost-0.")
                    && n.ends_with("-stray")
                    && n.len() == "ghost-0.".len() + 32 + "-stray".len()
            })
            .collect()
    };
    for _ in 0..2 {
        broker.restart();
        let mut wire = broker.connect();
        assert_eq!(values(&wire.fetch_all("real", 0, 0)), ["v"]);
        wait_until("the stray directory renamed", || {
            !ghost.exists() && strays().len() == 1
        });
        assert_eq!(
            files(&strays()[0]),
            ghost_files,
            "the stray keeps its files"
        );
    }
}

/// Found by the red-team review: one changed character in a partition's `partition.metadata`
/// (still a valid topic id, another one) made the broker take the directory for a leftover of
/// a deleted topic and delete it, with every acknowledged record of the partition. Now it is
/// set aside as a stray (Kafka's stray-replica handling), its files kept, and the partition
/// starts a new log.
#[test]
fn a_damaged_partition_metadata_does_not_delete_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut broker = TestBroker::start(&data, &[]);
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("kept", 1, 1, &[]).0, 0);
    assert_eq!(
        wire.produce("kept", 0, batch(&[(None, "acked")], Compression::None), -1)
            .0,
        0
    );
    assert!(broker.stop());
    let partition = data.join("kept-0");
    let segment = std::fs::read(partition.join(format!("{:020}.log", 0))).unwrap();
    assert!(!segment.is_empty());
    let meta = partition.join("partition.metadata");
    let text = std::fs::read_to_string(&meta).unwrap();
    let at = text.find("topic_id: ").unwrap() + "topic_id: ".len();
    let mut damaged = text.into_bytes();
    // Another base64url character: the file still names a topic id, a different one.
    damaged[at] = if damaged[at] == b'A' { b'B' } else { b'A' };
    std::fs::write(&meta, damaged).unwrap();
    broker.restart();
    let strays = || -> Vec<PathBuf> {
        std::fs::read_dir(&data)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let n = p.file_name().unwrap().to_string_lossy().into_owned();
                n.starts_with("kept-0.") && n.ends_with("-stray")
            })
            .collect()
    };
    wait_until("the damaged log set aside", || strays().len() == 1);
    let kept = std::fs::read(strays()[0].join(format!("{:020}.log", 0))).unwrap();
    assert_eq!(kept, segment, "the set-aside log keeps its records");
    // The broker still serves the partition, on a new log.
    let mut wire = broker.connect();
    assert_eq!(
        wire.produce("kept", 0, batch(&[(None, "new")], Compression::None), -1)
            .0,
        0
    );
}
