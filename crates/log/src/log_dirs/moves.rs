//! Moving a replica to another log dir (AlterReplicaLogDirs; Kafka's future replica and its
//! `ReplicaAlterLogDirsThread`): the partition's directory is copied into
//! `<t>-<p>.<id>-future` in the target dir by passes while the log keeps serving (`copy`),
//! then swapped under the log's lock.
//!
//! The swap, after a last pass under the lock (fsyncing the copy): rename the source to
//! `<t>-<p>.<id>-moved` (fsync its dir), rename the future to `<t>-<p>` (fsync), reopen the
//! log from there, remove the moved copy. The log's `Arc` stays the same, so the hosted
//! partition never notices. `recovery` says what a kill at any step leaves and how start-up
//! resolves it without losing the current copy.
//!
//! States of a move: registered (`start_move`, future dir created) -> copying (passes) ->
//! swapped | abandoned (deleted, set aside as stray, another target asked, shutdown, an I/O
//! error: the future dir is removed, the current copy untouched).

use std::fs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::copy::{copy_pass, CopyState};
use super::{Key, LogDirs};
use crate::checkpoint::sync_dir;
use crate::dir_name::{future_dir_name, moved_dir_name, partition_dir_name};
use crate::error::LogError;

/// A pass that wrote at most this much is close enough: the next one runs under the lock.
const CATCH_UP_BYTES: u64 = 4 * 1024 * 1024;
/// After this many passes the swap happens anyway (appends outrun the copy, or a throttle
/// below the produce rate): the last pass under the lock copies what is left.
const MAX_PASSES: u32 = 20;

/// One replica move in progress.
#[derive(Debug)]
pub struct Move {
    /// The target dir's index.
    pub target: usize,
    future_dir: PathBuf,
    cancelled: AtomicBool,
    copied_bytes: AtomicU64,
    /// The log end offset when the last finished pass started: the copy holds at least that.
    copied_to_offset: AtomicI64,
}

impl Move {
    fn cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }
}

/// What DescribeLogDirs shows of a move: the future replica in its target dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FutureReplica {
    pub topic: String,
    pub partition: i32,
    pub dir: usize,
    pub size_bytes: u64,
    /// How far the copy is known to reach (Kafka reports the future log's end offset).
    pub copied_to_offset: i64,
}

/// What `start_move` did.
#[derive(Debug)]
pub enum MoveStart {
    /// The replica is in that dir already (a move elsewhere, if any, was abandoned).
    AlreadyThere,
    /// A move to that dir is under way already.
    InProgress,
    /// A new move; run it with [`LogDirs::run_move`].
    Started(Arc<Move>),
}

enum Swap {
    Done,
    Cancelled,
    /// The log is being compacted: another pass, then try again.
    Later,
}

impl LogDirs {
    /// Starts moving the hosted partition to dir `target`. `Ok(None)`: not hosted here.
    pub fn start_move(
        &self,
        topic: &str,
        partition: i32,
        target: usize,
    ) -> Result<Option<MoveStart>, LogError> {
        let _structure = self.structure.lock();
        let Some(current) = self.dir_of(topic, partition) else {
            return Ok(None);
        };
        let key = (topic.to_string(), partition);
        let existing = self.moves.lock().get(&key).map(|m| m.target);
        if existing == Some(target) {
            return Ok(Some(MoveStart::InProgress));
        }
        if existing.is_some() {
            self.cancel_move(topic, partition);
        }
        if current == target {
            return Ok(Some(MoveStart::AlreadyThere));
        }
        let dir = self
            .dirs
            .get(target)
            .ok_or_else(|| LogError::LogDirs(format!("no log dir {target}")))?;
        if let Some(why) = dir.dir_failure() {
            return Err(LogError::LogDirs(format!(
                "log dir {} is offline: {why}",
                dir.dir().display()
            )));
        }
        let future_dir = dir
            .dir()
            .join(future_dir_name(topic, partition, uuid::Uuid::new_v4()));
        fs::create_dir(&future_dir)?;
        sync_dir(dir.dir())?;
        let mv = Arc::new(Move {
            target,
            future_dir,
            cancelled: AtomicBool::new(false),
            copied_bytes: AtomicU64::new(0),
            copied_to_offset: AtomicI64::new(0),
        });
        self.moves.lock().insert(key, Arc::clone(&mv));
        tracing::info!(topic, partition, from = %self.dirs[current].dir().display(), to = %dir.dir().display(), "replica move started");
        Ok(Some(MoveStart::Started(mv)))
    }

    /// Abandons the partition's move, if any (the caller holds the structure lock).
    pub(super) fn cancel_move(&self, topic: &str, partition: i32) {
        let Some(mv) = self.moves.lock().remove(&(topic.to_string(), partition)) else {
            return;
        };
        mv.cancelled.store(true, Ordering::Release);
        remove_future(&mv);
    }

    /// The future replicas of the moves under way.
    pub fn futures(&self) -> Vec<FutureReplica> {
        self.moves
            .lock()
            .iter()
            .map(|((topic, partition), m)| FutureReplica {
                topic: topic.clone(),
                partition: *partition,
                dir: m.target,
                size_bytes: m.copied_bytes.load(Ordering::Acquire),
                copied_to_offset: m.copied_to_offset.load(Ordering::Acquire),
            })
            .collect()
    }

