//! The invariants, checked after every tick and at the end of a run.
//!
//! `committed` is the history no one may lose: whenever a broker acting as leader has an HW,
//! its records below it are committed, and must equal what every other leader ever exposed
//! at those offsets. Each broker's `verified` counts how much of its log is known to match,
//! so the checks stay incremental (appends never change a verified prefix; truncation lowers
//! it).

use std::collections::HashMap;

use super::broker::Role;
use super::world::{World, BROKERS};

macro_rules! ensure {
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            return Err(format!($($arg)+));
        }
    };
}

impl World {
    /// Extends broker `i`'s verified prefix to `upto` (`<=` committed and log lengths).
    fn verify_prefix(&mut self, i: usize, upto: usize, why: &str) -> Result<(), String> {
        let b = &mut self.brokers[i];
        while b.verified < upto {
            let o = b.verified;
            ensure!(
                b.log[o] == self.committed[o],
                "{why}: broker {} has {:?} at offset {o} but the committed record is {:?}",
                b.id,
                b.log[o],
                self.committed[o]
            );
            b.verified += 1;
        }
        Ok(())
    }

    /// A leader's HW commits its records below it (invariant 2 for the history, 4 for the
    /// HW). Called whenever a leader's state may have changed (from `complete_parked`) and
    /// after every tick, so no HW goes unseen even if leadership moves in the same tick.
    pub fn observe_leader(&mut self, i: usize) -> Result<(), String> {
        let b = &self.brokers[i];
        let Role::Leader(c) = &b.role else {
            return Ok(());
        };
        if !b.alive {
            return Ok(());
        }
        let (id, inc, epoch) = (b.id, b.incarnation, c.ls.leader_epoch());
        let hw = c.ls.high_watermark();
        ensure!(
            hw <= b.leo(),
            "leader {id} has HW {hw} above its LEO {}",
            b.leo()
        );
        match self.epoch_leaders.get_mut(&epoch) {
            Some((lid, linc, last)) => {
                ensure!(
                    (*lid, *linc) == (id, inc),
                    "invariant 4: two leaders in epoch {epoch}: broker {lid} (incarnation {linc}) and broker {id} (incarnation {inc})"
                );
                ensure!(
                    hw >= *last,
                    "invariant 4: leader {id}'s HW went back from {last} to {hw} in epoch {epoch}"
                );
                *last = hw;
            }
            None => {
                self.epoch_leaders.insert(epoch, (id, inc, hw));
            }
        }
        let hw = hw as usize;
        let known = hw.min(self.committed.len());
        self.verify_prefix(i, known, "invariant 2 (committed records differ)")?;
        if hw > self.committed.len() {
            let b = &mut self.brokers[i];
            let start = self.committed.len();
            self.committed.extend_from_slice(&b.log[start..hw]);
            b.verified = hw;
        }
        Ok(())
    }

    pub fn check(&mut self) -> Result<(), String> {
        for i in 0..self.brokers.len() {
            self.observe_leader(i)?;
        }
        // Every live broker's HW (a follower takes it from its leader) covers committed records.
        for i in 0..self.brokers.len() {
            let b = &self.brokers[i];
            if !b.alive {
                continue;
            }
            let hw = b.hw.min(b.leo()) as usize;
            ensure!(
                hw <= self.committed.len(),
                "broker {} has HW {hw} beyond the committed records ({})",
                b.id,
                self.committed.len()
            );
            self.verify_prefix(
                i,
                hw,
                "invariant 2 (a broker's log below its HW differs from the committed records)",
            )?;
        }
        // Invariant 2: members of the controller's ISR (electable) hold every committed record.
        let isr = self.ctl.partition().isr.clone();
        for r in isr {
            let i = r as usize - 1;
            let b = &self.brokers[i];
            ensure!(
                b.log.len() >= self.committed.len(),
                "invariant 2: ISR member {r} has LEO {} below the committed offset {}",
                b.log.len(),
                self.committed.len()
            );
            let upto = self.committed.len();
            self.verify_prefix(i, upto, "invariant 2 (ISR member diverges below the HW)")?;
        }
        // Invariant 1 (as it happens): every acknowledged record is committed where acked.
        while self.producer.checked < self.producer.acked.len() {
            let (offset, payload) = self.producer.acked[self.producer.checked];
            let committed = self.committed.get(offset as usize).map(|r| r.payload);
            ensure!(
                committed == Some(payload),
                "invariant 1: payload {payload} was acknowledged at offset {offset}, but the committed record there is {committed:?}"
            );
            self.producer.checked += 1;
        }
        Ok(())
    }

    /// After healing: one leader with everyone in sync, equal logs, HW at the end, nothing
    /// pending.
    pub fn converged(&self) -> bool {
        let p = self.ctl.partition();
        if p.leader == -1 || p.isr.len() != BROKERS.len() || self.producer.inflight.is_some() {
            return false;
        }
        if self.ctl.pipeline.in_flight() > 0 || !self.ctl.quorum.pending.is_empty() {
            return false;
        }
        let l = &self.brokers[p.leader as usize - 1];
        let Role::Leader(c) = &l.role else {
            return false;
        };
        if c.ls.leader_epoch() != p.leader_epoch
            || c.ls.isr().len() != BROKERS.len()
            || c.ls.pending_isr().is_some()
            || c.ls.high_watermark() != l.leo()
            || !c.parked.is_empty()
        {
            return false;
        }
        self.brokers.iter().all(|b| {
            b.alive
                && b.log.len() == l.log.len()
                && b.hw == l.leo()
                && self.ctl.image.brokers[&b.id].is_active()
        })
    }

    /// The end of a run (after `converged`): invariants 1, 2 and 3 on the final logs.
    pub fn final_checks(&mut self) -> Result<(), String> {
        let leader = self.ctl.partition().leader;
        let log = self.brokers[leader as usize - 1].log.clone();
        self.stats.final_log_len = log.len() as u64;
        // Invariant 2: all (in-sync) logs identical.
        for b in &self.brokers {
            ensure!(
                b.log == log,
                "invariant 2: broker {}'s final log differs from leader {leader}'s",
                b.id
            );
        }
        ensure!(
            log.len() >= self.committed.len() && log[..self.committed.len()] == self.committed[..],
            "the final log does not start with the committed records"
        );
        // Invariant 1: every acknowledged payload, at its offset, once, in order.
        let mut where_is: HashMap<u64, usize> = HashMap::new();
        for (o, r) in log.iter().enumerate() {
            if let Some(prev) = where_is.insert(r.payload, o) {
                return Err(format!(
                    "invariant 1: payload {} appears twice in the final log (offsets {prev} and {o})",
                    r.payload
                ));
            }
        }
        let mut last = -1i64;
        for &(offset, payload) in &self.producer.acked {
            let at = where_is.get(&payload).map(|&o| o as i64);
            ensure!(
                at == Some(offset),
                "invariant 1: acknowledged payload {payload} (offset {offset}) is at {at:?} in the final log of leader {leader}"
            );
            ensure!(
                offset > last,
                "invariant 1: acknowledged records out of order ({offset} after {last})"
            );
            last = offset;
        }
        // Invariant 3: nothing a consumer read was lost.
        for (&offset, &payload) in &self.consumer.reads {
            let r = log.get(offset as usize).map(|r| r.payload);
            ensure!(
                r == Some(payload),
                "invariant 3: the consumer read payload {payload} at offset {offset}; the final log has {r:?}"
            );
        }
        Ok(())
    }
}
