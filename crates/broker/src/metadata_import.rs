//! The one-time upgrade of a single node's file metadata log (`<data-dir>/metadata/`, written
//! by builds before the single node ran a one-voter quorum) into the Raft log.
//!
//! The file log is checked for damage before any partition directory is opened (`open`), and
//! imported after the one-voter quorum elected itself and before the controller decides
//! anything (`import`): every record, in order, as one atomic batch, so a crash leaves either
//! nothing or everything imported. Then the directory is renamed `metadata.imported` and never
//! read again. A crash between the commit and the rename is recognised on the next start: the
//! quorum already holds records (nothing else writes before the import), so only the rename
//! is redone.

use std::path::{Path, PathBuf};
use std::time::Duration;

use runnel_raft::MetadataQuorum;

use crate::metadata_log::FileMetadataLog;
use crate::BrokerError;

/// The old single-node metadata directory.
const FILE_LOG_DIR: &str = "metadata";
/// What it is renamed to once imported.
const IMPORTED_DIR: &str = "metadata.imported";
/// How long the one voter may take to elect itself.
const ELECTION_DEADLINE: Duration = Duration::from_secs(30);

/// A file metadata log waiting to be imported.
pub struct PendingImport {
    dir: PathBuf,
    log: FileMetadataLog,
}

/// Opens the data dir's file metadata log if it was never imported; a damaged one refuses to
/// start (naming the file and byte offset) with nothing else touched.
pub fn open(data_dir: &Path) -> Result<Option<PendingImport>, BrokerError> {
    let dir = data_dir.join(FILE_LOG_DIR);
    if !dir.join("metadata.log").is_file() {
        return Ok(None);
    }
    let log = FileMetadataLog::open(&dir).map_err(|e| BrokerError::Startup(e.to_string()))?;
    Ok(Some(PendingImport { dir, log }))
}

impl PendingImport {
    /// Imports the records into `quorum` (this node its only voter, nothing proposed yet) and
    /// renames the old directory.
    pub async fn import(self, quorum: &MetadataQuorum) -> Result<(), BrokerError> {
        let failed = |e: String| BrokerError::Startup(format!("metadata import failed: {e}"));
        wait_until_leader(quorum).await?;
        if quorum.status().last_record_offset < 0 {
            let records = self.log.into_records();
            let count = records.len();
            if count > 0 {
                quorum
                    .propose(records)
                    .await
                    .map_err(|e| failed(e.to_string()))?;
            }
            tracing::info!(
                records = count,
                "imported the file metadata log into the metadata quorum"
            );
        } else {
            tracing::info!("the file metadata log was imported before; retiring it");
        }
        let imported = self.dir.with_file_name(IMPORTED_DIR);
        std::fs::rename(&self.dir, &imported).map_err(|e| {
            failed(format!(
                "cannot rename {} to {}: {e}",
                self.dir.display(),
                imported.display()
            ))
        })?;
        if let Some(parent) = imported.parent() {
            std::fs::File::open(parent)
                .and_then(|d| d.sync_all())
                .map_err(|e| failed(format!("cannot sync {}: {e}", parent.display())))?;
        }
        Ok(())
    }
}

/// Waits until the one voter leads and has applied an entry of its own term (then everything
/// its log held before is applied too, so "no records yet" is true, not a replay still under
/// way). It elects itself right after its first start and is leader at once on a restart;
/// bounded so a broken quorum is a startup error, not a hang.
async fn wait_until_leader(quorum: &MetadataQuorum) -> Result<(), BrokerError> {
    let deadline = tokio::time::Instant::now() + ELECTION_DEADLINE;
    while !quorum.status().leader_applied_own_term {
        if tokio::time::Instant::now() >= deadline {
            return Err(BrokerError::Startup(
                "metadata import failed: the one-voter quorum did not elect itself".into(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}