    /// Runs a started move to its end (blocking: run it on a thread of its own). `throttle`
    /// is called with every chunk's size before it is written (the
    /// `replica.alter.log.dirs.io.max.bytes.per.second` bound). Returns whether the replica
    /// now lives in the target dir; an abandoned move is `Ok(false)`, an error leaves the
    /// current copy serving and the future copy removed.
    pub fn run_move(
        &self,
        topic: &str,
        partition: i32,
        mv: &Arc<Move>,
        throttle: &mut dyn FnMut(u64),
    ) -> Result<bool, LogError> {
        let result = self.copy_and_swap(topic, partition, mv, throttle);
        if !matches!(result, Ok(true)) {
            let _structure = self.structure.lock();
            let key = (topic.to_string(), partition);
            let mut moves = self.moves.lock();
            if moves.get(&key).is_some_and(|m| Arc::ptr_eq(m, mv)) {
                moves.remove(&key);
            }
            drop(moves);
            remove_future(mv);
        }
        if let Err(e) = &result {
            tracing::error!(topic, partition, error = %e, "replica move failed; the replica stays where it was");
        }
        result
    }

    fn copy_and_swap(
        &self,
        topic: &str,
        partition: i32,
        mv: &Arc<Move>,
        throttle: &mut dyn FnMut(u64),
    ) -> Result<bool, LogError> {
        let mut state = CopyState::default();
        let mut passes = 0u32;
        loop {
            if mv.cancelled() {
                return Ok(false);
            }
            let Some(log) = self.get(topic, partition) else {
                return Ok(false);
            };
            let (src, leo) = {
                let l = log.lock();
                (l.dir().to_path_buf(), l.log_end_offset())
            };
            // Progress shows while a pass runs (DescribeLogDirs' future size).
            let before = state.copied_bytes();
            let mut running = 0u64;
            let mut counting = |n: u64| {
                throttle(n);
                running += n;
                mv.copied_bytes.store(before + running, Ordering::Release);
            };
            let written = match copy_pass(&src, &mv.future_dir, &mut state, false, &mut counting) {
                Err(_) if mv.cancelled() => return Ok(false),
                other => other?,
            };
            passes += 1;
            mv.copied_bytes
                .store(state.copied_bytes(), Ordering::Release);
            mv.copied_to_offset.store(leo, Ordering::Release);
            if written > CATCH_UP_BYTES && passes < MAX_PASSES {
                continue;
            }
            match self.swap(topic, partition, mv, &mut state)? {
                Swap::Done => return Ok(true),
                Swap::Cancelled => return Ok(false),
                Swap::Later => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// The last pass and the renames, under the structure lock and the log's lock.
    fn swap(
        &self,
        topic: &str,
        partition: i32,
        mv: &Arc<Move>,
        state: &mut CopyState,
    ) -> Result<Swap, LogError> {
        let _structure = self.structure.lock();
        let key: Key = (topic.to_string(), partition);
        if mv.cancelled()
            || !self
                .moves
                .lock()
                .get(&key)
                .is_some_and(|m| Arc::ptr_eq(m, mv))
        {
            return Ok(Swap::Cancelled);
        }
        if self.cleaning.lock().contains(&key) {
            return Ok(Swap::Later);
        }
        let Some(from) = self.dir_of(topic, partition) else {
            return Ok(Swap::Cancelled);
        };
        let (source, target) = (&self.dirs[from], &self.dirs[mv.target]);
        let Some(shared) = source.get(topic, partition) else {
            return Ok(Swap::Cancelled);
        };
        let mut log = shared.lock();
        log.check_writable()?;
        let src = log.dir().to_path_buf();
        // Unthrottled: appends wait on this lock, and what is left is one pass's appends.
        copy_pass(&src, &mv.future_dir, state, true, &mut |_| {})?;
        let moved = source
            .dir()
            .join(moved_dir_name(topic, partition, uuid::Uuid::new_v4()));
        let dst = target.dir().join(partition_dir_name(topic, partition));
        fs::rename(&src, &moved)?;
        sync_dir(source.dir())?;
        let renamed = fs::rename(&mv.future_dir, &dst)
            .and_then(|()| sync_dir(target.dir()))
            .map_err(LogError::from)
            .and_then(|()| log.reopen_at(dst.clone(), target.dir_failed_flag()));
        if let Err(e) = renamed {
            // Back as before: the old log's handles point into `moved`.
            let _ = fs::rename(&dst, &mv.future_dir);
            fs::rename(&moved, &src)?;
            sync_dir(source.dir())?;
            return Err(e);
        }
        drop(log);
        if let Some((log, topic_id)) = source.forget(topic, partition) {
            target.adopt(topic, partition, log, topic_id);
        }
        self.moves.lock().remove(&key);
        if let Err(e) = fs::remove_dir_all(&moved) {
            tracing::warn!(dir = %moved.display(), error = %e, "could not remove the moved copy; the next start removes it");
        }
        // The partition's offsets now belong in the target dir's checkpoints.
        for dir in [source, target] {
            if let Err(e) = dir.checkpoint() {
                tracing::warn!(dir = %dir.dir().display(), error = %e, "checkpoint after a replica move failed");
            }
        }
        tracing::info!(topic, partition, to = %dst.display(), "replica move completed");
        Ok(Swap::Done)
    }
}

fn remove_future(mv: &Move) {
    match fs::remove_dir_all(&mv.future_dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            tracing::warn!(dir = %mv.future_dir.display(), error = %e, "could not remove an abandoned future copy; the next start removes it")
        }
        _ => {}
    }
}
