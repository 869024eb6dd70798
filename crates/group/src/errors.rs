//! The Kafka error codes the coordinator answers with (spec Appendix 2): the whole table of
//! `runnel_codes`. Plain `i16`s because the shell copies them straight into responses.
//!
//! What the classic coordinator means by the ones it uses: OFFSET_METADATA_TOO_LARGE (12) -
//! commit metadata longer than `offset.metadata.max.bytes`; INVALID_COMMIT_OFFSET_SIZE (28) -
//! the commit's record batch exceeds the offsets partition's `max.message.bytes`;
//! NOT_COORDINATOR (16) - the group's partition is not (or no longer) led here, the client
//! re-discovers; INVALID_TOPIC_EXCEPTION (17) - a topic name that cannot be stored in a
//! `__consumer_offsets` key; ILLEGAL_GENERATION (22) - the request's generation is not the
//! group's; INCONSISTENT_GROUP_PROTOCOL (23) - protocol type differs from the group's, or no
//! assignor in common; INVALID_GROUP_ID (24) - empty group id where Kafka requires one;
//! UNKNOWN_MEMBER_ID (25) - the member id is not (or no longer) in the group;
//! INVALID_SESSION_TIMEOUT (26) - session timeout outside `[group.min.session.timeout.ms,
//! group.max.session.timeout.ms]`; REBALANCE_IN_PROGRESS (27) - the group is rebalancing, the
//! member must (re-)join; INVALID_REQUEST (42) - a string too long for the int16-length formats
//! of `__consumer_offsets`; NON_EMPTY_GROUP (68) / GROUP_ID_NOT_FOUND (69) - DeleteGroups /
//! OffsetDelete on a group that still has members / an unknown group; MEMBER_ID_REQUIRED (79) -
//! first JoinGroup (v4+) of a dynamic member: here is your id, join again with it;
//! GROUP_MAX_SIZE_REACHED (81) - `group.max.size` reached; FENCED_INSTANCE_ID (82) - a static
//! member's instance id is now owned by another member id; GROUP_SUBSCRIBED_TO_TOPIC (86) -
//! OffsetDelete of a topic that a member of the (non-empty) group subscribes to;
//! COORDINATOR_NOT_AVAILABLE (15) - a Dead group; UNSTABLE_OFFSET_COMMIT (88) - OffsetFetch with
//! `require_stable` for a partition whose offset is part of an open transaction.

pub use runnel_codes::code::*;
pub use runnel_codes::KafkaError;
