//! A seeded fault-injection simulation of a 3-voter quorum.
//!
//! The nodes run the real storage (their own data dirs) and the real openraft, connected by an
//! in-process [`Transport`] that encodes every request and response as on the wire and, driven
//! by a seeded RNG, delays, drops (requests and responses alike), and partitions them. The
//! schedule of crashes (shutdown, then restart from the data dir), partitions, drop rates and
//! proposals comes from the same seed, and everything runs on tokio's paused clock, so a run of
//! many virtual seconds takes little real time. (openraft draws its election jitter from its own
//! unseeded RNG, so two runs of one seed can interleave differently; the seed still fixes the
//! fault schedule, and is printed so a failing schedule can be replayed.)
//!
//! Why not turmoil: openraft runs on the ambient tokio runtime and this crate's transport is a
//! trait, so an in-process transport under tokio's paused clock gives the same virtual time and
//! fault control without a second socket stack (turmoil would need the TCP code made generic
//! over its stream types) — and it keeps the real storage in the loop.
//!
//! Checked throughout: at most one leader per term, and every reader on every node sees the
//! same image at every offset (records never lost, reordered or diverging). At the end, after
//! healing: every acknowledged proposal is in the final image, and all nodes converge.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use runnel_metadata::{ConfigResource, MetadataImage, MetadataRecord};
use runnel_raft::openraft::ServerState;
use runnel_raft::{
    handle_request, BoxFuture, Committed, MetadataQuorum, NodeId, QuorumConfig, Raft, RpcRequest,
    RpcResponse, Transport, TransportError,
};

const VOTERS: [i32; 3] = [1, 2, 3];

/// The simulated network shared by all nodes.
struct SimNet {
    nodes: Mutex<HashMap<NodeId, Raft>>,
    faults: Mutex<Faults>,
}

struct Faults {
    rng: StdRng,
    drop_rate: f64,
    /// Nodes cut off from everyone else (but not from each other).
    isolated: BTreeSet<NodeId>,
}

impl SimNet {
    fn connected(&self, a: NodeId, b: NodeId) -> bool {
        let f = self.faults.lock().unwrap();
        f.isolated.contains(&a) == f.isolated.contains(&b)
    }

    /// Decides the fate of one message: `None` = dropped, else its delay.
    fn fate(&self, from: NodeId, to: NodeId) -> Option<Duration> {
        if !self.connected(from, to) {
            return None;
        }
        let mut f = self.faults.lock().unwrap();
        let drop_rate = f.drop_rate;
        if f.rng.gen_bool(drop_rate) {
            return None;
        }
        Some(Duration::from_micros(f.rng.gen_range(100..3000)))
    }
}

/// One node's view of the network: knows its own id, for partitions.
struct Endpoint {
    net: Arc<SimNet>,
    me: NodeId,
}

fn roundtrip<T: serde::Serialize + serde::de::DeserializeOwned>(msg: &T) -> T {
    let bytes = serde_json::to_vec(msg).expect("encode");
    serde_json::from_slice(&bytes).expect("decode")
}

impl Transport for Endpoint {
    fn call<'a>(
        &'a self,
        target: NodeId,
        _address: &'a str,
        request: RpcRequest,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<RpcResponse, TransportError>> {
        Box::pin(async move {
            let lost = async {
                tokio::time::sleep(timeout).await;
                Err(TransportError::Timeout(timeout))
            };
            let Some(delay) = self.net.fate(self.me, target) else {
                return lost.await;
            };
            tokio::time::sleep(delay).await;
            let Some(raft) = self.net.nodes.lock().unwrap().get(&target).cloned() else {
                return Err(TransportError::Unreachable(
                    std::io::ErrorKind::ConnectionRefused.into(),
                ));
            };
            let request = roundtrip(&request);
            let response =
                match tokio::time::timeout(timeout, handle_request(&raft, "", request)).await {
                    Ok(r) => r,
                    Err(_) => return Err(TransportError::Timeout(timeout)),
                };
            // The response can be lost too, after the request took effect.
            let Some(delay) = self.net.fate(target, self.me) else {
                return lost.await;
            };
            tokio::time::sleep(delay).await;
            Ok(roundtrip(&response))
        })
    }
}

