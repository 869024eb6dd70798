//! The controller of the simulation: the metadata image is its state (real `MetadataImage`
//! records, so leader and partition epochs move exactly as the image says), broker sessions
//! (registration fences, heartbeats keep alive and unfence, a lapsed session fences), the
//! offline election (`replication::offline_election`, unclean disabled), controlled
//! shutdown (`controlled_shutdown_election`), the periodic preferred election
//! (`elect_leaders` PREFERRED) and AlterPartition (`replication::validate_alter_partition`).
//! It never crashes (the metadata quorum has its own simulation in runnel-raft).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use runnel_metadata::replication::{
    controlled_shutdown_election, elect_leaders, initial_election, offline_election,
    validate_alter_partition, ElectLeadersType, Election,
};
use runnel_metadata::{MetadataImage, MetadataRecord, PartitionImage};
use uuid::Uuid;

use super::net::{Msg, CONTROLLER};
use super::world::{Ev, Mutation, World, BROKERS, TOPIC};

pub struct Controller {
    pub image: Arc<MetadataImage>,
    pub topic_id: Uuid,
    pub last_heartbeat: BTreeMap<i32, u64>,
    /// Offset of each broker's current registration, and its incarnation.
    pub registration: BTreeMap<i32, (i64, u64)>,
    pub next_broadcast: u64,
}

fn register(broker_id: i32, incarnation: u64, broker_epoch: i64, fenced: bool) -> MetadataRecord {
    MetadataRecord::RegisterBroker {
        broker_id,
        incarnation_id: Uuid::from_u128(u128::from(incarnation) << 8 | broker_id as u128),
        broker_epoch,
        host: "localhost".into(),
        port: 9092,
        rack: None,
        fenced,
    }
}

impl Controller {
    pub fn new(assignment: &[i32]) -> Controller {
        let topic_id = Uuid::from_u128(0x0513_u128 << 64 | 1);
        let mut records: Vec<MetadataRecord> =
            BROKERS.iter().map(|&b| register(b, 1, 1, false)).collect();
        records.push(MetadataRecord::Topic {
            name: TOPIC.into(),
            topic_id,
        });
        records.push(MetadataRecord::Partition {
            topic_id,
            partition_id: 0,
            replicas: assignment.to_vec(),
            isr: vec![],
            leader: -1,
            leader_epoch: 0,
            partition_epoch: 0,
            adding_replicas: vec![],
            removing_replicas: vec![],
        });
        let live: BTreeSet<i32> = BROKERS.iter().copied().collect();
        let e = initial_election(assignment, &live).expect("all brokers live");
        records.push(MetadataRecord::PartitionChange {
            topic_id,
            partition_id: 0,
            leader: Some(e.leader),
            isr: Some(e.isr),
            replicas: None,
            adding_replicas: None,
            removing_replicas: None,
        });
        let numbered: Vec<(i64, MetadataRecord)> = records
            .into_iter()
            .enumerate()
            .map(|(o, r)| (o as i64, r))
            .collect();
        let image = MetadataImage::empty("sim".into())
            .apply(&numbered)
            .expect("initial image");
        Controller {
            image: Arc::new(image),
            topic_id,
            last_heartbeat: BROKERS.iter().map(|&b| (b, 0)).collect(),
            registration: BROKERS.iter().map(|&b| (b, (0, 1))).collect(),
            next_broadcast: 0,
        }
    }

    pub fn partition(&self) -> &PartitionImage {
        self.image.partition(TOPIC, 0).expect("the partition")
    }

    pub fn active(&self) -> BTreeSet<i32> {
        self.image
            .brokers
            .values()
            .filter(|b| b.is_active())
            .map(|b| b.id)
            .collect()
    }

    fn change(&self, leader: Option<i32>, isr: Vec<i32>) -> MetadataRecord {
        MetadataRecord::PartitionChange {
            topic_id: self.topic_id,
            partition_id: 0,
            leader,
            isr: Some(isr),
            replicas: None,
            adding_replicas: None,
            removing_replicas: None,
        }
    }
}

impl World {
    /// Commits one record (the next offset) to the controller's image.
    fn ctl_apply(&mut self, record: MetadataRecord) -> i64 {
        let offset = self.ctl.image.offset + 1;
        let next = self
            .ctl
            .image
            .apply(&[(offset, record)])
            .unwrap_or_else(|e| panic!("controller record rejected by the image: {e}"));
        self.ctl.image = Arc::new(next);
        offset
    }

