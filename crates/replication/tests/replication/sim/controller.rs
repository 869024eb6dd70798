//! The controller of the simulation: a thin adapter around the production pure controller
//! (`runnel_metadata::Controller` and `BrokerSessions`, what the broker's `controller_shell.rs`
//! drives), with the simulated time passed in as `now_ms`. Every decision is the production
//! one: registration and its duplicate guard, heartbeats, session expiry (fencing), unfencing,
//! the elections and ISR shrinks of `on_commit` (initial, offline, leaderless), controlled
//! shutdown and its completion, AlterPartition, and the periodic preferred-leader rebalance.
//!
//! What stays here is the shell's plumbing: committing a batch (applying it to the image at
//! the next offsets; the simulated quorum never fails), `on_commit` until it has nothing left
//! (the shell's `settle`), the messages, the trace, and the check of invariant 5 on every
//! committed election. It never crashes (the metadata quorum has its own simulation in
//! runnel-raft).

use std::sync::Arc;

use runnel_metadata::controller::Pipeline;
use runnel_metadata::replication::AlterPartitionRequest;
use runnel_metadata::{
    BrokerSessions, ConfigResource, Controller as PureController, ControllerConfig, MetadataImage,
    MetadataRecord, PartitionImage,
};
use uuid::Uuid;

use super::net::{Msg, CONTROLLER};
use super::world::{Ev, Mutation, Params, World, BROKERS, TICK_MS, TOPIC};

/// Kafka's `leader.imbalance.per.broker.percentage` default.
const IMBALANCE_PERCENTAGE: u32 = 10;

pub struct Controller {
    pub image: Arc<MetadataImage>,
    pub topic_id: Uuid,
    /// The production controller's decisions.
    pub core: PureController,
    /// The production broker sessions (`broker.session.timeout.ms` = the seed's session).
    pub sessions: BrokerSessions,
    pub next_broadcast: u64,
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
    /// The bootstrapped cluster, after the production initial election (D.1).
    pub fn new(p: &Params, now_ms: i64) -> Controller {
        let topic_id = Uuid::from_u128(0x0513_u128 << 64 | 1);
        let numbered: Vec<(i64, MetadataRecord)> = bootstrap(p, topic_id)
            .into_iter()
            .enumerate()
            .map(|(o, r)| (o as i64, r))
            .collect();
        let image = MetadataImage::empty("sim".into())
            .apply(&numbered)
            .expect("initial image");
        let mut core = PureController::new(ControllerConfig::default(), 1, p.seed);
        let elected = core.on_commit(&image, now_ms);
        let next = image.offset + 1;
        let numbered: Vec<(i64, MetadataRecord)> = (next..).zip(elected).collect();
        let image = image.apply(&numbered).expect("initial election");
        let timeout_ms = p.session_ticks as i64 * TICK_MS;
        let sessions = BrokerSessions::activate(&image, timeout_ms, now_ms);
        let ctl = Controller {
            image: Arc::new(image),
            topic_id,
            core,
            sessions,
            next_broadcast: 0,
        };
        assert!(ctl.partition().leader != -1, "all brokers live: a leader");
        ctl
    }

    pub fn partition(&self) -> &PartitionImage {
        self.image.partition(TOPIC, 0).expect("the partition")
    }
}

