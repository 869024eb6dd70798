//! Test harness: a coordinator with deterministic member ids, a clock, a topics view, and a
//! simulated client that heartbeats like librdkafka / the Java consumer (reports what it owns,
//! drops revoked partitions as soon as a response tells it to).

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use runnel_group::consumer_group::*;
use uuid::Uuid;

pub const REBALANCE_TIMEOUT: i32 = 30_000;

pub fn config() -> ConsumerGroupConfig {
    ConsumerGroupConfig::default()
}

pub fn coordinator(config: ConsumerGroupConfig) -> ConsumerGroups {
    let mut n = 0u64;
    ConsumerGroups::with_member_id_generator(
        config,
        Box::new(move || {
            n += 1;
            format!("gen-{n}")
        }),
    )
}

pub struct Harness {
    pub c: ConsumerGroups,
    pub now: i64,
    pub topics: TopicsView,
    next_topic: u128,
}

/// A join (epoch 0) with every required field, v1 (client-generated member id).
pub fn join_req(group: &str, member: &str, topics: &[&str]) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        group_id: group.into(),
        member_id: member.into(),
        member_epoch: 0,
        instance_id: None,
        rack_id: None,
        rebalance_timeout_ms: REBALANCE_TIMEOUT,
        subscribed_topic_names: Some(topics.iter().map(|t| t.to_string()).collect()),
        subscribed_topic_regex: None,
        server_assignor: None,
        topic_partitions: Some(vec![]),
        api_version: 1,
    }
}

/// A regular heartbeat: only epoch and (optionally) owned partitions.
pub fn hb_req(
    group: &str,
    member: &str,
    epoch: i32,
    owned: Option<&Assignment>,
) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        group_id: group.into(),
        member_id: member.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        topic_partitions: owned.map(wire),
        api_version: 1,
        ..Default::default()
    }
}

pub fn wire(a: &Assignment) -> Vec<(Uuid, Vec<i32>)> {
    a.iter()
        .filter(|(_, ps)| !ps.is_empty())
        .map(|(t, ps)| (*t, ps.iter().copied().collect()))
        .collect()
}

pub fn from_wire(w: &[(Uuid, Vec<i32>)]) -> Assignment {
    let mut a = Assignment::new();
    for (t, ps) in w {
        if !ps.is_empty() {
            a.entry(*t).or_default().extend(ps.iter().copied());
        }
    }
    a
}

pub fn count(a: &Assignment) -> usize {
    a.values().map(BTreeSet::len).sum()
}

impl Harness {
    pub fn new(config: ConsumerGroupConfig) -> Self {
        Harness {
            c: coordinator(config),
            now: 1_000_000,
            topics: TopicsView::default(),
            next_topic: 1,
        }
    }

    /// Creates (or resizes, keeping the id) a topic.
    pub fn topic(&mut self, name: &str, partitions: i32) -> Uuid {
        let id = match self.topics.topics.get(name) {
            Some((id, _)) => *id,
            None => {
                self.next_topic += 1;
                Uuid::from_u128(self.next_topic)
            }
        };
        self.topics
            .topics
            .insert(name.to_string(), (id, partitions));
        self.topics.version += 1;
        id
    }

    pub fn id(&self, name: &str) -> Uuid {
        self.topics.topics[name].0
    }

    /// `[(topic, [partitions])]` as an assignment.
    pub fn asg(&self, parts: &[(&str, &[i32])]) -> Assignment {
        parts
            .iter()
            .map(|(t, ps)| (self.id(t), ps.iter().copied().collect()))
            .collect()
    }

    pub fn send(&mut self, req: ConsumerHeartbeat) -> ConsumerHeartbeatResponse {
        let group = req.group_id.clone();
        let r = self.c.heartbeat(self.now, req, &self.topics);
        self.c.check_invariants().unwrap();
        assert_eq!(
            r.heartbeat_interval_ms,
            self.c.timeouts(&group).heartbeat_interval_ms
        );
        r
    }

    pub fn join(
        &mut self,
        group: &str,
        member: &str,
        topics: &[&str],
    ) -> ConsumerHeartbeatResponse {
        self.send(join_req(group, member, topics))
    }

