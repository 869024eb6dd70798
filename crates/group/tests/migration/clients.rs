//! Simulated consumers: a classic one (JoinGroup / SyncGroup / Heartbeat, eager like
//! librdkafka's `range` or cooperative like `cooperative-sticky`, leader-side assignment when
//! it is the leader of a classic group) and a KIP-848 one (ConsumerGroupHeartbeat, as
//! librdkafka's `group.protocol=consumer`). Each tracks what it owns, i.e. consumes.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use runnel_group::consumer_group::{Assignment, ConsumerHeartbeat, ConsumerHeartbeatResponse};
use runnel_group::consumer_protocol::{self, TopicPartitions};
use runnel_group::*;

use super::world::{World, CLASSIC_SESSION, REBALANCE};

/// (topic, partition), the unit of ownership the checks compare.
pub type Tp = (String, i32);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Must send a JoinGroup on the next poll.
    Out,
    Joining(RequestId),
    Syncing(RequestId),
    Stable,
}

#[derive(Debug, Clone)]
pub struct ClassicClient {
    pub group: String,
    pub client_id: String,
    pub member_id: String,
    pub generation: i32,
    pub topics: Vec<String>,
    /// Cooperative: keeps its partitions across a rejoin and reports them.
    pub cooperative: bool,
    pub owned: BTreeSet<Tp>,
    pub phase: Phase,
    /// Answers seen, for assertions.
    pub last_heartbeat: i16,
    pub last_join: Option<JoinResponse>,
}

impl ClassicClient {
    pub fn new(group: &str, client_id: &str, topics: &[&str], cooperative: bool) -> Self {
        ClassicClient {
            group: group.into(),
            client_id: client_id.into(),
            member_id: String::new(),
            generation: -1,
            topics: topics.iter().map(|t| t.to_string()).collect(),
            cooperative,
            owned: BTreeSet::new(),
            phase: Phase::Out,
            last_heartbeat: 0,
            last_join: None,
        }
    }

