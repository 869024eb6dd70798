//! The simulated cluster, its clock and its faults, and one seed's run.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::broker::{Broker, Role};
use super::client::{Consumer, Producer};
use super::controller::Controller;
use super::net::{Cut, Envelope, Msg, Net, Rec, CLIENT, CONTROLLER, NODES};
use super::rng::Rng;

pub const TOPIC: &str = "sim";
pub const BROKERS: [i32; 3] = [1, 2, 3];
pub const MIN_INSYNC: i32 = 2;
/// One tick of the logical clock, in the milliseconds the pure code sees.
pub const TICK_MS: i64 = 10;
/// The pure code's clock starts here (epoch milliseconds are large; `FollowerState` uses 0 as
/// "never caught up").
pub const T0_MS: i64 = 1_700_000_000_000;

/// A deliberate bug, to prove the checks can fail (tests `sim_catches_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    /// The leader answers acks=all as soon as the batch is in its own log (acks=1).
    AckAtLeo,
    /// The controller may elect an out-of-sync replica.
    UncleanElection,
    /// The same, with invariant 5 not checked: the data invariants must notice the loss.
    UncleanElectionUnchecked,
    /// A leader rebuilds its state from its checkpointed HW when the ISR changes.
    LeaderForgetsHw,
    /// Followers never truncate (no LastFetchedEpoch, no OffsetForLeaderEpoch).
    SkipTruncation,
    /// The consumer reads up to the leader's LEO instead of its HW.
    ConsumerReadsLeo,
    /// The controller answers an operation that changed nothing at once, even while batches
    /// it read are in flight (the shell's behaviour before it parked such answers too).
    AnswerReadOnlyAtOnce,
    /// The controller decides on the committed image instead of the speculative one.
    DecideOnCommitted,
}

/// One seed's knobs, all drawn from the seed.
#[derive(Debug, Clone)]
pub struct Params {
    pub seed: u64,
    pub steps: u64,
    pub settle_max: u64,
    pub lag_ms: i64,
    pub session_ticks: u64,
    pub heartbeat_ticks: u64,
    pub drop_per_10k: u64,
    pub max_delay: u64,
    pub metadata_delay: u64,
    pub broadcast_every: u64,
    pub alter_retry: u64,
    pub crash_per_10k: u64,
    /// Chance per tick that a broker starts a controlled shutdown (then stops and restarts).
    pub shutdown_per_10k: u64,
    /// Every this many ticks the controller runs the preferred election (0: never).
    pub rebalance_every: u64,
    pub cut_per_10k: u64,
    pub produce_per_10k: u64,
    /// Fetch v12+ DivergingEpoch (true) or OffsetForLeaderEpoch before fetching (false).
    pub via_fetch: bool,
    pub assignment: Vec<i32>,
    pub mutation: Option<Mutation>,
    /// The metadata quorum (`quorum.rs`): a batch commits 1..=this many ticks after its
    /// append (never before an earlier one), so several are in flight.
    pub quorum_delay: u64,
    /// Chance per appended batch that its append fails (it and what follows never commit).
    pub append_fail_per_10k: u64,
    /// Chance per tick that the controller loses the quorum's leadership mid-pipeline.
    pub leader_loss_per_10k: u64,
    /// An election after a leadership loss takes up to this many ticks.
    pub election_ticks: u64,
    /// Chance per tick that the quorum stalls (nothing commits for 20-150 ticks).
    pub stall_per_10k: u64,
    /// An answer whose records did not commit within this many ticks is REQUEST_TIMED_OUT.
    pub commit_timeout_ticks: u64,
}