/// What the checkers collected, shared with the watcher tasks.
#[derive(Default)]
struct Observed {
    /// term -> the node(s) that were leader in it.
    leaders: BTreeMap<u64, BTreeSet<NodeId>>,
    /// offset -> the image every reader must have after applying it.
    images: HashMap<i64, MetadataImage>,
    violations: Vec<String>,
}

fn config(id: i32, dir: &std::path::Path) -> QuorumConfig {
    let voters = VOTERS.iter().map(|v| (*v, format!("sim-{v}:1"))).collect();
    QuorumConfig {
        election_timeout_min_ms: 150,
        election_timeout_max_ms: 300,
        heartbeat_interval_ms: 50,
        snapshot_every: 7,
        ..QuorumConfig::new(id, voters, dir.join(format!("node{id}")))
    }
}

struct Sim {
    net: Arc<SimNet>,
    dir: tempfile::TempDir,
    running: BTreeMap<i32, MetadataQuorum>,
    observed: Arc<Mutex<Observed>>,
}

impl Sim {
    async fn start_node(&mut self, id: i32) {
        let transport = Arc::new(Endpoint {
            net: self.net.clone(),
            me: id as NodeId,
        });
        let node =
            MetadataQuorum::start_with_transport(config(id, self.dir.path()), transport, None)
                .await
                .expect("start");
        self.net
            .nodes
            .lock()
            .unwrap()
            .insert(id as NodeId, node.raft().clone());
        // Leader-per-term checker.
        let mut metrics = node.raft().metrics();
        let observed = self.observed.clone();
        tokio::spawn(async move {
            loop {
                {
                    let m = metrics.borrow_and_update().clone();
                    if m.state == ServerState::Leader {
                        let mut o = observed.lock().unwrap();
                        let set = o.leaders.entry(m.current_term).or_default();
                        set.insert(m.id);
                        if set.len() > 1 {
                            let msg = format!("two leaders in term {}: {:?}", m.current_term, set);
                            o.violations.push(msg);
                        }
                    }
                }
                if metrics.changed().await.is_err() {
                    return;
                }
            }
        });
        // Same-image-at-every-offset checker, from this incarnation's first committed record.
        let mut reader = node.committed();
        let observed = self.observed.clone();
        tokio::spawn(async move {
            let mut image = MetadataImage::empty(String::new());
            while let Some(step) = reader.next().await {
                let steps: Vec<MetadataImage> = match step {
                    Committed::Image(i) => vec![(*i).clone()],
                    Committed::Records(records, _) => records
                        .iter()
                        .map(|r| {
                            image = image
                                .apply(std::slice::from_ref(r))
                                .expect("committed records apply");
                            image.clone()
                        })
                        .collect(),
                };
                let mut o = observed.lock().unwrap();
                for img in steps {
                    match o.images.get(&img.offset) {
                        Some(seen) if *seen != img => {
                            let msg = format!("node {id} diverged at offset {}", img.offset);
                            o.violations.push(msg);
                        }
                        Some(_) => {}
                        None => {
                            o.images.insert(img.offset, img.clone());
                        }
                    }
                    image = img;
                }
            }
        });
        self.running.insert(id, node);
    }

    async fn crash(&mut self, id: i32) {
        if let Some(node) = self.running.remove(&id) {
            self.net.nodes.lock().unwrap().remove(&(id as NodeId));
            node.shutdown().await;
        }
    }

    fn leader(&self) -> Option<&MetadataQuorum> {
        self.running.values().find(|n| n.is_leader())
    }
}

fn record(n: u64) -> MetadataRecord {
    MetadataRecord::Config {
        resource: ConfigResource::Broker(String::new()),
        name: format!("k{n:05}"),
        value: Some(n.to_string()),
    }
}

