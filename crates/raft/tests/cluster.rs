//! A real 3-node quorum in one process over TCP on 127.0.0.1: election, commit, failover,
//! restart from the data dir (with and without snapshot catch-up), observers, full restart.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use runnel_metadata::{ConfigResource, MetadataImage, MetadataRecord};
use runnel_raft::{Committed, MetadataQuorum, QuorumConfig, QuorumError};
use tokio::net::TcpListener;

fn record(n: u64) -> MetadataRecord {
    MetadataRecord::Config {
        resource: ConfigResource::Broker(String::new()),
        name: format!("k{n:04}"),
        value: Some(n.to_string()),
    }
}

fn config(
    id: i32,
    voters: &BTreeMap<i32, String>,
    dir: &Path,
    snapshot_every: u64,
) -> QuorumConfig {
    QuorumConfig {
        election_timeout_min_ms: 150,
        election_timeout_max_ms: 300,
        heartbeat_interval_ms: 50,
        snapshot_every,
        ..QuorumConfig::new(id, voters.clone(), dir.join(format!("node{id}")))
    }
}

struct Cluster {
    voters: BTreeMap<i32, String>,
    dir: tempfile::TempDir,
    nodes: BTreeMap<i32, MetadataQuorum>,
    snapshot_every: u64,
}

impl Cluster {
    async fn start(n: i32, snapshot_every: u64) -> Cluster {
        let mut listeners = BTreeMap::new();
        for id in 1..=n {
            listeners.insert(id, TcpListener::bind("127.0.0.1:0").await.unwrap());
        }
        let voters = listeners
            .iter()
            .map(|(id, l)| (*id, l.local_addr().unwrap().to_string()))
            .collect();
        let mut cluster = Cluster {
            voters,
            dir: tempfile::tempdir().unwrap(),
            nodes: BTreeMap::new(),
            snapshot_every,
        };
        for (id, listener) in listeners {
            let node = MetadataQuorum::start(
                config(id, &cluster.voters, cluster.dir.path(), snapshot_every),
                listener,
            )
            .await
            .unwrap();
            cluster.nodes.insert(id, node);
        }
        cluster
    }

    async fn restart(&mut self, id: i32) {
        let listener = TcpListener::bind(&self.voters[&id]).await.unwrap();
        let node = MetadataQuorum::start(
            config(id, &self.voters, self.dir.path(), self.snapshot_every),
            listener,
        )
        .await
        .unwrap();
        self.nodes.insert(id, node);
    }

    async fn stop(&mut self, id: i32) {
        self.nodes.remove(&id).unwrap().shutdown().await;
    }

    /// Waits until every running node agrees on one leader; returns it.
    async fn leader(&self) -> i32 {
        wait_for("an agreed leader", || {
            let leaders: Vec<_> = self.nodes.values().map(|n| n.leader()).collect();
            match leaders[0] {
                Some(l)
                    if leaders.iter().all(|x| *x == Some(l))
                        && self.nodes.get(&l).is_some_and(|n| n.is_leader()) =>
                {
                    Some(l)
                }
                _ => None,
            }
        })
        .await
    }

    async fn shutdown(self) {
        for (_, n) in self.nodes {
            n.shutdown().await;
        }
    }
}

async fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Everything a fresh reader of `node` sees: the image it rebuilds and the records it got.
async fn read_all(node: &MetadataQuorum, upto: i64) -> (MetadataImage, Vec<(i64, MetadataRecord)>) {
    let mut reader = node.committed();
    let mut image = MetadataImage::empty(String::new());
    let mut records = Vec::new();
    while image.offset < upto {
        match tokio::time::timeout(Duration::from_secs(10), reader.next()).await {
            Ok(Some(Committed::Image(i))) => image = (*i).clone(),
            Ok(Some(Committed::Records(r, _))) => {
                image = image.apply(&r).unwrap();
                records.extend(r);
            }
            other => panic!(
                "node {} stopped at offset {}: {other:?}",
                node.node_id(),
                image.offset
            ),
        }
    }
    (image, records)
}