    fn protocol(&self) -> &'static str {
        if self.cooperative {
            "cooperative-sticky"
        } else {
            "range"
        }
    }

    pub fn join_request(&self) -> JoinRequest {
        let topics: Vec<&str> = self.topics.iter().map(String::as_str).collect();
        let mut owned = TopicPartitions::new();
        for (t, p) in &self.owned {
            owned.entry(t.clone()).or_default().insert(*p);
        }
        let subscription = consumer_protocol::encode_subscription(1, &topics, &owned, None);
        JoinRequest {
            group_id: self.group.clone(),
            member_id: self.member_id.clone(),
            group_instance_id: None,
            client_id: self.client_id.clone(),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: CLASSIC_SESSION,
            rebalance_timeout_ms: REBALANCE,
            protocol_type: "consumer".into(),
            protocols: vec![(self.protocol().to_string(), subscription)],
            api_version: 5,
        }
    }

    /// Gives up its partitions as a rejoin requires: all of them if eager.
    fn rejoin(&mut self) {
        if !self.cooperative {
            self.owned.clear();
        }
        self.phase = Phase::Out;
    }

    /// Starts over without a member id (UNKNOWN_MEMBER_ID) or generation (ILLEGAL_GENERATION):
    /// its partitions are lost.
    fn reset(&mut self, forget_id: bool) {
        if forget_id {
            self.member_id.clear();
        }
        self.generation = -1;
        self.owned.clear();
        self.phase = Phase::Out;
    }

    /// One turn of the client's poll loop.
    pub fn poll(&mut self, w: &mut World) {
        match self.phase.clone() {
            Phase::Out => {
                let id = w.join(self.join_request());
                self.phase = Phase::Joining(id);
            }
            Phase::Joining(id) => {
                if let Some(r) = w.take_join(id) {
                    self.on_join(w, r);
                }
            }
            Phase::Syncing(id) => {
                if let Some(r) = w.take_sync(id) {
                    self.on_sync(r);
                }
            }
            Phase::Stable => {
                let code = w.heartbeat(HeartbeatRequest {
                    group_id: self.group.clone(),
                    generation_id: self.generation,
                    member_id: self.member_id.clone(),
                    group_instance_id: None,
                });
                self.last_heartbeat = code;
                match code {
                    0 | 16 | 15 => {}
                    27 => self.rejoin(),
                    22 => self.reset(false),
                    25 => self.reset(true),
                    other => panic!("{}: heartbeat answered {other}", self.client_id),
                }
            }
        }
    }

    fn on_join(&mut self, w: &mut World, r: JoinResponse) {
        self.last_join = Some(r.clone());
        match r.error_code {
            0 => {
                self.member_id = r.member_id.clone();
                self.generation = r.generation_id;
                let assignments = if r.leader == self.member_id {
                    leader_assignment(w, &r.members, r.protocol_name.as_deref())
                } else {
                    Vec::new()
                };
                let id = w.sync(SyncRequest {
                    group_id: self.group.clone(),
                    generation_id: self.generation,
                    member_id: self.member_id.clone(),
                    group_instance_id: None,
                    protocol_type: r.protocol_type.clone(),
                    protocol_name: r.protocol_name.clone(),
                    assignments,
                });
                self.phase = Phase::Syncing(id);
            }
            79 => {
                self.member_id = r.member_id;
                self.phase = Phase::Out;
            }
            25 => self.reset(true),
            27 | 16 | 15 => self.phase = Phase::Out,
            other => panic!("{}: join answered {other}: {r:?}", self.client_id),
        }
    }

    fn on_sync(&mut self, r: SyncResponse) {
        match r.error_code {
            0 => {
                let assigned: BTreeSet<Tp> = consumer_protocol::decode_assignment(&r.assignment)
                    .map(|a| flatten(&a))
                    .unwrap_or_default();
                let revoked = self.owned.difference(&assigned).count() > 0;
                self.owned = assigned;
                // A cooperative client that had to give partitions back joins again at once
                // (the second rebalance of the cooperative protocol).
                self.phase = if self.cooperative && revoked {
                    Phase::Out
                } else {
                    Phase::Stable
                };
            }
            27 | 16 | 15 => self.rejoin(),
            22 => self.reset(false),
            25 => self.reset(true),
            other => panic!("{}: sync answered {other}", self.client_id),
        }
    }

    pub fn leave(&mut self, w: &mut World) -> Vec<i16> {
        let codes = w.leave(&self.group, &[(self.member_id.clone(), None)]);
        self.reset(true);
        codes
    }
}

pub fn flatten(a: &TopicPartitions) -> BTreeSet<Tp> {
    a.iter()
        .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
        .collect()
}

/// The leader's assignment in a classic group: range per topic over the members subscribed
/// to it; for cooperative members a partition another member still reports owning is left
/// out this round (its owner gives it up and joins again, as cooperative-sticky does).
fn leader_assignment(
    w: &World,
    members: &[JoinMember],
    protocol: Option<&str>,
) -> Vec<(String, Bytes)> {
    let cooperative = protocol == Some("cooperative-sticky");
    let mut subs: BTreeMap<String, consumer_protocol::Subscription> = BTreeMap::new();
    for m in members {
        if let Ok(s) = consumer_protocol::decode_subscription(&m.metadata) {
            subs.insert(m.member_id.clone(), s);
        }
    }
    let mut owner: BTreeMap<Tp, String> = BTreeMap::new();
    for (id, s) in &subs {
        for tp in flatten(&s.owned_partitions) {
            owner.insert(tp, id.clone());
        }
    }
    let mut out: BTreeMap<String, TopicPartitions> = subs
        .keys()
        .map(|id| (id.clone(), TopicPartitions::new()))
        .collect();
    let topics: BTreeSet<String> = subs.values().flat_map(|s| s.topics.clone()).collect();
    for topic in topics {
        let takers: Vec<&String> = subs
            .iter()
            .filter(|(_, s)| s.topics.contains(&topic))
            .map(|(id, _)| id)
            .collect();
        let n = w.partitions(&topic);
        let k = takers.len() as i32;
        for p in 0..n {
            let who = takers[((p * k) / n.max(1)) as usize];
            let tp = (topic.clone(), p);
            if cooperative && owner.get(&tp).is_some_and(|o| o != who) {
                continue;
            }
            out.entry(who.clone())
                .or_default()
                .entry(topic.clone())
                .or_default()
                .insert(p);
        }
    }
    out.into_iter()
        .map(|(id, a)| {
            let version = subs.get(&id).map_or(0, |s| s.version);
            (id, consumer_protocol::encode_assignment(version, &a))
        })
        .collect()
}

