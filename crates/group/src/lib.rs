//! # runnel-group
//!
//! The classic consumer-group coordinator (spec H, Kafka's `GroupCoordinator` of the
//! JoinGroup / SyncGroup / Heartbeat / LeaveGroup protocol) and the `__consumer_offsets`
//! record formats, as pure deterministic code.
//!
//! The broker shell owns one [`GroupCoordinator`] per node on one task. It decodes group
//! requests into the types of [`api`], calls the coordinator, and executes the returned
//! [`Output`]s: [`Output::Persist`] records are appended to the group's `__consumer_offsets`
//! partition (see [`partition_for_group`]) *before* any response produced by the same call is
//! sent, so a SyncGroup or OffsetCommit is only acknowledged once its record is in the log.
//! Requests that must wait (a JoinGroup until the join phase completes, a SyncGroup until the
//! leader's assignment) are parked under the shell's [`RequestId`] and completed by a later
//! call; the shell calls [`GroupCoordinator::tick`] every ~100 ms to drive session expiry,
//! rebalance timeouts, the initial rebalance delay and offset expiry. When the broker becomes
//! leader of a `__consumer_offsets` partition it replays the partition into
//! [`GroupCoordinator::load`].
//!
//! [`consumer_group`] holds the KIP-848 protocol (`group.protocol=consumer`): ConsumerGroupHeartbeat
//! and ConsumerGroupDescribe with server-side assignors and per-member reconciliation, beside the
//! classic coordinator and with the same pure-code rules.
//!
//! Nothing here performs I/O, spawns tasks or reads a clock (`now_ms` comes in), and member
//! ids come from an injectable generator, so every behaviour is reproducible in tests. Client
//! input never panics: every invalid request maps to a Kafka error code; internal invariants
//! are checked with `debug_assert!` after every call.

pub mod api;
pub mod batch_size;
pub mod codec;
pub mod config;
pub mod consumer_group;
pub mod consumer_protocol;
pub mod coordinator;
pub mod errors;
mod group;
mod member;
pub mod migration;
pub mod partitioner;
pub mod state;
pub mod subscription;

pub use api::{
    CommitOffset, CommittedOffset, GroupDescription, HeartbeatRequest, JoinMember, JoinRequest,
    JoinResponse, LoadRecord, MemberDescription, OffsetCommitRequest, OffsetsRecord, Output,
    RequestId, SyncRequest, SyncResponse, TxnOffsetCommitRequest,
};
pub use codec::CodecError;
pub use config::GroupConfig;
pub use consumer_group::{
    ClassicMemberMetadata, ConsumerGroupConfig, ConsumerGroupDescription, ConsumerGroups,
    ConsumerHeartbeat, ConsumerHeartbeatResponse, ConsumerMemberDescription,
    DescribedTopicPartitions, GroupTimeouts, MigrationPolicy, TopicRegex, TopicsView,
};
pub use coordinator::{FetchedOffset, GroupCoordinator, MemberIdGenerator, OffsetCommit};
pub use member::NEW_MEMBER_JOIN_TIMEOUT_MS;
pub use partitioner::partition_for_group;
pub use state::GroupState;
