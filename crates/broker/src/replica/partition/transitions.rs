//! Leader and follower transitions: the image's role applied to the partition, and the pure
//! leader state created, kept or dropped with it.

use runnel_log::PartitionLog;
use runnel_replication::{
    ineligible_replicas, BecomeLeader, LeaderConfig, LeaderImage, LeaderPartitionState,
};

use super::{log_config, publish_high_watermark, Partition, Role};
use crate::clock::now_ms;

impl Partition {
    pub fn set_role(&self, role: Role) {
        let config_changed = *self.role.read().config != *role.config;
        if config_changed {
            self.log.lock().update_config(log_config(&role.config));
        }
        *self.role.write() = role.clone();
        let mut log = self.log.lock();
        self.sync_leader_state(&role, &mut log);
        self.publish(&mut log);
    }

    /// Brings the leader state in line with the image's role: created on becoming leader
    /// (a new leader epoch), dropped on becoming a follower, otherwise given the committed ISR,
    /// the assignment, the config and the ineligible brokers. Returns whether the HW moved.
    pub(super) fn sync_leader_state(&self, role: &Role, log: &mut PartitionLog) -> bool {
        let mut state = self.leader_state.lock();
        if role.leader != self.node_id {
            *state = None;
            return false;
        }
        let now = now_ms();
        let config = LeaderConfig {
            replica_lag_time_max_ms: self.lag_max_ms,
            min_insync_replicas: role.config.min_insync_replicas,
        };
        let ineligible = ineligible_replicas(&role.replicas, |r| role.live_replicas.contains(&r));
        let current = state
            .as_mut()
            .filter(|s| s.leader_epoch() == role.leader_epoch);
        let s = match current {
            Some(s) => {
                let image = LeaderImage {
                    replicas: &role.replicas,
                    isr: &role.isr,
                    partition_epoch: role.partition_epoch,
                    ineligible,
                };
                s.on_image(image, config, now);
                s
            }
            None => {
                if let Err(e) = log.assign_leader_epoch(role.leader_epoch) {
                    tracing::error!(topic = %self.topic, partition = self.index, error = %e, "cannot record the new leader epoch");
                }
                let mut fresh = LeaderPartitionState::new(
                    BecomeLeader {
                        leader: self.node_id,
                        replicas: role.replicas.clone(),
                        isr: role.isr.clone(),
                        leader_epoch: role.leader_epoch,
                        partition_epoch: role.partition_epoch,
                        log_end_offset: log.log_end_offset(),
                        high_watermark: log.high_watermark(),
                    },
                    config,
                    now,
                );
                fresh.set_ineligible_replicas(ineligible);
                state.insert(fresh)
            }
        };
        publish_high_watermark(s, log)
    }
}