impl Params {
    pub fn draw(seed: u64, steps: u64, mutation: Option<Mutation>) -> Params {
        let mut r = Rng::new(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0xA5A5);
        let mut assignment = BROKERS.to_vec();
        for i in (1..assignment.len()).rev() {
            let j = r.below(i as u64 + 1) as usize;
            assignment.swap(i, j);
        }
        Params {
            seed,
            steps,
            settle_max: 4_000,
            lag_ms: r.pick(&[100, 200, 400, 800]),
            session_ticks: r.pick(&[15, 30, 60, 120]),
            heartbeat_ticks: 5,
            drop_per_10k: r.pick(&[0, 50, 200, 500, 1_000]),
            max_delay: r.pick(&[1, 3, 6]),
            metadata_delay: r.pick(&[0, 10, 40]),
            broadcast_every: r.pick(&[10, 25, 60]),
            alter_retry: r.pick(&[10, 40]),
            crash_per_10k: r.pick(&[5, 15, 30]),
            shutdown_per_10k: r.pick(&[0, 5, 15]),
            rebalance_every: r.pick(&[0, 100, 300]),
            cut_per_10k: r.pick(&[5, 20, 50]),
            produce_per_10k: r.pick(&[2_000, 5_000, 9_000]),
            via_fetch: r.below(2) == 0,
            assignment,
            mutation,
            // Drawn last, so the knobs above stay what they were for every seed.
            quorum_delay: r.pick(&[1, 3, 8]),
            append_fail_per_10k: r.pick(&[0, 30, 150]),
            leader_loss_per_10k: r.pick(&[0, 5, 20]),
            election_ticks: r.pick(&[5, 20, 60]),
            stall_per_10k: r.pick(&[0, 5, 15]),
            commit_timeout_ticks: r.pick(&[60, 300]),
        }
    }
}

/// What the trace remembers (formatted only when a seed fails, so fields are read by `Debug`
/// alone).
#[allow(dead_code)]
#[derive(Debug, Clone)]
pub enum Ev {
    Crash(i32),
    Restart(i32),
    CutLinks(Vec<(usize, usize)>, u64),
    Heal(Vec<(usize, usize)>),
    Registered {
        broker: i32,
        offset: i64,
    },
    Fenced(i32),
    Unfenced(i32),
    Elected {
        leader: i32,
        leader_epoch: i32,
        isr: Vec<i32>,
        how: &'static str,
    },
    ShutdownStarted(i32),
    ShutdownDone(i32),
    Leaderless {
        isr: Vec<i32>,
    },
    IsrCommitted {
        isr: Vec<i32>,
        partition_epoch: i32,
    },
    AlterRejected {
        broker: i32,
        new_isr: Vec<i32>,
        code: i16,
    },
    BecomeLeader {
        broker: i32,
        epoch: i32,
        leo: i64,
        hw: i64,
        isr: Vec<i32>,
    },
    BecomeFollower {
        broker: i32,
        leader: i32,
        epoch: i32,
        leo: i64,
    },
    Resign {
        broker: i32,
    },
    Proposed {
        broker: i32,
        isr: Vec<i32>,
        partition_epoch: i32,
    },
    AppliedIsr {
        broker: i32,
        isr: Vec<i32>,
        partition_epoch: i32,
        pending_before: Option<Vec<i32>>,
        pending_after: Option<Vec<i32>>,
        via: &'static str,
    },
    AlterFailed {
        broker: i32,
        code: i16,
        still_pending: bool,
    },
    Truncated {
        broker: i32,
        from: i64,
        to: i64,
    },
    Appended {
        broker: i32,
        base: i64,
        payloads: Vec<u64>,
    },
    Acked {
        broker: i32,
        epoch: i32,
        base: i64,
        payloads: Vec<u64>,
    },
    ProduceFailed {
        code: i16,
    },
    HwAdvanced {
        broker: i32,
        epoch: i32,
        hw: i64,
    },
    Settling,
    /// The controller decides again, in this quorum term.
    Activated {
        term: u64,
    },
    /// The quorum failed the append of the batch at `first` (and dropped what followed).
    AppendFailed {
        first: i64,
    },
    /// The controller lost the quorum's leadership with batches in flight: `kept` of them
    /// commit after the election, `dropped` never.
    LeadershipLost {
        kept: usize,
        dropped: usize,
        election: u64,
    },
    QuorumStalled {
        until: u64,
    },
}

pub struct Trace {
    events: VecDeque<(u64, Ev)>,
}

impl Trace {
    const KEEP: usize = 120;

    pub fn push(&mut self, tick: u64, ev: Ev) {
        if self.events.len() == Self::KEEP {
            self.events.pop_front();
        }
        self.events.push_back((tick, ev));
    }
}

