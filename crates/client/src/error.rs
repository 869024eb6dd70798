//! Client errors as types, with Kafka's error names so that users (and the CLI) can tell
//! exactly which broker-side condition happened and what to do about it.

use std::time::Duration;

/// Result alias used throughout the client.
pub type Result<T, E = ClientError> = std::result::Result<T, E>;

/// Everything that can go wrong talking to a Kafka cluster.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The broker answered with a Kafka error code.
    #[error("{name}{}", .message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    Kafka {
        /// The numeric code (Appendix 2 of the spec / Kafka's `Errors`).
        code: i16,
        /// Kafka's name for the code, e.g. `TOPIC_ALREADY_EXISTS`.
        name: &'static str,
        /// The broker's error message, when it sent one.
        message: Option<String>,
    },
    /// Socket-level failure (connection refused, reset, closed).
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// No answer within the configured time.
    #[error("timed out after {0:?} waiting for {1}")]
    Timeout(Duration, String),
    /// The peer sent something we cannot decode, or we could not encode a request.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The caller asked for something invalid (bad config, unknown partition, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl ClientError {
    /// Builds a `Kafka` error from a response error code and optional message.
    pub fn kafka(code: i16, message: Option<String>) -> Self {
        ClientError::Kafka {
            code,
            name: error_name(code),
            message: message.filter(|m| !m.is_empty()),
        }
    }

    /// Returns `Err` for a non-zero code, `Ok(())` for `NONE`.
    pub fn check(code: i16, message: Option<&str>) -> Result<()> {
        if code == 0 {
            Ok(())
        } else {
            Err(Self::kafka(code, message.map(str::to_owned)))
        }
    }

    /// The Kafka error code, if this error came from a broker.
    pub fn code(&self) -> Option<i16> {
        match self {
            ClientError::Kafka { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether retrying (possibly after a metadata refresh) can succeed.
    pub fn is_retriable(&self) -> bool {
        match self {
            ClientError::Kafka { code, .. } => is_retriable_code(*code),
            ClientError::Io(_) | ClientError::Timeout(..) => true,
            ClientError::Protocol(_) | ClientError::InvalidArgument(_) => false,
        }
    }

    /// Whether the error means our view of leadership is stale and metadata must be refreshed.
    pub fn needs_metadata_refresh(&self) -> bool {
        matches!(self.code(), Some(code) if needs_refresh_code(code))
            || matches!(self, ClientError::Io(_))
    }

    pub(crate) fn protocol(context: &str, err: impl std::fmt::Display) -> Self {
        ClientError::Protocol(format!("{context}: {err}"))
    }
}

/// Codes after which the client refreshes metadata before retrying: the partition moved,
/// has no leader yet, is not known yet, the broker or its listener is gone (Kafka's
/// `InvalidMetadataException` family, and BROKER_NOT_AVAILABLE: a broker named by stale
/// metadata), or the controller moved.
pub fn needs_refresh_code(code: i16) -> bool {
    use runnel_codes::*;
    matches!(
        code,
        UNKNOWN_TOPIC_OR_PARTITION
            | LEADER_NOT_AVAILABLE
            | NOT_LEADER_OR_FOLLOWER
            | BROKER_NOT_AVAILABLE
            | REPLICA_NOT_AVAILABLE
            | NETWORK_EXCEPTION
            | NOT_CONTROLLER
            | KAFKA_STORAGE_ERROR
            | LISTENER_NOT_FOUND
            | FENCED_LEADER_EPOCH
            | UNKNOWN_LEADER_EPOCH
            | UNKNOWN_TOPIC_ID
            | INCONSISTENT_TOPIC_ID
    )
}

/// Whether Kafka marks the code as retriable (its exception is a `RetriableException`):
/// the one error table, `runnel_codes`.
pub fn is_retriable_code(code: i16) -> bool {
    runnel_codes::is_retriable(code)
}

/// Kafka's upper-snake-case name for an error code (`UNKNOWN_TOPIC_OR_PARTITION`), from the
/// one error table (`runnel_codes`); "UNKNOWN" for a code Kafka does not define.
pub fn error_name(code: i16) -> &'static str {
    runnel_codes::name(code).unwrap_or("UNKNOWN")
}

/// What a user can do about an error code, for the CLI's one-line error report.
pub fn hint(code: i16) -> Option<&'static str> {
    use runnel_codes as c;
    Some(match code {
        c::UNKNOWN_TOPIC_OR_PARTITION => "check the topic name (runnel topics --list) or create it first",
        c::LEADER_NOT_AVAILABLE | c::NOT_LEADER_OR_FOLLOWER | c::NOT_CONTROLLER => "leadership is moving; retry in a moment",
        c::REQUEST_TIMED_OUT => "the broker was too slow; retry or raise the timeout",
        c::MESSAGE_TOO_LARGE => "the record batch is larger than the broker's message.max.bytes; send smaller records",
        c::INVALID_TOPIC_EXCEPTION => "topic names may only contain [a-zA-Z0-9._-] and be at most 249 characters",
        c::NOT_ENOUGH_REPLICAS | c::NOT_ENOUGH_REPLICAS_AFTER_APPEND => "not enough in-sync replicas for acks=all; bring brokers back or lower min.insync.replicas",
        c::TOPIC_AUTHORIZATION_FAILED..=c::CLUSTER_AUTHORIZATION_FAILED => "the principal is not authorised for this operation",
        c::UNSUPPORTED_VERSION => "the broker does not support this request version",
        c::TOPIC_ALREADY_EXISTS => "choose another name, or pass --if-not-exists",
        c::INVALID_PARTITIONS => "the partition count must be positive and may only grow",
        c::INVALID_REPLICATION_FACTOR => "use a replication factor between 1 and the number of live brokers",
        c::INVALID_REPLICA_ASSIGNMENT => "every partition needs the same number of distinct, existing broker ids",
        c::INVALID_CONFIG => "check the config name and value (runnel configs --describe shows valid names)",
        c::INVALID_REQUEST => "the request was malformed; check the flags",
        c::POLICY_VIOLATION => "the broker's policy rejected the request",
        c::TOPIC_DELETION_DISABLED => "topic deletion is disabled on the broker (delete.topic.enable=false)",
        c::UNSUPPORTED_COMPRESSION_TYPE => "use one of gzip, snappy, lz4, zstd or none",
        _ => return None,
    })
}

