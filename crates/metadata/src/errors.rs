//! Kafka error codes used by the metadata layer, and [`ApiError`], the per-item error value
//! that request handlers copy into `error_code` / `error_message` of a response.
//!
//! Errors are values, not panics: every validation failure caused by a client's request is
//! reported per topic (or per resource) with Kafka's code, so the broker can answer exactly
//! like Apache Kafka and the rest of the request still succeeds (spec C).

use std::fmt;

/// Kafka protocol error codes (spec Appendix 2) used by this crate and its callers.
pub mod codes {
    pub const UNKNOWN_SERVER_ERROR: i16 = -1;
    pub const NONE: i16 = 0;
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    pub const LEADER_NOT_AVAILABLE: i16 = 5;
    pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    pub const REQUEST_TIMED_OUT: i16 = 7;
    pub const STALE_CONTROLLER_EPOCH: i16 = 11;
    pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
    pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
    pub const GROUP_AUTHORIZATION_FAILED: i16 = 30;
    pub const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
    pub const TOPIC_ALREADY_EXISTS: i16 = 36;
    pub const INVALID_PARTITIONS: i16 = 37;
    pub const INVALID_REPLICATION_FACTOR: i16 = 38;
    pub const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
    pub const INVALID_CONFIG: i16 = 40;
    pub const NOT_CONTROLLER: i16 = 41;
    pub const INVALID_REQUEST: i16 = 42;
    pub const POLICY_VIOLATION: i16 = 44;
    pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
    pub const SECURITY_DISABLED: i16 = 54;
    pub const TOPIC_DELETION_DISABLED: i16 = 73;
    pub const STALE_BROKER_EPOCH: i16 = 77;
    pub const THROTTLING_QUOTA_EXCEEDED: i16 = 89;
    pub const UNKNOWN_TOPIC_ID: i16 = 100;
    pub const DUPLICATE_BROKER_REGISTRATION: i16 = 101;
    pub const BROKER_ID_NOT_REGISTERED: i16 = 102;
}

/// Kafka's upper-case name of an error code (for logs and `Display`); "UNKNOWN" otherwise.
pub fn code_name(code: i16) -> &'static str {
    match code {
        codes::UNKNOWN_SERVER_ERROR => "UNKNOWN_SERVER_ERROR",
        codes::NONE => "NONE",
        codes::UNKNOWN_TOPIC_OR_PARTITION => "UNKNOWN_TOPIC_OR_PARTITION",
        codes::LEADER_NOT_AVAILABLE => "LEADER_NOT_AVAILABLE",
        codes::NOT_LEADER_OR_FOLLOWER => "NOT_LEADER_OR_FOLLOWER",
        codes::REQUEST_TIMED_OUT => "REQUEST_TIMED_OUT",
        codes::STALE_CONTROLLER_EPOCH => "STALE_CONTROLLER_EPOCH",
        codes::INVALID_TOPIC_EXCEPTION => "INVALID_TOPIC_EXCEPTION",
        codes::TOPIC_AUTHORIZATION_FAILED => "TOPIC_AUTHORIZATION_FAILED",
        codes::GROUP_AUTHORIZATION_FAILED => "GROUP_AUTHORIZATION_FAILED",
        codes::CLUSTER_AUTHORIZATION_FAILED => "CLUSTER_AUTHORIZATION_FAILED",
        codes::TRANSACTIONAL_ID_AUTHORIZATION_FAILED => "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        codes::SECURITY_DISABLED => "SECURITY_DISABLED",
        codes::TOPIC_ALREADY_EXISTS => "TOPIC_ALREADY_EXISTS",
        codes::INVALID_PARTITIONS => "INVALID_PARTITIONS",
        codes::INVALID_REPLICATION_FACTOR => "INVALID_REPLICATION_FACTOR",
        codes::INVALID_REPLICA_ASSIGNMENT => "INVALID_REPLICA_ASSIGNMENT",
        codes::INVALID_CONFIG => "INVALID_CONFIG",
        codes::NOT_CONTROLLER => "NOT_CONTROLLER",
        codes::INVALID_REQUEST => "INVALID_REQUEST",
        codes::POLICY_VIOLATION => "POLICY_VIOLATION",
        codes::TOPIC_DELETION_DISABLED => "TOPIC_DELETION_DISABLED",
        codes::STALE_BROKER_EPOCH => "STALE_BROKER_EPOCH",
        codes::THROTTLING_QUOTA_EXCEEDED => "THROTTLING_QUOTA_EXCEEDED",
        codes::UNKNOWN_TOPIC_ID => "UNKNOWN_TOPIC_ID",
        codes::DUPLICATE_BROKER_REGISTRATION => "DUPLICATE_BROKER_REGISTRATION",
        codes::BROKER_ID_NOT_REGISTERED => "BROKER_ID_NOT_REGISTERED",
        _ => "UNKNOWN",
    }
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
