//! KIP-848 consumer groups: heartbeats, classic members inside them, and the online
//! migration between the protocols (decided by `runnel_group::migration::Shard`; this file
//! only appends its records and routes its answers).

use runnel_group::migration::{Shard, Step};
use runnel_group::{
    consumer_group::ClientInfo, ConsumerGroups, ConsumerHeartbeat, ConsumerHeartbeatResponse,
    HeartbeatRequest, JoinRequest, JoinResponse, SyncRequest, SyncResponse, TopicsView,
};
use tokio::sync::oneshot;

use super::*;

impl GroupManager {
    /// ConsumerGroupHeartbeat: decided by the pure KIP-848 groups (an online upgrade of a
    /// classic group included), whose records go to the group's partition before the answer,
    /// which waits until they (and every earlier record of the partition, as Kafka's
    /// coordinator runtime waits for its last written offset) are replicated. A failed append
    /// reverts the decision and answers its error.
    pub(super) fn consumer_heartbeat(
        &mut self,
        now: i64,
        req: ConsumerHeartbeat,
        client_id: &str,
        client_host: &str,
        reply: oneshot::Sender<ConsumerHeartbeatResponse>,
    ) {
        let failed = move |code: i16, heartbeat_interval_ms: i32| ConsumerHeartbeatResponse {
            error_code: code,
            error_message: None,
            member_id: None,
            member_epoch: 0,
            heartbeat_interval_ms,
            assignment: None,
        };
        let p = match self.route(&req.group_id) {
            Ok(p) => p,
            Err(code) => {
                let interval = self.consumer_config.heartbeat_interval_ms;
                let _ = reply.send(failed(code, interval));
                return;
            }
        };
        let client = ClientInfo {
            client_id,
            client_host,
        };
        let interval = self
            .consumer_groups_of(p)
            .timeouts(&req.group_id)
            .heartbeat_interval_ms;
        let step = self.with_shard(p, |s, topics| {
            s.consumer_heartbeat(now, req, client, topics)
        });
        let (response, written) = self.apply_step(p, step);
        self.answer_when_written(
            p,
            written,
            Box::new(move |err| {
                let _ = reply.send(if err == 0 {
                    response
                } else {
                    failed(err, interval)
                });
            }),
        );
    }

    /// ConsumerGroupDescribe: a group this node coordinates that is no KIP-848 group is
    /// GROUP_ID_NOT_FOUND.
    pub(super) fn consumer_describe(
        &mut self,
        group_ids: Vec<String>,
    ) -> Vec<ConsumerGroupDescription> {
        let mut out = Vec::with_capacity(group_ids.len());
        for g in group_ids {
            let described = match self.route(&g) {
                Ok(p) => self
                    .consumer_groups
                    .get(&p)
                    .and_then(|c| c.describe(std::slice::from_ref(&g), &self.topics).pop())
                    .unwrap_or_else(|| {
                        consumer_describe_error(g, runnel_group::errors::GROUP_ID_NOT_FOUND)
                    }),
                Err(code) => consumer_describe_error(g, code),
            };
            out.push(described);
        }
        out
    }

    /// Whether the classic request for `group_id` goes to its consumer group (`join`: a
    /// JoinGroup, which only a consumer group with members takes).
    pub(super) fn consumer_serves(&mut self, partition: i32, group_id: &str, join: bool) -> bool {
        self.with_shard(partition, |s, _| {
            if join {
                s.consumer_serves_join(group_id)
            } else {
                s.consumer_serves_classic(group_id)
            }
        })
    }

    /// A classic member's JoinGroup to a consumer group: answered once its records are
    /// replicated (Kafka answers it from the append's completion).
    pub(super) fn classic_join_to_consumer(
        &mut self,
        partition: i32,
        now: i64,
        req: JoinRequest,
        reply: oneshot::Sender<JoinResponse>,
    ) {
        let member_id = req.member_id.clone();
        let step = self.with_shard(partition, |s, topics| s.classic_join(now, &req, topics));
        let (answer, written) = self.apply_step(partition, step);
        self.answer_when_written(
            partition,
            written,
            Box::new(move |err| {
                let _ = reply.send(if err == 0 {
                    answer
                } else {
                    join_error(err, member_id)
                });
            }),
        );
    }

    /// A classic member's SyncGroup to a consumer group: it writes nothing, but its answer
    /// waits for the records before it.
    pub(super) fn classic_sync_to_consumer(
        &mut self,
        partition: i32,
        now: i64,
        req: SyncRequest,
        reply: oneshot::Sender<SyncResponse>,
    ) {
        let answer = self.with_shard(partition, |s, topics| s.classic_sync(now, &req, topics));
        self.answer_when_written(
            partition,
            Written::Done,
            Box::new(move |err| {
                let _ = reply.send(if err == 0 { answer } else { sync_error(err) });
            }),
        );
    }

    /// A classic member's Heartbeat to a consumer group (answered at once, as a classic
    /// group's heartbeat is).
    pub(super) fn classic_heartbeat_to_consumer(
        &mut self,
        partition: i32,
        now: i64,
        req: &HeartbeatRequest,
    ) -> i16 {
        self.with_shard(partition, |s, _| s.classic_heartbeat(now, req))
    }

