//! The replica side of the broker: the partitions hosted here and how they follow the image
//! and each other. `partition` (one hosted replica, its operations split by job), `manager`
//! (the image, or a delta, applied to the local logs), `local_changes` (which partitions a
//! delta may change), `fetcher` (follower replication: one task per
//! leader), `isr` (the leader's ISR changes sent to the controller), `log_dir_moves` (a replica
//! moving between log dirs, AlterReplicaLogDirs).

pub mod fetcher;
pub mod isr;
mod local_changes;
pub mod log_dir_moves;
pub mod manager;
pub mod partition;
#[cfg(test)]
mod test_records;
