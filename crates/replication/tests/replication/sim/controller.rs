//! The controller of the simulation: a thin adapter around the production pure controller
//! (`runnel_metadata::Controller`, `BrokerSessions`, the typed operations and their one
//! path through the shell's `controller::Pipeline`, what the broker's `controller/shell.rs`
//! drives), with the simulated time passed in as `now_ms`. Every decision is the production
//! one: registration and its duplicate guard, heartbeats (the early answer, then the queued
//! unfencing), session expiry (fencing), the elections and ISR shrinks of `on_commit`
//! (initial, offline, leaderless), controlled shutdown and its completion, AlterPartition,
//! and the periodic preferred-leader rebalance.
//!
//! As the shell, it decides on the pipeline's speculative image, appends without waiting and
//! parks each answer until everything it led to has committed; the simulated quorum
//! (`quorum.rs`) commits batches after seeded delays, several in flight, fails appends,
//! loses leadership mid-pipeline and stalls. A failed append or a lost leadership reverts:
//! every answer in flight is NOT_CONTROLLER, and the next operation re-activates a fresh pure
//! controller and sessions on the committed image (the shell's `ensure_active`). What stays
//! here is the shell's plumbing: the messages, the trace, and the checks on every commit and
//! every released answer (`check_commit`, `check_release`).

use std::sync::Arc;

use runnel_metadata::controller::{
    AlterPartition, BrokerHeartbeat, ControlledShutdown, ControllerOp, ControllerResult, OpContext,
    Pipeline, RegisterBroker, ShutdownComplete,
};
use runnel_metadata::replication::{AlterPartitionDecision, AlterPartitionRequest};
use runnel_metadata::{
    codes, BrokerSessions, ConfigResource, Controller as PureController, ControllerConfig,
    MetadataImage, MetadataRecord, PartitionImage,
};
use uuid::Uuid;

use super::net::{Msg, CONTROLLER};
use super::quorum::{Outcome, Quorum};
use super::world::{Ev, Mutation, Params, World, BROKERS, TICK_MS, TOPIC};

/// Kafka's `leader.imbalance.per.broker.percentage` default.
const IMBALANCE_PERCENTAGE: u32 = 10;

/// Who waits for an operation's answer, and what it asked.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Nobody (a heartbeat's unfencing, ShutdownComplete, timers).
    None,
    Register {
        to: usize,
        incarnation: u64,
    },
    Alter {
        to: usize,
        req: AlterPartitionRequest,
        attempt: u64,
        /// The ISR size the decision saw, to count shrinks and expansions.
        isr_before: usize,
    },
    Shutdown {
        to: usize,
        broker: i32,
        incarnation: u64,
    },
}

/// What an operation answered, in the sim's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decided {
    /// A registration's broker epoch.
    Epoch(i64),
    /// The ISR and partition epoch an AlterPartition answers with.
    Isr(Vec<i32>, i32),
    /// Leaderships that stay with a broker in controlled shutdown.
    Remaining(usize),
    Nothing,
}

/// The operations the simulation runs, with their answers read as [`Decided`].
pub trait SimOp: ControllerOp {
    fn decided(response: &Self::Response) -> Decided;
}

impl SimOp for RegisterBroker {
    fn decided(epoch: &i64) -> Decided {
        Decided::Epoch(*epoch)
    }
}

impl SimOp for AlterPartition {
    fn decided((isr, epoch): &(Vec<i32>, i32)) -> Decided {
        Decided::Isr(isr.clone(), *epoch)
    }
}

impl SimOp for ControlledShutdown {
    fn decided(remaining: &usize) -> Decided {
        Decided::Remaining(*remaining)
    }
}

impl SimOp for ShutdownComplete {
    fn decided(_: &()) -> Decided {
        Decided::Nothing
    }
}

impl SimOp for BrokerHeartbeat {
    fn decided(_: &bool) -> Decided {
        Decided::Nothing
    }
}

/// An answer parked in the pipeline until what it led to commits.
#[derive(Debug)]
pub struct Answer {
    /// Decision order: answers must be released in it.
    pub seq: u64,
    pub reply: Reply,
    pub decided: Decided,
    /// The operation's own records at their offsets: acknowledged only if exactly these
    /// committed there.
    pub records: Vec<(i64, MetadataRecord)>,
}

