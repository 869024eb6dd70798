//! The errors of partition-log operations, with their Kafka error codes.

use crate::batch::BatchError;
use runnel_codes as codes;

/// Anything a log operation can fail with. Disk content never panics: corruption that cannot
/// be repaired by truncation surfaces as [`LogError::Corrupt`].
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("offset {offset} is out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        offset: i64,
        log_start: i64,
        log_end: i64,
    },
    #[error("corrupt log data: {0}")]
    Corrupt(String),
    #[error(transparent)]
    Batch(#[from] BatchError),
    /// A follower append that does not continue the log densely at its end offset.
    #[error("unexpected append offset: expected {expected}, got {got}")]
    UnexpectedOffset { expected: i64, got: i64 },
    /// The log was closed (broker shutdown) or deleted; no further writes are accepted.
    #[error("log is closed")]
    Closed,
    /// `partition.metadata` holds another topic id than the one asked for (a stale directory
    /// of a deleted topic with the same name).
    #[error("topic id mismatch: directory has {found}, expected {expected}")]
    InconsistentTopicId {
        expected: uuid::Uuid,
        found: uuid::Uuid,
    },
    #[error("invalid partition directory name: {0}")]
    InvalidDirName(String),
    /// An append whose offsets do not fit one segment's 32-bit relative offsets even after a
    /// roll (Kafka's `LogSegmentOffsetOverflowException`); nothing was written.
    #[error("offsets {first}..={last} do not fit the segment at base {segment_base}")]
    OffsetOverflow {
        segment_base: i64,
        first: i64,
        last: i64,
    },
    /// An fsync failed, or a failed write could not be undone: the log's files can no longer
    /// be trusted to hold what was acknowledged, so every later operation fails (fsyncgate:
    /// an fsync is never retried on the same file). Only a restart (recovery) clears it.
    #[error("log failed: {0}")]
    Failed(String),
    /// The log dirs cannot be used as found (two current copies of a partition), or a replica
    /// move between them cannot go on.
    #[error("{0}")]
    LogDirs(String),
    #[error(transparent)]
    Index(#[from] crate::index::IndexAppendError),
}

impl LogError {
    /// The Kafka error code a handler should answer with.
    pub fn kafka_error_code(&self) -> i16 {
        match self {
            LogError::Io(_) => codes::KAFKA_STORAGE_ERROR,
            LogError::OffsetOutOfRange { .. } => codes::OFFSET_OUT_OF_RANGE,
            LogError::Corrupt(_) => codes::CORRUPT_MESSAGE,
            LogError::Batch(b) => b.kafka_error_code(),
            LogError::UnexpectedOffset { .. } => codes::CORRUPT_MESSAGE,
            // The replica is gone.
            LogError::Closed => codes::NOT_LEADER_OR_FOLLOWER,
            LogError::InconsistentTopicId { .. } => codes::INCONSISTENT_TOPIC_ID,
            LogError::InvalidDirName(_) => codes::UNKNOWN_SERVER_ERROR,
            LogError::OffsetOverflow { .. } => codes::CORRUPT_MESSAGE,
            LogError::Failed(_) | LogError::Index(_) | LogError::LogDirs(_) => {
                codes::KAFKA_STORAGE_ERROR
            }
        }
    }
}