async fn run(seed: u64, steps: usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut sim = Sim {
        net: Arc::new(SimNet {
            nodes: Mutex::new(HashMap::new()),
            faults: Mutex::new(Faults {
                rng: StdRng::seed_from_u64(seed ^ 0x5eed),
                drop_rate: 0.0,
                isolated: BTreeSet::new(),
            }),
        }),
        dir: sim_dir(),
        running: BTreeMap::new(),
        observed: Arc::new(Mutex::new(Observed::default())),
    };
    for id in VOTERS {
        sim.start_node(id).await;
    }
    let mut next_record = 0u64;
    // (first offset, records) of every acknowledged proposal.
    let mut acked: Vec<(i64, Vec<MetadataRecord>)> = Vec::new();
    let mut stats = BTreeMap::<&str, usize>::new();
    for _ in 0..steps {
        let roll = rng.gen_range(0..100);
        let action = match roll {
            0..=39 => {
                // A burst of concurrent batches, so that a leader about to be deposed can hold
                // several uncommitted entries that the next leader must overwrite.
                let batches: Vec<Vec<MetadataRecord>> = (0..rng.gen_range(1..=4))
                    .map(|_| {
                        (0..rng.gen_range(1..=3))
                            .map(|_| {
                                next_record += 1;
                                record(next_record)
                            })
                            .collect()
                    })
                    .collect();
                // Mostly to the leader, sometimes to anyone (must be refused or succeed).
                let target = match sim.leader() {
                    Some(l) if rng.gen_bool(0.8) => Some(l),
                    _ => {
                        let ids: Vec<_> = sim.running.keys().copied().collect();
                        (!ids.is_empty()).then(|| &sim.running[&ids[rng.gen_range(0..ids.len())]])
                    }
                };
                if let Some(node) = target {
                    let results = futures_join(batches.iter().map(|b| {
                        tokio::time::timeout(Duration::from_secs(2), node.propose(b.clone()))
                    }))
                    .await;
                    let mut outcome = "propose-refused";
                    for (result, batch) in results.into_iter().zip(batches) {
                        match result {
                            Ok(Ok(offset)) => {
                                acked.push((offset, batch));
                                outcome = "propose-ok";
                            }
                            Ok(Err(_)) => {}
                            Err(_) => outcome = "propose-timeout",
                        }
                    }
                    outcome
                } else {
                    "propose-no-node"
                }
            }
            40..=49 => {
                let id = VOTERS[rng.gen_range(0..3)];
                sim.crash(id).await;
                "crash"
            }
            50..=61 => {
                let down: Vec<i32> = VOTERS
                    .iter()
                    .copied()
                    .filter(|v| !sim.running.contains_key(v))
                    .collect();
                if down.is_empty() {
                    "restart-none"
                } else {
                    sim.start_node(down[rng.gen_range(0..down.len())]).await;
                    "restart"
                }
            }
            62..=69 => {
                let victim = VOTERS[rng.gen_range(0..3)] as NodeId;
                sim.net.faults.lock().unwrap().isolated = BTreeSet::from([victim]);
                "partition"
            }
            70..=79 => {
                sim.net.faults.lock().unwrap().isolated.clear();
                "heal"
            }
            80..=87 => {
                sim.net.faults.lock().unwrap().drop_rate =
                    [0.0, 0.05, 0.2, 0.5][rng.gen_range(0..4)];
                "drop-rate"
            }
            _ => "idle",
        };
        *stats.entry(action).or_default() += 1;
        tokio::time::sleep(Duration::from_millis(rng.gen_range(10..400))).await;
    }

    // Heal everything and let the cluster converge.
    {
        let mut f = sim.net.faults.lock().unwrap();
        f.isolated.clear();
        f.drop_rate = 0.0;
    }
    for id in VOTERS {
        if !sim.running.contains_key(&id) {
            sim.start_node(id).await;
        }
    }
    let final_offset = loop {
        next_record += 1;
        let attempt = match sim.leader() {
            Some(l) => {
                tokio::time::timeout(Duration::from_secs(2), l.propose(vec![record(next_record)]))
                    .await
            }
            None => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if let Ok(Ok(offset)) = attempt {
            acked.push((offset, vec![record(next_record)]));
            break offset;
        }
    };
    let mut waited = Duration::ZERO;
    while sim
        .running
        .values()
        .any(|n| n.last_committed_offset() != final_offset)
    {
        assert!(
            waited < Duration::from_secs(30),
            "seed {seed}: nodes did not converge"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += Duration::from_millis(50);
    }
    // Let the readers drain.
    tokio::time::sleep(Duration::from_millis(100)).await;

    let images: Vec<_> = sim.running.values().map(|n| n.image()).collect();
    for (i, img) in images.iter().enumerate() {
        assert_eq!(
            **img,
            *images[0],
            "seed {seed}: node {} differs after healing",
            i + 1
        );
    }
    let elections = check_final(seed, &images[0], &acked, &sim.observed.lock().unwrap());
    eprintln!(
        "seed {seed}: {} acked proposals, final offset {final_offset}, {elections} leader terms, actions {stats:?}",
        acked.len()
    );
    assert!(
        elections >= 2,
        "seed {seed}: the schedule never forced a re-election"
    );
    for (_, node) in std::mem::take(&mut sim.running) {
        node.shutdown().await;
    }
}

/// The end-of-run checks; returns the number of terms that had a leader.
fn check_final(
    seed: u64,
    final_image: &MetadataImage,
    acked: &[(i64, Vec<MetadataRecord>)],
    observed: &Observed,
) -> usize {
    assert!(
        observed.violations.is_empty(),
        "seed {seed}: {:?}",
        observed.violations
    );
    let configs = final_image
        .configs
        .get(&ConfigResource::Broker(String::new()))
        .cloned()
        .unwrap_or_default();
    let mut offsets = BTreeSet::new();
    for (offset, batch) in acked {
        for (i, r) in batch.iter().enumerate() {
            let MetadataRecord::Config { name, value, .. } = r else {
                unreachable!()
            };
            assert_eq!(
                configs.get(name),
                value.as_ref(),
                "seed {seed}: acknowledged {name} lost"
            );
            assert!(
                offsets.insert(offset + i as i64),
                "seed {seed}: offset {} acknowledged twice",
                offset + i as i64
            );
            // The acknowledged offset holds exactly this record.
            if let Some(img) = observed.images.get(&(offset + i as i64)) {
                let prev = observed.images.get(&(offset + i as i64 - 1));
                let before = prev.and_then(|p| {
                    p.configs
                        .get(&ConfigResource::Broker(String::new()))
                        .and_then(|c| c.get(name))
                });
                let after = img
                    .configs
                    .get(&ConfigResource::Broker(String::new()))
                    .and_then(|c| c.get(name));
                assert!(
                    before.is_none() && after == value.as_ref(),
                    "seed {seed}: offset {} is not {name}",
                    offset + i as i64
                );
            }
        }
    }
    observed.leaders.len()
}

/// Awaits all futures concurrently on this task (no spawning: they borrow the node).
async fn futures_join<F: std::future::Future>(futs: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut futs: Vec<_> = futs.map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = futs.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, o) in futs.iter_mut().zip(out.iter_mut()) {
            if o.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *o = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().map(|o| o.expect("all ready")).collect()
}

/// Data dirs on tmpfs when there is one: the simulation tests the logic, and fsyncs to a real
/// disk shared with other CI jobs would make its run time unpredictable.
fn sim_dir() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::tempdir_in(shm) {
            return dir;
        }
    }
    tempfile::tempdir().unwrap()
}

fn seeds() -> Vec<u64> {
    match std::env::var("RUNNEL_SIM_SEEDS") {
        Ok(s) => s.split(',').filter_map(|x| x.trim().parse().ok()).collect(),
        Err(_) => (1..=5).collect(),
    }
}

#[tokio::test(start_paused = true)]
async fn seeded_faults_never_break_the_log() {
    let steps = std::env::var("RUNNEL_SIM_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150);
    for seed in seeds() {
        run(seed, steps).await;
    }
}
