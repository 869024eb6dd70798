//! Runs a replica move between log dirs (AlterReplicaLogDirs) on a thread of its own, Kafka's
//! `ReplicaAlterLogDirsThread`: the copy and swap are `runnel_log::LogDirs::run_move`'s; this
//! is the shell around it and the copy-rate bound
//! (`replica.alter.log.dirs.io.max.bytes.per.second`, Kafka's quota for that thread).

use std::sync::Arc;
use std::time::{Duration, Instant};

use runnel_log::log_dirs::{Move, MoveStart};

use crate::replica::manager::ReplicaManager;

/// How long to wait before writing more, once `copied` bytes went out `elapsed` after the
/// start, to stay at or under `rate` bytes per second.
pub fn delay_for(copied: u64, rate: i64, elapsed: Duration) -> Duration {
    // i64::MAX is Kafka's default: unbounded.
    if rate <= 0 || rate == i64::MAX {
        return Duration::ZERO;
    }
    let due = Duration::from_secs_f64(copied as f64 / rate as f64);
    due.saturating_sub(elapsed)
}

/// Starts the thread that runs `mv` (already registered by `LogDirs::start_move`).
pub fn spawn(
    replicas: Arc<ReplicaManager>,
    topic: String,
    partition: i32,
    mv: Arc<Move>,
    rate: i64,
) {
    let spawned = std::thread::Builder::new()
        .name(format!("alter-log-dirs-{topic}-{partition}"))
        .spawn(move || {
            let start = Instant::now();
            let mut copied = 0u64;
            let mut throttle = |n: u64| {
                let wait = delay_for(copied, rate, start.elapsed());
                if !wait.is_zero() {
                    std::thread::sleep(wait);
                }
                copied += n;
            };
            // Errors are logged by run_move; the replica stays where it was.
            let _ = replicas
                .logs()
                .run_move(&topic, partition, &mv, &mut throttle);
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot start a replica move thread");
    }
}

/// Starts again the moves a kill interrupted (`LogDirs::take_resumable`), as Kafka resumes a
/// future replica after a restart: called once the node serves, so the partitions are
/// hosted. A partition no longer hosted here is skipped.
pub fn resume(replicas: &Arc<ReplicaManager>, rate: i64) {
    for (topic, partition, target) in replicas.logs().take_resumable() {
        if replicas.get(&topic, partition).is_none() {
            continue;
        }
        match replicas.logs().start_move(&topic, partition, target) {
            Ok(Some(MoveStart::Started(mv))) => {
                spawn(Arc::clone(replicas), topic, partition, mv, rate)
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(%topic, partition, error = %e, "cannot restart an interrupted replica move")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_waits_only_when_ahead_of_its_rate() {
        let s = Duration::from_secs;
        assert_eq!(delay_for(1000, 1000, s(0)), s(1));
        assert_eq!(delay_for(1000, 1000, s(2)), Duration::ZERO);
        assert_eq!(
            delay_for(500, 1000, Duration::from_millis(100)),
            Duration::from_millis(400)
        );
        assert_eq!(delay_for(u64::MAX, i64::MAX, s(0)), Duration::ZERO);
        assert_eq!(delay_for(10, -1, s(0)), Duration::ZERO);
    }
}
