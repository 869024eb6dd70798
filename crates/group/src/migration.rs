//! Online migration between the classic protocol and KIP-848 (Kafka's
//! `group.consumer.migration.policy`, KIP-848 "Upgrade & Downgrade"), as one decision over
//! both coordinators of a `__consumer_offsets` partition.
//!
//! * **Upgrade**: a ConsumerGroupHeartbeat joining (epoch 0) a classic group with members
//!   converts it, if the policy allows and the group qualifies (Kafka's `validateOnlineUpgrade`:
//!   the "consumer" protocol type, no more members than `group.consumer.max.size`; and its
//!   embedded protocol readable): the classic members become members of a new consumer group
//!   keeping their partitions, and the heartbeat joins it. Otherwise GROUP_ID_NOT_FOUND, as
//!   before migration existed.
//! * **Classic members in a consumer group**: JoinGroup / SyncGroup / Heartbeat / LeaveGroup
//!   of a consumer group with members are answered by it (`consumer_group::classic`), whatever
//!   the policy (Kafka serves them regardless).
//! * **Downgrade**: when the last member using the consumer protocol leaves or is fenced and
//!   only classic members remain, the group becomes a classic group again (if the policy
//!   allows), each member owning its target assignment, and a rebalance makes them join it.
//!
//! The records of a conversion are one batch: the old group's tombstones and the new group's
//! records (classic `GroupMetadata` tombstone, then the consumer group's records; or the
//! consumer group's tombstones, then the `GroupMetadata` record). If the append fails,
//! [`Shard::revert`] puts both coordinators back.

use bytes::Bytes;

use crate::api::{HeartbeatRequest, JoinRequest, JoinResponse, OffsetsRecord, Output};
use crate::api::{SyncRequest, SyncResponse};
use crate::consumer_group::{ClientInfo, ConsumerHeartbeat, ConsumerHeartbeatResponse};
use crate::consumer_group::{ConsumerGroups, TopicsView};
use crate::consumer_protocol::TopicPartitions;
use crate::coordinator::{ClassicUndo, GroupCoordinator};
use crate::errors::{GROUP_ID_NOT_FOUND, NONE};

/// A group as it moves from one coordinator to the other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvertedGroup {
    pub group_id: String,
    /// The classic generation (upgrade) or the consumer group's epoch (downgrade).
    pub generation: i32,
    /// The classic group's protocol (upgrade); chosen by the classic group (downgrade).
    pub protocol_name: Option<String>,
    pub members: Vec<ConvertedMember>,
}

/// One member of a [`ConvertedGroup`], with the classic protocol's view of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvertedMember {
    pub id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    /// `(assignor name, subscription bytes)` in preference order.
    pub protocols: Vec<(String, Bytes)>,
    /// The partitions it owns (upgrade: its classic assignment) or will own (downgrade: its
    /// target).
    pub assignment: TopicPartitions,
}

/// What one call decided: the answer, the records to append as one batch before answering
/// (in this order), and answers to requests the classic coordinator had parked.
#[derive(Debug)]
pub struct Step<T> {
    pub answer: T,
    pub records: Vec<OffsetsRecord>,
    pub outputs: Vec<Output>,
    /// For [`Shard::revert`] when the append of `records` fails.
    pub undo: Undo,
}

/// What a failed append must put back (opaque).
#[derive(Debug, Default)]
pub struct Undo {
    classic: Vec<ClassicUndo>,
}

/// Both coordinators of one `__consumer_offsets` partition, borrowed for one decision.
pub struct Shard<'a> {
    pub classic: &'a mut GroupCoordinator,
    pub consumer: &'a mut ConsumerGroups,
}

