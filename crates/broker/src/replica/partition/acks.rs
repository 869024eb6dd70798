//! acks=all on the leader (spec E.4): the min-ISR check before the append and the wait until
//! the HW covers it, on the partition's own progress watch.

use runnel_replication::{check_min_isr, AcksOutcome};

use super::wait::Replicated;
use super::{Partition, Role};

impl Partition {
    /// E.4 before appending an acks=all produce: the committed ISR (the leader state's, which
    /// AlterPartition answers update before the image does) must hold `min.insync.replicas`.
    pub(super) fn can_accept_acks_all(
        &self,
        role: &Role,
    ) -> Result<(), runnel_replication::NotEnoughReplicas> {
        match self.leader_state.lock().as_ref() {
            Some(s) => s.can_accept_acks_all(),
            None => check_min_isr(role.isr.len(), role.config.min_insync_replicas),
        }
    }

    /// How a parked acks=all produce that needs the HW at `required_offset` stands, as long
    /// as this broker still leads in `leader_epoch` (`runnel_replication::acks`); `None`
    /// while pending.
    fn replication_outcome(&self, required_offset: i64, leader_epoch: i32) -> Option<Replicated> {
        let state = self.leader_state.lock();
        let Some(s) = state.as_ref().filter(|s| s.leader_epoch() == leader_epoch) else {
            return Some(Replicated::LeadershipMoved);
        };
        match s.acks_all_outcome(required_offset) {
            AcksOutcome::Pending => None,
            AcksOutcome::Done => Some(Replicated::Done),
            AcksOutcome::NotEnoughReplicasAfterAppend => {
                Some(Replicated::NotEnoughReplicasAfterAppend)
            }
        }
    }

    /// acks=all (Kafka's `DelayedProduce` for one partition): waits until the HW covers
    /// `required_offset` (every ISR member has the batch) while this broker leads in
    /// `leader_epoch`, or until `deadline`. Woken only by this partition's progress.
    pub async fn wait_replicated(
        &self,
        required_offset: i64,
        leader_epoch: i32,
        deadline: tokio::time::Instant,
    ) -> Replicated {
        let mut rx = self.subscribe();
        loop {
            if let Some(done) = self.replication_outcome(required_offset, leader_epoch) {
                return done;
            }
            tokio::select! {
                _ = rx.changed() => {}
                _ = tokio::time::sleep_until(deadline) => {
                    return self
                        .replication_outcome(required_offset, leader_epoch)
                        .unwrap_or(Replicated::TimedOut);
                }
            }
        }
    }
}