    /// A LeaveGroup of classic members of a consumer group: answered once the tombstones are
    /// replicated.
    pub(super) fn classic_leave_to_consumer(
        &mut self,
        partition: i32,
        now: i64,
        group_id: String,
        members: Vec<(String, Option<String>)>,
        reply: oneshot::Sender<(i16, Vec<i16>)>,
    ) {
        let step = self.with_shard(partition, |s, topics| {
            s.classic_leave(now, &group_id, &members, topics)
        });
        let ((code, codes), written) = self.apply_step(partition, step);
        self.answer_when_written(
            partition,
            written,
            Box::new(move |err| {
                let _ = reply.send(if err == 0 {
                    (code, codes)
                } else {
                    (err, vec![err; members.len()])
                });
            }),
        );
    }

    /// The KIP-848 groups' timers (fencing, which may downgrade a group) of every partition.
    pub(super) fn tick_consumer_groups(&mut self, now: i64) {
        let partitions: Vec<i32> = self.consumer_groups.keys().copied().collect();
        for p in partitions {
            let step = self.with_shard(p, |s, topics| s.tick(now, topics));
            if let (_, Written::Failed(code)) = self.apply_step(p, step) {
                tracing::warn!(partition = p, code, "consumer group records not appended");
            }
        }
    }

    /// Both coordinators of `partition` (created empty if missing) and the topics view, for
    /// one pure decision.
    fn with_shard<R>(
        &mut self,
        partition: i32,
        decide: impl FnOnce(&mut Shard<'_>, &TopicsView) -> R,
    ) -> R {
        let (config, timeouts) = (&self.consumer_config, &self.group_timeouts);
        let consumer = self
            .consumer_groups
            .entry(partition)
            .or_insert_with(|| fresh_consumer_groups(config, timeouts));
        let classic_config = &self.config;
        let classic = self
            .coordinators
            .entry(partition)
            .or_insert_with(|| GroupCoordinator::new(classic_config.clone()));
        decide(&mut Shard { classic, consumer }, &self.topics)
    }

    /// Appends a step's records as one batch (a failed append reverts both coordinators) and
    /// sends the classic answers it completed. Returns the answer and the state of the write.
    fn apply_step<T>(&mut self, partition: i32, step: Step<T>) -> (T, Written) {
        let Step {
            answer,
            records,
            outputs,
            undo,
        } = step;
        let written = self.persist(partition, records);
        if let Written::Failed(_) = written {
            self.with_shard(partition, |s, _| s.revert(undo));
        }
        // Parked joins and syncs told to rejoin by an upgrade; their answers stand either way.
        self.apply_outputs(partition, outputs);
        (answer, written)
    }

    /// Runs `answer` once `written` and every earlier record of the partition are
    /// replicated (an answer that wrote nothing still must not show state a failover could
    /// take back), or with the error the write failed with.
    fn answer_when_written(&mut self, partition: i32, written: Written, answer: persist::Answer) {
        let written = match written {
            Written::Done => self.unreplicated_tail(partition),
            other => other,
        };
        self.when_written(partition, written, answer);
    }

    /// Whether a classic JoinGroup may go to the classic coordinator (a consumer group with
    /// members took it before, see [`Self::consumer_serves`]): an empty KIP-848 group gives
    /// way, with its tombstones, as Kafka converts an empty consumer group. Both protocols
    /// holding members of one id cannot happen; if it did, INCONSISTENT_GROUP_PROTOCOL.
    pub(super) fn classic_join_allowed(
        &mut self,
        partition: i32,
        group_id: &str,
    ) -> Result<(), i16> {
        let consumer = self.consumer_groups_of(partition);
        if !consumer.contains(group_id) {
            return Ok(());
        }
        if consumer.has_members(group_id) {
            return Err(runnel_group::errors::INCONSISTENT_GROUP_PROTOCOL);
        }
        consumer.delete(group_id);
        let records = consumer.take_records();
        match self.persist(partition, records) {
            Written::Failed(code) => {
                self.consumer_groups_of(partition).revert_records();
                Err(code)
            }
            _ => Ok(()),
        }
    }

    /// The KIP-848 groups of a partition this node coordinates.
    pub(super) fn consumer_groups_of(&mut self, partition: i32) -> &mut ConsumerGroups {
        let (config, timeouts) = (&self.consumer_config, &self.group_timeouts);
        self.consumer_groups
            .entry(partition)
            .or_insert_with(|| fresh_consumer_groups(config, timeouts))
    }

    /// What an answer that wrote nothing still waits for: the records already appended to the
    /// partition and not yet replicated (an answer must not show state a failover could take
    /// back).
    pub(super) fn unreplicated_tail(&self, partition: i32) -> Written {
        match self.replicas.get(OFFSETS_TOPIC, partition) {
            Some(p) if p.high_watermark() < p.log_end_offset() => {
                Written::Pending(p.log_end_offset())
            }
            _ => Written::Done,
        }
    }
}
