//! KIP-848 consumer groups: heartbeats, and the rule that one group id runs one protocol.

use runnel_group::{
    consumer_group::ClientInfo, ConsumerGroups, ConsumerHeartbeat, ConsumerHeartbeatResponse,
};
use tokio::sync::oneshot;

use super::*;

impl GroupManager {
    /// ConsumerGroupHeartbeat: decided by the pure KIP-848 groups, whose records go to the
    /// group's partition before the answer, which waits until they (and every earlier record
    /// of the partition, as Kafka's coordinator runtime waits for its last written offset)
    /// are replicated. A failed append reverts the decision and answers its error.
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
        if self.coordinator(p).has_members(&req.group_id) {
            // Kafka: a classic group with members is only taken over by an online upgrade
            // (`group.consumer.migration.policy`), which Runnel does not do yet.
            let _ = reply.send(ConsumerHeartbeatResponse {
                error_message: Some(format!("Group {} is not a consumer group", req.group_id)),
                ..failed(runnel_group::errors::GROUP_ID_NOT_FOUND, interval)
            });
            return;
        }
        let (config, timeouts, topics) =
            (&self.consumer_config, &self.group_timeouts, &self.topics);
        let groups = self
            .consumer_groups
            .entry(p)
            .or_insert_with(|| fresh_consumer_groups(config, timeouts));
        let response = groups.heartbeat_from(now, req, client, topics);
        let records = groups.take_records();
        let written = match self.persist(p, records) {
            Written::Failed(code) => {
                self.consumer_groups_of(p).revert_records();
                let _ = reply.send(failed(code, interval));
                return;
            }
            Written::Done => self.unreplicated_tail(p),
            pending => pending,
        };
        self.when_written(
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

    /// Whether a classic JoinGroup may go to the classic coordinator: not while a KIP-848
    /// group with members has the id (INCONSISTENT_GROUP_PROTOCOL: Kafka serves classic
    /// members inside a consumer group only through the migration Runnel does not do yet).
    /// An empty KIP-848 group gives way, with its tombstones, as Kafka deletes it.
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
