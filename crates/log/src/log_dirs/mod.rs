//! [`LogDirs`]: the broker's log dirs (`log.dirs`, Kafka's JBOD), one [`LogManager`] each:
//! where a new replica goes (`placement`), start-up after an interrupted replica move
//! (`recovery`), and moving a replica between dirs (`moves`, AlterReplicaLogDirs) by copying
//! its directory while it keeps serving (`copy`).
//!
//! One structure lock serialises what changes which dir holds a partition (create, delete,
//! stray, a move's swap); a partition's log is locked inside it, never the other way round.

mod copy;
mod moves;
pub mod placement;
pub mod recovery;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

pub use moves::{FutureReplica, Move, MoveStart};

use crate::config::LogConfig;
use crate::dir_name::{
    parse_partition_dir, parse_suffixed_dir, partition_dir_name, stray_dir_name,
};
use crate::error::LogError;
use crate::manager::{LogManager, SharedLog};
use recovery::{Found, Kind, Step};

type Key = (String, i32);

/// Every log dir of the broker, in `log.dirs` order.
pub struct LogDirs {
    dirs: Vec<LogManager>,
    structure: Mutex<()>,
    /// Dirs AlterReplicaLogDirs named for partitions not hosted yet (Kafka's
    /// `preferredLogDirs`): their replica is created there.
    preferred: Mutex<BTreeMap<Key, usize>>,
    moves: Mutex<BTreeMap<Key, Arc<Move>>>,
    /// Logs the cleaner is compacting: a move does not swap them meanwhile.
    cleaning: Mutex<BTreeSet<Key>>,
    /// Moves a kill interrupted, to start again once their partitions are hosted.
    resumable: Mutex<Vec<(String, i32, usize)>>,
}

impl std::fmt::Debug for LogDirs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.dirs.iter()).finish()
    }
}

impl From<LogManager> for LogDirs {
    fn from(one: LogManager) -> Self {
        LogDirs::of(vec![one])
    }
}

/// The partition directories of `dir` (index `i`) by kind.
fn scan(i: usize, dir: &Path) -> Result<Vec<Found>, LogError> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if !entry.file_type()?.is_dir() {
            continue;
        }
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let classified = parse_partition_dir(&name)
            .map(|k| (k, Kind::Current))
            .or_else(|| parse_suffixed_dir(&name, "future").map(|k| (k, Kind::Future)))
            .or_else(|| parse_suffixed_dir(&name, "moved").map(|k| (k, Kind::Moved)));
        if let Some(((topic, partition), kind)) = classified {
            found.push(Found {
                dir: i,
                name,
                topic,
                partition,
                kind,
            });
        }
    }
    Ok(found)
}

/// Carries out the start-up plan (see `recovery`); returns the moves to start again
/// (topic, partition, target dir).
fn apply(
    dirs: &[PathBuf],
    found: &[Found],
    steps: &[Step],
) -> Result<Vec<(String, i32, usize)>, LogError> {
    let mut resume = Vec::new();
    let key_of = |dir: usize, name: &str| {
        found
            .iter()
            .find(|f| f.dir == dir && f.name == name)
            .map(|f| (f.topic.clone(), f.partition))
    };
    for step in steps {
        match step {
            Step::Remove { dir, name } => {
                tracing::warn!(dir = %dirs[*dir].display(), name, "removing the leftover of an interrupted replica move");
                fs::remove_dir_all(dirs[*dir].join(name))?;
            }
            Step::Resume { dir, name } => {
                tracing::warn!(dir = %dirs[*dir].display(), name, "restarting an interrupted replica move");
                fs::remove_dir_all(dirs[*dir].join(name))?;
                resume.extend(key_of(*dir, name).map(|(t, p)| (t, p, *dir)));
            }
            Step::MakeCurrent { dir, from } => {
                let Some((topic, partition)) = key_of(*dir, from) else {
                    continue;
                };
                tracing::warn!(dir = %dirs[*dir].display(), from, "completing an interrupted replica move");
                fs::rename(
                    dirs[*dir].join(from),
                    dirs[*dir].join(partition_dir_name(&topic, partition)),
                )?;
            }
            Step::SetAside { dir, from } => {
                let Some((topic, partition)) = key_of(*dir, from) else {
                    continue;
                };
                let to = stray_dir_name(&topic, partition, uuid::Uuid::new_v4());
                tracing::warn!(dir = %dirs[*dir].display(), from, to, "keeping a future copy without a current one as a stray directory");
                fs::rename(dirs[*dir].join(from), dirs[*dir].join(to))?;
            }
        }
        crate::checkpoint::sync_dir(&dirs[step_dir(step)])?;
    }
    Ok(resume)
}

