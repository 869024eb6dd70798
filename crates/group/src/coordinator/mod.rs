//! The `GroupCoordinator`: every classic group led by this broker, driven by requests and by
//! `tick`. One file per API family; `rebalance` holds the state-machine steps they share.
//!
//! Everything is synchronous and deterministic: time comes in as `now_ms`, member ids come
//! from an injectable generator, and responses that must wait (JoinGroup until the join phase
//! completes, SyncGroup until the leader's assignment) are parked under the shell's
//! [`RequestId`](crate::RequestId) and returned later as [`Output`] values.

mod admin;
mod heartbeat;
mod join;
mod leave;
mod load;
mod migration;
mod offsets;
mod txn_offsets;

pub(crate) use migration::ClassicUndo;
pub use offsets::OffsetCommit;
pub use txn_offsets::FetchedOffset;
mod rebalance;
mod sync;
mod timers;

use std::collections::BTreeMap;

use crate::api::Output;
use crate::config::GroupConfig;
use crate::group::Group;

/// Produces the random part of generated member ids.
pub type MemberIdGenerator = Box<dyn FnMut() -> String + Send>;

/// The classic consumer-group coordinator for all groups this broker leads.
pub struct GroupCoordinator {
    config: GroupConfig,
    groups: BTreeMap<String, Group>,
    new_member_suffix: MemberIdGenerator,
    /// Next time `tick` scans for expired offsets (None until the first tick).
    next_offset_expiry_ms: Option<i64>,
    /// Offset commits whose records are being written, by token: group and offsets.
    inflight_commits: std::collections::HashMap<u64, InflightCommit>,
    /// TxnOffsetCommit writes in flight, by token: group, producer id, partitions.
    inflight_txn_commits: std::collections::HashMap<u64, txn_offsets::InflightTxnCommit>,
    next_commit_token: u64,
}

/// The offsets of one commit that are stored only once its records are written.
#[derive(Debug)]
pub(crate) struct InflightCommit {
    pub group_id: String,
    pub offsets: Vec<((String, i32), crate::group::StoredOffset)>,
}

impl std::fmt::Debug for GroupCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCoordinator")
            .field("config", &self.config)
            .field("groups", &self.groups.len())
            .finish()
    }
}

impl GroupCoordinator {
    /// A coordinator whose member ids end in random v4 UUIDs (like Kafka's).
    pub fn new(config: GroupConfig) -> Self {
        Self::with_member_id_generator(config, Box::new(|| uuid::Uuid::new_v4().to_string()))
    }

    /// A coordinator with a custom member-id suffix generator (deterministic tests).
    pub fn with_member_id_generator(config: GroupConfig, generator: MemberIdGenerator) -> Self {
        GroupCoordinator {
            config,
            groups: BTreeMap::new(),
            new_member_suffix: generator,
            next_offset_expiry_ms: None,
            inflight_commits: std::collections::HashMap::new(),
            inflight_txn_commits: std::collections::HashMap::new(),
            next_commit_token: 0,
        }
    }

    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    /// Ids of all groups held (including Empty groups that only store offsets), sorted.
    pub fn groups(&self) -> impl Iterator<Item = &str> {
        self.groups.keys().map(String::as_str)
    }

    /// Checks every group's internal invariants (used by `debug_assert!` after each call and
    /// by property tests). `Err` describes the first violation.
    pub fn check_invariants(&self) -> Result<(), String> {
        for (id, g) in &self.groups {
            if id != &g.id {
                return Err(format!("group stored under {id:?} is {:?}", g.id));
            }
            g.check_invariants()?;
        }
        Ok(())
    }

    /// Whether `group_id` is a classic group with members (a KIP-848 heartbeat may not take
    /// it over, see `group_manager`).
    pub fn has_members(&self, group_id: &str) -> bool {
        self.groups
            .get(group_id)
            .is_some_and(|g| !g.members.is_empty())
    }

    /// The group's generation and leader, for tests and diagnostics.
    pub fn generation_and_leader(&self, group_id: &str) -> Option<(i32, Option<String>)> {
        self.groups
            .get(group_id)
            .map(|g| (g.generation, g.leader.clone()))
    }

    /// The next commit token: tokens increase in the order commits are appended, so they
    /// double as the commits' log order ([`crate::group::StoredOffset::position`]).
    fn take_commit_token(&mut self) -> u64 {
        let token = self.next_commit_token;
        self.next_commit_token = self.next_commit_token.wrapping_add(1);
        token
    }

    fn debug_check(&self) {
        debug_assert_eq!(self.check_invariants(), Ok(()));
    }
}

/// Puts every record of a call into one leading `Output::Persist`, in emission order, so the
/// shell's persist-then-answer rule is a matter of handling the first output first. (A call
/// can persist after answering, e.g. a tick that completes one group's join and then expires
/// offsets.)
pub(crate) fn persist_first(out: Vec<Output>) -> Vec<Output> {
    let leading = out
        .iter()
        .take_while(|o| matches!(o, Output::Persist(_)))
        .count();
    let persists = out
        .iter()
        .filter(|o| matches!(o, Output::Persist(_)))
        .count();
    if persists <= 1 && leading == persists {
        return out;
    }
    let mut records = Vec::new();
    let mut responses = Vec::with_capacity(out.len());
    for o in out {
        match o {
            Output::Persist(r) => records.extend(r),
            other => responses.push(other),
        }
    }
    let mut result = Vec::with_capacity(responses.len() + 1);
    result.push(Output::Persist(records));
    result.extend(responses);
    result
}
