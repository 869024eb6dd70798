//! A failed log dir takes only its own partitions offline (issue 12, KIP-858): three real
//! brokers, each with two log dirs (`a`, `b`; the metadata log in the data dir beside them),
//! a topic of six partitions with replication factor 3. Node 1's dir `b` is a size-limited
//! tmpfs the test mounts itself (root only, as CI runs; otherwise it says so and passes) and
//! fills up for real: the next append there fails with ENOSPC, which fails the log and its
//! dir (Kafka's `maybeHandleIOException` / `LogDirFailureChannel`).
//!
//! Then: node 1 keeps running; the partitions of its dir `b` get other leaders and node 1
//! leaves their ISR (Metadata lists it offline there); the partitions of its dir `a` stay led
//! by it; acks=all produce to all six keeps working; DescribeLogDirs reports `b` with
//! KAFKA_STORAGE_ERROR. After a restart with space back, node 1 rejoins every ISR and nothing
//! acknowledged is lost.
//!
//! Without the fix, node 1 stops at the first failed dir (its session expires and every
//! leadership moves, `a`'s included): the "node 1 keeps running" and "dir a stays led by
//! node 1" checks fail.

mod support;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use kafka_protocol::messages::*;
use support::cluster::*;
use support::*;

use runnel_codes::{KAFKA_STORAGE_ERROR, NONE};

const TOPIC: &str = "dirs";
const PARTITIONS: i32 = 6;

/// A tmpfs mounted by the test; unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).expect("mount point");
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(dir.to_path_buf()))
    }

    /// Writes a file until the filesystem is full.
    fn fill(&self) {
        let mut f = std::fs::File::create(self.0.join("filler")).expect("filler file");
        let chunk = vec![7u8; 1 << 20];
        while f.write_all(&chunk).is_ok() {}
        let _ = f.sync_all();
    }

    fn free(&self) {
        std::fs::remove_file(self.0.join("filler")).expect("filler removed");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// One partition as Metadata v9 shows it: (leader, isr sorted, offline replicas).
type View = (i32, Vec<i32>, Vec<i32>);

/// Every partition of the topic as broker `addr` sees it, by index.
fn partitions(addr: &str) -> Option<BTreeMap<i32, View>> {
    let meta = metadata(addr)?;
    let t = meta
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.0.as_str()) == Some(TOPIC) && t.error_code == 0)?;
    Some(
        t.partitions
            .iter()
            .map(|p| {
                let mut isr: Vec<i32> = p.isr_nodes.iter().map(|b| b.0).collect();
                isr.sort();
                let offline = p.offline_replicas.iter().map(|b| b.0).collect();
                (p.partition_index, (p.leader_id.0, isr, offline))
            })
            .collect(),
    )
}

fn describe_log_dirs(addr: &str) -> DescribeLogDirsResponse {
    Wire::connect(addr).call(
        ApiKey::DescribeLogDirs,
        4,
        &DescribeLogDirsRequest::default().with_topics(None),
    )
}

/// Produces one acks=all batch of `value` to the partition's current leader; true if
/// acknowledged.
fn produce_acked(c: &Cluster, partition: i32, value: &str) -> bool {
    let Some(parts) = partitions(&c.addr(1)) else {
        return false;
    };
    let leader = parts.get(&partition).map_or(-1, |p| p.0);
    if leader < 1 {
        return false;
    }
    let Some(mut wire) = Wire::try_connect(&c.addr(c.index_of(leader))) else {
        return false;
    };
    let b = batch(&[(None, value)], kafka_protocol::records::Compression::None);
    wire.produce(TOPIC, partition, b, -1).0 == NONE
}

/// One acknowledged acks=all record per partition, remembered in `acked`.
fn send(c: &Cluster, round: &str, acked: &mut BTreeMap<i32, Vec<String>>) {
    for p in 0..PARTITIONS {
        let value = format!("{round}-{p}");
        wait_until(&format!("acks=all produce of {value}"), || {
            produce_acked(c, p, &value)
        });
        acked.entry(p).or_default().push(value);
    }
}

