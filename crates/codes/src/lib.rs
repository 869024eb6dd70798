//! Kafka's protocol error codes, defined once for every Runnel crate.
//!
//! The table mirrors `org.apache.kafka.common.protocol.Errors`: codes -1 to 127 as Kafka 3.9.1's
//! `Errors.toHtml()` prints them (name, "retriable" = its exception is a `RetriableException`,
//! default message), and 128-133 from Kafka 4.0/4.1 (KIP-848 regex subscriptions, KIP-1102
//! rebootstrap, KIP-1071 streams groups, KIP-932 share sessions). A unit test cross-checks names
//! and retriability against kafka-protocol's `ResponseError` table.
//! Responses carry `i16`, so the names are plain `pub const NAME: i16` constants; every crate's
//! error module re-exports them rather than defining its own (a test in `crates/runnel/tests`
//! refuses a local `const NAME: i16 = ...` for a Kafka error name).

mod kafka_error;

pub use code::*;
pub use kafka_error::KafkaError;

/// One row of Kafka's error table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorInfo {
    pub code: i16,
    /// Kafka's enum constant name, e.g. "NOT_LEADER_OR_FOLLOWER".
    pub name: &'static str,
    /// Kafka's exception for this code extends `RetriableException`.
    pub retriable: bool,
    /// Kafka's default message; empty for NONE (Kafka's is null).
    pub message: &'static str,
}

// One macro expansion defines both the constants and the table, so a name can never disagree
// with its row.
macro_rules! kafka_errors {
    ($($name:ident = $code:literal, $kind:ident, $message:literal;)*) => {
        /// The constants alone, for the error modules that re-export them with a glob
        /// (`pub use runnel_codes::code::*`) without pulling in the lookup functions' names.
        pub mod code {
            $(
                #[doc = concat!(stringify!($code), ": ", $message)]
                pub const $name: i16 = $code;
            )*
        }

        /// Every Kafka error, sorted by code (a unit test keeps it sorted and unique, which
        /// the lookups' binary search relies on).
        pub const ALL: &[ErrorInfo] = &[
            $(ErrorInfo {
                code: $code,
                name: stringify!($name),
                retriable: kafka_errors!(@retriable $kind),
                message: $message,
            },)*
        ];
    };
    (@retriable retriable) => { true };
    (@retriable fatal) => { false };
}