    fn ctl_broadcast(&mut self) {
        // The image is re-sent periodically: brokers keep fetching the metadata log.
        self.ctl.next_broadcast = self.tick + self.p.broadcast_every;
        for b in BROKERS {
            let msg = Msg::Metadata(self.ctl.image.clone());
            self.send(CONTROLLER, b as usize, msg);
        }
    }

    /// After a broker's state changed (the controller's `on_commit` for this partition):
    /// a leader that is not active is replaced by the offline election (D.3, unclean
    /// disabled); failing that the partition goes leaderless keeping its last ISR member
    /// (as `controller/commit.rs`); with an active leader, inactive followers leave the ISR.
    fn reconcile(&mut self) {
        let p = self.ctl.partition().clone();
        let active = self.ctl.active();
        if p.leader != -1 && active.contains(&p.leader) {
            let live_isr: Vec<i32> = p
                .isr
                .iter()
                .copied()
                .filter(|r| active.contains(r))
                .collect();
            if live_isr != p.isr {
                let rec = self.ctl.change(None, live_isr);
                self.ctl_apply(rec);
            }
            return;
        }
        let unclean = matches!(
            self.p.mutation,
            Some(Mutation::UncleanElection | Mutation::UncleanElectionUnchecked)
        );
        match offline_election(&p.replicas, &p.isr, &active, unclean) {
            Some(e) => self.elected(&p, &active, e, "offline"),
            None if p.leader != -1 => {
                let kept = if p.isr.len() <= 1 {
                    p.isr.clone()
                } else if p.isr.contains(&p.leader) {
                    vec![p.leader]
                } else {
                    p.isr[..1].to_vec()
                };
                let rec = self.ctl.change(Some(-1), kept.clone());
                self.ctl_apply(rec);
                self.stats.leaderless += 1;
                self.ev(Ev::Leaderless { isr: kept });
            }
            None => {}
        }
    }

    /// Commits an election, checking invariant 5: only a live in-sync replica is elected.
    fn elected(
        &mut self,
        p: &PartitionImage,
        active: &BTreeSet<i32>,
        e: Election,
        how: &'static str,
    ) {
        let unchecked = self.p.mutation == Some(Mutation::UncleanElectionUnchecked);
        if !unchecked && (e.unclean || !p.isr.contains(&e.leader) || !active.contains(&e.leader)) {
            self.fail(format!(
                "invariant 5: {how} election of {} (unclean {}) outside the ISR {:?} / live {:?}",
                e.leader, e.unclean, p.isr, active
            ));
        }
        let rec = self.ctl.change(Some(e.leader), e.isr.clone());
        self.ctl_apply(rec);
        self.stats.elections += 1;
        let leader_epoch = self.ctl.partition().leader_epoch;
        self.ev(Ev::Elected {
            leader: e.leader,
            leader_epoch,
            isr: e.isr,
            how,
        });
    }

    fn set_fenced(&mut self, broker: i32, fenced: bool) {
        let epoch = self.ctl.image.brokers[&broker].epoch;
        self.ctl_apply(MetadataRecord::BrokerRegistrationChange {
            broker_id: broker,
            broker_epoch: epoch,
            fenced: Some(fenced),
            in_controlled_shutdown: None,
        });
        if fenced {
            self.stats.fenced += 1;
            self.ev(Ev::Fenced(broker));
        } else {
            self.ev(Ev::Unfenced(broker));
        }
        self.reconcile();
        self.ctl_broadcast();
    }