impl Shard<'_> {
    /// Whether a classic JoinGroup for `group_id` goes to its consumer group (one with
    /// members; an empty one gives way to a classic group).
    pub fn consumer_serves_join(&self, group_id: &str) -> bool {
        self.consumer.has_members(group_id) && !self.classic.has_members(group_id)
    }

    /// Whether a classic SyncGroup / Heartbeat / LeaveGroup for `group_id` goes to its
    /// consumer group.
    pub fn consumer_serves_classic(&self, group_id: &str) -> bool {
        self.consumer.contains(group_id) && !self.classic.has_members(group_id)
    }

    /// ConsumerGroupHeartbeat, upgrading a classic group with members when allowed; a leave
    /// may downgrade the group.
    pub fn consumer_heartbeat(
        &mut self,
        now_ms: i64,
        req: ConsumerHeartbeat,
        client: ClientInfo<'_>,
        topics: &TopicsView,
    ) -> Step<ConsumerHeartbeatResponse> {
        let group_id = req.group_id.clone();
        let mut step = Step::of(());
        if self.classic.has_members(&group_id) {
            if let Err(refused) = self.consumer.validate_heartbeat(&req) {
                return step.with(refused);
            }
            if let Err(why) = self.upgrade(now_ms, &req, topics, &mut step) {
                tracing::info!(group = %group_id, %why, "classic group not upgraded");
                let interval = self.consumer.timeouts(&group_id).heartbeat_interval_ms;
                let message = format!("Group {group_id} is not a consumer group");
                return step.with(ConsumerHeartbeatResponse::error(
                    GROUP_ID_NOT_FOUND,
                    message,
                    interval,
                ));
            }
        }
        let answer = self.consumer.heartbeat_from(now_ms, req, client, topics);
        if answer.error_code != NONE {
            if let Some(undo) = step.undo.classic.pop() {
                // The joining member was refused: the group stays classic.
                self.consumer.forget_adopted(&group_id);
                self.classic.restore(undo);
                step.records.clear();
            }
        }
        self.finish(now_ms, step.with(answer))
    }

    /// The upgrade half of a heartbeat: `Err` (why) leaves everything as it was.
    fn upgrade(
        &mut self,
        now_ms: i64,
        req: &ConsumerHeartbeat,
        topics: &TopicsView,
        step: &mut Step<()>,
    ) -> Result<(), String> {
        let config = self.consumer.config();
        if req.member_epoch != 0 {
            return Err("only a joining member upgrades a group".into());
        }
        if !config.migration_policy.upgrade_enabled() {
            return Err("the online upgrade is disabled".into());
        }
        let max_size = config.max_size;
        let (converted, outputs, records, undo) =
            self.classic
                .take_for_upgrade(now_ms, &req.group_id, max_size)?;
        if let Err(why) = self.consumer.adopt_upgraded(now_ms, &converted, topics) {
            self.classic.restore(undo);
            // The parked requests were answered: they join again and find the classic group.
            step.outputs.extend(outputs);
            return Err(why);
        }
        tracing::info!(group = %req.group_id, "classic group upgraded to a consumer group");
        step.outputs.extend(outputs);
        step.records.extend(records);
        step.undo.classic.push(undo);
        Ok(())
    }

    /// A classic member's JoinGroup to a consumer group with members.
    pub fn classic_join(
        &mut self,
        now_ms: i64,
        req: &JoinRequest,
        topics: &TopicsView,
    ) -> Step<JoinResponse> {
        if let Some(refused) = self.classic.refused_join(req) {
            return Step::of(refused);
        }
        let answer = self.consumer.classic_join(now_ms, req, topics);
        self.finish(now_ms, Step::of(answer))
    }

    /// A classic member's SyncGroup to a consumer group (writes nothing).
    pub fn classic_sync(
        &mut self,
        now_ms: i64,
        req: &SyncRequest,
        topics: &TopicsView,
    ) -> SyncResponse {
        self.consumer.classic_sync(now_ms, req, topics)
    }

    /// A classic member's Heartbeat to a consumer group (writes nothing).
    pub fn classic_heartbeat(&mut self, now_ms: i64, req: &HeartbeatRequest) -> i16 {
        self.consumer.classic_heartbeat(now_ms, req)
    }

    /// A LeaveGroup of classic members of a consumer group.
    pub fn classic_leave(
        &mut self,
        now_ms: i64,
        group_id: &str,
        members: &[(String, Option<String>)],
        topics: &TopicsView,
    ) -> Step<(i16, Vec<i16>)> {
        let answer = self.consumer.classic_leave(group_id, members, topics);
        self.finish(now_ms, Step::of(answer))
    }

    /// The consumer groups' timers (fencing may downgrade groups) and regex refreshes.
    pub fn tick(&mut self, now_ms: i64, topics: &TopicsView) -> Step<()> {
        self.consumer.tick(now_ms, topics);
        self.finish(now_ms, Step::of(()))
    }

    /// The consumer groups' records, and the classic groups that take over downgraded ones.
    fn finish<T>(&mut self, now_ms: i64, mut step: Step<T>) -> Step<T> {
        step.records.extend(self.consumer.take_records());
        for converted in self.consumer.take_downgrades() {
            let (records, outputs, undo) = self.classic.adopt_downgraded(now_ms, converted);
            step.records.extend(records);
            step.outputs.extend(outputs);
            step.undo.classic.push(undo);
        }
        step
    }

    /// The append of a step's records failed: both coordinators go back to before it.
    pub fn revert(&mut self, undo: Undo) {
        self.consumer.revert_records();
        for u in undo.classic.into_iter().rev() {
            self.classic.restore(u);
        }
    }
}

impl<T> Step<T> {
    fn of(answer: T) -> Self {
        Step {
            answer,
            records: Vec::new(),
            outputs: Vec::new(),
            undo: Undo::default(),
        }
    }

    fn with<U>(self, answer: U) -> Step<U> {
        Step {
            answer,
            records: self.records,
            outputs: self.outputs,
            undo: self.undo,
        }
    }
}
