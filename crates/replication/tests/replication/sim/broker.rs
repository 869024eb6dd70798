//! A broker of the simulation: the imperative shell around the pure decisions. Its log and
//! leader-epoch cache survive a crash (fsynced); everything else (leadership, follower state,
//! the metadata it has seen, parked produces) is lost.
//!
//! The leader side drives `LeaderPartitionState` (follower fetches, appends, shrink checks,
//! AlterPartition answers, committed ISR changes, acks=all) and answers fetches with
//! `diverging_epoch`; the follower side truncates with `truncation_point`, either from a
//! DivergingEpoch (Fetch v12+) or from OffsetForLeaderEpoch rounds before fetching.

use std::collections::BTreeSet;
use std::sync::Arc;

use runnel_metadata::replication::AlterPartitionRequest;
use runnel_metadata::MetadataImage;
use runnel_replication::{
    check_leader_epoch, codes, diverging_epoch, follower_high_watermark, ineligible_replicas,
    truncation_point, AcksOutcome, AlterPartitionFailure, BecomeLeader, LeaderConfig,
    LeaderEpochCache, LeaderImage, LeaderPartitionState,
};

use super::net::{FetchBody, Msg, Rec, CLIENT, CONTROLLER};
use super::world::{Ev, Mutation, World, MIN_INSYNC, TOPIC};
use runnel_codes::REQUEST_TIMED_OUT;

/// At most this many records per fetch response.
const MAX_FETCH: usize = 16;
/// A request without an answer after this many ticks is sent again.
const REQUEST_TIMEOUT: u64 = 40;
/// How long a parked acks=all produce waits (ticks) before REQUEST_TIMED_OUT.
pub const PRODUCE_TIMEOUT: u64 = 150;

pub struct Parked {
    pub id: u64,
    pub base: i64,
    pub required: i64,
    pub payloads: Vec<u64>,
    pub deadline: u64,
}

pub struct LeaderCtx {
    pub ls: LeaderPartitionState,
    pub parked: Vec<Parked>,
    /// The AlterPartition request of the pending ISR change, when it was last sent and the id
    /// of that (latest) attempt.
    pub alter: Option<AlterAttempt>,
    pub next_shrink: u64,
}

pub struct AlterAttempt {
    pub req: AlterPartitionRequest,
    pub sent: u64,
    pub attempt: u64,
}

pub struct FollowerCtx {
    pub leader: i32,
    pub epoch: i32,
    /// OffsetForLeaderEpoch rounds still to do before fetching (only without `via_fetch`).
    pub truncating: bool,
    pub inflight: Option<(u64, u64)>,
    pub next_send: u64,
}

pub enum Role {
    None,
    Leader(Box<LeaderCtx>),
    Follower(FollowerCtx),
}

pub struct Broker {
    pub id: i32,
    pub alive: bool,
    pub incarnation: u64,
    // durable
    pub log: Vec<Rec>,
    pub cache: LeaderEpochCache,
    pub hw_checkpoint: i64,
    // volatile
    pub hw: i64,
    pub reg_offset: Option<i64>,
    /// The broker epoch of the registration (what heartbeats carry).
    pub broker_epoch: i64,
    pub next_register: u64,
    pub image: Option<Arc<MetadataImage>>,
    pub last_partition_epoch: i32,
    pub role: Role,
    pub next_heartbeat: u64,
    /// In controlled shutdown: when to ask the controller (again).
    pub shutting_down: Option<u64>,
    pub restart_at: u64,
    // bookkeeping of the checker: log[..verified] equals the committed records
    pub verified: usize,
}

impl Broker {
    pub fn new(id: i32) -> Broker {
        Broker {
            id,
            alive: true,
            incarnation: 1,
            log: Vec::new(),
            cache: LeaderEpochCache::new(),
            hw_checkpoint: 0,
            hw: 0,
            reg_offset: None,
            broker_epoch: -1,
            next_register: 0,
            image: None,
            last_partition_epoch: -1,
            role: Role::None,
            next_heartbeat: 0,
            shutting_down: None,
            restart_at: 0,
            verified: 0,
        }
    }

