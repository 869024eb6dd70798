//! What a broker does when one of its log directories fails (Kafka's `LogDirFailureChannel`,
//! `ReplicaManager.handleLogDirFailure` and KIP-858).
//!
//! A partition log fails for good when an fsync fails or a failed write cannot be undone
//! (`runnel_log::LogError::Failed`): its files may no longer hold what was acknowledged, and
//! fsyncing them again could report success for data that never reached the disk (fsyncgate).
//! Its whole directory fails with it (the logs of a dir share one failure flag,
//! `runnel_log::LogManager`): every partition in it answers KAFKA_STORAGE_ERROR and stops
//! fetching as a follower (`replica::fetcher`).
//!
//! The broker then keeps serving from its other dirs. Every heartbeat names the failed dirs
//! and the replicas they hold ([`offline_dirs`]); the controller takes those replicas out of
//! the ISR and moves their leaderships to the other in-sync replicas
//! (`runnel_metadata::controller::offline_dirs`). Kafka halts only when the last log dir
//! failed ("Shutdown broker because all log dirs in ... have failed") or the dir holding the
//! metadata log did ("Shutdown broker because the metadata log dir ... has failed"): then its
//! session expires, the controller fences it and moves every leadership, and the next start
//! recovers the dirs from their last clean point. [`must_halt`] is that rule; stopping is the
//! caller's decision (`runnel broker` exits non-zero with one clear line).

use std::sync::Arc;
use std::time::Duration;

use runnel_metadata::controller::OfflineDir;
use tokio::sync::watch;
use uuid::Uuid;

use crate::replica::manager::ReplicaManager;

/// How often the log dirs are checked. A failed log refuses every operation at once, so this
/// only bounds how long the broker takes to report a dir (or to stop).
const CHECK_EVERY: Duration = Duration::from_millis(200);

/// Why the broker must stop: the failed log that took the deciding dir down.
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

/// Kafka's rule: a broker halts once every log dir failed, or the one holding the metadata
/// log (`metadata_dir`, its index in `log.dirs` when it is one of them). `failed[i]`: dir `i`
/// failed.
pub fn must_halt(failed: &[bool], metadata_dir: Option<usize>) -> bool {
    let all = !failed.is_empty() && failed.iter().all(|f| *f);
    let metadata = metadata_dir.is_some_and(|i| failed.get(i).copied().unwrap_or(false));
    all || metadata
}

/// The index in `log.dirs` of the dir holding the metadata log (the data directory), when it
/// is one of them: its failure halts the broker as Kafka's does.
pub fn metadata_dir(config: &crate::config::BrokerConfig) -> Option<usize> {
    config.log_dirs.iter().position(|d| *d == config.data_dir)
}

/// Which log dirs failed, in `log.dirs` order.
pub fn failed_dirs(replicas: &ReplicaManager) -> Vec<bool> {
    let logs = replicas.logs();
    logs.dirs()
        .iter()
        .map(|d| d.dir_failure().is_some())
        .collect()
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

/// The failed dirs as a heartbeat reports them: each dir's id (`dir_ids`, in `log.dirs`
/// order) with the replicas (topic id, partition) it holds. None when the broker must halt
/// ([`must_halt`], `metadata_dir` as there): Kafka halts before it tells the controller, and
/// the fencing that follows the halt moves every leadership anyway.
pub fn offline_dirs(
    replicas: &ReplicaManager,
    dir_ids: &[Uuid],
    metadata_dir: Option<usize>,
) -> Vec<OfflineDir> {
    if must_halt(&failed_dirs(replicas), metadata_dir) {
        return Vec::new();
    }
    let logs = replicas.logs();
    let mut offline = Vec::new();
    for (dir, id) in logs.dirs().iter().zip(dir_ids) {
        if dir.dir_failure().is_none() {
            continue;
        }
        let held = dir
            .partitions()
            .into_iter()
            .filter_map(|(topic, partition)| {
                let hosted = replicas.get(&topic, partition).map(|p| p.topic_id);
                let id = hosted.or_else(|| dir.topic_id(&topic, partition))?;
                Some((id, partition))
            })
            .collect();
        offline.push(OfflineDir {
            id: *id,
            replicas: held,
        });
    }
    offline
}

/// The failed dirs, or why the broker must halt.
fn check(
    replicas: &ReplicaManager,
    metadata_dir: Option<usize>,
) -> Result<Vec<bool>, LogDirFailure> {
    let failed = failed_dirs(replicas);
    if !must_halt(&failed, metadata_dir) {
        return Ok(failed);
    }
    Err(first_failed_log(replicas).unwrap_or_else(|| LogDirFailure {
        topic: "(a deleted partition)".into(),
        partition: -1,
        reason: replicas
            .logs()
            .dir_failure()
            .unwrap_or_default()
            .to_string(),
    }))
}

/// Logs each dir once when it fails (Kafka's "Stopping serving replicas in dir ...").
fn report_new_failures(replicas: &ReplicaManager, seen: &mut Vec<bool>, failed: &[bool]) {
    seen.resize(failed.len(), false);
    for (i, now) in failed.iter().enumerate() {
        if *now && !seen[i] {
            seen[i] = true;
            let logs = replicas.logs();
            let dir = &logs.dirs()[i];
            tracing::error!(
                dir = %dir.dir().display(),
                reason = dir.dir_failure().unwrap_or_default(),
                "stopped serving the replicas in a failed log dir; the other dirs keep serving"
            );
        }
    }
}

/// Watches the log dirs; the receiver turns `Some` once the broker must halt ([`must_halt`];
/// `metadata_dir` as there) and stays so.
pub fn spawn_watch(
    replicas: Arc<ReplicaManager>,
    metadata_dir: Option<usize>,
    mut shutdown: watch::Receiver<bool>,
) -> watch::Receiver<Option<LogDirFailure>> {
    let (tx, rx) = watch::channel(None);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(CHECK_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut seen = Vec::new();
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let r = replicas.clone();
                    match tokio::task::spawn_blocking(move || check(&r, metadata_dir)).await {
                        Ok(Err(failure)) => {
                            let _ = tx.send(Some(failure));
                            return;
                        }
                        Ok(Ok(failed)) => report_new_failures(&replicas, &mut seen, &failed),
                        Err(_) => {}
                    }
                }
                _ = shutdown.changed() => return,
            }
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::must_halt;

    #[test]
    fn a_broker_halts_only_when_every_dir_or_the_metadata_dir_failed() {
        // (failed dirs, metadata dir, halts)
        let cases: &[(&[bool], Option<usize>, bool)] = &[
            (&[false, false], Some(0), false),
            (&[false, true], Some(0), false),
            (&[true, false], Some(0), true),
            (&[true, false], None, false),
            (&[true, true], None, true),
            (&[true], Some(0), true),
            (&[true], None, true),
            (&[false], None, false),
            (&[], None, false),
        ];
        for (failed, metadata, halts) in cases {
            assert_eq!(
                must_halt(failed, *metadata),
                *halts,
                "{failed:?} {metadata:?}"
            );
        }
    }
}