    pub fn controller_on_msg(&mut self, from: usize, msg: Msg) {
        match msg {
            Msg::Register {
                broker,
                incarnation,
            } => {
                let (offset, current) = self.ctl.registration[&broker];
                if incarnation < current {
                    return; // a delayed request of an earlier incarnation
                }
                if current == incarnation {
                    // A retry: answer again.
                    self.send(
                        CONTROLLER,
                        from,
                        Msg::RegisterResp {
                            incarnation,
                            offset,
                        },
                    );
                    return;
                }
                // A new incarnation registers fenced; its leaderships and ISR memberships
                // go in the same batch, so no image shows it leading its old epoch.
                let epoch = self.ctl.image.brokers[&broker].epoch + 1;
                let offset = self.ctl_apply(register(broker, incarnation, epoch, true));
                self.ctl.registration.insert(broker, (offset, incarnation));
                self.ctl.last_heartbeat.insert(broker, self.tick);
                self.ev(Ev::Registered { broker, offset });
                self.reconcile();
                self.send(
                    CONTROLLER,
                    from,
                    Msg::RegisterResp {
                        incarnation,
                        offset,
                    },
                );
                self.ctl_broadcast();
            }
            Msg::Shutdown {
                broker,
                incarnation,
            } => {
                let (_, current) = self.ctl.registration[&broker];
                if current != incarnation {
                    return;
                }
                let reg = self.ctl.image.brokers[&broker].clone();
                if !reg.fenced {
                    if !reg.in_controlled_shutdown {
                        self.ctl_apply(MetadataRecord::BrokerRegistrationChange {
                            broker_id: broker,
                            broker_epoch: reg.epoch,
                            fenced: None,
                            in_controlled_shutdown: Some(true),
                        });
                    }
                    // `controller/controlled_shutdown.rs`: move the leadership to an in-sync
                    // replica that is not shutting down; then the usual reconciliation drops
                    // shutting-down followers from the ISR.
                    let p = self.ctl.partition().clone();
                    let shutting_down: BTreeSet<i32> = self
                        .ctl
                        .image
                        .brokers
                        .values()
                        .filter(|b| b.in_controlled_shutdown)
                        .map(|b| b.id)
                        .collect();
                    let live = self.ctl.active();
                    if p.leader == broker {
                        if let Some(e) =
                            controlled_shutdown_election(&p.replicas, &p.isr, &live, &shutting_down)
                        {
                            self.elected(&p, &live, e, "controlled shutdown");
                        }
                    }
                    self.reconcile();
                    self.ctl_broadcast();
                }
                let may_stop = self.ctl.partition().leader != broker;
                self.send(
                    CONTROLLER,
                    from,
                    Msg::ShutdownResp {
                        incarnation,
                        may_stop,
                    },
                );
            }
            Msg::Heartbeat {
                broker,
                incarnation,
                metadata_offset,
            } => {
                let (offset, current) = self.ctl.registration[&broker];
                if current != incarnation {
                    return;
                }
                self.ctl.last_heartbeat.insert(broker, self.tick);
                if self.ctl.image.brokers[&broker].fenced && metadata_offset >= offset {
                    self.set_fenced(broker, false);
                }
            }
            Msg::Alter { req, attempt } => {
                let image = self.ctl.image.clone();
                let p = self.ctl.partition().clone();
                let eligible = |b: i32| image.brokers.get(&b).is_some_and(|r| r.is_active());
                let result = validate_alter_partition(&p, &req, eligible);
                let result = match result {
                    Ok(d) => {
                        if d.changed {
                            let rec = self.ctl.change(None, d.isr.clone());
                            self.ctl_apply(rec);
                            let now = self.ctl.partition().clone();
                            assert_eq!(now.partition_epoch, d.partition_epoch);
                            if d.isr.len() < p.isr.len() {
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
                let changed = matches!(&result, Ok(d) if d.changed);
                self.send(
                    CONTROLLER,
                    from,
                    Msg::AlterResp {
                        req,
                        attempt,
                        result,
                    },
                );
                if changed {
                    self.ctl_broadcast();
                }
            }
            _ => {}
        }
    }

    /// Session expiry and the periodic image.
    pub fn controller_timers(&mut self) {
        let expired: Vec<i32> = BROKERS
            .iter()
            .copied()
            .filter(|b| {
                !self.ctl.image.brokers[b].fenced
                    && self.tick > self.ctl.last_heartbeat[b] + self.p.session_ticks
            })
            .collect();
        for b in expired {
            self.set_fenced(b, true);
        }
        if self.p.rebalance_every > 0 && self.tick % self.p.rebalance_every == 0 {
            // The periodic preferred-leader election (spec F; ElectLeaders PREFERRED).
            let p = self.ctl.partition().clone();
            let active = self.ctl.active();
            if let Ok(e) = elect_leaders(
                ElectLeadersType::Preferred,
                &p.replicas,
                &p.isr,
                p.leader,
                &active,
            ) {
                self.stats.preferred_elections += 1;
                self.elected(&p, &active, e, "preferred");
                self.ctl_broadcast();
            }
        }
        if self.tick >= self.ctl.next_broadcast {
            self.ctl_broadcast();
        }
    }
}
