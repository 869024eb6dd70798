//! Online migration between the classic protocol and KIP-848 (`runnel_group::migration`):
//! both coordinators of one partition driven as the broker drives them, with simulated
//! classic and KIP-848 consumers (one test binary).

mod clients;
mod properties;
mod scenarios;
mod world;

use std::collections::BTreeSet;

use clients::{ClassicClient, KipClient, Tp};
use world::World;

/// The live clients of a test.
#[derive(Default)]
pub struct Fleet {
    pub classic: Vec<ClassicClient>,
    pub kip: Vec<KipClient>,
}

impl Fleet {
    /// Every client polls once, then time moves on by `ms` (timers run); after each poll no
    /// partition is consumed by two clients.
    pub fn step(&mut self, w: &mut World, ms: i64) {
        for i in 0..self.classic.len() {
            self.classic[i].poll(w);
            self.check_exclusive(w);
        }
        for i in 0..self.kip.len() {
            self.kip[i].poll(w);
            self.check_exclusive(w);
        }
        w.tick(ms);
        self.check_exclusive(w);
    }

    pub fn run(&mut self, w: &mut World, steps: usize) {
        for _ in 0..steps {
            self.step(w, 100);
        }
    }

    /// Who consumes what: (client, partitions).
    pub fn owners(&self, w: &World) -> Vec<(String, BTreeSet<Tp>)> {
        let mut out: Vec<(String, BTreeSet<Tp>)> = self
            .classic
            .iter()
            .map(|c| (c.client_id.clone(), c.owned.clone()))
            .collect();
        out.extend(
            self.kip
                .iter()
                .map(|k| (k.member_id.clone(), k.owned_tps(w))),
        );
        out
    }

    pub fn check_exclusive(&self, w: &World) {
        let mut seen: std::collections::BTreeMap<Tp, String> = Default::default();
        for (who, tps) in self.owners(w) {
            for tp in tps {
                if let Some(other) = seen.insert(tp.clone(), who.clone()) {
                    panic!("{tp:?} consumed by {other} and {who}");
                }
            }
        }
    }

    /// Every partition of `topic` consumed by exactly one client.
    pub fn covers(&self, w: &World, topic: &str) -> bool {
        let all: BTreeSet<Tp> = (0..w.partitions(topic))
            .map(|p| (topic.to_string(), p))
            .collect();
        let owned: BTreeSet<Tp> = self
            .owners(w)
            .into_iter()
            .flat_map(|(_, tps)| tps)
            .filter(|(t, _)| t == topic)
            .collect();
        owned == all
    }

    pub fn owned_by(&self, w: &World, who: &str) -> usize {
        self.owners(w)
            .into_iter()
            .find(|(id, _)| id == who)
            .map_or(0, |(_, tps)| tps.len())
    }
}