    pub fn node(&self) -> usize {
        self.id as usize
    }

    pub fn leo(&self) -> i64 {
        self.log.len() as i64
    }

    /// Truncates log and epoch cache to `to`; returns how many records went.
    pub fn truncate(&mut self, to: i64) -> usize {
        let to = to.max(0);
        let removed = self.log.len().saturating_sub(to as usize);
        self.log.truncate(to as usize);
        self.cache.truncate_from_end(to);
        self.hw = self.hw.min(to);
        self.hw_checkpoint = self.hw_checkpoint.min(to);
        self.verified = self.verified.min(self.log.len());
        removed
    }

    pub fn crash(&mut self, restart_at: u64) {
        self.alive = false;
        self.restart_at = restart_at;
        self.reg_offset = None;
        self.broker_epoch = -1;
        self.image = None;
        self.last_partition_epoch = -1;
        self.shutting_down = None;
        self.role = Role::None;
    }

    pub fn restart(&mut self, now: u64) {
        self.alive = true;
        self.incarnation += 1;
        self.hw = self.hw_checkpoint.min(self.leo());
        self.next_register = now;
        self.role = Role::None;
    }
}

impl World {
    fn leader_config(&self) -> LeaderConfig {
        LeaderConfig {
            replica_lag_time_max_ms: self.p.lag_ms,
            min_insync_replicas: MIN_INSYNC,
        }
    }

    pub fn broker_on_msg(&mut self, i: usize, from: usize, msg: Msg) {
        match msg {
            Msg::Metadata(image) => self.apply_image(i, image),
            Msg::RegisterResp {
                incarnation,
                result: Ok((epoch, offset)),
            } => {
                // A retried registration may have committed twice: the later (higher) epoch
                // is the current registration.
                let b = &mut self.brokers[i];
                if incarnation == b.incarnation && epoch > b.broker_epoch {
                    b.broker_epoch = epoch;
                    b.reg_offset = Some(offset);
                    b.next_heartbeat = self.tick;
                }
            }
            Msg::ShutdownResp {
                incarnation,
                may_stop,
            } => {
                let b = &self.brokers[i];
                if may_stop && incarnation == b.incarnation && b.shutting_down.is_some() {
                    let id = b.id;
                    self.stats.controlled_shutdowns += 1;
                    self.ev(Ev::ShutdownDone(id));
                    self.crash(i);
                    // The broker's `end_session`, its last request.
                    let node = self.brokers[i].node();
                    let msg = Msg::ShutdownComplete { broker: id };
                    self.net
                        .send(&mut self.rng, self.tick, node, CONTROLLER, msg);
                }
            }
            Msg::Fetch {
                id,
                replica,
                epoch,
                offset,
                last_epoch,
            } => self.on_fetch(i, from, id, replica, epoch, offset, last_epoch),
            Msg::FetchResp { id, body } => self.on_fetch_resp(i, from, id, body),
            Msg::Ofle {
                id,
                epoch,
                requested,
            } => {
                let b = &self.brokers[i];
                let body = match &b.role {
                    Role::Leader(c) => check_leader_epoch(epoch, c.ls.leader_epoch())
                        .map(|()| b.cache.end_offset_for(requested, b.leo())),
                    _ => Err(codes::NOT_LEADER_OR_FOLLOWER),
                };
                self.send(b.node(), from, Msg::OfleResp { id, body });
            }
            Msg::OfleResp { id, body } => self.on_ofle_resp(i, from, id, body),
            Msg::AlterResp {
                req,
                attempt,
                result,
            } => self.on_alter_resp(i, req, attempt, result),
            Msg::Produce { id, payloads } => self.on_produce(i, id, payloads),
            _ => {}
        }
    }