fn step_dir(step: &Step) -> usize {
    match step {
        Step::Remove { dir, .. }
        | Step::MakeCurrent { dir, .. }
        | Step::SetAside { dir, .. }
        | Step::Resume { dir, .. } => *dir,
    }
}

impl LogDirs {
    fn of(dirs: Vec<LogManager>) -> Self {
        LogDirs {
            dirs,
            structure: Mutex::new(()),
            preferred: Mutex::default(),
            moves: Mutex::default(),
            cleaning: Mutex::default(),
            resumable: Mutex::default(),
        }
    }

    /// Opens every log dir (creating missing ones): first the leftovers of an interrupted
    /// replica move are resolved across all of them (`recovery`), then each dir's logs open
    /// and recover as one [`LogManager`].
    pub fn open(dirs: Vec<PathBuf>, default_config: LogConfig) -> Result<LogDirs, LogError> {
        if dirs.is_empty() {
            return Err(LogError::LogDirs("no log dir configured".into()));
        }
        let mut found = Vec::new();
        for (i, dir) in dirs.iter().enumerate() {
            fs::create_dir_all(dir)?;
            found.extend(scan(i, dir)?);
        }
        let paths: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        let steps = recovery::plan(&found, &paths).map_err(LogError::LogDirs)?;
        let resume = apply(&dirs, &found, &steps)?;
        let managers = dirs
            .into_iter()
            .map(|d| LogManager::open(d, default_config.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        let opened = LogDirs::of(managers);
        *opened.resumable.lock() = resume;
        Ok(opened)
    }

    /// The moves a kill interrupted (topic, partition, target dir), once: the broker starts
    /// them again when the partitions are hosted.
    pub fn take_resumable(&self) -> Vec<(String, i32, usize)> {
        std::mem::take(&mut *self.resumable.lock())
    }

    /// The dirs, in `log.dirs` order.
    pub fn dirs(&self) -> &[LogManager] {
        &self.dirs
    }

    pub fn default_config(&self) -> &LogConfig {
        self.dirs[0].default_config()
    }

    /// Index of the dir holding the partition's current log.
    pub fn dir_of(&self, topic: &str, partition: i32) -> Option<usize> {
        self.dirs
            .iter()
            .position(|d| d.get(topic, partition).is_some())
    }

    /// Index of the dir at `path`: as `log.dirs` names it, its absolute path (what
    /// DescribeLogDirs reports, Kafka's `getAbsolutePath`) or the same directory.
    pub fn index_of(&self, path: &str) -> Option<usize> {
        let wanted = Path::new(path);
        let absolute = |p: &Path| std::path::absolute(p).ok();
        let canonical = |p: &Path| fs::canonicalize(p).ok();
        self.dirs.iter().position(|d| {
            d.dir() == wanted
                || absolute(d.dir()).is_some_and(|a| Some(a) == absolute(wanted))
                || canonical(d.dir()).is_some_and(|c| Some(c) == canonical(wanted))
        })
    }

    pub fn get(&self, topic: &str, partition: i32) -> Option<SharedLog> {
        self.dirs.iter().find_map(|d| d.get(topic, partition))
    }

    pub fn topic_id(&self, topic: &str, partition: i32) -> Option<uuid::Uuid> {
        self.dirs.iter().find_map(|d| d.topic_id(topic, partition))
    }

    pub fn partitions(&self) -> Vec<(String, i32)> {
        self.dirs.iter().flat_map(|d| d.partitions()).collect()
    }

    /// Why the first failed dir failed, if one did.
    pub fn dir_failure(&self) -> Option<&str> {
        self.dirs.iter().find_map(|d| d.dir_failure())
    }

    /// Remembers the dir AlterReplicaLogDirs named for a partition not hosted here yet.
    pub fn prefer(&self, topic: &str, partition: i32, dir: usize) {
        self.preferred
            .lock()
            .insert((topic.to_string(), partition), dir);
    }

    /// The partition's log, created if missing in the dir [`placement::choose_dir`] picks.
    pub fn get_or_create(
        &self,
        topic: &str,
        partition: i32,
        topic_id: uuid::Uuid,
        config: LogConfig,
    ) -> Result<SharedLog, LogError> {
        let _structure = self.structure.lock();
        if let Some(i) = self.dir_of(topic, partition) {
            return self.dirs[i].get_or_create(topic, partition, topic_id, config);
        }
        let key = (topic.to_string(), partition);
        let preferred = self.preferred.lock().remove(&key);
        let i = placement::choose_dir(&self.counts(), &self.online(), preferred)
            .ok_or_else(|| LogError::LogDirs("every log dir is offline".into()))?;
        self.dirs[i].get_or_create(topic, partition, topic_id, config)
    }

    /// Partition copies per dir, current and future ones (Kafka's `nextLogDirs` counts both).
    fn counts(&self) -> Vec<usize> {
        let mut counts: Vec<usize> = self.dirs.iter().map(LogManager::len).collect();
        for m in self.moves.lock().values() {
            if let Some(c) = counts.get_mut(m.target) {
                *c += 1;
            }
        }
        counts
    }

    fn online(&self) -> Vec<bool> {
        self.dirs
            .iter()
            .map(|d| d.dir_failure().is_none())
            .collect()
    }

    /// Deletes a partition (see [`LogManager::delete`]); a move of it is abandoned first.
    pub fn delete(&self, topic: &str, partition: i32) -> Result<(), LogError> {
        let _structure = self.structure.lock();
        self.cancel_move(topic, partition);
        match self.dir_of(topic, partition) {
            Some(i) => self.dirs[i].delete(topic, partition),
            None => Ok(()),
        }
    }

    /// Sets a partition aside as stray (see [`LogManager::rename_stray`]); a move of it is
    /// abandoned first.
    pub fn rename_stray(&self, topic: &str, partition: i32) -> Result<Option<PathBuf>, LogError> {
        let _structure = self.structure.lock();
        self.cancel_move(topic, partition);
        match self.dir_of(topic, partition) {
            Some(i) => self.dirs[i].rename_stray(topic, partition),
            None => Ok(None),
        }
    }

    /// Every online dir's checkpoints; a failing dir does not keep the others from theirs. A
    /// failed dir is left alone (Kafka drops it from its checkpointed dirs): its next start
    /// recovers from the checkpoints it last wrote, which never passed unsynced data.
    pub fn checkpoint(&self) -> Result<(), LogError> {
        self.each(|d| match d.dir_failure() {
            Some(_) => Ok(()),
            None => d.checkpoint(),
        })
    }

    pub fn flush_all(&self) -> Result<(), LogError> {
        self.each(LogManager::flush_all)
    }

    pub fn enforce_retention(&self, now_ms: i64) -> Result<usize, LogError> {
        let mut deleted = 0;
        for d in &self.dirs {
            deleted += d.enforce_retention(now_ms)?;
        }
        Ok(deleted)
    }

    /// Clean shutdown of every dir; moves in progress are abandoned first (their future
    /// copies removed), so a restart finds only current copies.
    pub fn shutdown(&self) -> Result<(), LogError> {
        {
            let _structure = self.structure.lock();
            let keys: Vec<Key> = self.moves.lock().keys().cloned().collect();
            for (topic, partition) in keys {
                self.cancel_move(&topic, partition);
            }
        }
        self.each(LogManager::shutdown)
    }

    fn each(&self, f: impl Fn(&LogManager) -> Result<(), LogError>) -> Result<(), LogError> {
        let mut first = None;
        for d in &self.dirs {
            if let Err(e) = f(d) {
                tracing::error!(dir = %d.dir().display(), error = %e, "log dir operation failed");
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Marks a log as being compacted; `false` (do not clean it now) while it moves.
    pub fn begin_cleaning(&self, topic: &str, partition: i32) -> bool {
        let key = (topic.to_string(), partition);
        if self.moves.lock().contains_key(&key) {
            return false;
        }
        self.cleaning.lock().insert(key);
        true
    }

    pub fn end_cleaning(&self, topic: &str, partition: i32) {
        self.cleaning.lock().remove(&(topic.to_string(), partition));
    }
}

#[cfg(test)]
mod tests;
