//! [`LogManager`]: every partition log of one log directory, its checkpoints and the
//! clean-shutdown marker (spec J.1, J.5).

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::checkpoint::{self, sync_dir, OffsetCheckpoint};
use crate::config::LogConfig;
use crate::dir_name::{
    delete_dir_name, is_delete_dir, is_stray_dir, parse_partition_dir, partition_dir_name,
    stray_dir_name,
};
use crate::error::LogError;
use crate::partition_log::{PartitionLog, RecoveryHint};
use crate::partition_metadata;

/// A partition log shared between request handlers; hold the lock only briefly.
pub type SharedLog = Arc<Mutex<PartitionLog>>;

pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";
pub const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
pub const LOG_START_CHECKPOINT: &str = "log-start-offset-checkpoint";
pub const HIGH_WATERMARK_CHECKPOINT: &str = "replication-offset-checkpoint";
pub const CLEANER_CHECKPOINT: &str = "cleaner-offset-checkpoint";

/// The per-partition values of the log dir's checkpoint files.
struct Offsets {
    recovery_point: i64,
    log_start: i64,
    high_watermark: i64,
    cleaned: i64,
}

impl Offsets {
    fn of(log: &PartitionLog) -> Self {
        Offsets {
            recovery_point: log.recovery_point(),
            log_start: log.log_start_offset(),
            high_watermark: log.high_watermark(),
            cleaned: log.cleaner_checkpoint(),
        }
    }
}

struct Entry {
    log: SharedLog,
    topic_id: Option<uuid::Uuid>,
}

/// All partition logs of one log directory. Thread-safe: every method takes `&self`.
pub struct LogManager {
    dir: PathBuf,
    default_config: LogConfig,
    logs: Mutex<BTreeMap<(String, i32), Entry>>,
    /// Serialises checkpoint writers (they share the `.tmp` names).
    checkpoint_lock: Mutex<()>,
    /// The directory's failure flag, shared by every log in it: the first I/O error in the
    /// directory takes all of its partitions out of service (Kafka's offline log dir).
    dir_failed: Arc<OnceLock<String>>,
}

impl std::fmt::Debug for LogManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogManager")
            .field("dir", &self.dir)
            .field("partitions", &self.partitions().len())
            .finish()
    }
}

/// Reads an offsets checkpoint; an unreadable one is ignored (the safe defaults mean full
/// recovery and HW 0) rather than keeping the broker from starting.
fn read_checkpoint_lenient(path: &Path) -> OffsetCheckpoint {
    checkpoint::read_offsets(path).unwrap_or_else(|e| {
        tracing::warn!(path = %path.display(), error = %e, "ignoring unreadable checkpoint");
        OffsetCheckpoint::new()
    })
}

/// Topic names become directory names: refuse anything that could leave the log dir.
fn check_topic_name(topic: &str, partition: i32) -> Result<(), LogError> {
    let bad = topic.is_empty()
        || topic == "."
        || topic == ".."
        || topic.contains(['/', '\\', '\0'])
        || partition < 0;
    if bad {
        return Err(LogError::InvalidDirName(format!("{topic}-{partition}")));
    }
    Ok(())
}

impl LogManager {
    /// Opens the log directory (creating it if missing): detects and removes the clean-shutdown
    /// marker (absent => every log recovers after its recovery point), reads the checkpoints,
    /// opens every `<topic>-<partition>` directory and removes leftover `*-delete` ones.
    pub fn open(dir: PathBuf, default_config: LogConfig) -> Result<LogManager, LogError> {
        fs::create_dir_all(&dir)?;
        let marker = dir.join(CLEAN_SHUTDOWN_FILE);
        let clean_shutdown = marker.exists();
        if clean_shutdown {
            fs::remove_file(&marker)?;
            sync_dir(&dir)?;
        }
        let recovery_points = read_checkpoint_lenient(&dir.join(RECOVERY_POINT_CHECKPOINT));
        let log_starts = read_checkpoint_lenient(&dir.join(LOG_START_CHECKPOINT));
        let high_watermarks = read_checkpoint_lenient(&dir.join(HIGH_WATERMARK_CHECKPOINT));
        // A lost cleaner checkpoint only means cleaning again from the start.
        let cleaned = read_checkpoint_lenient(&dir.join(CLEANER_CHECKPOINT));
        let mut logs = BTreeMap::new();
        let dir_failed: Arc<OnceLock<String>> = Arc::default();
        for entry in fs::read_dir(&dir)? {
            let entry = entry?;
            if !entry.file_type()?.is_dir() {
                continue;
            }
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if is_delete_dir(name) {
                if let Err(e) = fs::remove_dir_all(entry.path()) {
                    tracing::warn!(dir = name, error = %e, "could not remove deleted partition");
                }
                continue;
            }
            if is_stray_dir(name) {
                tracing::warn!(
                    dir = name,
                    "keeping a stray partition directory (not in the metadata); remove it by hand when it is not needed"
                );
                continue;
            }
            let Some(key) = parse_partition_dir(name) else {
                continue;
            };
            let hint = RecoveryHint {
                recovery_point: recovery_points.get(&key).copied().unwrap_or(0),
                log_start_offset: log_starts.get(&key).copied().unwrap_or(0),
                high_watermark: high_watermarks.get(&key).copied().unwrap_or(0),
                clean_shutdown,
            };
            let mut log = PartitionLog::open(entry.path(), default_config.clone(), hint)?;
            log.share_dir_failure(Arc::clone(&dir_failed));
            if let Some(&offset) = cleaned.get(&key) {
                log.set_cleaner_checkpoint(offset);
            }
            let topic_id = partition_metadata::read(&entry.path())?;
            logs.insert(
                key,
                Entry {
                    log: Arc::new(Mutex::new(log)),
                    topic_id,
                },
            );
        }
        tracing::info!(dir = %dir.display(), partitions = logs.len(), clean_shutdown, "log dir opened");
        Ok(LogManager {
            dir,
            default_config,
            logs: Mutex::new(logs),
            checkpoint_lock: Mutex::new(()),
            dir_failed,
        })
    }

