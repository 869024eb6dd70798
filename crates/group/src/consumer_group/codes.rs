//! The Kafka error codes specific to KIP-848 groups, next to the classic ones they reuse, so
//! the heartbeat code reads like Kafka's `Errors` enum. Plain `i16`s because the shell copies
//! them straight into ConsumerGroupHeartbeat / ConsumerGroupDescribe responses.

pub use crate::errors::{
    FENCED_INSTANCE_ID, GROUP_ID_NOT_FOUND, GROUP_MAX_SIZE_REACHED, INVALID_REQUEST, NONE,
    NON_EMPTY_GROUP, UNKNOWN_MEMBER_ID,
};

/// 110: the member's epoch is not the one the coordinator knows (ahead, or behind by more
/// than the one lost response Kafka tolerates); it must drop its partitions and rejoin.
pub const FENCED_MEMBER_EPOCH: i16 = 110;
/// 111: a static member joins with an instance id still held by a member that did not leave
/// with epoch -2.
pub const UNRELEASED_INSTANCE_ID: i16 = 111;
/// 112: `server_assignor` names an assignor not in `group.consumer.assignors`.
pub const UNSUPPORTED_ASSIGNOR: i16 = 112;
/// 113: OffsetCommit (v9+) with a member epoch other than the member's current one.
pub const STALE_MEMBER_EPOCH: i16 = 113;
/// 128 (Kafka 4.0's INVALID_REGULAR_EXPRESSION; 114 is MISMATCHED_ENDPOINT_TYPE): `subscribed_topic_regex`
/// does not compile.
pub const INVALID_REGULAR_EXPRESSION: i16 = 128;