    pub fn hb(
        &mut self,
        group: &str,
        member: &str,
        epoch: i32,
        owned: Option<&Assignment>,
    ) -> ConsumerHeartbeatResponse {
        self.send(hb_req(group, member, epoch, owned))
    }

    pub fn tick(&mut self, advance_ms: i64) {
        self.now += advance_ms;
        self.c.tick(self.now, &self.topics);
        self.c.check_invariants().unwrap();
    }

    pub fn describe(&self, group: &str) -> ConsumerGroupDescription {
        self.c
            .describe(&[group.to_string()], &self.topics)
            .remove(0)
    }

    /// member id -> current assignment, from describe.
    pub fn assignments(&self, group: &str) -> BTreeMap<String, Assignment> {
        self.describe(group)
            .members
            .into_iter()
            .map(|m| {
                let a = m
                    .assignment
                    .iter()
                    .map(|t| (t.topic_id, t.partitions.iter().copied().collect()))
                    .collect();
                (m.member_id, a)
            })
            .collect()
    }
}

/// A client as librdkafka runs one: joins with epoch 0, then heartbeats with its epoch and
/// owned partitions; takes the response's assignment as what it owns (revoking at once);
/// rejoins after FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID. A subscription change is sent once,
/// on the next heartbeat (names, and the regex or "" to clear it), then omitted as unchanged.
#[derive(Debug, Clone)]
pub struct Client {
    pub group: String,
    pub member_id: String,
    pub topics: Vec<String>,
    pub regex: Option<String>,
    pub epoch: i32,
    pub owned: Assignment,
    /// The next heartbeat must carry the subscription (librdkafka's SEND_NEW_SUBSCRIPTION).
    pub subscription_changed: bool,
}

impl Client {
    pub fn new(group: &str, member_id: &str, topics: &[&str]) -> Self {
        Client {
            group: group.into(),
            member_id: member_id.into(),
            topics: topics.iter().map(|t| t.to_string()).collect(),
            regex: None,
            epoch: 0,
            owned: Assignment::new(),
            subscription_changed: false,
        }
    }

    /// `rd_kafka_subscribe` while in the group: the change goes out with the next heartbeat.
    pub fn subscribe(&mut self, topics: &[String], regex: Option<&str>) {
        self.topics = topics.to_vec();
        self.regex = regex.map(str::to_string);
        self.subscription_changed = true;
    }

    /// The heartbeat this client sends next.
    pub fn next_request(&self, ack: bool) -> ConsumerHeartbeat {
        if self.epoch == 0 {
            let topics: Vec<&str> = self.topics.iter().map(String::as_str).collect();
            return ConsumerHeartbeat {
                subscribed_topic_regex: self.regex.clone(),
                ..join_req(&self.group, &self.member_id, &topics)
            };
        }
        let mut req = hb_req(
            &self.group,
            &self.member_id,
            self.epoch,
            ack.then_some(&self.owned),
        );
        if self.subscription_changed {
            req.subscribed_topic_names = Some(self.topics.clone());
            req.subscribed_topic_regex = Some(self.regex.clone().unwrap_or_default());
        }
        req
    }

    /// One heartbeat; `ack` = report owned partitions (else send null). Returns the response.
    pub fn poll(&mut self, h: &mut Harness, ack: bool) -> ConsumerHeartbeatResponse {
        let r = h.send(self.next_request(ack));
        match r.error_code {
            0 => {
                self.epoch = r.member_epoch;
                self.subscription_changed = false;
                if let Some(a) = &r.assignment {
                    self.owned = from_wire(a);
                }
            }
            110 | 25 => {
                self.epoch = 0;
                self.owned.clear();
            }
            other => panic!("unexpected error {other}: {r:?}"),
        }
        r
    }

    pub fn leave(&mut self, h: &mut Harness) -> ConsumerHeartbeatResponse {
        let r = h.send(hb_req(&self.group, &self.member_id, -1, None));
        self.epoch = 0;
        self.owned.clear();
        r
    }
}