    /// Why the log directory failed (its first failed log, or fsync), if it did.
    pub fn dir_failure(&self) -> Option<&str> {
        self.dir_failed.get().map(String::as_str)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn default_config(&self) -> &LogConfig {
        &self.default_config
    }

    pub fn get(&self, topic: &str, partition: i32) -> Option<SharedLog> {
        self.logs
            .lock()
            .get(&(topic.to_string(), partition))
            .map(|e| Arc::clone(&e.log))
    }

    /// The topic id recorded in the partition's `partition.metadata`, if any.
    pub fn topic_id(&self, topic: &str, partition: i32) -> Option<uuid::Uuid> {
        self.logs
            .lock()
            .get(&(topic.to_string(), partition))
            .and_then(|e| e.topic_id)
    }

    /// Returns the partition's log, creating its directory and `partition.metadata` if missing.
    /// An existing log gets `config` applied; an existing directory of another topic id is
    /// [`LogError::InconsistentTopicId`] (delete it first).
    pub fn get_or_create(
        &self,
        topic: &str,
        partition: i32,
        topic_id: uuid::Uuid,
        config: LogConfig,
    ) -> Result<SharedLog, LogError> {
        check_topic_name(topic, partition)?;
        let mut logs = self.logs.lock();
        let key = (topic.to_string(), partition);
        if let Some(entry) = logs.get_mut(&key) {
            match entry.topic_id {
                Some(found) if found != topic_id => {
                    return Err(LogError::InconsistentTopicId {
                        expected: topic_id,
                        found,
                    })
                }
                Some(_) => {}
                None => {
                    partition_metadata::write(entry.log.lock().dir(), topic_id)?;
                    entry.topic_id = Some(topic_id);
                }
            }
            entry.log.lock().update_config(config);
            return Ok(Arc::clone(&entry.log));
        }
        let path = self.dir.join(partition_dir_name(topic, partition));
        let mut log = PartitionLog::open(path.clone(), config, RecoveryHint::new_log())?;
        log.share_dir_failure(Arc::clone(&self.dir_failed));
        match partition_metadata::read(&path)? {
            Some(found) if found != topic_id => {
                return Err(LogError::InconsistentTopicId {
                    expected: topic_id,
                    found,
                })
            }
            Some(_) => {}
            None => partition_metadata::write(&path, topic_id)?,
        }
        sync_dir(&self.dir)?;
        let shared = Arc::new(Mutex::new(log));
        logs.insert(
            key,
            Entry {
                log: Arc::clone(&shared),
                topic_id: Some(topic_id),
            },
        );
        Ok(shared)
    }

    /// Deletes a partition: the log is closed for writes, its directory renamed to
    /// `<t>-<p>.<uuid>-delete` (atomic, survives a crash: `open` finishes the job), then removed.
    pub fn delete(&self, topic: &str, partition: i32) -> Result<(), LogError> {
        let Some(entry) = self.logs.lock().remove(&(topic.to_string(), partition)) else {
            return Ok(());
        };
        let mut log = entry.log.lock();
        log.abandon();
        let from = log.dir().to_path_buf();
        let to = self
            .dir
            .join(delete_dir_name(topic, partition, uuid::Uuid::new_v4()));
        fs::rename(&from, &to)?;
        sync_dir(&self.dir)?;
        drop(log);
        match fs::remove_dir_all(&to) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }

    /// Sets a partition log aside as stray (on disk, but not in the metadata image): the log
    /// is closed for writes and forgotten, and its directory renamed to
    /// `<t>-<p>.<uuid>-stray`, Kafka's name, and kept; nothing deletes it automatically.
    /// Returns the new path, `None` if the partition is not hosted.
    pub fn rename_stray(&self, topic: &str, partition: i32) -> Result<Option<PathBuf>, LogError> {
        let Some(entry) = self.logs.lock().remove(&(topic.to_string(), partition)) else {
            return Ok(None);
        };
        let mut log = entry.log.lock();
        log.abandon();
        let to = self
            .dir
            .join(stray_dir_name(topic, partition, uuid::Uuid::new_v4()));
        fs::rename(log.dir(), &to)?;
        sync_dir(&self.dir)?;
        Ok(Some(to))
    }

    pub fn partitions(&self) -> Vec<(String, i32)> {
        self.logs.lock().keys().cloned().collect()
    }

    /// How many partition logs the directory holds.
    pub fn len(&self) -> usize {
        self.logs.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The directory's failure flag, for a log moving in (`LogDirs`' swap).
    pub(crate) fn dir_failed_flag(&self) -> Arc<OnceLock<String>> {
        Arc::clone(&self.dir_failed)
    }

    /// Forgets a partition whose log moved to another directory (nothing on disk changes).
    pub(crate) fn forget(
        &self,
        topic: &str,
        partition: i32,
    ) -> Option<(SharedLog, Option<uuid::Uuid>)> {
        self.logs
            .lock()
            .remove(&(topic.to_string(), partition))
            .map(|e| (e.log, e.topic_id))
    }

    /// Adopts a partition log that moved here from another directory.
    pub(crate) fn adopt(
        &self,
        topic: &str,
        partition: i32,
        log: SharedLog,
        topic_id: Option<uuid::Uuid>,
    ) {
        self.logs
            .lock()
            .insert((topic.to_string(), partition), Entry { log, topic_id });
    }

    fn snapshot(&self) -> Vec<((String, i32), SharedLog)> {
        self.logs
            .lock()
            .iter()
            .map(|(k, e)| (k.clone(), Arc::clone(&e.log)))
            .collect()
    }

    fn write_checkpoints(&self, offsets: &[((String, i32), Offsets)]) -> Result<(), LogError> {
        let _guard = self.checkpoint_lock.lock();
        let mut rp = OffsetCheckpoint::new();
        let mut ls = OffsetCheckpoint::new();
        let mut hw = OffsetCheckpoint::new();
        let mut cl = OffsetCheckpoint::new();
        for (key, o) in offsets {
            rp.insert(key.clone(), o.recovery_point);
            ls.insert(key.clone(), o.log_start);
            hw.insert(key.clone(), o.high_watermark);
            // Like Kafka, only logs the cleaner has been through are listed.
            if o.cleaned > 0 {
                cl.insert(key.clone(), o.cleaned);
            }
        }
        checkpoint::write_offsets(&self.dir.join(RECOVERY_POINT_CHECKPOINT), &rp)?;
        checkpoint::write_offsets(&self.dir.join(LOG_START_CHECKPOINT), &ls)?;
        checkpoint::write_offsets(&self.dir.join(HIGH_WATERMARK_CHECKPOINT), &hw)?;
        checkpoint::write_offsets(&self.dir.join(CLEANER_CHECKPOINT), &cl)?;
        Ok(())
    }

    /// Writes `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
    /// `replication-offset-checkpoint` (HWs) and `cleaner-offset-checkpoint` for every
    /// partition.
    pub fn checkpoint(&self) -> Result<(), LogError> {
        let offsets: Vec<_> = self
            .snapshot()
            .into_iter()
            .map(|(k, log)| (k, Offsets::of(&log.lock())))
            .collect();
        self.write_checkpoints(&offsets)
    }

    /// The partition's cleaner checkpoint (how far compaction got), `None` if not hosted.
    pub fn cleaner_checkpoint(&self, topic: &str, partition: i32) -> Option<i64> {
        self.get(topic, partition)
            .map(|log| log.lock().cleaner_checkpoint())
    }

    /// Fsyncs every log with unflushed messages (the periodic `log.flush.interval.ms` job).
    /// The fsync runs outside each log's lock. A failing log does not stop the others from
    /// being flushed: the first error is returned after all were tried (a failed fsync has
    /// already marked its log failed, so it is not retried).
    pub fn flush_all(&self) -> Result<(), LogError> {
        let mut first_error = None;
        for ((topic, partition), log) in self.snapshot() {
            let target = {
                let l = log.lock();
                if l.is_closed() || l.failure().is_some() {
                    continue;
                }
                l.flush_target()
            };
            match target.sync() {
                Ok(()) => log.lock().mark_flushed(target.up_to_offset()),
                Err(e) => {
                    tracing::error!(%topic, partition, error = %e, "flush failed");
                    first_error.get_or_insert(LogError::Io(e));
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Runs retention on every log; returns the number of segments deleted.
    pub fn enforce_retention(&self, now_ms: i64) -> Result<usize, LogError> {
        let mut deleted = 0;
        for (_, log) in self.snapshot() {
            let mut l = log.lock();
            if !l.is_closed() {
                deleted += l.enforce_retention(now_ms)?;
            }
        }
        Ok(deleted)
    }

    /// Clean shutdown: flushes and closes every log (later writes fail with `Closed`), writes
    /// the checkpoints, then `.kafka_cleanshutdown`, so the next open skips recovery. A log
    /// that fails to close does not stop the others; the checkpoints are still written (a
    /// failed log's recovery point never passed unsynced data) but the clean-shutdown marker
    /// is not, so the next open recovers.
    pub fn shutdown(&self) -> Result<(), LogError> {
        let mut offsets = Vec::new();
        let mut first_error = None;
        for (key, log) in self.snapshot() {
            let mut l = log.lock();
            if let Err(e) = l.close_in_place() {
                tracing::error!(topic = %key.0, partition = key.1, error = %e, "closing log failed");
                first_error.get_or_insert(e);
            }
            offsets.push((key, Offsets::of(&l)));
        }
        self.write_checkpoints(&offsets)?;
        if let Some(e) = first_error {
            return Err(e);
        }
        let marker = self.dir.join(CLEAN_SHUTDOWN_FILE);
        fs::File::create(&marker)?.sync_all()?;
        sync_dir(&self.dir)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::{self, Fault};
    use crate::partition_log::fault_tests::{append, batch};

    /// Caught (issue 9 item 6): `flush_all` returned at the first failing partition, so one
    /// bad log left every later partition unflushed. Now all are tried, the first error is
    /// returned, and the failed log is skipped from then on (never fsynced again).
    #[test]
    fn flush_all_flushes_the_others_when_one_fails() {
        let dir = tempfile::tempdir().unwrap();
        let m = LogManager::open(dir.path().to_path_buf(), LogConfig::default()).unwrap();
        let logs: Vec<SharedLog> = (0..3)
            .map(|p| {
                let log = m
                    .get_or_create("t", p, uuid::Uuid::new_v4(), LogConfig::default())
                    .unwrap();
                append(&mut log.lock(), &batch(2, b'a')).unwrap();
                log
            })
            .collect();
        fault::arm(Fault::Sync); // the first partition's first fsync fails
        let e = m.flush_all().unwrap_err();
        assert_eq!(e.kafka_error_code(), 56);
        let failed: Vec<bool> = logs.iter().map(|l| l.lock().failure().is_some()).collect();
        assert_eq!(failed, vec![true, false, false]);
        let rps: Vec<i64> = logs.iter().map(|l| l.lock().recovery_point()).collect();
        assert_eq!(rps, vec![0, 2, 2]);
        // The directory is offline now: its healthy logs refuse new writes too.
        assert!(m.dir_failure().is_some());
        for l in &logs[1..] {
            let e = append(&mut l.lock(), &batch(1, b'b')).unwrap_err();
            assert_eq!(e.kafka_error_code(), 56);
        }
    }

    /// Known case 6 (docs/faults.md): one partition's failed write must take every partition
    /// of the directory out of service, as Kafka's offline log dir does; before, the others
    /// kept accepting (and acknowledging) writes until the broker had stopped.
    #[test]
    fn a_failed_write_takes_every_log_of_the_directory_out_of_service() {
        let dir = tempfile::tempdir().unwrap();
        let m = LogManager::open(dir.path().to_path_buf(), LogConfig::default()).unwrap();
        let a = m
            .get_or_create("t", 0, uuid::Uuid::new_v4(), LogConfig::default())
            .unwrap();
        let b = m
            .get_or_create("t", 1, uuid::Uuid::new_v4(), LogConfig::default())
            .unwrap();
        append(&mut b.lock(), &batch(1, b'a')).unwrap();
        fault::arm(Fault::LogWrite);
        assert!(append(&mut a.lock(), &batch(1, b'x')).is_err());
        assert!(a.lock().failure().is_some());
        assert!(b.lock().failure().is_none(), "b itself did not fail");
        let e = b.lock().check_writable().unwrap_err();
        assert_eq!(e.kafka_error_code(), 56);
        assert!(e.to_string().contains("t-0"), "{e}");
        assert_eq!(
            append(&mut b.lock(), &batch(1, b'b'))
                .unwrap_err()
                .kafka_error_code(),
            56
        );
        assert_eq!(
            b.lock().log_end_offset(),
            1,
            "nothing appended after the failure"
        );
    }
}