async fn propose_range(node: &MetadataQuorum, range: std::ops::Range<u64>) -> Vec<i64> {
    let mut offsets = Vec::new();
    for n in range {
        offsets.push(node.propose(vec![record(n)]).await.unwrap());
    }
    offsets
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_elect_commit_fail_over_and_restart() {
    let mut c = Cluster::start(3, 1000).await;
    let leader = c.leader().await;
    let term1 = c.nodes[&leader].term();
    assert!(term1 >= 1);

    // A batch commits atomically with consecutive offsets.
    let first = c.nodes[&leader]
        .propose(vec![record(0), record(1), record(2)])
        .await
        .unwrap();
    assert_eq!(first, 0);
    assert_eq!(
        propose_range(&c.nodes[&leader], 3..10).await,
        (3..10).collect::<Vec<_>>()
    );
    // Followers refuse and point at the leader.
    let follower = *c.nodes.keys().find(|id| **id != leader).unwrap();
    match c.nodes[&follower].propose(vec![record(99)]).await {
        Err(QuorumError::NotLeader { leader: Some(l) }) => assert_eq!(l, leader),
        other => panic!("expected NotLeader, got {other:?}"),
    }
    // Every node sees the same records in the same order.
    let (_, expected) = read_all(&c.nodes[&leader], 9).await;
    assert_eq!(
        expected,
        (0..10).map(|n| (n as i64, record(n))).collect::<Vec<_>>()
    );
    for node in c.nodes.values() {
        assert_eq!(
            read_all(node, 9).await.1,
            expected,
            "node {}",
            node.node_id()
        );
    }
    let status = c.nodes[&leader].status();
    assert_eq!(status.leader_id, Some(leader));
    assert_eq!(status.voters.len(), 3);
    assert_eq!(status.last_record_offset, 9);
    wait_for("followers to catch up in the status", || {
        let s = c.nodes[&leader].status();
        s.voters.iter().all(|v| v.lag == Some(0)).then_some(())
    })
    .await;

    // Garbage on the controller listener closes that connection only.
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(&c.voters[&follower])
            .await
            .unwrap();
        s.write_all(&[0, 0, 0, 5, b'h', b'e', b'l', b'l', b'o'])
            .await
            .unwrap();
        let mut buf = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf)).await;
        assert!(
            matches!(read, Ok(Ok(0)) | Ok(Err(_))),
            "expected the connection to close: {read:?}"
        );
        let mut s = tokio::net::TcpStream::connect(&c.voters[&follower])
            .await
            .unwrap();
        s.write_all(&[0xff, 0xff, 0xff, 0xff]).await.unwrap();
        let read = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf)).await;
        assert!(
            matches!(read, Ok(Ok(0)) | Ok(Err(_))),
            "expected the connection to close: {read:?}"
        );
    }
    assert_eq!(
        c.nodes[&leader].propose(vec![record(10)]).await.unwrap(),
        10
    );
    let expected: Vec<_> = (0..11).map(|n| (n as i64, record(n))).collect();

    // Kill the leader: a new one within a few seconds, with a higher term.
    let started = Instant::now();
    c.stop(leader).await;
    let leader2 = c.leader().await;
    assert_ne!(leader2, leader);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "failover took {:?}",
        started.elapsed()
    );
    assert!(c.nodes[&leader2].term() > term1);
    assert_eq!(
        propose_range(&c.nodes[&leader2], 11..15).await,
        (11..15).collect::<Vec<_>>()
    );
    for node in c.nodes.values() {
        let (_, records) = read_all(node, 14).await;
        assert_eq!(records[..11], expected[..]);
        assert_eq!(records.len(), 15);
    }

    // The old leader restarts from its data dir and catches up.
    c.restart(leader).await;
    let (_, records) = read_all(&c.nodes[&leader], 14).await;
    assert_eq!(records.len(), 15);
    assert_eq!(records[..11], expected[..]);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lagging_node_catches_up_from_a_snapshot_and_observers_follow() {
    let mut c = Cluster::start(3, 5).await;
    let leader = c.leader().await;
    let lagging = *c.nodes.keys().find(|id| **id != leader).unwrap();
    propose_range(&c.nodes[&leader], 0..3).await;
    c.stop(lagging).await;
    // Enough entries for several snapshots; the leader purges its log before each one.
    propose_range(&c.nodes[&leader], 3..40).await;
    wait_for("a purged log on the leader", || {
        let m = c.nodes[&leader].raft().metrics().borrow().clone();
        m.purged.is_some_and(|p| p.index > 10).then_some(())
    })
    .await;
    c.restart(lagging).await;
    let (image, _) = read_all(&c.nodes[&lagging], 39).await;
    assert_eq!(image, *c.nodes[&leader].image());
    let m = c.nodes[&lagging].raft().metrics().borrow().clone();
    assert!(
        m.snapshot.is_some(),
        "the lagging node should have installed a snapshot"
    );
    assert!(c
        .dir
        .path()
        .join(format!("node{lagging}/snapshot.checkpoint"))
        .exists());

    // An observer (not a voter) joins as a learner and follows, including from the snapshot.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let observer = MetadataQuorum::start(config(7, &c.voters, c.dir.path(), 5), listener)
        .await
        .unwrap();
    let (image, _) = read_all(&observer, 39).await;
    assert_eq!(image, *c.nodes[&leader].image());
    assert!(!observer.is_leader());
    assert!(matches!(
        observer.propose(vec![record(1)]).await,
        Err(QuorumError::NotLeader { .. })
    ));
    let status = c.nodes[&leader].status();
    assert_eq!(
        status
            .observers
            .iter()
            .map(|o| o.node_id)
            .collect::<Vec<_>>(),
        vec![7]
    );
    assert_eq!(status.voters.len(), 3);
    propose_range(&c.nodes[&leader], 40..42).await;
    // (The observer may have jumped there through a snapshot: compare images, not records.)
    let (image, _) = read_all(&observer, 41).await;
    assert_eq!(image.offset, 41);
    assert_eq!(image, *c.nodes[&leader].image());
    observer.shutdown().await;

    // A full restart keeps everything.
    let before = c.nodes[&leader].image();
    for id in 1..=3 {
        c.stop(id).await;
    }
    for id in 1..=3 {
        c.restart(id).await;
    }
    let leader = c.leader().await;
    let (image, _) = read_all(&c.nodes[&leader], 41).await;
    assert_eq!(image, *before);
    assert_eq!(
        c.nodes[&leader].propose(vec![record(42)]).await.unwrap(),
        42
    );
    c.shutdown().await;
}
