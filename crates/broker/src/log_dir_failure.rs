//! What a broker does when its log directory fails (Kafka's `LogDirFailureChannel` and
//! `ReplicaManager.handleLogDirFailure`).
//!
//! A partition log fails for good when an fsync fails or a failed write cannot be undone
//! (`runnel_log::LogError::Failed`): its files may no longer hold what was acknowledged, and
//! fsyncing them again could report success for data that never reached the disk (fsyncgate).
//! Such a log answers KAFKA_STORAGE_ERROR to everything, but its partitions would keep their
//! leadership, so the other replicas could never take over. Runnel has one log directory per
//! broker, and Kafka halts a broker whose last log directory went offline ("Shutdown broker
//! because all log dirs in ... have failed"): the controller then fences it once its session
//! expires and moves every leadership to the in-sync replicas, and the next start recovers the
//! directory from its last clean point. This module only *finds* a failed log; stopping is the
//! caller's decision (`runnel broker` exits non-zero with one clear line).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::replica::manager::ReplicaManager;

/// How often the hosted logs are checked. A failed log refuses every operation at once, so
/// this only bounds how long a failed broker keeps its leaderships before it stops.
const CHECK_EVERY: Duration = Duration::from_millis(200);

/// A failed partition log: which one and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDirFailure {
    pub topic: String,
    pub partition: i32,
    pub reason: String,
}

impl std::fmt::Display for LogDirFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the log of {}-{} failed ({}); the log directory can no longer be trusted",
            self.topic, self.partition, self.reason
        )
    }
}

/// The first failed log among those hosted here, if any.
pub fn first_failed_log(replicas: &ReplicaManager) -> Option<LogDirFailure> {
    replicas.all().into_iter().find_map(|p| {
        let log = p.lock_log();
        log.failure().map(|why| LogDirFailure {
            topic: p.topic.clone(),
            partition: p.index,
            reason: why.to_string(),
        })
    })
}

/// Watches the hosted logs; the receiver turns `Some` once one has failed (and stays so).
pub fn spawn_watch(
    replicas: Arc<ReplicaManager>,
    mut shutdown: watch::Receiver<bool>,
) -> watch::Receiver<Option<LogDirFailure>> {
    let (tx, rx) = watch::channel(None);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(CHECK_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let r = replicas.clone();
                    let found = tokio::task::spawn_blocking(move || first_failed_log(&r))
                        .await
                        .ok()
                        .flatten();
                    if let Some(failure) = found {
                        let _ = tx.send(Some(failure));
                        return;
                    }
                }
                _ = shutdown.changed() => return,
            }
        }
    });
    rx
}
