//! Kafka error codes used by the metadata layer, and [`ApiError`], the per-item error value
//! that request handlers copy into `error_code` / `error_message` of a response.
//!
//! Errors are values, not panics: every validation failure caused by a client's request is
//! reported per topic (or per resource) with Kafka's code, so the broker can answer exactly
//! like Apache Kafka and the rest of the request still succeeds (spec C).

use std::fmt;

/// Kafka protocol error codes (spec Appendix 2): the whole table of `runnel_codes`, under the
/// path this crate's callers use.
pub mod codes {
    pub use runnel_codes::code::*;
}

/// Kafka's upper-case name of an error code (for logs and `Display`); "UNKNOWN" otherwise.
pub fn code_name(code: i16) -> &'static str {
    runnel_codes::name(code).unwrap_or("UNKNOWN")
}

/// A Kafka error code with the human-readable message sent as `error_message`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ApiError {
    pub code: i16,
    pub message: String,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            code_name(self.code),
            self.code,
            self.message
        )
    }
}

impl std::error::Error for ApiError {}

macro_rules! ctor {
    ($($(#[$doc:meta])* $fn_name:ident => $code:ident;)*) => {
        $(
            $(#[$doc])*
            pub fn $fn_name(message: impl Into<String>) -> Self {
                Self::new(codes::$code, message)
            }
        )*
    };
}

impl ApiError {
    pub fn new(code: i16, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    ctor! {
        /// -1: an internal failure, or Kafka's non-API `AdminOperationException`.
        unknown_server_error => UNKNOWN_SERVER_ERROR;
        /// 3: the topic (or partition) is unknown.
        unknown_topic_or_partition => UNKNOWN_TOPIC_OR_PARTITION;
        /// 7: the operation did not complete in time.
        request_timed_out => REQUEST_TIMED_OUT;
        /// 17: illegal topic name or a '.'/'_' collision.
        invalid_topic => INVALID_TOPIC_EXCEPTION;
        /// 36: CreateTopics for an existing name.
        topic_already_exists => TOPIC_ALREADY_EXISTS;
        /// 37: bad partition count.
        invalid_partitions => INVALID_PARTITIONS;
        /// 38: bad replication factor, or not enough brokers for it.
        invalid_replication_factor => INVALID_REPLICATION_FACTOR;
        /// 39: bad manual replica assignment.
        invalid_replica_assignment => INVALID_REPLICA_ASSIGNMENT;
        /// 40: unknown config key or bad value.
        invalid_config => INVALID_CONFIG;
        /// 42: malformed or contradictory request.
        invalid_request => INVALID_REQUEST;
        /// 54: an ACL request on a broker without an authorizer.
        security_disabled => SECURITY_DISABLED;
        /// 31: the principal may not perform a cluster operation.
        cluster_authorization_failed => CLUSTER_AUTHORIZATION_FAILED;
        /// 44: rejected by a policy (e.g. excessively large requests).
        policy_violation => POLICY_VIOLATION;
        /// 73: DeleteTopics v3+ while `delete.topic.enable=false`.
        topic_deletion_disabled => TOPIC_DELETION_DISABLED;
        /// 77: a broker used an old broker epoch.
        stale_broker_epoch => STALE_BROKER_EPOCH;
        /// 100: the topic id is unknown.
        unknown_topic_id => UNKNOWN_TOPIC_ID;
        /// 101: another live incarnation holds this broker id.
        duplicate_broker_registration => DUPLICATE_BROKER_REGISTRATION;
        /// 102: the broker id is not registered.
        broker_id_not_registered => BROKER_ID_NOT_REGISTERED;
    }

    /// Kafka's name of this error's code.
    pub fn name(&self) -> &'static str {
        code_name(self.code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_carry_the_right_codes() {
        assert_eq!(ApiError::invalid_partitions("x").code, 37);
        assert_eq!(ApiError::invalid_replication_factor("x").code, 38);
        assert_eq!(ApiError::invalid_replica_assignment("x").code, 39);
        assert_eq!(ApiError::invalid_config("x").code, 40);
        assert_eq!(ApiError::invalid_request("x").code, 42);
        assert_eq!(ApiError::invalid_topic("x").code, 17);
        assert_eq!(ApiError::topic_already_exists("x").code, 36);
        assert_eq!(ApiError::topic_deletion_disabled("x").code, 73);
        assert_eq!(ApiError::unknown_topic_id("x").code, 100);
        assert_eq!(ApiError::unknown_topic_or_partition("x").code, 3);
        assert_eq!(ApiError::unknown_server_error("x").code, -1);
        assert_eq!(ApiError::request_timed_out("x").code, 7);
    }

    #[test]
    fn display_names_the_code() {
        let e = ApiError::invalid_config("bad");
        assert_eq!(e.to_string(), "INVALID_CONFIG (40): bad");
    }
}