pub struct Controller {
    /// The committed image: what brokers are sent and what the checks read.
    pub image: Arc<MetadataImage>,
    pub topic_id: Uuid,
    /// The production controller's decisions (a fresh one per activation, as the shell's).
    pub core: PureController,
    /// The production broker sessions (`broker.session.timeout.ms` = the seed's session).
    pub sessions: BrokerSessions,
    pub next_broadcast: u64,
    /// The shell's pipeline: committed image, speculative image, answers in flight.
    pub pipeline: Pipeline<Answer>,
    pub quorum: Quorum,
    /// The quorum term this controller decides in (0: not active), the shell's `active_term`.
    pub active_term: u64,
    pub next_seq: u64,
    /// The last released answer's `seq`.
    pub released: u64,
}

/// A broker process's incarnation id (a new one per restart).
pub fn incarnation_id(broker_id: i32, incarnation: u64) -> Uuid {
    Uuid::from_u128(u128::from(incarnation) << 8 | broker_id as u128)
}

/// The records a cluster starts from: every broker registered and unfenced (epoch 1), the
/// topic with its partition not yet elected, and, for the unclean-election mutations, the
/// topic config that allows unclean elections (the production rule reads it).
fn bootstrap(p: &Params, topic_id: Uuid) -> Vec<MetadataRecord> {
    let mut records: Vec<MetadataRecord> = BROKERS
        .iter()
        .map(|&b| MetadataRecord::RegisterBroker {
            broker_id: b,
            incarnation_id: incarnation_id(b, 1),
            broker_epoch: 1,
            host: "localhost".into(),
            port: 9092,
            rack: None,
            fenced: false,
            endpoints: Vec::new(),
        })
        .collect();
    records.push(MetadataRecord::Topic {
        name: TOPIC.into(),
        topic_id,
    });
    records.push(MetadataRecord::Partition {
        topic_id,
        partition_id: 0,
        replicas: p.assignment.clone(),
        isr: vec![],
        leader: -1,
        leader_epoch: 0,
        partition_epoch: 0,
        adding_replicas: vec![],
        removing_replicas: vec![],
    });
    if matches!(
        p.mutation,
        Some(Mutation::UncleanElection | Mutation::UncleanElectionUnchecked)
    ) {
        records.push(MetadataRecord::Config {
            resource: ConfigResource::Topic(TOPIC.into()),
            name: "unclean.leader.election.enable".into(),
            value: Some("true".into()),
        });
    }
    records
}

impl Controller {
    /// The bootstrapped cluster, after the production initial election (D.1), committed.
    pub fn new(p: &Params, now_ms: i64) -> Controller {
        let topic_id = Uuid::from_u128(0x0513_u128 << 64 | 1);
        let mut log = bootstrap(p, topic_id);
        let numbered: Vec<(i64, MetadataRecord)> = (0..).zip(log.iter().cloned()).collect();
        let image = MetadataImage::empty("sim".into())
            .apply(&numbered)
            .expect("initial image");
        let mut core = PureController::new(ControllerConfig::default(), 1, p.seed);
        let elected = core.on_commit(&image, now_ms);
        let numbered: Vec<(i64, MetadataRecord)> =
            (image.offset + 1..).zip(elected.iter().cloned()).collect();
        let image = Arc::new(image.apply(&numbered).expect("initial election"));
        log.extend(elected);
        let timeout_ms = p.session_ticks as i64 * TICK_MS;
        let sessions = BrokerSessions::activate(&image, timeout_ms, now_ms);
        let ctl = Controller {
            pipeline: Pipeline::new(image.clone()),
            quorum: Quorum::new(log, image.clone()),
            image,
            topic_id,
            core,
            sessions,
            next_broadcast: 0,
            active_term: 1,
            next_seq: 0,
            released: 0,
        };
        assert!(ctl.partition().leader != -1, "all brokers live: a leader");
        ctl
    }

    pub fn partition(&self) -> &PartitionImage {
        self.image.partition(TOPIC, 0).expect("the partition")
    }
}

impl World {
    /// The image decisions read: the speculative one (the committed one under the
    /// `DecideOnCommitted` mutation).
    fn decision_image(&self) -> Arc<MetadataImage> {
        if self.p.mutation == Some(Mutation::DecideOnCommitted) {
            self.ctl.pipeline.committed().clone()
        } else {
            self.ctl.pipeline.speculative().clone()
        }
    }