// `fatal` means "not a RetriableException" (the client must not blindly resend), not that the
// connection or process is doomed.
kafka_errors! {
    UNKNOWN_SERVER_ERROR = -1, fatal, "The server experienced an unexpected error when processing the request.";
    NONE = 0, fatal, "";
    OFFSET_OUT_OF_RANGE = 1, fatal, "The requested offset is not within the range of offsets maintained by the server.";
    CORRUPT_MESSAGE = 2, retriable, "This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted topic, or is otherwise corrupt.";
    UNKNOWN_TOPIC_OR_PARTITION = 3, retriable, "This server does not host this topic-partition.";
    INVALID_FETCH_SIZE = 4, fatal, "The requested fetch size is invalid.";
    LEADER_NOT_AVAILABLE = 5, retriable, "There is no leader for this topic-partition as we are in the middle of a leadership election.";
    NOT_LEADER_OR_FOLLOWER = 6, retriable, "For requests intended only for the leader, this error indicates that the broker is not the current leader. For requests intended for any replica, this error indicates that the broker is not a replica of the topic partition.";
    REQUEST_TIMED_OUT = 7, retriable, "The request timed out.";
    BROKER_NOT_AVAILABLE = 8, fatal, "The broker is not available.";
    REPLICA_NOT_AVAILABLE = 9, retriable, "The replica is not available for the requested topic-partition. Produce/Fetch requests and other requests intended only for the leader or follower return NOT_LEADER_OR_FOLLOWER if the broker is not a replica of the topic-partition.";
    MESSAGE_TOO_LARGE = 10, fatal, "The request included a message larger than the max message size the server will accept.";
    STALE_CONTROLLER_EPOCH = 11, fatal, "The controller moved to another broker.";
    OFFSET_METADATA_TOO_LARGE = 12, fatal, "The metadata field of the offset request was too large.";
    NETWORK_EXCEPTION = 13, retriable, "The server disconnected before a response was received.";
    COORDINATOR_LOAD_IN_PROGRESS = 14, retriable, "The coordinator is loading and hence can't process requests.";
    COORDINATOR_NOT_AVAILABLE = 15, retriable, "The coordinator is not available.";
    NOT_COORDINATOR = 16, retriable, "This is not the correct coordinator.";
    INVALID_TOPIC_EXCEPTION = 17, fatal, "The request attempted to perform an operation on an invalid topic.";
    RECORD_LIST_TOO_LARGE = 18, fatal, "The request included message batch larger than the configured segment size on the server.";
    NOT_ENOUGH_REPLICAS = 19, retriable, "Messages are rejected since there are fewer in-sync replicas than required.";
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20, retriable, "Messages are written to the log, but to fewer in-sync replicas than required.";
    INVALID_REQUIRED_ACKS = 21, fatal, "Produce request specified an invalid value for required acks.";
    ILLEGAL_GENERATION = 22, fatal, "Specified group generation id is not valid.";
    INCONSISTENT_GROUP_PROTOCOL = 23, fatal, "The group member's supported protocols are incompatible with those of existing members or first group member tried to join with empty protocol type or empty protocol list.";
    INVALID_GROUP_ID = 24, fatal, "The configured groupId is invalid.";
    UNKNOWN_MEMBER_ID = 25, fatal, "The coordinator is not aware of this member.";
    INVALID_SESSION_TIMEOUT = 26, fatal, "The session timeout is not within the range allowed by the broker (as configured by group.min.session.timeout.ms and group.max.session.timeout.ms).";
    REBALANCE_IN_PROGRESS = 27, fatal, "The group is rebalancing, so a rejoin is needed.";
    INVALID_COMMIT_OFFSET_SIZE = 28, fatal, "The committing offset data size is not valid.";
    TOPIC_AUTHORIZATION_FAILED = 29, fatal, "Topic authorization failed.";
    GROUP_AUTHORIZATION_FAILED = 30, fatal, "Group authorization failed.";
    CLUSTER_AUTHORIZATION_FAILED = 31, fatal, "Cluster authorization failed.";
    INVALID_TIMESTAMP = 32, fatal, "The timestamp of the message is out of acceptable range.";
    UNSUPPORTED_SASL_MECHANISM = 33, fatal, "The broker does not support the requested SASL mechanism.";
    ILLEGAL_SASL_STATE = 34, fatal, "Request is not valid given the current SASL state.";
    UNSUPPORTED_VERSION = 35, fatal, "The version of API is not supported.";
    TOPIC_ALREADY_EXISTS = 36, fatal, "Topic with this name already exists.";
    INVALID_PARTITIONS = 37, fatal, "Number of partitions is below 1.";
    INVALID_REPLICATION_FACTOR = 38, fatal, "Replication factor is below 1 or larger than the number of available brokers.";
    INVALID_REPLICA_ASSIGNMENT = 39, fatal, "Replica assignment is invalid.";
    INVALID_CONFIG = 40, fatal, "Configuration is invalid.";
    NOT_CONTROLLER = 41, retriable, "This is not the correct controller for this cluster.";
    INVALID_REQUEST = 42, fatal, "This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details.";
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43, fatal, "The message format version on the broker does not support the request.";
    POLICY_VIOLATION = 44, fatal, "Request parameters do not satisfy the configured policy.";
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45, fatal, "The broker received an out of order sequence number.";
    DUPLICATE_SEQUENCE_NUMBER = 46, fatal, "The broker received a duplicate sequence number.";
    INVALID_PRODUCER_EPOCH = 47, fatal, "Producer attempted to produce with an old epoch.";
    INVALID_TXN_STATE = 48, fatal, "The producer attempted a transactional operation in an invalid state.";
    INVALID_PRODUCER_ID_MAPPING = 49, fatal, "The producer attempted to use a producer id which is not currently assigned to its transactional id.";
    INVALID_TRANSACTION_TIMEOUT = 50, fatal, "The transaction timeout is larger than the maximum value allowed by the broker (as configured by transaction.max.timeout.ms).";
    CONCURRENT_TRANSACTIONS = 51, retriable, "The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing.";
    TRANSACTION_COORDINATOR_FENCED = 52, fatal, "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current coordinator for a given producer.";
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53, fatal, "Transactional Id authorization failed.";
    SECURITY_DISABLED = 54, fatal, "Security features are disabled.";
    OPERATION_NOT_ATTEMPTED = 55, fatal, "The broker did not attempt to execute this operation. This may happen for batched RPCs where some operations in the batch failed, causing the broker to respond without trying the rest.";
    KAFKA_STORAGE_ERROR = 56, retriable, "Disk error when trying to access log file on the disk.";
    LOG_DIR_NOT_FOUND = 57, fatal, "The user-specified log directory is not found in the broker config.";
    SASL_AUTHENTICATION_FAILED = 58, fatal, "SASL Authentication failed.";
    UNKNOWN_PRODUCER_ID = 59, fatal, "This exception is raised by the broker if it could not locate the producer metadata associated with the producerId in question. This could happen if, for instance, the producer's records were deleted because their retention time had elapsed. Once the last records of the producerId are removed, the producer's metadata is removed from the broker, and future appends by the producer will return this exception.";
    REASSIGNMENT_IN_PROGRESS = 60, fatal, "A partition reassignment is in progress.";
    DELEGATION_TOKEN_AUTH_DISABLED = 61, fatal, "Delegation Token feature is not enabled.";
    DELEGATION_TOKEN_NOT_FOUND = 62, fatal, "Delegation Token is not found on server.";
    DELEGATION_TOKEN_OWNER_MISMATCH = 63, fatal, "Specified Principal is not valid Owner/Renewer.";
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64, fatal, "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels.";
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65, fatal, "Delegation Token authorization failed.";
    DELEGATION_TOKEN_EXPIRED = 66, fatal, "Delegation Token is expired.";
    INVALID_PRINCIPAL_TYPE = 67, fatal, "Supplied principalType is not supported.";
    NON_EMPTY_GROUP = 68, fatal, "The group is not empty.";
    GROUP_ID_NOT_FOUND = 69, fatal, "The group id does not exist.";
    FETCH_SESSION_ID_NOT_FOUND = 70, retriable, "The fetch session ID was not found.";
    INVALID_FETCH_SESSION_EPOCH = 71, retriable, "The fetch session epoch is invalid.";
    LISTENER_NOT_FOUND = 72, retriable, "There is no listener on the leader broker that matches the listener on which metadata request was processed.";
    TOPIC_DELETION_DISABLED = 73, fatal, "Topic deletion is disabled.";
    FENCED_LEADER_EPOCH = 74, retriable, "The leader epoch in the request is older than the epoch on the broker.";
    UNKNOWN_LEADER_EPOCH = 75, retriable, "The leader epoch in the request is newer than the epoch on the broker.";
    UNSUPPORTED_COMPRESSION_TYPE = 76, fatal, "The requesting client does not support the compression type of given partition.";
    STALE_BROKER_EPOCH = 77, fatal, "Broker epoch has changed.";
    OFFSET_NOT_AVAILABLE = 78, retriable, "The leader high watermark has not caught up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing.";
    MEMBER_ID_REQUIRED = 79, fatal, "The group member needs to have a valid member id before actually entering a consumer group.";
    PREFERRED_LEADER_NOT_AVAILABLE = 80, retriable, "The preferred leader was not available.";
    GROUP_MAX_SIZE_REACHED = 81, fatal, "The consumer group has reached its max size.";
    FENCED_INSTANCE_ID = 82, fatal, "The broker rejected this static consumer since another consumer with the same group.instance.id has registered with a different member.id.";
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83, retriable, "Eligible topic partition leaders are not available.";
    ELECTION_NOT_NEEDED = 84, retriable, "Leader election not needed for topic partition.";
    NO_REASSIGNMENT_IN_PROGRESS = 85, fatal, "No partition reassignment is in progress.";
    GROUP_SUBSCRIBED_TO_TOPIC = 86, fatal, "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it.";
    INVALID_RECORD = 87, fatal, "This record has failed the validation on broker and hence will be rejected.";
    UNSTABLE_OFFSET_COMMIT = 88, retriable, "There are unstable offsets that need to be cleared.";
    THROTTLING_QUOTA_EXCEEDED = 89, retriable, "The throttling quota has been exceeded.";
    PRODUCER_FENCED = 90, fatal, "There is a newer producer with the same transactionalId which fences the current one.";
    RESOURCE_NOT_FOUND = 91, fatal, "A request illegally referred to a resource that does not exist.";
    DUPLICATE_RESOURCE = 92, fatal, "A request illegally referred to the same resource twice.";
    UNACCEPTABLE_CREDENTIAL = 93, fatal, "Requested credential would not meet criteria for acceptability.";
    INCONSISTENT_VOTER_SET = 94, fatal, "Indicates that the either the sender or recipient of a voter-only request is not one of the expected voters.";
    INVALID_UPDATE_VERSION = 95, fatal, "The given update version was invalid.";
    FEATURE_UPDATE_FAILED = 96, fatal, "Unable to update finalized features due to an unexpected server error.";
    PRINCIPAL_DESERIALIZATION_FAILURE = 97, fatal, "Request principal deserialization failed during forwarding. This indicates an internal error on the broker cluster security setup.";
    SNAPSHOT_NOT_FOUND = 98, fatal, "Requested snapshot was not found.";
    POSITION_OUT_OF_RANGE = 99, fatal, "Requested position is not greater than or equal to zero, and less than the size of the snapshot.";
    UNKNOWN_TOPIC_ID = 100, retriable, "This server does not host this topic ID.";
    DUPLICATE_BROKER_REGISTRATION = 101, fatal, "This broker ID is already in use.";
    BROKER_ID_NOT_REGISTERED = 102, fatal, "The given broker ID was not registered.";
    INCONSISTENT_TOPIC_ID = 103, retriable, "The log's topic ID did not match the topic ID in the request.";
    INCONSISTENT_CLUSTER_ID = 104, fatal, "The clusterId in the request does not match that found on the server.";
    TRANSACTIONAL_ID_NOT_FOUND = 105, fatal, "The transactionalId could not be found.";
    FETCH_SESSION_TOPIC_ID_ERROR = 106, retriable, "The fetch session encountered inconsistent topic ID usage.";
    INELIGIBLE_REPLICA = 107, fatal, "The new ISR contains at least one ineligible replica.";
    NEW_LEADER_ELECTED = 108, fatal, "The AlterPartition request successfully updated the partition state but the leader has changed.";
    OFFSET_MOVED_TO_TIERED_STORAGE = 109, fatal, "The requested offset is moved to tiered storage.";
    FENCED_MEMBER_EPOCH = 110, fatal, "The member epoch is fenced by the group coordinator. The member must abandon all its partitions and rejoin.";
    UNRELEASED_INSTANCE_ID = 111, fatal, "The instance ID is still used by another member in the consumer group. That member must leave first.";
    UNSUPPORTED_ASSIGNOR = 112, fatal, "The assignor or its version range is not supported by the consumer group.";
    STALE_MEMBER_EPOCH = 113, fatal, "The member epoch is stale. The member must retry after receiving its updated member epoch via the ConsumerGroupHeartbeat API.";
    MISMATCHED_ENDPOINT_TYPE = 114, fatal, "The request was sent to an endpoint of the wrong type.";
    UNSUPPORTED_ENDPOINT_TYPE = 115, fatal, "This endpoint type is not supported yet.";
    UNKNOWN_CONTROLLER_ID = 116, fatal, "This controller ID is not known.";
    UNKNOWN_SUBSCRIPTION_ID = 117, fatal, "Client sent a push telemetry request with an invalid or outdated subscription ID.";
    TELEMETRY_TOO_LARGE = 118, fatal, "Client sent a push telemetry request larger than the maximum size the broker will accept.";
    INVALID_REGISTRATION = 119, fatal, "The controller has considered the broker registration to be invalid.";
    TRANSACTION_ABORTABLE = 120, fatal, "The server encountered an error with the transaction. The client can abort the transaction to continue using this transactional ID.";
    INVALID_RECORD_STATE = 121, fatal, "The record state is invalid. The acknowledgement of delivery could not be completed.";
    SHARE_SESSION_NOT_FOUND = 122, retriable, "The share session was not found.";
    INVALID_SHARE_SESSION_EPOCH = 123, retriable, "The share session epoch is invalid.";
    FENCED_STATE_EPOCH = 124, fatal, "The share coordinator rejected the request because the share-group state epoch did not match.";
    INVALID_VOTER_KEY = 125, fatal, "The voter key doesn't match the receiving replica's key.";
    DUPLICATE_VOTER = 126, fatal, "The voter is already part of the set of voters.";
    VOTER_NOT_FOUND = 127, fatal, "The voter is not part of the set of voters.";
    INVALID_REGULAR_EXPRESSION = 128, fatal, "The regular expression is not valid.";
    REBOOTSTRAP_REQUIRED = 129, fatal, "Client metadata is stale. The client should rebootstrap to obtain new metadata.";
    STREAMS_INVALID_TOPOLOGY = 130, fatal, "The supplied topology is invalid.";
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131, fatal, "The supplied topology epoch is invalid.";
    STREAMS_TOPOLOGY_FENCED = 132, fatal, "The supplied topology epoch is outdated.";
    SHARE_SESSION_LIMIT_REACHED = 133, retriable, "The limit of share sessions has been reached.";
}

/// The table row of `code`, if Kafka defines it.
pub fn info(code: i16) -> Option<&'static ErrorInfo> {
    ALL.binary_search_by_key(&code, |e| e.code)
        .ok()
        .and_then(|i| ALL.get(i))
}

/// Kafka's name of `code` ("NOT_COORDINATOR"), `None` for a code Kafka does not define.
pub fn name(code: i16) -> Option<&'static str> {
    info(code).map(|e| e.name)
}

/// Whether Kafka's exception for `code` is retriable; an unknown code is not (Kafka's
/// `Errors.forCode` maps it to UNKNOWN_SERVER_ERROR, which is not retriable).
pub fn is_retriable(code: i16) -> bool {
    info(code).is_some_and(|e| e.retriable)
}

/// Kafka's default message for `code`; `None` for NONE and for unknown codes.
pub fn default_message(code: i16) -> Option<&'static str> {
    info(code).map(|e| e.message).filter(|m| !m.is_empty())
}

#[cfg(test)]
mod tests;
