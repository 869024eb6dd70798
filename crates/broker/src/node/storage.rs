//! The node's disk at start-up: the data directory, the metadata logs checked for damage
//! before any partition directory is opened, then the partition logs of every log dir
//! (recovered) under the replica manager.

use std::collections::BTreeMap;
use std::sync::Arc;

use runnel_log::LogDirs;
use runnel_metadata::{effective_topic_config, BrokerDefaults};
use runnel_raft::storage::log::LogStore;

use crate::config::BrokerConfig;
use crate::metadata_import::PendingImport;
use crate::replica::manager::ReplicaManager;
use crate::replica::partition::log_config;
use crate::BrokerError;

/// The opened storage.
pub(super) struct Storage {
    /// A single node's file metadata log of an earlier build, to import once.
    pub file_log: Option<PendingImport>,
    pub replicas: Arc<ReplicaManager>,
}

/// Opens the data directory. A damaged metadata log refuses to start with nothing in the log
/// directory touched (not even recovery).
pub(super) fn open(
    config: &BrokerConfig,
    defaults: &BrokerDefaults,
    replica_lag_time_max_ms: i64,
) -> Result<Storage, BrokerError> {
    let data_dir = config.data_dir.clone();
    std::fs::create_dir_all(&data_dir).map_err(|e| {
        BrokerError::Startup(format!(
            "cannot create data dir {}: {e}",
            data_dir.display()
        ))
    })?;
    // A single node's file log of an earlier build is imported once (metadata_import).
    let file_log = match &config.cluster {
        None => crate::metadata_import::open(&data_dir)?,
        Some(_) => None,
    };
    LogStore::verify(&data_dir.join("metadata-quorum"))
        .map_err(|e| BrokerError::Startup(format!("metadata quorum did not start: {e}")))?;
    let default_log_config = log_config(&effective_topic_config(&BTreeMap::new(), defaults));
    // Every log dir's partitions, an interrupted replica move resolved first (runnel_log's
    // `log_dirs::recovery`).
    let logs = LogDirs::open(config.log_dirs.clone(), default_log_config)?;
    let replicas = Arc::new(ReplicaManager::new(
        config.node_id,
        logs,
        defaults.clone(),
        replica_lag_time_max_ms,
    ));
    Ok(Storage { file_log, replicas })
}