    /// A metadata image arrived (Kafka's `ReplicaManager.applyDelta` for this partition).
    pub fn apply_image(&mut self, i: usize, image: Arc<MetadataImage>) {
        let now_ms = self.now_ms();
        let config = self.leader_config();
        let b = &mut self.brokers[i];
        let Some(reg) = b.reg_offset else { return };
        if image.offset < reg || b.image.as_ref().is_some_and(|m| image.offset <= m.offset) {
            return;
        }
        let p = image.partition(TOPIC, 0).expect("partition").clone();
        let ineligible = ineligible_replicas(&p.replicas, |r| {
            image.brokers.get(&r).is_some_and(|b| b.is_active())
        });
        let changed = p.partition_epoch != b.last_partition_epoch;
        b.last_partition_epoch = p.partition_epoch;
        b.image = Some(image);
        let id = b.id;
        if p.leader == id {
            if let Role::Leader(c) = &mut b.role {
                let forget = changed && self.p.mutation == Some(Mutation::LeaderForgetsHw);
                if c.ls.leader_epoch() == p.leader_epoch && !forget {
                    let before = c.ls.pending_isr().map(<[i32]>::to_vec);
                    let view = LeaderImage {
                        replicas: &p.replicas,
                        isr: &p.isr,
                        partition_epoch: p.partition_epoch,
                        ineligible,
                    };
                    c.ls.on_image(view, config, now_ms);
                    if changed {
                        let ev = Ev::AppliedIsr {
                            broker: id,
                            isr: p.isr.clone(),
                            partition_epoch: p.partition_epoch,
                            pending_before: before,
                            pending_after: c.ls.pending_isr().map(<[i32]>::to_vec),
                            via: "image",
                        };
                        self.ev(ev);
                    }
                    self.complete_parked(i);
                    return;
                }
            }
            self.become_leader(i, &p, ineligible);
        } else if p.leader == -1 {
            self.resign(i);
            self.brokers[i].role = Role::None;
        } else {
            if let Role::Follower(f) = &b.role {
                if f.leader == p.leader && f.epoch == p.leader_epoch {
                    return;
                }
            }
            self.resign(i);
            let b = &mut self.brokers[i];
            b.role = Role::Follower(FollowerCtx {
                leader: p.leader,
                epoch: p.leader_epoch,
                truncating: !self.p.via_fetch && self.p.mutation != Some(Mutation::SkipTruncation),
                inflight: None,
                next_send: self.tick,
            });
            let ev = Ev::BecomeFollower {
                broker: id,
                leader: p.leader,
                epoch: p.leader_epoch,
                leo: b.leo(),
            };
            self.ev(ev);
        }
    }

    /// Leaves leadership: parked produces fail with NOT_LEADER_OR_FOLLOWER.
    fn resign(&mut self, i: usize) {
        let b = &mut self.brokers[i];
        if let Role::Leader(c) = std::mem::replace(&mut b.role, Role::None) {
            let node = b.node();
            let id = b.id;
            for p in c.parked {
                self.send(
                    node,
                    CLIENT,
                    Msg::ProduceResp {
                        id: p.id,
                        result: Err(codes::NOT_LEADER_OR_FOLLOWER),
                    },
                );
            }
            self.ev(Ev::Resign { broker: id });
        }
    }

