//! One `__consumer_offsets` partition's two coordinators, driven the way the broker's group
//! task drives them (`group_manager`): the same routing of classic requests, every record
//! appended to a log, parked classic answers collected, appends that can be made to fail, and
//! a failover that rebuilds both coordinators from the log.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use runnel_codes::NOT_COORDINATOR;
use runnel_group::migration::{Shard, Step};
use runnel_group::*;
use uuid::Uuid;

pub const CLASSIC_SESSION: i32 = 10_000;
pub const REBALANCE: i32 = 30_000;

pub fn classic_config() -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    }
}

pub struct World {
    pub classic: GroupCoordinator,
    pub consumer: ConsumerGroups,
    pub classic_config: GroupConfig,
    pub consumer_config: ConsumerGroupConfig,
    pub now: i64,
    pub topics: TopicsView,
    /// Every record appended, in order.
    pub log: Vec<OffsetsRecord>,
    /// The next append fails (the step is reverted and answered with this code).
    pub fail_next_append: Option<i16>,
    joins: BTreeMap<RequestId, JoinResponse>,
    syncs: BTreeMap<RequestId, SyncResponse>,
    parked: BTreeSet<RequestId>,
    next_req: RequestId,
    ids: Arc<AtomicU64>,
}

fn generator(ids: &Arc<AtomicU64>, prefix: &'static str) -> MemberIdGenerator {
    let ids = ids.clone();
    Box::new(move || format!("{prefix}{}", ids.fetch_add(1, Ordering::Relaxed)))
}

impl World {
    pub fn new(consumer_config: ConsumerGroupConfig) -> Self {
        let ids = Arc::new(AtomicU64::new(1));
        let classic_config = classic_config();
        let consumer_config = ConsumerGroupConfig {
            classic_max_size: classic_config.max_size,
            ..consumer_config
        };
        World {
            classic: GroupCoordinator::with_member_id_generator(
                classic_config.clone(),
                generator(&ids, "c"),
            ),
            consumer: ConsumerGroups::with_member_id_generator(
                consumer_config.clone(),
                generator(&ids, "k"),
            ),
            classic_config,
            consumer_config,
            now: 1_000_000,
            topics: TopicsView::default(),
            log: Vec::new(),
            fail_next_append: None,
            joins: BTreeMap::new(),
            syncs: BTreeMap::new(),
            parked: BTreeSet::new(),
            next_req: 0,
            ids,
        }
    }

    pub fn topic(&mut self, name: &str, partitions: i32) {
        let id = match self.topics.topics.get(name) {
            Some((id, _)) => *id,
            None => Uuid::from_u128(self.topics.topics.len() as u128 + 1),
        };
        self.topics
            .topics
            .insert(name.to_string(), (id, partitions));
        self.topics.version += 1;
    }

    pub fn partitions(&self, name: &str) -> i32 {
        self.topics.topics.get(name).map_or(0, |(_, n)| *n)
    }

    pub fn topic_id(&self, name: &str) -> Uuid {
        self.topics.topics[name].0
    }

    fn shard(&mut self) -> (Shard<'_>, &TopicsView) {
        (
            Shard {
                classic: &mut self.classic,
                consumer: &mut self.consumer,
            },
            &self.topics,
        )
    }

    /// Appends a step's records (or fails the append, reverting both coordinators) and
    /// collects its classic answers. `Err` is the code the answer gets instead.
    fn apply<T>(&mut self, step: Step<T>) -> Result<T, i16> {
        let Step {
            answer,
            records,
            outputs,
            undo,
        } = step;
        let result = match self.fail_next_append.take().filter(|_| !records.is_empty()) {
            Some(code) => {
                self.shard().0.revert(undo);
                Err(code)
            }
            None => {
                self.log.extend(records);
                Ok(answer)
            }
        };
        self.collect(outputs);
        result
    }

    fn collect(&mut self, outputs: Vec<Output>) {
        for o in outputs {
            match o {
                Output::Persist(records) => self.log.extend(records),
                Output::Join(id, r) => {
                    self.parked.remove(&id);
                    self.joins.insert(id, r);
                }
                Output::Sync(id, r) => {
                    self.parked.remove(&id);
                    self.syncs.insert(id, r);
                }
            }
        }
    }

    fn request_id(&mut self) -> RequestId {
        self.next_req += 1;
        self.parked.insert(self.next_req);
        self.next_req
    }

    pub fn check(&self) {
        self.classic.check_invariants().unwrap();
        self.consumer.check_invariants().unwrap();
    }

    /// JoinGroup; the answer (now or later) is collected by [`Self::take_join`].
    pub fn join(&mut self, req: JoinRequest) -> RequestId {
        let id = self.request_id();
        let now = self.now;
        let (mut shard, topics) = self.shard();
        if shard.consumer_serves_join(&req.group_id) {
            let step = shard.classic_join(now, &req, topics);
            let answer = self
                .apply(step)
                .unwrap_or_else(|code| JoinResponse::error(req.member_id.clone(), code));
            self.collect(vec![Output::Join(id, answer)]);
        } else {
            // An empty consumer group gives way (the shell's `classic_join_allowed`).
            if self.consumer.contains(&req.group_id) && !self.consumer.has_members(&req.group_id) {
                self.consumer.delete(&req.group_id);
                let records = self.consumer.take_records();
                self.log.extend(records);
            }
            let outputs = self.classic.join(now, id, req);
            self.collect(outputs);
        }
        self.check();
        id
    }

