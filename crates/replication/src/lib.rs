//! The pure rules of replication (spec E and I.3 item 6's leader side), one implementation
//! each, used by the log (the epoch cache's arithmetic), the broker (leader, follower and
//! produce paths) and checked by the deterministic simulation under `tests/replication/`.
//!
//! The broker is the imperative shell: its follower fetchers, partition leaders and produce
//! handler feed events in (a follower's fetch, a leader append, a tick with `now_ms`, a
//! committed partition change) and act on the decisions that come out (answer a parked
//! acks=all produce, send an AlterPartition, truncate a log). Nothing here does I/O, reads a
//! clock or depends on an async runtime. The controller's side (elections, AlterPartition
//! validation, leader imbalance) lives in `runnel_metadata::replication`.
//!
//! One idea per file:
//!
//! * [`follower`]: what a leader knows about one follower, and E.2's "caught up" rule;
//! * [`follower_fetch`]: who may fetch as a follower (a replica with its broker epoch);
//! * [`leader_state`]: one partition on its leader: ISR with pending changes, HW (E.3),
//!   shrink / expand (E.2), acks=all (E.4);
//! * [`acks`]: the acks=all decisions in isolation (E.4);
//! * [`fencing`]: the leader-epoch check of the data path (E.7);
//! * [`epoch_cache`]: a replica's leader-epoch cache and OffsetForLeaderEpoch (E.5);
//! * [`truncation`]: where a follower truncates, and the leader's DivergingEpoch (E.5);
//! * [`read_replica`]: which replica a consumer reads from (KIP-392's preferred read replica).

pub mod acks;
pub mod epoch_cache;
pub mod fencing;
pub mod follower;
pub mod follower_fetch;
pub mod follower_hw;
pub mod leader_state;
pub mod read_replica;
pub mod truncation;

pub use acks::{acks_all_outcome, check_min_isr, AcksOutcome, NotEnoughReplicas};
pub use epoch_cache::{EpochEndOffset, EpochEntry, LeaderEpochCache};
pub use fencing::check_leader_epoch;
pub use follower::{FollowerState, UNKNOWN_OFFSET};
pub use follower_fetch::{check_follower_fetch, FollowerIdentity};
pub use follower_hw::follower_high_watermark;
pub use leader_state::{
    ineligible_replicas, AlterPartitionFailure, BecomeLeader, FetchError, FetchOutcome,
    LeaderConfig, LeaderImage, LeaderPartitionState,
};
pub use read_replica::{
    preferred_read_replica, ReplicaCandidate, ReplicaSelector, RACK_AWARE_SELECTOR_CLASS,
};
pub use truncation::{diverging_epoch, truncation_point, TruncationState};

/// Kafka error codes of the replication path (the values are Kafka's), shared with the
/// controller's side in `runnel_metadata::replication`.
pub mod codes {
    pub use runnel_codes::code::*;
}