    /// Kafka's `Partition.makeLeader`: the new epoch starts at the LEO; the follower HW is the
    /// starting HW. Parked produces survive a re-election of the same broker (their records
    /// are still in this log).
    fn become_leader(
        &mut self,
        i: usize,
        p: &runnel_metadata::PartitionImage,
        ineligible: BTreeSet<i32>,
    ) {
        let now_ms = self.now_ms();
        let config = self.leader_config();
        let shrink_every = (self.p.lag_ms / 2 / super::world::TICK_MS).max(1) as u64;
        let tick = self.tick;
        let b = &mut self.brokers[i];
        let parked = match std::mem::replace(&mut b.role, Role::None) {
            Role::Leader(c) => c.parked,
            _ => Vec::new(),
        };
        let leo = b.leo();
        b.cache.assign(p.leader_epoch, leo);
        let mut ls = LeaderPartitionState::new(
            BecomeLeader {
                leader: b.id,
                replicas: p.replicas.clone(),
                isr: p.isr.clone(),
                leader_epoch: p.leader_epoch,
                partition_epoch: p.partition_epoch,
                log_end_offset: leo,
                high_watermark: if self.p.mutation == Some(Mutation::LeaderForgetsHw) {
                    b.hw_checkpoint
                } else {
                    b.hw
                },
            },
            config,
            now_ms,
        );
        ls.set_ineligible_replicas(ineligible);
        b.hw = ls.high_watermark();
        let ev = Ev::BecomeLeader {
            broker: b.id,
            epoch: p.leader_epoch,
            leo,
            hw: b.hw,
            isr: p.isr.clone(),
        };
        b.role = Role::Leader(Box::new(LeaderCtx {
            ls,
            parked,
            alter: None,
            next_shrink: tick + shrink_every,
        }));
        self.ev(ev);
        self.complete_parked(i);
    }

    /// Answers parked acks=all produces that are done (E.4), or timed out.
    pub fn complete_parked(&mut self, i: usize) {
        let tick = self.tick;
        let current_epoch = self.ctl.partition().leader_epoch;
        let b = &mut self.brokers[i];
        let Role::Leader(c) = &mut b.role else { return };
        let hw = c.ls.high_watermark();
        if hw > b.hw {
            self.trace.push(
                tick,
                Ev::HwAdvanced {
                    broker: b.id,
                    epoch: c.ls.leader_epoch(),
                    hw,
                },
            );
        }
        b.hw = hw;
        let node = b.id as usize;
        let mut out = Vec::new();
        c.parked.retain(|p| {
            let result = match c.ls.acks_all_outcome(p.required) {
                AcksOutcome::Pending if tick >= p.deadline => Err(REQUEST_TIMED_OUT),
                AcksOutcome::Pending => return true,
                AcksOutcome::Done => Ok(p.base),
                AcksOutcome::NotEnoughReplicasAfterAppend => {
                    Err(codes::NOT_ENOUGH_REPLICAS_AFTER_APPEND)
                }
            };
            out.push((p.id, result, p.base, p.payloads.clone()));
            false
        });
        let (id, epoch) = (b.id, c.ls.leader_epoch());
        for (pid, result, base, payloads) in out {
            if result.is_ok() {
                if epoch < current_epoch {
                    self.stats.zombie_acks += 1;
                }
                self.trace.push(
                    tick,
                    Ev::Acked {
                        broker: id,
                        epoch,
                        base,
                        payloads,
                    },
                );
            }
            self.outbox
                .push((node, CLIENT, Msg::ProduceResp { id: pid, result }));
        }
        if let Err(e) = self.observe_leader(i) {
            self.fail(e);
        }
    }

    fn on_produce(&mut self, i: usize, id: u64, payloads: Vec<u64>) {
        let now_ms = self.now_ms();
        let deadline = self.tick + PRODUCE_TIMEOUT;
        let ack_at_leo = self.p.mutation == Some(Mutation::AckAtLeo);
        let b = &mut self.brokers[i];
        let node = b.node();
        let Role::Leader(c) = &mut b.role else {
            self.send(
                node,
                CLIENT,
                Msg::ProduceResp {
                    id,
                    result: Err(codes::NOT_LEADER_OR_FOLLOWER),
                },
            );
            return;
        };
        if c.ls.can_accept_acks_all().is_err() {
            self.send(
                node,
                CLIENT,
                Msg::ProduceResp {
                    id,
                    result: Err(codes::NOT_ENOUGH_REPLICAS),
                },
            );
            return;
        }
        let base = b.log.len() as i64;
        let epoch = c.ls.leader_epoch();
        b.log
            .extend(payloads.iter().map(|&payload| Rec { epoch, payload }));
        let leo = b.log.len() as i64;
        c.ls.on_leader_append(leo, now_ms);
        let broker = b.id;
        if ack_at_leo {
            self.send(
                node,
                CLIENT,
                Msg::ProduceResp {
                    id,
                    result: Ok(base),
                },
            );
        } else {
            c.parked.push(Parked {
                id,
                base,
                required: leo,
                payloads: payloads.clone(),
                deadline,
            });
        }
        self.ev(Ev::Appended {
            broker,
            base,
            payloads,
        });
        self.complete_parked(i);
    }

