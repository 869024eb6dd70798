//! What the waiters of one partition watch, and how a wait over several partitions ends.
//!
//! Every partition publishes its [`Progress`] on a `tokio::sync::watch` (as it publishes its
//! fsync point), so an append or an HW move wakes the waiters of that partition only; a woken
//! waiter checks its own offsets before it reads or answers anything.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use runnel_log::PartitionLog;
use tokio::sync::watch;

use super::Role;

/// A partition's position as its waiters see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub log_end_offset: i64,
    pub high_watermark: i64,
    /// The LSO (`runnel_log::txn::last_stable_offset`): read_committed consumers read below it.
    pub last_stable_offset: i64,
    pub leader: i32,
    pub leader_epoch: i32,
    /// Bumped for changes the fields above do not show (a follower's log start, the
    /// partition leaving this broker), so waiters re-check.
    pub changes: u64,
}

impl Progress {
    pub(crate) fn of(log: &PartitionLog, role: &Role, first_unstable: Option<i64>) -> Progress {
        Progress {
            log_end_offset: log.log_end_offset(),
            high_watermark: log.high_watermark(),
            last_stable_offset: runnel_log::txn::last_stable_offset(
                first_unstable,
                log.high_watermark(),
            ),
            leader: role.leader,
            leader_epoch: role.leader_epoch,
            changes: 0,
        }
    }

    pub(crate) fn position(&self) -> (i64, i64, i64, i32, i32) {
        (
            self.log_end_offset,
            self.high_watermark,
            self.last_stable_offset,
            self.leader,
            self.leader_epoch,
        )
    }

    /// Whether a fetch at `fetch_offset` that read the partition when it stood at `seen` has
    /// something new to answer: records up to its bound (the LEO for followers, the HW for
    /// consumers, the LSO for read_committed ones) past both its offset and what it saw, or a
    /// leadership change or truncation (its answer is an error now).
    pub fn has_news_for(&self, seen: &Progress, fetch_offset: i64, bound: ReadBound) -> bool {
        let upper = |p: &Progress| match bound {
            ReadBound::LogEnd => p.log_end_offset,
            ReadBound::HighWatermark => p.high_watermark,
            ReadBound::LastStable => p.last_stable_offset,
        };
        upper(self) > fetch_offset.max(upper(seen))
            || self.leader != seen.leader
            || self.leader_epoch != seen.leader_epoch
            || self.log_end_offset < seen.log_end_offset
    }
}

/// Up to where a fetch may read: followers the LEO, consumers the HW, read_committed
/// consumers the LSO.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadBound {
    LogEnd,
    HighWatermark,
    LastStable,
}

/// How an acks=all wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replicated {
    /// The HW covers the write and the committed ISR still holds `min.insync.replicas`.
    Done,
    TimedOut,
    /// This broker no longer leads in the epoch of the append: as a follower it may truncate
    /// the write away and later reach its offset with other records, so only the new leader
    /// can tell (the client retries there). Kafka answers NOT_LEADER_OR_FOLLOWER too.
    LeadershipMoved,
    /// Replicated, but the committed ISR shrank below `min.insync.replicas` meanwhile
    /// (spec E.4): 20 NOT_ENOUGH_REPLICAS_AFTER_APPEND.
    NotEnoughReplicasAfterAppend,
}

/// Waits until any of `receivers` sees a change (never, for none). A closed sender counts as
/// a change: its partition is gone, the waiter re-checks and finds that out.
pub async fn any_progress<'a>(
    receivers: impl IntoIterator<Item = &'a mut watch::Receiver<Progress>>,
) {
    type Change<'a> =
        Pin<Box<dyn Future<Output = Result<(), watch::error::RecvError>> + Send + 'a>>;
    let mut changes: Vec<Change<'a>> = receivers
        .into_iter()
        .map(|rx| Box::pin(rx.changed()) as Change<'a>)
        .collect();
    if changes.is_empty() {
        return std::future::pending().await;
    }
    std::future::poll_fn(|cx| {
        if changes.iter_mut().any(|c| c.as_mut().poll(cx).is_ready()) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await
}

/// Runs every future concurrently and returns their outputs in order (one deadline for all
/// is the caller's: each future carries it).
pub async fn join_all<T>(futures: Vec<Pin<Box<dyn Future<Output = T> + Send + '_>>>) -> Vec<T> {
    let mut futures: Vec<_> = futures.into_iter().map(Some).collect();
    let mut outputs: Vec<Option<T>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (slot, out) in futures.iter_mut().zip(outputs.iter_mut()) {
            if let Some(f) = slot {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => {
                        *out = Some(v);
                        *slot = None;
                    }
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}