/// Renders an error as one line for the CLI: `ERROR_NAME: message. hint`.
pub fn render_error(err: &ClientError) -> String {
    match err {
        ClientError::Kafka { code, name, message } => {
            let mut line = (*name).to_string();
            if let Some(m) = message {
                line.push_str(": ");
                line.push_str(m.trim_end_matches('.'));
            }
            line.push('.');
            if let Some(h) = hint(*code) {
                line.push(' ');
                line.push_str(&capitalise(h));
                line.push('.');
            }
            line
        }
        ClientError::Io(e) => format!(
            "NETWORK_EXCEPTION: {e}. Check that a broker is listening at the --bootstrap-server address."
        ),
        ClientError::Timeout(d, what) => format!(
            "REQUEST_TIMED_OUT: no answer to {what} within {} ms. Check that the broker is up and reachable.",
            d.as_millis()
        ),
        ClientError::Protocol(m) => format!("PROTOCOL_ERROR: {m}."),
        ClientError::InvalidArgument(m) => format!("INVALID_ARGUMENT: {m}."),
    }
}

fn capitalise(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_kafka() {
        assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(error_name(0), "NONE");
        assert_eq!(error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(error_name(6), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(error_name(17), "INVALID_TOPIC_EXCEPTION");
        assert_eq!(error_name(36), "TOPIC_ALREADY_EXISTS");
        assert_eq!(error_name(41), "NOT_CONTROLLER");
        assert_eq!(error_name(100), "UNKNOWN_TOPIC_ID");
        assert_eq!(error_name(30000), "UNKNOWN");
    }

    #[test]
    fn retriable_and_refresh() {
        assert!(ClientError::kafka(6, None).is_retriable());
        assert!(ClientError::kafka(6, None).needs_metadata_refresh());
        assert!(!ClientError::kafka(36, None).is_retriable());
        assert!(!ClientError::kafka(36, None).needs_metadata_refresh());
    }

    /// The codes whose exception in Kafka's `Errors` (clients, 4.0) is a `RetriableException`
    /// (directly or through `InvalidMetadataException`); 133 (SHARE_SESSION_LIMIT_REACHED)
    /// is newer and retriable too.
    #[test]
    fn retriable_codes_are_kafkas() {
        let kafka: &[i16] = &[
            2, 3, 5, 6, 7, 9, 13, 14, 15, 16, 19, 20, 41, 51, 56, 70, 71, 72, 74, 75, 78, 80, 83,
            84, 88, 89, 100, 103, 106, 122, 123, 133,
        ];
        let ours: Vec<i16> = (-1..=140).filter(|c| is_retriable_code(*c)).collect();
        assert_eq!(ours, kafka);
        // BROKER_NOT_AVAILABLE is not retriable in Kafka, but it means stale metadata.
        assert!(!is_retriable_code(8));
        assert!(needs_refresh_code(8));
    }

    #[test]
    fn render_one_line() {
        let e = ClientError::kafka(36, Some("Topic 'a' already exists.".into()));
        assert_eq!(
            render_error(&e),
            "TOPIC_ALREADY_EXISTS: Topic 'a' already exists. Choose another name, or pass --if-not-exists."
        );
        let e = ClientError::kafka(3, None);
        assert!(render_error(&e).starts_with("UNKNOWN_TOPIC_OR_PARTITION. Check"));
        assert!(!render_error(&e).contains('\n'));
    }
}