    /// The leader's side of a follower fetch (Kafka's `Partition.fetchRecords` for a
    /// follower): epoch fencing, DivergingEpoch (no state update then), then the follower's
    /// position, ISR expansion and HW.
    #[allow(clippy::too_many_arguments)]
    fn on_fetch(
        &mut self,
        i: usize,
        from: usize,
        id: u64,
        replica: i32,
        epoch: i32,
        offset: i64,
        last_epoch: i32,
    ) {
        let now_ms = self.now_ms();
        let b = &mut self.brokers[i];
        let node = b.node();
        let leo = b.leo();
        let mut proposal = None;
        let body = match &mut b.role {
            Role::Leader(c) => {
                if let Err(code) = check_leader_epoch(epoch, c.ls.leader_epoch()) {
                    FetchBody::Error(code)
                } else if let Some(d) = diverging_epoch(&b.cache, leo, last_epoch, offset) {
                    self.stats.diverging_replies += 1;
                    FetchBody::Diverging(d)
                } else {
                    match c.ls.on_follower_fetch(replica, offset, now_ms) {
                        Err(e) => FetchBody::Error(e.code()),
                        Ok(out) => {
                            if let Some(isr) = out.isr_expand {
                                let req = AlterPartitionRequest {
                                    broker_id: b.id,
                                    leader_epoch: c.ls.leader_epoch(),
                                    partition_epoch: c.ls.partition_epoch(),
                                    new_isr: isr,
                                };
                                proposal = Some(req);
                            }
                            let end = (offset as usize + MAX_FETCH).min(b.log.len());
                            FetchBody::Records {
                                base: offset,
                                recs: b.log[offset as usize..end].to_vec(),
                                hw: c.ls.high_watermark(),
                            }
                        }
                    }
                }
            }
            _ => FetchBody::Error(codes::NOT_LEADER_OR_FOLLOWER),
        };
        self.send(node, from, Msg::FetchResp { id, body });
        if let Some(req) = proposal {
            self.propose(i, req);
        }
        self.complete_parked(i);
    }

    /// Sends (or re-sends) the AlterPartition request of the pending change, as a new attempt.
    fn propose(&mut self, i: usize, req: AlterPartitionRequest) {
        let attempt = self.id();
        let tick = self.tick;
        let b = &mut self.brokers[i];
        let node = b.node();
        if let Role::Leader(c) = &mut b.role {
            c.alter = Some(AlterAttempt {
                req: req.clone(),
                sent: tick,
                attempt,
            });
        }
        self.ev(Ev::Proposed {
            broker: req.broker_id,
            isr: req.new_isr.clone(),
            partition_epoch: req.partition_epoch,
        });
        self.send(node, CONTROLLER, Msg::Alter { req, attempt });
    }

