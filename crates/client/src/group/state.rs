//! The membership state shared by the consumer (which joins, syncs and commits) and its
//! background heartbeat task (which only reports what the coordinator said). The heartbeat
//! task never rebalances itself: it raises flags that the next `poll` acts on, as the Java
//! client's heartbeat thread does, so partitions only change inside `poll`.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use crate::connection::Connection;

use super::coordinator::CoordinatorInfo;
use super::membership::Identity;

/// What the consumer and its heartbeat task both see.
#[derive(Debug)]
pub struct MemberState {
    /// Who we are (member id changes on join / reset).
    pub identity: Identity,
    /// Generation of the current assignment, -1 outside a generation.
    pub generation: i32,
    /// The coordinator and a dedicated connection to it (a JoinGroup blocks its connection
    /// for the whole round, so it must not share one with fetches).
    pub coordinator: Option<(CoordinatorInfo, Arc<Connection>)>,
    /// A generation is active and heartbeats are due.
    pub stable: bool,
    /// The coordinator asked for (or an error implies) a new rebalance round.
    pub rejoin_needed: bool,
    /// Our partitions were taken away without a chance to commit (ILLEGAL_GENERATION,
    /// UNKNOWN_MEMBER_ID, poll interval exceeded): drop them without committing.
    pub partitions_lost: bool,
    /// A non-recoverable error from the heartbeat task, returned by the next `poll`.
    pub fatal: Option<runnel_codes::KafkaError>,
    /// When the application last called `poll` (for `max.poll.interval.ms`).
    pub last_poll: Instant,
}

/// The shared handle.
#[derive(Debug, Clone)]
pub struct Shared(Arc<Mutex<MemberState>>);

impl Shared {
    /// Fresh state for a member that has not joined yet.
    pub fn new(identity: Identity) -> Self {
        Self(Arc::new(Mutex::new(MemberState {
            identity,
            generation: -1,
            coordinator: None,
            stable: false,
            rejoin_needed: true,
            partitions_lost: false,
            fatal: None,
            last_poll: Instant::now(),
        })))
    }

    /// Locks the state (a poisoned lock still holds consistent plain data).
    pub fn lock(&self) -> MutexGuard<'_, MemberState> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reacts to a group error code the way every group API shares (spec H.2): returns
    /// whether the code was one of those handled here.
    pub fn on_group_error(&self, code: i16) -> bool {
        let mut st = self.lock();
        match code {
            // The group is rebalancing: re-join, keeping our partitions until then.
            27 => st.rejoin_needed = true,
            // Our generation is gone: the partitions already belong to someone else.
            22 => {
                st.generation = -1;
                st.stable = false;
                st.rejoin_needed = true;
                st.partitions_lost = true;
            }
            // The coordinator forgot us: join again as a new member.
            25 => {
                st.identity.member_id.clear();
                st.generation = -1;
                st.stable = false;
                st.rejoin_needed = true;
                st.partitions_lost = true;
            }
            14..=16 => st.coordinator = None,
            _ => return false,
        }
        true
    }
}