#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub seeds: u64,
    pub ticks: u64,
    pub acked: u64,
    pub produce_attempts: u64,
    pub produce_errors: BTreeMap<i16, u64>,
    pub zombie_acks: u64,
    pub consumer_reads: u64,
    pub crashes: u64,
    pub cuts: u64,
    pub elections: u64,
    pub preferred_elections: u64,
    pub controlled_shutdowns: u64,
    pub leaderless: u64,
    pub fenced: u64,
    /// Registrations the controller refused (a previous process's session was alive).
    pub registrations_refused: u64,
    pub shrinks_committed: u64,
    pub expands_committed: u64,
    pub alter_rejected: BTreeMap<i16, u64>,
    /// `truncation_point` calls, and those that needed another round (KIP-279).
    pub truncation_rounds: u64,
    pub incomplete_truncation_rounds: u64,
    pub truncations: u64,
    pub truncated_records: u64,
    pub diverging_replies: u64,
    pub messages: u64,
    pub dropped: u64,
    pub final_log_len: u64,
    // The controller's pipeline and the quorum.
    pub batches_appended: u64,
    pub batches_committed: u64,
    /// In-flight batches dropped by a leadership loss.
    pub batches_reverted: u64,
    /// Most batches in flight at once.
    pub max_in_flight: u64,
    pub append_failures: u64,
    pub leader_losses: u64,
    /// Re-activations (a fresh pure controller and sessions) after a revert or a new term.
    pub activations: u64,
    pub answers_released: u64,
    /// Answers failed NOT_CONTROLLER by a revert, and REQUEST_TIMED_OUT by a stall.
    pub answers_failed: u64,
    pub answers_timed_out: u64,
}

impl Stats {
    pub fn add(&mut self, o: &Stats) {
        self.seeds += o.seeds;
        self.ticks += o.ticks;
        self.acked += o.acked;
        self.produce_attempts += o.produce_attempts;
        for (k, v) in &o.produce_errors {
            *self.produce_errors.entry(*k).or_default() += v;
        }
        self.zombie_acks += o.zombie_acks;
        self.consumer_reads += o.consumer_reads;
        self.crashes += o.crashes;
        self.cuts += o.cuts;
        self.elections += o.elections;
        self.preferred_elections += o.preferred_elections;
        self.controlled_shutdowns += o.controlled_shutdowns;
        self.leaderless += o.leaderless;
        self.fenced += o.fenced;
        self.registrations_refused += o.registrations_refused;
        self.shrinks_committed += o.shrinks_committed;
        self.expands_committed += o.expands_committed;
        for (k, v) in &o.alter_rejected {
            *self.alter_rejected.entry(*k).or_default() += v;
        }
        self.truncation_rounds += o.truncation_rounds;
        self.incomplete_truncation_rounds += o.incomplete_truncation_rounds;
        self.truncations += o.truncations;
        self.truncated_records += o.truncated_records;
        self.diverging_replies += o.diverging_replies;
        self.messages += o.messages;
        self.dropped += o.dropped;
        self.final_log_len += o.final_log_len;
        self.batches_appended += o.batches_appended;
        self.batches_committed += o.batches_committed;
        self.batches_reverted += o.batches_reverted;
        self.max_in_flight = self.max_in_flight.max(o.max_in_flight);
        self.append_failures += o.append_failures;
        self.leader_losses += o.leader_losses;
        self.activations += o.activations;
        self.answers_released += o.answers_released;
        self.answers_failed += o.answers_failed;
        self.answers_timed_out += o.answers_timed_out;
    }
}

pub struct World {
    pub p: Params,
    pub rng: Rng,
    pub tick: u64,
    pub net: Net,
    /// Index `i` is broker `i + 1` (= its node).
    pub brokers: Vec<Broker>,
    pub ctl: Controller,
    pub producer: Producer,
    pub consumer: Consumer,
    /// Every record that was ever below some leader's HW, by offset: what no one may lose.
    pub committed: Vec<Rec>,
    /// Leader epoch -> (broker, incarnation, highest HW seen in that epoch).
    pub epoch_leaders: BTreeMap<i32, (i32, u64, i64)>,
    pub outbox: Vec<(usize, usize, Msg)>,
    pub trace: Trace,
    pub stats: Stats,
    pub violation: Option<String>,
    pub next_id: u64,
    pub settling: bool,
}