    /// The controller's answer to an AlterPartition. Only an answer to the change still
    /// pending counts (Kafka ignores answers to anything else). A success is a committed
    /// state whichever attempt it answers; a refusal counts only for the latest attempt
    /// (earlier ones were answered before it on this FIFO link, or lost): a late refusal of
    /// an earlier attempt says nothing about a later one the controller may have accepted.
    fn on_alter_resp(
        &mut self,
        i: usize,
        req: AlterPartitionRequest,
        attempt: u64,
        result: Result<runnel_metadata::replication::AlterPartitionDecision, i16>,
    ) {
        let now_ms = self.now_ms();
        let b = &mut self.brokers[i];
        let id = b.id;
        let Role::Leader(c) = &mut b.role else { return };
        let Some(latest) = c.alter.as_ref() else {
            return;
        };
        if latest.req != req || c.ls.pending_isr() != Some(&req.new_isr[..]) {
            return;
        }
        if result.is_err() && latest.attempt != attempt {
            return;
        }
        match result {
            Ok(d) => {
                c.alter = None;
                let before = c.ls.pending_isr().map(<[i32]>::to_vec);
                c.ls.apply_committed_isr(d.isr.clone(), d.partition_epoch, now_ms);
                let after = c.ls.pending_isr().map(<[i32]>::to_vec);
                self.ev(Ev::AppliedIsr {
                    broker: id,
                    isr: d.isr,
                    partition_epoch: d.partition_epoch,
                    pending_before: before,
                    pending_after: after,
                    via: "response",
                });
            }
            Err(code) => match c.ls.on_alter_partition_error(code) {
                AlterPartitionFailure::Retry => {} // the timer sends it again
                AlterPartitionFailure::AwaitMetadata => {
                    c.alter = None;
                    self.ev(Ev::AlterFailed {
                        broker: id,
                        code,
                        still_pending: true,
                    });
                }
                AlterPartitionFailure::Dropped => {
                    c.alter = None;
                    self.ev(Ev::AlterFailed {
                        broker: id,
                        code,
                        still_pending: false,
                    });
                }
            },
        }
        self.complete_parked(i);
    }

    fn on_fetch_resp(&mut self, i: usize, from: usize, id: u64, body: FetchBody) {
        let tick = self.tick;
        let b = &mut self.brokers[i];
        let Role::Follower(f) = &mut b.role else {
            return;
        };
        if f.leader as usize != from || f.inflight.map(|x| x.0) != Some(id) {
            return;
        }
        f.inflight = None;
        match body {
            FetchBody::Records { base, recs, hw } => {
                assert_eq!(
                    base,
                    b.log.len() as i64,
                    "fetch response for another offset"
                );
                f.next_send = tick + u64::from(recs.is_empty());
                for r in recs {
                    let offset = b.log.len() as i64;
                    b.cache.assign(r.epoch, offset);
                    b.log.push(r);
                }
                b.hw = follower_high_watermark(hw, b.leo());
            }
            FetchBody::Diverging(reply) => {
                f.next_send = tick;
                if self.p.mutation == Some(Mutation::SkipTruncation) {
                    return;
                }
                let state = truncation_point(&b.cache, b.leo(), b.hw, reply);
                self.stats.truncation_rounds += 1;
                self.stats.incomplete_truncation_rounds += u64::from(!state.completed);
                self.truncate(i, state.offset);
            }
            FetchBody::Error(code) => {
                f.next_send = tick + 5;
                if code == codes::OFFSET_OUT_OF_RANGE && !self.p.via_fetch {
                    f.truncating = self.p.mutation != Some(Mutation::SkipTruncation);
                }
            }
        }
    }

    fn on_ofle_resp(
        &mut self,
        i: usize,
        from: usize,
        id: u64,
        body: Result<runnel_replication::EpochEndOffset, i16>,
    ) {
        let tick = self.tick;
        let b = &mut self.brokers[i];
        let Role::Follower(f) = &mut b.role else {
            return;
        };
        if f.leader as usize != from || f.inflight.map(|x| x.0) != Some(id) || !f.truncating {
            return;
        }
        f.inflight = None;
        match body {
            Ok(reply) => {
                let state = truncation_point(&b.cache, b.log.len() as i64, b.hw, reply);
                self.stats.truncation_rounds += 1;
                self.stats.incomplete_truncation_rounds += u64::from(!state.completed);
                f.truncating = !state.completed;
                f.next_send = tick;
                self.truncate(i, state.offset);
            }
            Err(_) => f.next_send = tick + 5,
        }
    }

    pub fn truncate(&mut self, i: usize, to: i64) {
        let b = &mut self.brokers[i];
        let from = b.leo();
        let removed = b.truncate(to);
        let id = b.id;
        if removed > 0 {
            self.stats.truncations += 1;
            self.stats.truncated_records += removed as u64;
            self.ev(Ev::Truncated {
                broker: id,
                from,
                to,
            });
        }
    }

