//! The clients: one producer (acks=all, one request in flight, each attempt with fresh
//! payloads, so an acknowledged payload must appear exactly once) and one consumer that reads
//! below the HW of whichever broker acts as leader (a deposed leader too, if it still thinks
//! it leads) and remembers every record it saw.

use std::collections::BTreeMap;

use super::broker::Role;
use super::net::{Msg, CLIENT};
use super::world::{Ev, Mutation, World};

#[derive(Default)]
pub struct Producer {
    pub next_payload: u64,
    /// The leader from the last metadata refresh (-1: none known).
    pub leader: i32,
    pub inflight: Option<Inflight>,
    /// Acknowledged records in acknowledgement order: (offset, payload).
    pub acked: Vec<(i64, u64)>,
    pub checked: usize,
}

pub struct Inflight {
    pub id: u64,
    pub payloads: Vec<u64>,
    pub deadline: u64,
}

#[derive(Default)]
pub struct Consumer {
    pub position: i64,
    /// Every record ever read: offset -> payload.
    pub reads: BTreeMap<i64, u64>,
}

impl World {
    pub fn producer_tick(&mut self) {
        if let Some(f) = &self.producer.inflight {
            if self.tick < f.deadline {
                return;
            }
            // Timed out: the outcome is unknown, so nothing is acknowledged.
            self.producer.inflight = None;
            self.producer.leader = -1;
        }
        if self.settling || !self.rng.chance(self.p.produce_per_10k) {
            return;
        }
        if self.producer.leader == -1 || self.rng.chance(500) {
            self.producer.leader = self.ctl.partition().leader;
        }
        if self.producer.leader == -1 {
            return;
        }
        let n = self.rng.range(1, 3);
        let payloads: Vec<u64> = (0..n)
            .map(|_| {
                self.producer.next_payload += 1;
                self.producer.next_payload
            })
            .collect();
        let id = self.id();
        self.producer.inflight = Some(Inflight {
            id,
            payloads: payloads.clone(),
            deadline: self.tick + super::broker::PRODUCE_TIMEOUT + 20,
        });
        self.stats.produce_attempts += 1;
        let to = self.producer.leader as usize;
        self.send(CLIENT, to, Msg::Produce { id, payloads });
    }

    pub fn client_on_msg(&mut self, _from: usize, msg: Msg) {
        let Msg::ProduceResp { id, result } = msg else {
            return;
        };
        let Some(f) = &self.producer.inflight else {
            return;
        };
        if f.id != id {
            return;
        }
        let f = self.producer.inflight.take().expect("in flight");
        match result {
            Ok(base) => {
                self.stats.acked += f.payloads.len() as u64;
                for (k, payload) in f.payloads.into_iter().enumerate() {
                    self.producer.acked.push((base + k as i64, payload));
                }
            }
            Err(code) => {
                *self.stats.produce_errors.entry(code).or_default() += 1;
                self.producer.leader = -1;
                self.ev(Ev::ProduceFailed { code });
            }
        }
    }

    /// Reads a few records below the HW of a broker that acts as leader.
    pub fn consumer_tick(&mut self) {
        if !self.rng.chance(3_000) {
            return;
        }
        if self.rng.chance(100) {
            // Rewind: reading again must give the same records.
            self.consumer.position = self.rng.below(self.consumer.position as u64 + 1) as i64;
        }
        let target = if self.rng.chance(8_000) {
            self.ctl.partition().leader
        } else {
            self.rng.range(1, 3) as i32
        };
        if target < 1 || self.net.is_cut(CLIENT, target as usize) {
            return;
        }
        let b = &self.brokers[target as usize - 1];
        if !b.alive {
            return;
        }
        let Role::Leader(c) = &b.role else { return };
        let visible = if self.p.mutation == Some(Mutation::ConsumerReadsLeo) {
            b.leo()
        } else {
            c.ls.high_watermark()
        };
        let from = self.consumer.position;
        let to = visible.min(from + 10);
        for offset in from..to {
            let rec = b.log[offset as usize];
            self.stats.consumer_reads += 1;
            if let Some(&seen) = self.consumer.reads.get(&offset) {
                if seen != rec.payload {
                    let msg = format!(
                        "invariant 3: the consumer read payload {} at offset {offset} from broker {}, earlier {seen}",
                        rec.payload, b.id
                    );
                    self.fail(msg);
                    return;
                }
            }
            // Below an HW checked this tick, so it must be a committed record.
            if self.committed.get(offset as usize) != Some(&rec) {
                let msg = format!(
                    "invariant 3: the consumer read {rec:?} at offset {offset} below broker {}'s HW {visible}, but the committed record there is {:?}",
                    b.id,
                    self.committed.get(offset as usize)
                );
                self.fail(msg);
                return;
            }
            self.consumer.reads.insert(offset, rec.payload);
        }
        self.consumer.position = self.consumer.position.max(to);
    }
}
