//! What the active controller needs of the metadata quorum, as a trait: the Raft quorum in
//! production, a scripted one in the shell's tests (which decide when each batch commits, so
//! pipelining and failover mid-pipeline are tested deterministically).
//!
//! The appender task keeps the controller task from waiting on Raft: the shell hands it each
//! batch in offset order, it appends them in that order without waiting for their commit
//! ([`ControllerQuorum::append`]), and reports each batch's outcome (its first offset, or why
//! it did not commit) back to the shell.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use runnel_metadata::MetadataRecord;
use runnel_raft::{MetadataQuorum, QuorumError};
use tokio::sync::mpsc;

/// Resolves with a batch's first offset once it committed and was applied, or with why not.
pub type CommitFuture = Pin<Box<dyn Future<Output = Result<i64, QuorumError>> + Send>>;
type AppendFuture<'a> =
    Pin<Box<dyn Future<Output = Result<CommitFuture, QuorumError>> + Send + 'a>>;

/// The metadata quorum as the active controller uses it.
pub trait ControllerQuorum: Send + Sync + 'static {
    fn is_leader(&self) -> bool;
    /// The current term: the controller epoch.
    fn term(&self) -> u64;
    fn leader(&self) -> Option<i32>;
    /// The offset of the last record committed and applied on this node.
    fn last_committed_offset(&self) -> i64;
    /// Appends one batch without waiting for its commit; batches appended one after another
    /// are logged in that order.
    fn append(&self, records: Vec<MetadataRecord>) -> AppendFuture<'_>;
}

impl ControllerQuorum for MetadataQuorum {
    fn is_leader(&self) -> bool {
        MetadataQuorum::is_leader(self)
    }

    fn term(&self) -> u64 {
        MetadataQuorum::term(self)
    }

    fn leader(&self) -> Option<i32> {
        MetadataQuorum::leader(self)
    }

    fn last_committed_offset(&self) -> i64 {
        MetadataQuorum::last_committed_offset(self)
    }

    fn append(&self, records: Vec<MetadataRecord>) -> AppendFuture<'_> {
        Box::pin(async move {
            let committing = MetadataQuorum::append(self, records).await?;
            Ok(Box::pin(committing) as CommitFuture)
        })
    }
}

/// One batch for the appender: its pipeline generation (outcomes of a reverted pipeline are
/// ignored), the offset its first record must get, and an optional delay before it is
/// appended (the test-only stall hook; later batches wait behind it, as behind a slow quorum).
pub(crate) struct AppendJob {
    pub generation: u64,
    pub first: i64,
    pub records: Vec<MetadataRecord>,
    pub stall: Option<Duration>,
}

/// What became of one appended batch.
pub(crate) struct AppendOutcome {
    pub generation: u64,
    pub first: i64,
    pub result: Result<i64, QuorumError>,
}

/// Starts the appender task; it ends when the shell drops the sender.
pub(crate) fn spawn_appender(
    quorum: Arc<dyn ControllerQuorum>,
) -> (
    mpsc::UnboundedSender<AppendJob>,
    mpsc::UnboundedReceiver<AppendOutcome>,
) {
    let (job_tx, mut job_rx) = mpsc::unbounded_channel::<AppendJob>();
    let (outcome_tx, outcome_rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(job) = job_rx.recv().await {
            if let Some(stall) = job.stall {
                tracing::warn!(?stall, "test hook: stalling a CreateTopics commit");
                tokio::time::sleep(stall).await;
            }
            let AppendJob {
                generation,
                first,
                records,
                ..
            } = job;
            match quorum.append(records).await {
                Ok(committing) => {
                    let outcome_tx = outcome_tx.clone();
                    tokio::spawn(async move {
                        let result = committing.await;
                        let _ = outcome_tx.send(AppendOutcome {
                            generation,
                            first,
                            result,
                        });
                    });
                }
                Err(e) => {
                    let _ = outcome_tx.send(AppendOutcome {
                        generation,
                        first,
                        result: Err(e),
                    });
                }
            }
        }
    });
    (job_tx, outcome_rx)
}
