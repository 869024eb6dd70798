//! The controller's side of replication (spec D.3, F and I.3 item 6): leader elections,
//! the validation of AlterPartition, and the leader imbalance. The partition's own rules
//! (leader state, epochs, truncation, acks, fencing) are the pure crate `runnel_replication`,
//! which this module builds on.
//!
//! * [`election`]: the D.3 leader-election strategies and ElectLeaders' result codes;
//! * [`imbalance`]: the per-broker leader imbalance and the auto-rebalance decision (F);
//! * [`alter_partition`]: the controller's validation of AlterPartition (I.3 item 6).

pub mod alter_partition;
pub mod election;
pub mod imbalance;

pub use alter_partition::{
    validate_alter_partition, AlterPartitionDecision, AlterPartitionRequest,
};
pub use election::{
    controlled_shutdown_election, elect_leaders, initial_election, offline_election,
    preferred_election, reassign_election, ElectLeadersType, Election,
};
pub use imbalance::{
    auto_rebalance, imbalance_by_broker, BrokerImbalance, PartitionLeadership, RebalancePlan,
};
pub use runnel_replication::codes;
