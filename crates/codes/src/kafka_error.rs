//! [`KafkaError`]: a Kafka error code with the message that goes out as `error_message`, the
//! typed form of what used to travel as an `(i16, String)` pair. The metadata crate's
//! `ApiError` is this type.

use crate::code;

/// A Kafka error code and its human-readable message. The code is what the client acts on; the
/// message is for people (the response's `error_message`, logs).
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[error("{} ({code}): {message}", crate::name(*.code).unwrap_or("UNKNOWN"))]
pub struct KafkaError {
    pub code: i16,
    pub message: String,
}

macro_rules! ctor {
    ($($(#[$doc:meta])* $fn_name:ident => $code:ident;)*) => {
        $(
            $(#[$doc])*
            pub fn $fn_name(message: impl Into<String>) -> Self {
                Self::new(code::$code, message)
            }
        )*
    };
}

impl KafkaError {
    pub fn new(code: i16, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// `code` with Kafka's default message for it (empty when Kafka has none).
    pub fn with_default_message(code: i16) -> Self {
        Self::new(code, crate::default_message(code).unwrap_or_default())
    }

    /// Kafka's name of this error's code, "UNKNOWN" for a code Kafka does not define.
    pub fn name(&self) -> &'static str {
        crate::name(self.code).unwrap_or("UNKNOWN")
    }

    pub fn is_retriable(&self) -> bool {
        crate::is_retriable(self.code)
    }

    // The errors the metadata layer reports most, by name, so a validation reads
    // `KafkaError::invalid_config(..)` rather than a code and a message.
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
}