    pub fn take_join(&mut self, id: RequestId) -> Option<JoinResponse> {
        self.joins.remove(&id)
    }

    pub fn sync(&mut self, req: SyncRequest) -> RequestId {
        let id = self.request_id();
        let now = self.now;
        let (mut shard, topics) = self.shard();
        if shard.consumer_serves_classic(&req.group_id) {
            let answer = shard.classic_sync(now, &req, topics);
            self.collect(vec![Output::Sync(id, answer)]);
        } else {
            let outputs = self.classic.sync(now, id, req);
            self.collect(outputs);
        }
        self.check();
        id
    }

    pub fn take_sync(&mut self, id: RequestId) -> Option<SyncResponse> {
        self.syncs.remove(&id)
    }

    pub fn heartbeat(&mut self, req: HeartbeatRequest) -> i16 {
        let now = self.now;
        let (mut shard, _) = self.shard();
        let code = if shard.consumer_serves_classic(&req.group_id) {
            shard.classic_heartbeat(now, &req)
        } else {
            self.classic.heartbeat(now, &req)
        };
        self.check();
        code
    }

    pub fn leave(&mut self, group: &str, members: &[(String, Option<String>)]) -> Vec<i16> {
        let now = self.now;
        let (mut shard, topics) = self.shard();
        let codes = if shard.consumer_serves_classic(group) {
            let step = shard.classic_leave(now, group, members, topics);
            match self.apply(step) {
                Ok((_, codes)) => codes,
                Err(code) => vec![code; members.len()],
            }
        } else {
            let (_, codes, outputs) = self.classic.leave(now, group, members);
            self.collect(outputs);
            codes
        };
        self.check();
        codes
    }

    pub fn consumer_heartbeat(&mut self, req: ConsumerHeartbeat) -> ConsumerHeartbeatResponse {
        let now = self.now;
        let interval = self.consumer.timeouts(&req.group_id).heartbeat_interval_ms;
        let (mut shard, topics) = self.shard();
        let step = shard.consumer_heartbeat(now, req, Default::default(), topics);
        let r = self
            .apply(step)
            .unwrap_or_else(|code| ConsumerHeartbeatResponse {
                error_code: code,
                error_message: None,
                member_id: None,
                member_epoch: 0,
                heartbeat_interval_ms: interval,
                assignment: None,
            });
        self.check();
        r
    }

    /// OffsetCommit as the shell checks it: a consumer group's member by its epoch, then
    /// stored as a simple commit; a classic group's by the classic rules.
    pub fn commit(&mut self, mut req: OffsetCommitRequest) -> i16 {
        if self.consumer.contains(&req.group_id) {
            if let Err(code) = self.consumer.is_member_epoch_valid(
                &req.group_id,
                &req.member_id,
                req.generation_id,
            ) {
                return code;
            }
            req.generation_id = -1;
            req.member_id.clear();
        }
        let (code, codes, records) = self.classic.commit_offsets(self.now, &req, usize::MAX);
        self.log.extend(records);
        self.check();
        if code != 0 {
            return code;
        }
        codes.iter().map(|c| c.2).find(|c| *c != 0).unwrap_or(0)
    }

    pub fn committed(&self, group: &str, topic: &str, partition: i32) -> Option<i64> {
        let want = [(topic.to_string(), vec![partition])];
        let (_, found) = self.classic.fetch_offsets(group, Some(&want));
        found.into_iter().find_map(|(_, _, c)| c.map(|c| c.offset))
    }

    /// Advances time and runs both coordinators' timers.
    pub fn tick(&mut self, ms: i64) {
        self.now += ms;
        let now = self.now;
        let outputs = self.classic.tick(now);
        self.collect(outputs);
        let (mut shard, topics) = self.shard();
        let step = shard.tick(now, topics);
        let _ = self.apply(step);
        self.check();
    }

    /// Both coordinators rebuilt from the log (with the same settings).
    pub fn reloaded(&self) -> (GroupCoordinator, ConsumerGroups) {
        let mut classic = GroupCoordinator::with_member_id_generator(
            self.classic_config.clone(),
            generator(&self.ids, "c"),
        );
        classic.load(self.now, self.log.clone());
        let mut consumer = ConsumerGroups::with_member_id_generator(
            self.consumer_config.clone(),
            generator(&self.ids, "k"),
        );
        consumer.load(self.now, self.log.iter(), &self.topics);
        (classic, consumer)
    }

    /// A coordinator failover: both rebuilt from the log; parked classic requests are
    /// answered NOT_COORDINATOR, as the shell answers them when leadership moves.
    pub fn failover(&mut self) {
        let (classic, consumer) = self.reloaded();
        self.classic = classic;
        self.consumer = consumer;
        for id in std::mem::take(&mut self.parked) {
            self.joins
                .insert(id, JoinResponse::error(String::new(), NOT_COORDINATOR));
            self.syncs.insert(id, SyncResponse::error(NOT_COORDINATOR));
        }
        self.check();
    }

    /// What a failover now would rebuild equals the live state: the consumer groups'
    /// durable projection, and which ids are consumer groups.
    pub fn check_durable(&self) {
        let (classic, consumer) = self.reloaded();
        assert_eq!(consumer.durable_view(), self.consumer.durable_view());
        for id in self.consumer.durable_view().keys() {
            if self.consumer.has_members(id) {
                assert!(
                    !classic.has_members(id),
                    "{id}: both protocols after reload"
                );
            }
        }
    }
}