impl World {
    /// Commits one batch at the next offsets through the shell's pipeline (`Pipeline::append`
    /// on the speculative image, then the commit listener; the simulated quorum commits at
    /// once and never fails); checks invariant 5 on each election in it and traces what
    /// changed.
    fn ctl_commit(&mut self, records: Vec<MetadataRecord>, how: &'static str) {
        if records.is_empty() {
            return;
        }
        let before = self.ctl.image.clone();
        let mut pipeline: Pipeline<()> = Pipeline::new(before.clone());
        pipeline
            .append(records.clone(), 0)
            .unwrap_or_else(|e| panic!("controller record rejected by the image: {}", e.message));
        let next = pipeline.speculative().clone();
        if pipeline.commit(next.clone()).is_err() || pipeline.in_flight() != 0 {
            panic!("the simulated quorum commits every batch as appended");
        }
        self.ctl.image = next;
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

    /// Commits `records`, then lets the production state machines react until they are
    /// stable (the shell's `commit` + `settle`), and re-sends the image.
    fn ctl_decide(&mut self, records: Vec<MetadataRecord>, how: &'static str) {
        let changed = !records.is_empty();
        self.ctl_commit(records, how);
        let mut settled = false;
        for _ in 0..16 {
            let now = self.now_ms();
            let image = self.ctl.image.clone();
            let follow_up = self.ctl.core.on_commit(&image, now);
            if follow_up.is_empty() {
                settled = true;
                break;
            }
            self.ctl_commit(follow_up, "offline");
        }
        assert!(settled, "the controller's state machines did not settle");
        if changed {
            self.ctl_broadcast();
        }
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
        match msg {
            Msg::Register {
                broker,
                incarnation,
            } => self.ctl_register(from, broker, incarnation),
            Msg::Heartbeat {
                broker,
                broker_epoch,
                metadata_offset,
            } => self.ctl_heartbeat(broker, broker_epoch, metadata_offset),
            Msg::Shutdown {
                broker,
                incarnation,
            } => {
                let image = self.ctl.image.clone();
                let (records, remaining) = self.ctl.core.controlled_shutdown(&image, broker);
                self.ctl_decide(records, "controlled shutdown");
                let may_stop = remaining == 0;
                if may_stop {
                    self.check_handed_over(broker);
                }
                let msg = Msg::ShutdownResp {
                    incarnation,
                    may_stop,
                };
                self.send(CONTROLLER, from, msg);
            }
            Msg::ShutdownComplete { broker } => {
                let image = self.ctl.image.clone();
                let records = self.ctl.core.shutdown_complete(&image, broker);
                if !records.is_empty() {
                    self.ctl.sessions.remove(broker);
                    self.stats.fenced += 1;
                    self.ev(Ev::Fenced(broker));
                    self.ctl_decide(records, "offline");
                }
            }
            Msg::Alter { req, attempt } => self.ctl_alter(from, req, attempt),
            _ => {}
        }
    }

    /// Spec D.2's promise: a broker told it may stop leads no partition that another live
    /// in-sync replica could lead.
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

    /// BrokerRegistration as the shell's `register`: the duplicate guard, the fenced
    /// registration, its session from now, then the state machines.
    fn ctl_register(&mut self, from: usize, broker: i32, incarnation: u64) {
        let now = self.now_ms();
        let image = self.ctl.image.clone();
        let inc = incarnation_id(broker, incarnation);
        let decided = self
            .ctl
            .sessions
            .check_registration(&image, broker, inc, now)
            .and_then(|()| {
                self.ctl.core.register_broker(
                    &image,
                    runnel_metadata::controller::RegisterBroker {
                        broker_id: broker,
                        incarnation_id: inc,
                        host: "localhost".into(),
                        port: 9092,
                        rack: None,
                        endpoints: Vec::new(),
                    },
                )
            });
        let records = match decided {
            Ok(records) => records,
            Err(e) => {
                self.stats.registrations_refused += 1;
                let result = Err(e.code);
                self.send(
                    CONTROLLER,
                    from,
                    Msg::RegisterResp {
                        incarnation,
                        result,
                    },
                );
                return;
            }
        };
        let epoch = match records.first() {
            Some(MetadataRecord::RegisterBroker { broker_epoch, .. }) => *broker_epoch,
            _ => unreachable!("a registration is one RegisterBroker record"),
        };
        self.ctl_commit(records, "registration");
        let offset = self.ctl.image.offset;
        self.ctl
            .sessions
            .registered(broker, inc, epoch, offset, now);
        self.ev(Ev::Registered { broker, offset });
        self.ctl_decide(Vec::new(), "offline");
        self.ctl_broadcast();
        let result = Ok((epoch, offset));
        self.send(
            CONTROLLER,
            from,
            Msg::RegisterResp {
                incarnation,
                result,
            },
        );
    }

    /// A heartbeat as the shell's: the session rule, then the unfencing it leads to.
    fn ctl_heartbeat(&mut self, broker: i32, broker_epoch: i64, metadata_offset: i64) {
        let now = self.now_ms();
        let image = self.ctl.image.clone();
        let outcome =
            self.ctl
                .sessions
                .heartbeat(&image, broker, broker_epoch, metadata_offset, now);
        if !outcome.is_ok_and(|o| o.unfence) {
            return;
        }
        let records = self
            .ctl
            .core
            .unfence_registration(&image, broker, broker_epoch);
        if !records.is_empty() {
            self.ev(Ev::Unfenced(broker));
            self.ctl_decide(records, "offline");
        }
    }

    fn ctl_alter(&mut self, from: usize, req: AlterPartitionRequest, attempt: u64) {
        let image = self.ctl.image.clone();
        let topic_id = self.ctl.topic_id;
        let before = self.ctl.partition().isr.len();
        let result = match self.ctl.core.alter_partition(&image, &topic_id, 0, &req) {
            Ok((d, records)) => {
                if !records.is_empty() {
                    self.ctl_decide(records, "alter partition");
                    if d.isr.len() < before {
                        self.stats.shrinks_committed += 1;
                    } else {
                        self.stats.expands_committed += 1;
                    }
                    self.ev(Ev::IsrCommitted {
                        isr: d.isr.clone(),
                        partition_epoch: d.partition_epoch,
                    });
                }
                Ok(d)
            }
            Err(e) => {
                *self.stats.alter_rejected.entry(e.code).or_default() += 1;
                self.ev(Ev::AlterRejected {
                    broker: req.broker_id,
                    new_isr: req.new_isr.clone(),
                    code: e.code,
                });
                Err(e.code)
            }
        };
        let msg = Msg::AlterResp {
            req,
            attempt,
            result,
        };
        self.send(CONTROLLER, from, msg);
    }

    /// Session expiry (the shell's `expire_sessions`), the periodic preferred-leader
    /// rebalance (`rebalance_leaders`) and the periodic image.
    pub fn controller_timers(&mut self) {
        let now = self.now_ms();
        let image = self.ctl.image.clone();
        for broker in self.ctl.sessions.expired(&image, now) {
            let image = self.ctl.image.clone();
            let records = self.ctl.core.fence_broker(&image, broker);
            self.stats.fenced += 1;
            self.ev(Ev::Fenced(broker));
            self.ctl_decide(records, "offline");
        }
        if self.p.rebalance_every > 0 && self.tick % self.p.rebalance_every == 0 {
            let image = self.ctl.image.clone();
            let records = self
                .ctl
                .core
                .rebalance_leaders(&image, IMBALANCE_PERCENTAGE);
            if !records.is_empty() {
                self.stats.preferred_elections += 1;
                self.ctl_decide(records, "preferred");
            }
        }
        if self.tick >= self.ctl.next_broadcast {
            self.ctl_broadcast();
        }
    }
}
