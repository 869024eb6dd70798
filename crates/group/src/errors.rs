//! The Kafka error codes the coordinator answers with (spec Appendix 2). Plain `i16`s because
//! the shell copies them straight into responses.

/// 0: success.
pub const NONE: i16 = 0;
/// 12: commit metadata longer than `offset.metadata.max.bytes`.
pub const OFFSET_METADATA_TOO_LARGE: i16 = 12;
/// The commit's record batch exceeds the offsets partition's `max.message.bytes`.
pub const INVALID_COMMIT_OFFSET_SIZE: i16 = 28;
/// 16: the group's partition is not (or no longer) led here; the client re-discovers.
pub const NOT_COORDINATOR: i16 = 16;
/// 17: a topic name that cannot be stored in a `__consumer_offsets` key.
pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
/// 22: the request's generation is not the group's.
pub const ILLEGAL_GENERATION: i16 = 22;
/// 23: protocol type differs from the group's, or no assignor in common.
pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
/// 24: empty group id where Kafka requires one.
pub const INVALID_GROUP_ID: i16 = 24;
/// 25: the member id is not (or no longer) in the group.
pub const UNKNOWN_MEMBER_ID: i16 = 25;
/// 26: session timeout outside `[group.min.session.timeout.ms, group.max.session.timeout.ms]`.
pub const INVALID_SESSION_TIMEOUT: i16 = 26;
/// 27: the group is rebalancing; the member must (re-)join.
pub const REBALANCE_IN_PROGRESS: i16 = 27;
/// 42: a string too long for the int16-length formats of `__consumer_offsets`.
pub const INVALID_REQUEST: i16 = 42;
/// 68: DeleteGroups / OffsetDelete on a group that still has members.
pub const NON_EMPTY_GROUP: i16 = 68;
/// 69: DeleteGroups / OffsetDelete on an unknown group.
pub const GROUP_ID_NOT_FOUND: i16 = 69;
/// 79: first JoinGroup (v4+) of a dynamic member: here is your id, join again with it.
pub const MEMBER_ID_REQUIRED: i16 = 79;
/// 81: `group.max.size` reached.
pub const GROUP_MAX_SIZE_REACHED: i16 = 81;
/// 82: a static member's instance id is now owned by another member id.
pub const FENCED_INSTANCE_ID: i16 = 82;
/// 86: OffsetDelete of a topic that a member of the (non-empty) group subscribes to.
pub const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;
/// COORDINATOR_NOT_AVAILABLE (a Dead group).
pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
/// UNSTABLE_OFFSET_COMMIT: OffsetFetch with `require_stable` for a partition whose offset is
/// part of an open transaction.
pub const UNSTABLE_OFFSET_COMMIT: i16 = 88;
