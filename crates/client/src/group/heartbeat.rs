//! The background heartbeat task: every `heartbeat.interval.ms` while a generation is active
//! it tells the coordinator we are alive, and turns the answer into flags for the next
//! `poll`. It also enforces `max.poll.interval.ms`: an application that stops polling leaves
//! the group (as the Java client does) so the others can take its partitions.

use std::time::Duration;

use runnel_codes::KafkaError;
use tokio::task::JoinHandle;

use super::membership::{heartbeat, leave_group};
use super::state::Shared;

/// Timing of the task.
#[derive(Debug, Clone, Copy)]
pub struct HeartbeatTiming {
    /// `heartbeat.interval.ms`.
    pub interval: Duration,
    /// `max.poll.interval.ms`.
    pub max_poll_interval: Duration,
    /// Per-request timeout.
    pub request_timeout: Duration,
}

/// Starts the task; abort the handle to stop it.
pub fn spawn(shared: Shared, timing: HeartbeatTiming) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(timing.interval).await;
            let (conn, who, generation, poll_expired) = {
                let st = shared.lock();
                let Some((_, conn)) = st.coordinator.clone() else {
                    continue;
                };
                if !st.stable {
                    continue;
                }
                let expired = st.last_poll.elapsed() > timing.max_poll_interval;
                (conn, st.identity.clone(), st.generation, expired)
            };
            if poll_expired {
                tracing::warn!(
                    group = %who.group,
                    "poll() was not called within max.poll.interval.ms; leaving the group"
                );
                if who.instance_id.is_none() {
                    if let Err(e) = leave_group(&conn, &who, timing.request_timeout).await {
                        tracing::debug!(error = %e, "LeaveGroup failed");
                    }
                }
                let mut st = shared.lock();
                st.identity.member_id.clear();
                st.generation = -1;
                st.stable = false;
                st.rejoin_needed = true;
                st.partitions_lost = true;
                continue;
            }
            match heartbeat(&conn, &who, generation, timing.request_timeout).await {
                Ok(0) => {}
                Ok(code) if shared.on_group_error(code) => {
                    tracing::debug!(group = %who.group, code, "heartbeat asks for action");
                }
                Ok(code) => {
                    let name = crate::error::error_name(code);
                    tracing::warn!(group = %who.group, code, name, "heartbeat failed");
                    // FENCED_INSTANCE_ID and authorisation errors cannot be retried.
                    if matches!(
                        code,
                        runnel_codes::FENCED_INSTANCE_ID | runnel_codes::GROUP_AUTHORIZATION_FAILED
                    ) {
                        shared.lock().fatal =
                            Some(KafkaError::new(code, format!("heartbeat: {name}")));
                    }
                }
                Err(e) => {
                    tracing::debug!(group = %who.group, error = %e, "heartbeat failed; rediscovering the coordinator");
                    shared.lock().coordinator = None;
                }
            }
        }
    })
}