    /// Registration, heartbeats, HW checkpoints, follower requests, leader timers.
    pub fn broker_timers(&mut self, i: usize) {
        let tick = self.tick;
        let now_ms = self.now_ms();
        let hb = self.p.heartbeat_ticks;
        let alter_retry = self.p.alter_retry;
        let shrink_every = (self.p.lag_ms / 2 / super::world::TICK_MS).max(1) as u64;
        let via_fetch = self.p.via_fetch && self.p.mutation != Some(Mutation::SkipTruncation);
        let b = &mut self.brokers[i];
        let node = b.node();
        if tick % 20 == 0 {
            b.hw_checkpoint = b.hw;
        }
        let Some(_) = b.reg_offset else {
            if tick >= b.next_register {
                b.next_register = tick + REQUEST_TIMEOUT;
                let msg = Msg::Register {
                    broker: b.id,
                    incarnation: b.incarnation,
                };
                self.send(node, CONTROLLER, msg);
            }
            return;
        };
        if tick >= b.next_heartbeat {
            b.next_heartbeat = tick + hb;
            let msg = Msg::Heartbeat {
                broker: b.id,
                broker_epoch: b.broker_epoch,
                metadata_offset: b.image.as_ref().map_or(-1, |m| m.offset),
            };
            self.outbox.push((node, CONTROLLER, msg));
        }
        if let Some(next) = b.shutting_down {
            if tick >= next {
                b.shutting_down = Some(tick + 20);
                let msg = Msg::Shutdown {
                    broker: b.id,
                    incarnation: b.incarnation,
                };
                self.outbox.push((node, CONTROLLER, msg));
            }
        }
        match &mut b.role {
            Role::None => {}
            Role::Follower(f) => {
                if f.inflight
                    .is_some_and(|(_, sent)| tick >= sent + REQUEST_TIMEOUT)
                {
                    f.inflight = None;
                }
                if f.inflight.is_some() || tick < f.next_send {
                    return;
                }
                self.next_id += 1;
                let id = self.next_id;
                let to = f.leader as usize;
                if f.truncating {
                    match b.cache.latest_epoch() {
                        // Nothing to compare: the pre-epoch rule, truncate to the HW.
                        None => {
                            f.truncating = false;
                            let hw = b.hw;
                            self.truncate(i, hw);
                        }
                        Some(requested) => {
                            f.inflight = Some((id, tick));
                            let msg = Msg::Ofle {
                                id,
                                epoch: f.epoch,
                                requested,
                            };
                            self.outbox.push((node, to, msg));
                        }
                    }
                } else {
                    f.inflight = Some((id, tick));
                    let last_epoch = if via_fetch {
                        b.cache.latest_epoch().unwrap_or(-1)
                    } else {
                        -1
                    };
                    let msg = Msg::Fetch {
                        id,
                        replica: b.id,
                        epoch: f.epoch,
                        offset: b.leo(),
                        last_epoch,
                    };
                    self.outbox.push((node, to, msg));
                }
            }
            Role::Leader(c) => {
                let mut proposal = None;
                if c.ls.pending_isr().is_none() {
                    c.alter = None;
                }
                if let Some(a) = &c.alter {
                    if tick >= a.sent + alter_retry {
                        // No answer: send the same change again (Kafka's AlterPartitionManager).
                        proposal = Some(a.req.clone());
                    }
                }
                if tick >= c.next_shrink {
                    c.next_shrink = tick + shrink_every;
                    if let Some(isr) = c.ls.maybe_shrink_isr(now_ms) {
                        let req = AlterPartitionRequest {
                            broker_id: b.id,
                            leader_epoch: c.ls.leader_epoch(),
                            partition_epoch: c.ls.partition_epoch(),
                            new_isr: isr,
                        };
                        proposal = Some(req);
                    }
                }
                if let Some(req) = proposal {
                    self.propose(i, req);
                }
                self.complete_parked(i);
            }
        }
    }
}
