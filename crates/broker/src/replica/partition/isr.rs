//! The leader's ISR changes (spec E.2): shrink proposals, the AlterPartition request for a
//! pending change and how the controller's answer is taken.

use runnel_replication::{AlterPartitionFailure, LeaderPartitionState};

use super::{publish_high_watermark, Partition};
use crate::clock::now_ms;

/// What the controller's answer to an ISR change means for the leader.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct IsrAnswer {
    /// Send the same request again (after a pause).
    pub retry: bool,
    /// The committed ISR let the HW move: wake acks=all waiters and consumers.
    pub hw_changed: bool,
}

impl Partition {
    /// E.2 shrink: in-sync followers that have not caught up for `replica.lag.time.max.ms`
    /// leave the ISR (the change is then pending). The leader never removes itself.
    pub fn isr_shrink(&self, now: i64) -> Option<crate::controller::shell::AlterIsr> {
        let mut state = self.leader_state.lock();
        let s = state.as_mut()?;
        let isr = s.maybe_shrink_isr(now)?;
        Some(self.isr_request(s, isr))
    }

    /// The AlterPartition request for the pending `new_isr`, against the epochs the leader
    /// state proposed it on.
    pub(super) fn isr_request(
        &self,
        s: &LeaderPartitionState,
        new_isr: Vec<i32>,
    ) -> crate::controller::shell::AlterIsr {
        crate::controller::shell::AlterIsr {
            topic_id: self.topic_id,
            partition: self.index,
            broker_id: self.node_id,
            leader_epoch: s.leader_epoch(),
            partition_epoch: s.partition_epoch(),
            new_isr,
        }
    }

    /// The controller's answer to `request`: the committed ISR and partition epoch, or an
    /// error code. Says whether to send the same request again (Kafka's
    /// `handleAlterPartitionError`: only for errors that say nothing about the change). An
    /// answer to a request that is no longer the pending one (a newer leader epoch, or the
    /// image settled it) changes nothing.
    pub fn isr_change_answered(
        &self,
        request: &crate::controller::shell::AlterIsr,
        answer: Result<(Vec<i32>, i32), i16>,
    ) -> IsrAnswer {
        let mut log = self.log.lock();
        let mut state = self.leader_state.lock();
        let Some(s) = state.as_mut() else {
            return IsrAnswer::default();
        };
        if s.leader_epoch() != request.leader_epoch
            || s.pending_isr() != Some(request.new_isr.as_slice())
        {
            return IsrAnswer::default();
        }
        match answer {
            Ok((isr, partition_epoch)) => {
                s.apply_committed_isr(isr, partition_epoch, now_ms());
                let hw_changed = publish_high_watermark(s, &mut log);
                drop(state);
                self.publish(&mut log);
                // The committed ISR can also settle a parked acks=all (too few replicas now).
                drop(log);
                self.wake_waiters();
                IsrAnswer {
                    retry: false,
                    hw_changed,
                }
            }
            Err(code) => IsrAnswer {
                retry: s.on_alter_partition_error(code) == AlterPartitionFailure::Retry,
                hw_changed: false,
            },
        }
    }

    /// The ISR change waiting for the controller, if any.
    #[cfg(test)]
    pub fn pending_isr(&self) -> Option<Vec<i32>> {
        self.leader_state
            .lock()
            .as_ref()
            .and_then(|s| s.pending_isr().map(<[i32]>::to_vec))
    }
}
