//! Spec E.4: when an acks=all produce may be appended, and how a parked one ends.
//!
//! `min.insync.replicas` is checked twice because the ISR can shrink while the request waits:
//! before appending (reject without writing, 19) and when the HW reaches the batch (the data
//! is already in the log, so the producer must learn it may be duplicated on retry, 20).
//! Both checks use the *committed* ISR, as Kafka does. The timeout (7) is the shell's.

use std::fmt;

use crate::codes;

/// How a parked acks=all produce stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcksOutcome {
    /// The HW has not reached the batch yet: keep waiting (or time out: 7).
    Pending,
    /// Every ISR member has the batch: answer success.
    Done,
    /// The batch is committed but the ISR shrank below `min.insync.replicas` meanwhile:
    /// answer 20 NOT_ENOUGH_REPLICAS_AFTER_APPEND.
    NotEnoughReplicasAfterAppend,
}

impl AcksOutcome {
    /// The response's error code once the request is complete; `None` while pending.
    pub fn error_code(self) -> Option<i16> {
        match self {
            AcksOutcome::Pending => None,
            AcksOutcome::Done => Some(codes::NONE),
            AcksOutcome::NotEnoughReplicasAfterAppend => {
                Some(codes::NOT_ENOUGH_REPLICAS_AFTER_APPEND)
            }
        }
    }
}

/// The ISR is smaller than `min.insync.replicas`: an acks=all produce is rejected before
/// anything is written (19 NOT_ENOUGH_REPLICAS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotEnoughReplicas {
    pub isr_size: usize,
    pub min_insync_replicas: i32,
}

impl NotEnoughReplicas {
    pub const CODE: i16 = codes::NOT_ENOUGH_REPLICAS;
}

impl fmt::Display for NotEnoughReplicas {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "The size of the current ISR {} is insufficient to satisfy the min.isr requirement of {}",
            self.isr_size, self.min_insync_replicas
        )
    }
}

impl std::error::Error for NotEnoughReplicas {}

/// Whether an acks=all produce may be appended: `|ISR| >= min.insync.replicas`.
pub fn check_min_isr(isr_size: usize, min_insync_replicas: i32) -> Result<(), NotEnoughReplicas> {
    if (isr_size as i64) < i64::from(min_insync_replicas) {
        Err(NotEnoughReplicas {
            isr_size,
            min_insync_replicas,
        })
    } else {
        Ok(())
    }
}

/// The state of an acks=all produce whose last offset is `required_offset - 1`: done once
/// the HW reaches `required_offset` (the HW is the minimum LEO over the ISR, so every member
/// has the batch), then judged against `min.insync.replicas` (Kafka's
/// `checkEnoughReplicasReachOffset`).
pub fn acks_all_outcome(
    high_watermark: i64,
    required_offset: i64,
    isr_size: usize,
    min_insync_replicas: i32,
) -> AcksOutcome {
    if high_watermark < required_offset {
        AcksOutcome::Pending
    } else if check_min_isr(isr_size, min_insync_replicas).is_ok() {
        AcksOutcome::Done
    } else {
        AcksOutcome::NotEnoughReplicasAfterAppend
    }
}
