//! Errors of the quorum API.

use thiserror::Error;

/// Why a quorum operation failed. `NotLeader` and `Shutdown` are retriable by the caller (the
/// broker maps them to NOT_CONTROLLER); `Storage` and `Config` are not.
#[derive(Debug, Error)]
pub enum QuorumError {
    /// This node is not the leader; `leader` is the current leader if known.
    #[error("not the metadata quorum leader (leader: {leader:?})")]
    NotLeader { leader: Option<i32> },
    /// The committed batch was inconsistent with the metadata image and got no offsets.
    #[error("the metadata batch was rejected when applied: {0}")]
    Rejected(String),
    /// The quorum configuration is inconsistent (one line, for the operator).
    #[error("invalid metadata quorum configuration: {0}")]
    Config(String),
    /// Reading or writing the data directory failed.
    #[error("metadata quorum storage error: {0}")]
    Storage(String),
    /// The Raft node stopped (shutdown or a fatal storage error).
    #[error("the metadata quorum is shut down: {0}")]
    Shutdown(String),
    /// Any other Raft error (e.g. a membership change that is not allowed now).
    #[error("metadata quorum error: {0}")]
    Raft(String),
}

impl From<std::io::Error> for QuorumError {
    fn from(e: std::io::Error) -> Self {
        QuorumError::Storage(e.to_string())
    }
}

impl From<crate::storage::log::OpenError> for QuorumError {
    fn from(e: crate::storage::log::OpenError) -> Self {
        QuorumError::Storage(e.to_string())
    }
}