#[test]
fn a_failed_log_dir_moves_only_its_own_leaderships_and_the_broker_keeps_serving() {
    if !is_root() {
        eprintln!("log_dir_offline: skipped, mounting a tmpfs needs root");
        return;
    }
    let mut c = Cluster::prepare(
        3,
        &[
            "log.dirs={data_dir}/a,{data_dir}/b",
            "min.insync.replicas=2",
        ],
        &[],
    );
    let dir_b = c.nodes[0].data_dir.join("b");
    let Some(tmpfs) = Tmpfs::mount(&dir_b, "48m") else {
        eprintln!("log_dir_offline: skipped, mount -t tmpfs was refused");
        return;
    };
    c.launch();
    assert_eq!(create(&c.addr(0), TOPIC, PARTITIONS, 3), NONE);
    wait_until("every partition led, full ISR", || {
        partitions(&c.addr(1)).is_some_and(|p| {
            p.len() == PARTITIONS as usize && p.values().all(|(l, isr, _)| *l > 0 && isr.len() == 3)
        })
    });
    let mut acked: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    send(&c, "before", &mut acked);

    // Which of node 1's replicas live in which dir, and which it leads.
    let node1 = &c.nodes[0].data_dir;
    let in_b: Vec<i32> = (0..PARTITIONS)
        .filter(|p| node1.join("b").join(format!("{TOPIC}-{p}")).is_dir())
        .collect();
    let in_a: Vec<i32> = (0..PARTITIONS).filter(|p| !in_b.contains(p)).collect();
    let before = partitions(&c.addr(1)).expect("metadata");
    let led_in =
        |dir: &[i32]| -> Vec<i32> { dir.iter().copied().filter(|p| before[p].0 == 1).collect() };
    let (led_a, led_b) = (led_in(&in_a), led_in(&in_b));
    assert!(
        !led_a.is_empty() && !led_b.is_empty(),
        "node 1 must lead a partition in each dir (a {in_a:?} led {led_a:?}, b {in_b:?} led {led_b:?})"
    );

    // Dir b fills up: the next append to a partition there fails and fails the dir.
    tmpfs.fill();
    let big = "x".repeat(256 * 1024);
    let mut refused = None;
    for _ in 0..20 {
        let mut wire = Wire::connect(&c.addr(0));
        let b = batch(&[(None, &big)], kafka_protocol::records::Compression::None);
        let code = wire.produce(TOPIC, led_b[0], b, -1).0;
        if code != NONE {
            refused = Some(code);
            break;
        }
    }
    assert!(refused.is_some(), "a write to the full dir was refused");
    let failed_at = std::time::Instant::now();

    wait_until(
        "dir b's partitions led elsewhere, node 1 out of their ISR",
        || {
            partitions(&c.addr(1)).is_some_and(|p| {
                in_b.iter().all(|i| {
                    let (leader, isr, offline) = &p[i];
                    *leader > 1 && !isr.contains(&1) && offline.contains(&1)
                })
            })
        },
    );
    eprintln!(
        "log_dir_offline: dir b's leaderships moved {} ms after the refused write",
        failed_at.elapsed().as_millis()
    );
    assert!(
        metadata(&c.addr(0)).is_some(),
        "node 1 keeps running and answers"
    );
    let after = partitions(&c.addr(1)).expect("metadata");
    for p in &led_a {
        let (leader, isr, offline) = &after[p];
        assert_eq!(*leader, 1, "partition {p} in dir a stays led by node 1");
        assert!(
            isr.contains(&1) && offline.is_empty(),
            "{p}: {isr:?} {offline:?}"
        );
    }
    send(&c, "after", &mut acked);

    let dirs = describe_log_dirs(&c.addr(0));
    let code_of = |suffix: &str| {
        dirs.results
            .iter()
            .find(|d| d.log_dir.ends_with(suffix))
            .map(|d| d.error_code)
    };
    assert_eq!(code_of("/b"), Some(KAFKA_STORAGE_ERROR));
    assert_eq!(code_of("/a"), Some(NONE));

    // Space back, restart: node 1 recovers dir b and rejoins every ISR.
    c.kill9(0);
    tmpfs.free();
    let rx = c.spawn(0);
    rx.recv_timeout(DEADLINE).expect("node 1 listening again");
    wait_until("node 1 back in every ISR", || {
        partitions(&c.addr(1)).is_some_and(|p| {
            p.values()
                .all(|(l, isr, offline)| *l > 0 && isr.contains(&1) && offline.is_empty())
        })
    });
    send(&c, "restarted", &mut acked);

    let now = partitions(&c.addr(1)).expect("metadata");
    for (p, values) in &acked {
        let leader = now[p].0;
        let mut wire = Wire::connect(&c.addr(c.index_of(leader)));
        let read = support::values(&wire.fetch_all(TOPIC, *p, 0));
        for v in values {
            assert!(
                read.contains(v),
                "partition {p} lost acknowledged {v}: {read:?}"
            );
        }
    }
}