/// A `group.protocol=consumer` client (member ids generated by the client, v1).
#[derive(Debug, Clone)]
pub struct KipClient {
    pub group: String,
    pub member_id: String,
    pub topics: Vec<String>,
    pub epoch: i32,
    pub owned: Assignment,
    pub last: Option<ConsumerHeartbeatResponse>,
}

impl KipClient {
    pub fn new(group: &str, member_id: &str, topics: &[&str]) -> Self {
        KipClient {
            group: group.into(),
            member_id: member_id.into(),
            topics: topics.iter().map(|t| t.to_string()).collect(),
            epoch: 0,
            owned: Assignment::new(),
            last: None,
        }
    }

    fn request(&self) -> ConsumerHeartbeat {
        let owned = self
            .owned
            .iter()
            .map(|(t, ps)| (*t, ps.iter().copied().collect()))
            .collect();
        if self.epoch == 0 {
            return ConsumerHeartbeat {
                group_id: self.group.clone(),
                member_id: self.member_id.clone(),
                member_epoch: 0,
                rebalance_timeout_ms: REBALANCE,
                subscribed_topic_names: Some(self.topics.clone()),
                topic_partitions: Some(vec![]),
                api_version: 1,
                ..Default::default()
            };
        }
        ConsumerHeartbeat {
            group_id: self.group.clone(),
            member_id: self.member_id.clone(),
            member_epoch: self.epoch,
            rebalance_timeout_ms: -1,
            topic_partitions: Some(owned),
            api_version: 1,
            ..Default::default()
        }
    }

    pub fn poll(&mut self, w: &mut World) -> ConsumerHeartbeatResponse {
        let r = w.consumer_heartbeat(self.request());
        match r.error_code {
            0 => {
                self.epoch = r.member_epoch;
                if let Some(a) = &r.assignment {
                    let mut owned = Assignment::new();
                    for (t, ps) in a {
                        owned.entry(*t).or_default().extend(ps.iter().copied());
                    }
                    self.owned = owned;
                }
            }
            110 | 25 => {
                self.epoch = 0;
                self.owned.clear();
            }
            // Not upgraded (GROUP_ID_NOT_FOUND, GROUP_MAX_SIZE_REACHED) or the coordinator
            // moved: try again later.
            69 | 81 | 16 | 15 => {}
            other => panic!("{}: heartbeat answered {other}: {r:?}", self.member_id),
        }
        self.last = Some(r.clone());
        r
    }

    pub fn leave(&mut self, w: &mut World) -> ConsumerHeartbeatResponse {
        let r = w.consumer_heartbeat(ConsumerHeartbeat {
            group_id: self.group.clone(),
            member_id: self.member_id.clone(),
            member_epoch: -1,
            rebalance_timeout_ms: -1,
            api_version: 1,
            ..Default::default()
        });
        self.epoch = 0;
        self.owned.clear();
        r
    }

    pub fn owned_tps(&self, w: &World) -> BTreeSet<Tp> {
        let mut out = BTreeSet::new();
        for (id, ps) in &self.owned {
            if let Some(name) = w.topics.name_of(id) {
                out.extend(ps.iter().map(|p| (name.to_string(), *p)));
            }
        }
        out
    }
}
