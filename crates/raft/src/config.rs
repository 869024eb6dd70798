//! The quorum configuration: Kafka's `controller.quorum.voters` plus the Raft timings.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use openraft::SnapshotPolicy;

use crate::error::QuorumError;

/// How one node joins the metadata quorum.
#[derive(Debug, Clone)]
pub struct QuorumConfig {
    /// This node's Kafka node id.
    pub node_id: i32,
    /// The voters (`controller.quorum.voters`): node id -> controller listener `host:port`.
    /// A node whose id is not here is an *observer* (a Raft learner).
    pub voters: BTreeMap<i32, String>,
    /// Where the Raft log, vote and snapshot live (e.g. `<data-dir>/__cluster_metadata-0`).
    pub data_dir: PathBuf,
    pub election_timeout_min_ms: u64,
    pub election_timeout_max_ms: u64,
    pub heartbeat_interval_ms: u64,
    /// Take a snapshot every this many Raft entries and purge the log before it.
    pub snapshot_every: u64,
    /// The `host:port` the leader should replicate to when this node is an observer (its
    /// listener's address is used when `None`; voters always use their entry in `voters`).
    pub observer_address: Option<String>,
    /// The cluster this quorum belongs to: stamped on every frame sent, and frames stamped
    /// with another id are refused.
    pub cluster_id: String,
    /// Connections the controller listener holds at once; one more is closed on accept.
    /// Each held connection takes a file descriptor from the process's table, which the
    /// broker's segment files share: without a cap, a peer opening connections could starve
    /// the logs of descriptors (Kafka caps its controller listener with `max.connections`).
    pub max_connections: usize,
}

/// [`QuorumConfig::max_connections`] by default: far more than a cluster's peers use (each
/// node keeps a few pooled connections to each other node), far less than a process's
/// descriptor table.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

impl QuorumConfig {
    /// A configuration with Kafka-like defaults (election timeout 1000-2000 ms, heartbeat
    /// 500 ms — KRaft's `controller.quorum.election.timeout.ms` default is 1000) and a snapshot
    /// every 1000 entries.
    pub fn new(node_id: i32, voters: BTreeMap<i32, String>, data_dir: PathBuf) -> Self {
        QuorumConfig {
            node_id,
            voters,
            data_dir,
            election_timeout_min_ms: 1000,
            election_timeout_max_ms: 2000,
            heartbeat_interval_ms: 500,
            snapshot_every: 1000,
            observer_address: None,
            cluster_id: String::new(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }

    /// True if this node votes (is in `voters`).
    pub fn is_voter(&self) -> bool {
        self.voters.contains_key(&self.node_id)
    }

    /// Rejects what would make the quorum misbehave, with one line for the operator.
    pub fn validate(&self) -> Result<(), QuorumError> {
        let bad = |m: String| Err(QuorumError::Config(m));
        if self.node_id < 0 {
            return bad(format!("node id {} is negative", self.node_id));
        }
        if self.voters.is_empty() {
            return bad("the voter set is empty".into());
        }
        if let Some((id, _)) = self.voters.iter().find(|(id, _)| **id < 0) {
            return bad(format!("voter id {id} is negative"));
        }
        for (id, addr) in &self.voters {
            if addr
                .rsplit_once(':')
                .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
            {
                return bad(format!(
                    "voter {id} has address '{addr}', expected HOST:PORT"
                ));
            }
        }
        if self.max_connections == 0 {
            return bad("the controller listener's max.connections must be positive".into());
        }
        if self.heartbeat_interval_ms == 0 {
            return bad("heartbeat interval must be positive".into());
        }
        if self.election_timeout_min_ms <= self.heartbeat_interval_ms
            || self.election_timeout_max_ms <= self.election_timeout_min_ms
        {
            return bad(format!(
                "need heartbeat ({}) < election timeout min ({}) < max ({})",
                self.heartbeat_interval_ms,
                self.election_timeout_min_ms,
                self.election_timeout_max_ms
            ));
        }
        if self.snapshot_every == 0 {
            return bad("snapshot_every must be positive".into());
        }
        Ok(())
    }

    /// The openraft configuration these settings mean.
    pub(crate) fn raft_config(&self) -> Result<Arc<openraft::Config>, QuorumError> {
        let config = openraft::Config {
            cluster_name: "runnel-metadata".into(),
            election_timeout_min: self.election_timeout_min_ms,
            election_timeout_max: self.election_timeout_max_ms,
            heartbeat_interval: self.heartbeat_interval_ms,
            // Every RPC must answer well within an election timeout, or a slow follower would
            // hold a replication stream hostage.
            install_snapshot_timeout: self.election_timeout_max_ms,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(self.snapshot_every),
            // Keep no entries before the snapshot: a lagging node gets the snapshot instead.
            max_in_snapshot_log_to_keep: 0,
            // Chunks are JSON-encoded; keep frames small next to the election timeout.
            snapshot_max_chunk_size: 256 * 1024,
            max_payload_entries: 256,
            ..Default::default()
        };
        config
            .validate()
            .map(Arc::new)
            .map_err(|e| QuorumError::Config(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn voters() -> BTreeMap<i32, String> {
        (1..=3)
            .map(|i| (i, format!("127.0.0.1:{}", 19092 + i)))
            .collect()
    }

    #[test]
    fn defaults_validate_and_map_to_openraft() {
        let c = QuorumConfig::new(1, voters(), "/tmp/x".into());
        c.validate().unwrap();
        assert!(c.is_voter());
        let rc = c.raft_config().unwrap();
        assert_eq!(rc.heartbeat_interval, 500);
        assert!(!QuorumConfig::new(7, voters(), "/tmp/x".into()).is_voter());
    }

    #[test]
    fn inconsistent_configs_are_refused() {
        let mut c = QuorumConfig::new(1, voters(), "/tmp/x".into());
        c.voters.insert(4, "nohost".into());
        assert!(c.validate().is_err());
        let mut c = QuorumConfig::new(1, voters(), "/tmp/x".into());
        c.heartbeat_interval_ms = 1500;
        assert!(c.validate().is_err());
        let c = QuorumConfig::new(1, BTreeMap::new(), "/tmp/x".into());
        assert!(c.validate().is_err());
        let c = QuorumConfig::new(-1, voters(), "/tmp/x".into());
        assert!(c.validate().is_err());
    }
}