impl World {
    pub fn new(p: Params) -> World {
        let rng = Rng::new(p.seed);
        let net = Net::new(p.drop_per_10k, p.max_delay, p.metadata_delay);
        let ctl = Controller::new(&p, T0_MS);
        let mut w = World {
            rng,
            tick: 0,
            net,
            brokers: BROKERS.iter().map(|&id| Broker::new(id)).collect(),
            ctl,
            producer: Producer::default(),
            consumer: Consumer::default(),
            committed: Vec::new(),
            epoch_leaders: BTreeMap::new(),
            outbox: Vec::new(),
            trace: Trace {
                events: VecDeque::new(),
            },
            stats: Stats {
                seeds: 1,
                ..Stats::default()
            },
            violation: None,
            next_id: 1,
            settling: false,
            p,
        };
        // Every broker starts registered, unfenced and with the first image.
        let image = w.ctl.image.clone();
        for i in 0..w.brokers.len() {
            w.brokers[i].reg_offset = Some(0);
            w.brokers[i].broker_epoch = 1;
            w.apply_image(i, image.clone());
        }
        w.flush();
        w
    }

    pub fn now_ms(&self) -> i64 {
        T0_MS + self.tick as i64 * TICK_MS
    }

    pub fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    pub fn ev(&mut self, ev: Ev) {
        self.trace.push(self.tick, ev);
    }

    pub fn fail(&mut self, msg: String) {
        if self.violation.is_none() {
            self.violation = Some(msg);
        }
    }

    pub fn send(&mut self, from: usize, to: usize, msg: Msg) {
        self.outbox.push((from, to, msg));
    }

    /// Hands everything queued in the outbox to the network.
    pub fn flush(&mut self) {
        let now = self.tick;
        for (from, to, msg) in std::mem::take(&mut self.outbox) {
            self.net.send(&mut self.rng, now, from, to, msg);
        }
    }

    fn deliver(&mut self, e: Envelope) {
        if self.net.is_cut(e.from, e.to) {
            self.net.dropped += 1;
            return;
        }
        match e.to {
            CONTROLLER => self.controller_on_msg(e.from, e.msg),
            CLIENT => self.client_on_msg(e.from, e.msg),
            node => {
                let i = node - 1;
                if self.brokers[i].alive {
                    self.broker_on_msg(i, e.from, e.msg);
                }
            }
        }
        self.flush();
    }

    /// One tick: deliveries, broker and controller timers, the producer, the invariants, the
    /// consumer, then new faults.
    pub fn step(&mut self) -> Result<(), String> {
        self.tick += 1;
        while let Some(e) = self.net.pop_due(self.tick) {
            self.deliver(e);
        }
        for i in 0..self.brokers.len() {
            if self.brokers[i].alive {
                self.broker_timers(i);
                self.flush();
            }
        }
        self.controller_timers();
        self.flush();
        self.producer_tick();
        self.flush();
        // Checked before the faults, so a leader's last HW is seen before it crashes.
        self.check()?;
        // The consumer reads after the check, so every read is below an HW already checked.
        self.consumer_tick();
        if let Some(v) = self.violation.take() {
            return Err(v);
        }
        if self.settling {
            // A controlled shutdown begun before healing still ends with a restart.
            for i in 0..self.brokers.len() {
                if !self.brokers[i].alive && self.tick >= self.brokers[i].restart_at {
                    self.restart(i);
                }
            }
        } else {
            self.faults();
        }
        Ok(())
    }

    fn faults(&mut self) {
        for i in 0..self.brokers.len() {
            let b = &self.brokers[i];
            if b.alive {
                if self.rng.chance(self.p.crash_per_10k) {
                    self.crash(i);
                }
            } else if self.tick >= b.restart_at {
                self.restart(i);
            }
            let b = &mut self.brokers[i];
            if b.alive
                && b.reg_offset.is_some()
                && b.shutting_down.is_none()
                && self.rng.chance(self.p.shutdown_per_10k)
            {
                b.shutting_down = Some(self.tick);
                let id = b.id;
                self.ev(Ev::ShutdownStarted(id));
            }
        }
        let now = self.tick;
        let (healed, kept): (Vec<Cut>, Vec<Cut>) =
            self.net.cuts.drain(..).partition(|c| c.heal_at <= now);
        self.net.cuts = kept;
        for c in healed {
            self.ev(Ev::Heal(c.links));
        }
        if self.rng.chance(self.p.cut_per_10k) {
            let duration = self.rng.range(10, 300);
            let links = match self.rng.below(4) {
                // Isolate one node (the controller or a broker) from everyone.
                0 | 1 => {
                    let n = self.rng.range(0, 3) as usize;
                    (0..NODES).filter(|&m| m != n).map(|m| (n, m)).collect()
                }
                // One broker from the controller only (a zombie leader, if it leads).
                2 => vec![(self.rng.range(1, 3) as usize, CONTROLLER)],
                // One link between two brokers.
                _ => {
                    let a = self.rng.range(1, 3) as usize;
                    let b = 1 + (a + self.rng.range(0, 1) as usize) % 3;
                    vec![(a, b)]
                }
            };
            self.stats.cuts += 1;
            self.ev(Ev::CutLinks(links.clone(), duration));
            self.net.cuts.push(Cut {
                heal_at: now + duration,
                links,
            });
        }
    }

