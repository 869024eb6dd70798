//! Applies the nemesis schedule to the cluster and the proxies, on its own thread, and keeps
//! the history's nemesis and topology events. Every fault heals at its end; nodes that exited
//! on their own (a full disk stops a node whose Raft log append fails) are restarted then.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::cluster::Cluster;
use crate::history::{Event, Recorder};
use crate::nemesis::{cut_pairs, majority_connected, Fault, Split, Step};

pub struct Executor {
    pub cluster: Arc<Mutex<Cluster>>,
    pub rec: Recorder,
    pub nodes: i32,
    /// Nodes `1..=voters` are controllers (the quorum's voters), the rest broker-only.
    pub voters: i32,
    pub runtime: tokio::runtime::Handle,
    pub bootstrap: String,
    /// Where each node's data filesystem is (the disk nemesis fills it).
    pub disk: bool,
}

impl Executor {
    fn cluster(&self) -> std::sync::MutexGuard<'_, Cluster> {
        self.cluster.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn topology(&self, down: &BTreeSet<i32>, cut: &BTreeSet<(i32, i32)>) {
        self.rec.record(Event::Topology {
            t: self.rec.now(),
            majority_connected: majority_connected(self.nodes, self.voters, down, cut),
        });
    }

    fn active_controller(&self) -> i32 {
        let bootstrap = self.bootstrap.clone();
        self.runtime
            .block_on(async move {
                let client = crate::workload::client(&bootstrap).await.ok()?;
                let q = tokio::time::timeout(
                    Duration::from_secs(5),
                    runnel_client::Admin::new(client).describe_metadata_quorum(),
                )
                .await
                .ok()?
                .ok()?;
                Some(q.leader_id)
            })
            .filter(|id| *id > 0)
            .unwrap_or(1)
    }

    fn sleep_until(&self, t_ms: u64) {
        loop {
            let now = self.rec.now();
            if now >= t_ms {
                return;
            }
            std::thread::sleep(Duration::from_millis((t_ms - now).min(200)));
        }
    }

    /// Runs every step in order; returns when the last one healed.
    pub fn run(&self, steps: &[Step]) {
        for step in steps {
            self.sleep_until(step.start_ms);
            let (name, down, cut) = self.start(&step.fault);
            self.rec.info(format!("nemesis start: {name}"));
            self.rec.record(Event::Nemesis {
                t: self.rec.now(),
                phase: "start".into(),
                fault: name.clone(),
            });
            self.topology(&down, &cut);
            self.sleep_until(step.end_ms);
            self.heal(&step.fault);
            self.rec.record(Event::Nemesis {
                t: self.rec.now(),
                phase: "stop".into(),
                fault: name.clone(),
            });
            self.rec.info(format!("nemesis healed: {name}"));
            self.topology(&BTreeSet::new(), &BTreeSet::new());
        }
    }

    fn start(&self, fault: &Fault) -> (String, BTreeSet<i32>, BTreeSet<(i32, i32)>) {
        let mut down = BTreeSet::new();
        let mut cut = BTreeSet::new();
        let mut name = fault.name();
        match fault {
            Fault::Partition(split) => {
                let controller = match split {
                    Split::ControllerAlone => self.active_controller(),
                    _ => 0,
                };
                if controller > 0 {
                    name = format!("{name} (node {controller})");
                }
                cut = cut_pairs(split, self.nodes, controller);
                let c = self.cluster();
                for (a, b) in &cut {
                    c.net.cut_pair(*a, *b);
                }
            }
            Fault::Kill(n) => {
                self.cluster().kill9(*n);
                down.insert(*n);
            }
            Fault::Pause(n) => {
                self.cluster().pause(*n);
                down.insert(*n);
            }
            Fault::Disk(n) => {
                if self.disk {
                    let dir = self.cluster().nodes[(*n - 1) as usize].data_dir.clone();
                    let bytes = crate::disk::fill(&dir);
                    name = format!("{name} ({} KiB filler)", bytes / 1024);
                }
            }
            Fault::Term(n) => {
                let clean = self.cluster().terminate(*n, Duration::from_secs(30));
                if !clean {
                    self.rec
                        .info(format!("node {n} did not stop within 30 s of SIGTERM"));
                }
                down.insert(*n);
            }
            Fault::Latency { node, ms } => {
                let c = self.cluster();
                for src in 0..=self.nodes {
                    for l in crate::proxy::LISTENERS {
                        if src != *node {
                            c.net.update((src, *node, l), |s| s.latency_ms = *ms);
                        }
                    }
                }
            }
        }
        (name, down, cut)
    }

    fn heal(&self, fault: &Fault) {
        match fault {
            Fault::Partition(_) | Fault::Latency { .. } => self.cluster().net.heal(),
            Fault::Pause(n) => self.cluster().resume(*n),
            Fault::Disk(n) => {
                if self.disk {
                    let dir = self.cluster().nodes[(*n - 1) as usize].data_dir.clone();
                    crate::disk::free(&dir);
                }
            }
            Fault::Kill(_) | Fault::Term(_) => {}
        }
        self.restart_dead();
    }

    /// Starts every node whose process is not running (killed, or exited on its own): all
    /// spawned first, then awaited, since a node waits for a quorum before it listens.
    pub fn restart_dead(&self) {
        let mut waits = Vec::new();
        {
            let mut c = self.cluster();
            for id in 1..=self.nodes {
                if c.running(id) {
                    continue;
                }
                if c.pid(id).is_some() {
                    self.rec
                        .info(format!("node {id} exited on its own; restarting it"));
                }
                c.kill9(id);
                match c.spawn(id) {
                    Ok(rx) => waits.push((id, rx)),
                    Err(e) => self.rec.info(format!("node {id} failed to restart: {e}")),
                }
            }
        }
        for (id, rx) in waits {
            if rx.recv_timeout(Duration::from_secs(90)).is_err() {
                self.rec.info(format!(
                    "LIVENESS: node {id} did not listen within 90 s of its restart"
                ));
            }
        }
    }

    /// Heals everything at once (the end of a run, or an aborted one).
    pub fn heal_all(&self) {
        let mut c = self.cluster();
        c.net.heal();
        let ids: Vec<i32> = (1..=self.nodes).collect();
        for id in &ids {
            if c.nodes[(*id - 1) as usize].paused {
                c.resume(*id);
            }
            if self.disk {
                crate::disk::free(&c.nodes[(*id - 1) as usize].data_dir);
            }
        }
        drop(c);
        self.restart_dead();
    }
}