    /// Runs `f` on what a decision sees (the shell's `with_context`).
    fn with_context<R>(&mut self, received_ms: i64, f: impl FnOnce(&mut OpContext<'_>) -> R) -> R {
        let image = self.decision_image();
        let now = self.now_ms();
        let mut ctx = OpContext {
            controller: &mut self.ctl.core,
            sessions: &mut self.ctl.sessions,
            image: &image,
            now_ms: now,
            session_ms: now,
            received_ms,
            single_node: false,
        };
        f(&mut ctx)
    }

    /// Puts `records` in flight on the speculative image and hands them to the quorum (the
    /// shell's `append`); their offsets, or the error code of an inconsistent batch.
    fn ctl_append(
        &mut self,
        records: Vec<MetadataRecord>,
        how: &'static str,
    ) -> Result<Vec<(i64, MetadataRecord)>, i16> {
        let now = self.now_ms();
        let Some(at) = self
            .ctl
            .pipeline
            .append(records.clone(), now)
            .map_err(|e| e.code)?
        else {
            return Ok(Vec::new());
        };
        let fail = if self.settling {
            0
        } else {
            self.p.append_fail_per_10k
        };
        let tick = self.tick;
        let delay = self.p.quorum_delay;
        self.stats.batches_appended += 1;
        let numbered = (at.first..).zip(records.iter().cloned()).collect();
        self.ctl
            .quorum
            .append(&mut self.rng, tick, at.first, records, how, delay, fail);
        let in_flight = self.ctl.pipeline.in_flight() as u64;
        self.stats.max_in_flight = self.stats.max_in_flight.max(in_flight);
        Ok(numbered)
    }

    /// Lets the production state machines react to the speculative image until they have
    /// nothing left (the shell's `settle`).
    fn ctl_settle(&mut self) {
        for _ in 0..16 {
            let now = self.now_ms();
            let image = self.decision_image();
            let follow_up = self.ctl.core.on_commit(&image, now);
            if follow_up.is_empty() {
                return;
            }
            if self.ctl_append(follow_up, "offline").is_err() {
                return;
            }
        }
        panic!("the controller's state machines did not settle");
    }

    /// The one path of every operation (the shell's `handle` + `run_op`): activate if needed,
    /// decide, append, let the operation react to the image that holds its records, settle,
    /// park the answer.
    fn ctl_run<O: SimOp>(&mut self, op: O, received_ms: i64, reply: Reply) {
        if let Err(code) = self.ensure_active() {
            return self.answer_error(&reply, code);
        }
        let decided = self.with_context(received_ms, |ctx| op.decide(ctx));
        let ControllerResult { records, response } = match decided {
            Ok(d) => d,
            Err(e) => {
                self.refused(&reply, e.code);
                return self.answer_error(&reply, e.code);
            }
        };
        let mut answer = Answer {
            seq: 0,
            reply,
            decided: O::decided(&response),
            records: Vec::new(),
        };
        if !records.is_empty() {
            match self.ctl_append(records, O::NAME) {
                Ok(numbered) => answer.records = numbered,
                Err(code) => return self.answer_error(&answer.reply, code),
            }
            let now = self.now_ms();
            let follow_up = self.with_context(now, |ctx| op.committed(ctx, &response));
            let _ = self.ctl_append(follow_up, O::NAME);
            self.ctl_settle();
        }
        self.park(answer);
    }

    fn refused(&mut self, reply: &Reply, code: i16) {
        match reply {
            Reply::Register { .. } => self.stats.registrations_refused += 1,
            Reply::Alter { req, .. } => {
                *self.stats.alter_rejected.entry(code).or_default() += 1;
                self.ev(Ev::AlterRejected {
                    broker: req.broker_id,
                    new_isr: req.new_isr.clone(),
                    code,
                });
            }
            _ => {}
        }
    }

    /// An answer waits for the newest batch in flight, even one that changed nothing (its
    /// decision read the speculative image; Kafka's read-only write events wait for the
    /// highest pending offset), and goes out at once if nothing is in flight.
    fn park(&mut self, mut answer: Answer) {
        self.ctl.next_seq += 1;
        answer.seq = self.ctl.next_seq;
        let at_once =
            self.p.mutation == Some(Mutation::AnswerReadOnlyAtOnce) && answer.records.is_empty();
        if at_once {
            return self.release(answer);
        }
        if let Some(answer) = self.ctl.pipeline.wait_for_appended(answer) {
            self.release(answer);
        }
    }

    /// The shell's `ensure_active`: only the quorum leader decides; a new term (or the same
    /// one after a revert) starts a fresh pure controller and sessions on the committed image
    /// once it has caught up with what the quorum holds.
    fn ensure_active(&mut self) -> Result<(), i16> {
        if !self.ctl.quorum.has_leader(self.tick) {
            self.deactivate();
            return Err(codes::NOT_CONTROLLER);
        }
        if self.ctl.quorum.term == self.ctl.active_term {
            return Ok(());
        }
        self.deactivate();
        if !self.ctl.quorum.pending.is_empty() {
            // The previous term's replicated batches have not committed yet.
            return Err(codes::NOT_CONTROLLER);
        }
        let term = self.ctl.quorum.term;
        let image = self.ctl.image.clone();
        self.ctl.pipeline = Pipeline::new(image.clone());
        let epoch = i32::try_from(term).unwrap_or(i32::MAX);
        self.ctl.core = PureController::new(ControllerConfig::default(), epoch, self.p.seed ^ term);
        let timeout_ms = self.p.session_ticks as i64 * TICK_MS;
        let now = self.now_ms();
        self.ctl.sessions = BrokerSessions::activate(&image, timeout_ms, now);
        self.ctl.active_term = term;
        self.stats.activations += 1;
        self.ev(Ev::Activated { term });
        self.ctl_settle();
        Ok(())
    }

    /// Not deciding any more: whatever is in flight is answered NOT_CONTROLLER.
    fn deactivate(&mut self) {
        if self.ctl.pipeline.in_flight() > 0 {
            let dropped = self.ctl.pipeline.fail();
            self.fail_all(dropped, codes::NOT_CONTROLLER);
        }
        self.ctl.active_term = 0;
    }

    fn fail_all(&mut self, answers: Vec<Answer>, code: i16) {
        self.stats.answers_failed += answers.len() as u64;
        for a in answers {
            self.answer_error(&a.reply, code);
        }
    }

    fn answer_error(&mut self, reply: &Reply, code: i16) {
        let (to, msg) = match reply.clone() {
            Reply::None => return,
            Reply::Register { to, incarnation } => (
                to,
                Msg::RegisterResp {
                    incarnation,
                    result: Err(code),
                },
            ),
            Reply::Alter {
                to, req, attempt, ..
            } => (
                to,
                Msg::AlterResp {
                    req,
                    attempt,
                    result: Err(code),
                },
            ),
            Reply::Shutdown {
                to, incarnation, ..
            } => (
                to,
                Msg::ShutdownResp {
                    incarnation,
                    may_stop: false,
                },
            ),
        };
        self.send(CONTROLLER, to, msg);
    }

    /// A committed answer goes out, after its checks.
    fn release(&mut self, a: Answer) {
        self.check_release(&a);
        self.ctl.released = a.seq;
        self.stats.answers_released += 1;
        match (a.reply, a.decided) {
            (Reply::Register { to, incarnation }, Decided::Epoch(epoch)) => {
                let offset = a.records.last().map_or(-1, |(o, _)| *o);
                let result = Ok((epoch, offset));
                self.send(
                    CONTROLLER,
                    to,
                    Msg::RegisterResp {
                        incarnation,
                        result,
                    },
                );
            }
            (
                Reply::Alter {
                    to,
                    req,
                    attempt,
                    isr_before,
                },
                Decided::Isr(isr, partition_epoch),
            ) => {
                if !a.records.is_empty() {
                    if isr.len() < isr_before {
                        self.stats.shrinks_committed += 1;
                    } else {
                        self.stats.expands_committed += 1;
                    }
                    self.ev(Ev::IsrCommitted {
                        isr: isr.clone(),
                        partition_epoch,
                    });
                }
                let result = Ok(AlterPartitionDecision {
                    changed: !a.records.is_empty(),
                    isr,
                    partition_epoch,
                });
                self.send(
                    CONTROLLER,
                    to,
                    Msg::AlterResp {
                        req,
                        attempt,
                        result,
                    },
                );
            }
            (
                Reply::Shutdown {
                    to,
                    broker,
                    incarnation,
                },
                Decided::Remaining(remaining),
            ) => {
                let may_stop = remaining == 0;
                if may_stop {
                    self.check_handed_over(broker);
                }
                self.send(
                    CONTROLLER,
                    to,
                    Msg::ShutdownResp {
                        incarnation,
                        may_stop,
                    },
                );
            }
            _ => {}
        }
    }

    /// What the quorum did this tick reaches the shell's commit listener and appender
    /// outcome; then the quorum's faults, and answers overdue.
    pub fn quorum_tick(&mut self) {
        let mut committed = false;
        while let Some(outcome) = self.ctl.quorum.poll(self.tick) {
            match outcome {
                Outcome::Committed(batch) => {
                    committed = true;
                    self.on_committed(batch.records, batch.how);
                }
                Outcome::Failed { first } => {
                    self.stats.append_failures += 1;
                    self.ev(Ev::AppendFailed { first });
                    let dropped = self.ctl.pipeline.fail();
                    self.fail_all(dropped, codes::NOT_CONTROLLER);
                    self.ctl.active_term = 0;
                }
            }
        }
        if committed {
            self.ctl_broadcast();
        }
        if !self.settling {
            self.quorum_faults();
        }
        let cutoff = self.now_ms() - self.p.commit_timeout_ticks as i64 * TICK_MS;
        let overdue = self.ctl.pipeline.take_overdue(cutoff);
        self.stats.answers_timed_out += overdue.len() as u64;
        for a in overdue {
            self.answer_error(&a.reply, codes::REQUEST_TIMED_OUT);
        }
    }

    fn quorum_faults(&mut self) {
        let tick = self.tick;
        if self.ctl.quorum.has_leader(tick) && self.rng.chance(self.p.leader_loss_per_10k) {
            let in_flight = self.ctl.quorum.pending.len() as u64;
            let kept = self.rng.range(0, in_flight) as usize;
            let election = self.rng.range(1, self.p.election_ticks);
            let dropped = self.ctl.quorum.lose_leadership(tick, kept, election);
            self.stats.leader_losses += 1;
            self.stats.batches_reverted += dropped as u64;
            self.ev(Ev::LeadershipLost {
                kept,
                dropped,
                election,
            });
            self.deactivate();
        }
        if self.rng.chance(self.p.stall_per_10k) {
            let until = tick + self.rng.range(20, 150);
            self.ctl.quorum.stall(until);
            self.ev(Ev::QuorumStalled { until });
        }
    }

    /// The commit listener (the shell's `on_committed`): the committed image is the quorum's;
    /// answers whose records it holds go out in order; an image that is not what this
    /// controller appended reverts. Invariant 5 is checked on every committed election.
    fn on_committed(&mut self, records: Vec<MetadataRecord>, how: &'static str) {
        let before = self.ctl.image.clone();
        self.ctl.image = self.ctl.quorum.truth.clone();
        self.stats.batches_committed += 1;
        for r in &records {
            if let MetadataRecord::PartitionChange {
                leader: Some(leader),
                isr,
                ..
            } = r
            {
                self.elected(&before, *leader, isr.clone(), how);
            }
        }
        let image = self.ctl.image.clone();
        if self.ctl.active_term == 0 {
            self.ctl.pipeline = Pipeline::new(image);
            return;
        }
        let appended = self.ctl.pipeline.speculative().offset;
        match self.ctl.pipeline.commit(image) {
            Ok(released) => {
                for a in released {
                    self.release(a);
                }
                if self.ctl.pipeline.committed().offset > appended {
                    self.ctl_settle();
                }
            }
            Err(dropped) => {
                self.fail_all(dropped, codes::NOT_CONTROLLER);
                self.deactivate();
            }
        }
        self.check_commit();
    }

    /// Invariant 5: only a live in-sync replica is elected (leader -1 is no election).
    fn elected(
        &mut self,
        before: &MetadataImage,
        leader: i32,
        isr: Option<Vec<i32>>,
        how: &'static str,
    ) {
        let p = before.partition(TOPIC, 0).expect("the partition");
        let isr = isr.unwrap_or_else(|| self.ctl.partition().isr.clone());
        if leader == -1 {
            self.stats.leaderless += 1;
            self.ev(Ev::Leaderless { isr });
            return;
        }
        let live = before.brokers.get(&leader).is_some_and(|b| b.is_active());
        let unchecked = self.p.mutation == Some(Mutation::UncleanElectionUnchecked);
        if !unchecked && (!p.isr.contains(&leader) || !live) {
            self.fail(format!(
                "invariant 5: {how} election of {leader} outside the ISR {:?} (live {live})",
                p.isr
            ));
        }
        self.stats.elections += 1;
        let leader_epoch = self.ctl.partition().leader_epoch;
        self.ev(Ev::Elected {
            leader,
            leader_epoch,
            isr,
            how,
        });
    }

    fn ctl_broadcast(&mut self) {
        // The image is re-sent periodically: brokers keep fetching the metadata log.
        self.ctl.next_broadcast = self.tick + self.p.broadcast_every;
        for b in BROKERS {
            let msg = Msg::Metadata(self.ctl.image.clone());
            self.send(CONTROLLER, b as usize, msg);
        }
    }

    pub fn controller_on_msg(&mut self, from: usize, msg: Msg) {
        let now = self.now_ms();
        match msg {
            Msg::Register {
                broker,
                incarnation,
            } => {
                let op = RegisterBroker {
                    broker_id: broker,
                    incarnation_id: incarnation_id(broker, incarnation),
                    host: "localhost".into(),
                    port: 9092,
                    rack: None,
                    endpoints: Vec::new(),
                };
                let reply = Reply::Register {
                    to: from,
                    incarnation,
                };
                self.ctl_run(op, now, reply);
            }
            Msg::Heartbeat {
                broker,
                broker_epoch,
                metadata_offset,
            } => self.ctl_heartbeat(broker, broker_epoch, metadata_offset),
            Msg::Shutdown {
                broker,
                incarnation,
            } => {
                let reply = Reply::Shutdown {
                    to: from,
                    broker,
                    incarnation,
                };
                self.ctl_run(ControlledShutdown { broker_id: broker }, now, reply);
            }
            Msg::ShutdownComplete { broker } => {
                let image = self.decision_image();
                let ending =
                    |b: &runnel_metadata::BrokerRegistration| b.in_controlled_shutdown && !b.fenced;
                if image.brokers.get(&broker).is_some_and(ending) {
                    self.stats.fenced += 1;
                    self.ev(Ev::Fenced(broker));
                }
                self.ctl_run(ShutdownComplete { broker_id: broker }, now, Reply::None);
            }
            Msg::Alter { req, attempt } => {
                let isr_before = self
                    .decision_image()
                    .partition(TOPIC, 0)
                    .map_or(0, |p| p.isr.len());
                let op = AlterPartition {
                    topic_id: self.ctl.topic_id,
                    partition: 0,
                    broker_id: req.broker_id,
                    leader_epoch: req.leader_epoch,
                    partition_epoch: req.partition_epoch,
                    new_isr: req.new_isr.clone(),
                };
                let reply = Reply::Alter {
                    to: from,
                    req,
                    attempt,
                    isr_before,
                };
                self.ctl_run(op, now, reply);
            }
            _ => {}
        }
    }

    /// Spec D.2's promise: a broker told it may stop leads no partition that another live
    /// in-sync replica could lead (in the committed image).
    fn check_handed_over(&mut self, broker: i32) {
        let p = self.ctl.partition().clone();
        let image = self.ctl.image.clone();
        let successor = p
            .isr
            .iter()
            .any(|&r| r != broker && image.brokers.get(&r).is_some_and(|b| b.is_active()));
        if p.leader == broker && successor {
            self.fail(format!(
                "controlled shutdown: broker {broker} may stop while leading, ISR {:?}",
                p.isr
            ));
        }
    }

    /// A heartbeat as the shell's handle runs it: answered from the sessions while active
    /// (only the unfencing it leads to is queued), else through the queue (which
    /// re-activates the controller).
    fn ctl_heartbeat(&mut self, broker: i32, broker_epoch: i64, metadata_offset: i64) {
        let now = self.now_ms();
        let op = BrokerHeartbeat {
            broker_id: broker,
            broker_epoch,
            metadata_offset,
            offline_dirs: Vec::new(),
        };
        let active = self.ctl.active_term != 0
            && self.ctl.quorum.has_leader(self.tick)
            && self.ctl.quorum.term == self.ctl.active_term;
        if !active {
            return self.ctl_run(op, now, Reply::None);
        }
        let image = self.ctl.pipeline.speculative().clone();
        let early = op.answer_early(&mut self.ctl.sessions, &image, now);
        if let Some(Ok(e)) = early {
            if e.then_queue {
                self.ev(Ev::Unfenced(broker));
                self.ctl_run(op, now, Reply::None);
            }
        }
    }

    /// The quorum's commits and faults, then session expiry (the shell's `expire_sessions`),
    /// the periodic preferred-leader rebalance (`rebalance_leaders`) and the periodic image.
    /// Both run only on an active controller, as the shell's.
    pub fn controller_timers(&mut self) {
        self.quorum_tick();
        if self.ctl.active_term != 0 && self.ensure_active().is_ok() {
            self.expire_sessions();
            if self.p.rebalance_every > 0 && self.tick % self.p.rebalance_every == 0 {
                let image = self.decision_image();
                let records = self
                    .ctl
                    .core
                    .rebalance_leaders(&image, IMBALANCE_PERCENTAGE);
                if !records.is_empty() {
                    self.stats.preferred_elections += 1;
                    let _ = self.ctl_append(records, "preferred");
                    self.ctl_settle();
                }
            }
        }
        if self.tick >= self.ctl.next_broadcast {
            self.ctl_broadcast();
        }
    }

    fn expire_sessions(&mut self) {
        let now = self.now_ms();
        let image = self.decision_image();
        let expired = self.ctl.sessions.expired(&image, now);
        if expired.is_empty() {
            return;
        }
        for broker in expired {
            let image = self.decision_image();
            let records = self.ctl.core.fence_broker(&image, broker);
            self.stats.fenced += 1;
            self.ev(Ev::Fenced(broker));
            let _ = self.ctl_append(records, "offline");
        }
        self.ctl_settle();
    }

    /// After every commit: the pipeline's committed image is the quorum's (nothing
    /// uncommitted is visible in it), and the speculative image is committed plus in flight.
    fn check_commit(&mut self) {
        if self.ctl.active_term == 0 {
            return;
        }
        let committed = self.ctl.pipeline.committed().clone();
        if *committed != *self.ctl.quorum.truth {
            self.fail(format!(
                "the pipeline's committed image (offset {}) is not the quorum's (offset {})",
                committed.offset, self.ctl.quorum.truth.offset
            ));
        }
        let in_flight = self.ctl.pipeline.in_flight_records().count() as i64;
        let speculative = self.ctl.pipeline.speculative().offset;
        if speculative != committed.offset + in_flight {
            self.fail(format!(
                "speculative offset {speculative} is not committed {} + {in_flight} in flight",
                committed.offset
            ));
        }
    }

    /// A released answer: released in decision order, its records committed at their
    /// offsets (a reverted decision is never acknowledged), and what it tells the broker is
    /// what the committed image says.
    fn check_release(&mut self, a: &Answer) {
        if a.seq <= self.ctl.released {
            self.fail(format!(
                "answers out of order: {} released after {}",
                a.seq, self.ctl.released
            ));
        }
        for (offset, record) in &a.records {
            let at = usize::try_from(*offset).ok();
            let committed = at.and_then(|o| self.ctl.quorum.log.get(o));
            if committed != Some(record) {
                self.fail(format!(
                    "a decision was acknowledged that did not commit: {record:?} at offset {offset}, committed {committed:?}"
                ));
            }
        }
        if let Decided::Isr(isr, partition_epoch) = &a.decided {
            let p = self.ctl.partition().clone();
            let stale = p.partition_epoch < *partition_epoch
                || (p.partition_epoch == *partition_epoch && p.isr != *isr);
            if stale {
                self.fail(format!(
                    "AlterPartition acknowledged ISR {isr:?} at partition epoch {partition_epoch}, committed {:?} at {}",
                    p.isr, p.partition_epoch
                ));
            }
        }
    }
}