    /// The process dies: its log and epoch cache stay (fsynced), the rest is gone, and so are
    /// its parked produces (the client times out).
    pub fn crash(&mut self, i: usize) {
        let downtime = self.rng.range(5, 200);
        let now = self.tick;
        let b = &mut self.brokers[i];
        b.crash(now + downtime);
        let (id, node) = (b.id, b.node());
        self.net.drop_to(node);
        self.net.drop_requests_to_controller(node);
        self.outbox.retain(|&(from, _, _)| from != node);
        self.stats.crashes += 1;
        self.ev(Ev::Crash(id));
    }

    pub fn restart(&mut self, i: usize) {
        let now = self.tick;
        self.brokers[i].restart(now);
        let id = self.brokers[i].id;
        self.ev(Ev::Restart(id));
    }

    fn settle_begin(&mut self) {
        self.settling = true;
        self.ev(Ev::Settling);
        let healed: Vec<Cut> = self.net.cuts.drain(..).collect();
        for c in healed {
            self.ev(Ev::Heal(c.links));
        }
        self.net.drop_per_10k = 0;
        for i in 0..self.brokers.len() {
            if !self.brokers[i].alive {
                self.restart(i);
            }
        }
    }

    pub fn run(&mut self) -> Result<(), String> {
        for _ in 0..self.p.steps {
            self.step()?;
        }
        self.settle_begin();
        let mut settled = false;
        for _ in 0..self.p.settle_max {
            self.step()?;
            if self.converged() {
                settled = true;
                break;
            }
        }
        if !settled {
            return Err(format!(
                "liveness: the cluster did not converge within {} ticks after healing",
                self.p.settle_max
            ));
        }
        self.final_checks()?;
        self.stats.ticks = self.tick;
        self.stats.messages = self.net.sent;
        self.stats.dropped = self.net.dropped;
        Ok(())
    }

    pub fn report(&self, err: &str) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "\n=== replication simulation FAILED: seed {} at tick {} ===\n{err}\n",
            self.p.seed, self.tick
        );
        let _ = writeln!(s, "params: {:?}", self.p);
        let _ = writeln!(
            s,
            "reproduce: SIM_SEED={} cargo test -p runnel-replication --test replication sim",
            self.p.seed
        );
        let _ = writeln!(s, "\nlast events (tick: event):");
        for (t, e) in &self.trace.events {
            let _ = writeln!(s, "  {t:>6}: {e:?}");
        }
        let _ = writeln!(s, "\ncontroller: {:?}", self.ctl.partition());
        for b in &self.brokers {
            let fenced = self.ctl.image.brokers.get(&b.id).map(|r| r.fenced);
            let role = match &b.role {
                Role::None => "none".to_string(),
                Role::Leader(c) => format!(
                    "leader epoch {} isr {:?} pending {:?} pe {} hw {}",
                    c.ls.leader_epoch(),
                    c.ls.isr(),
                    c.ls.pending_isr(),
                    c.ls.partition_epoch(),
                    c.ls.high_watermark()
                ),
                Role::Follower(f) => format!(
                    "follower of {} epoch {} truncating {}",
                    f.leader, f.epoch, f.truncating
                ),
            };
            let _ = writeln!(
                s,
                "broker {}: alive {} fenced {:?} leo {} hw {} cache {:?} role {role}",
                b.id,
                b.alive,
                fenced,
                b.leo(),
                b.hw,
                b.cache.entries()
            );
        }
        let _ = writeln!(s, "committed length {}", self.committed.len());
        s
    }
}

/// Runs one seed; `Err` carries the full failure report.
pub fn run_seed(p: Params) -> Result<Stats, String> {
    let mut w = World::new(p);
    let outcome = catch_unwind(AssertUnwindSafe(|| w.run()));
    match outcome {
        Ok(Ok(())) => Ok(w.stats.clone()),
        Ok(Err(e)) => Err(w.report(&e)),
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(w.report(&format!("panicked: {msg}")))
        }
    }
}
