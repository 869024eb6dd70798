//! The Kafka error codes specific to KIP-848 groups, next to the classic ones they reuse, so
//! the heartbeat code reads like Kafka's `Errors` enum. Plain `i16`s because the shell copies
//! them straight into ConsumerGroupHeartbeat / ConsumerGroupDescribe responses.
//!
//! What each means here: FENCED_MEMBER_EPOCH (110) - the member's epoch is not the one the
//! coordinator knows (ahead, or behind by more than the one lost response Kafka tolerates), so
//! it must drop its partitions and rejoin; UNRELEASED_INSTANCE_ID (111) - a static member joins
//! with an instance id still held by a member that did not leave with epoch -2;
//! UNSUPPORTED_ASSIGNOR (112) - `server_assignor` names an assignor not in
//! `group.consumer.assignors`; STALE_MEMBER_EPOCH (113) - OffsetCommit (v9+) with a member
//! epoch other than the member's current one; INVALID_REGULAR_EXPRESSION (128) -
//! `subscribed_topic_regex` does not compile.

pub use crate::errors::{
    FENCED_INSTANCE_ID, FENCED_MEMBER_EPOCH, GROUP_ID_NOT_FOUND, GROUP_MAX_SIZE_REACHED,
    INVALID_REGULAR_EXPRESSION, INVALID_REQUEST, NONE, NON_EMPTY_GROUP, STALE_MEMBER_EPOCH,
    UNKNOWN_MEMBER_ID, UNRELEASED_INSTANCE_ID, UNSUPPORTED_ASSIGNOR,
};
