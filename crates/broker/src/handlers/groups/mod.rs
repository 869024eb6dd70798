//! The classic consumer-group APIs: FindCoordinator (10), JoinGroup (11), Heartbeat (12),
//! LeaveGroup (13), SyncGroup (14), OffsetCommit (8), OffsetFetch (9), ListGroups (16),
//! DescribeGroups (15), DeleteGroups (42), OffsetDelete (47). Translation only: decisions are
//! in `runnel-group`, sequencing and persistence in `group_manager`. One file per API family:
//! `coordinator` (FindCoordinator and the internal topics), `membership` (join, sync,
//! heartbeat, leave), `offset_commit`, `offset_fetch`, `admin` (list, describe, delete groups
//! and offsets).

use kafka_protocol::protocol::StrBytes;

mod admin;
mod coordinator;
mod membership;
mod offset_commit;
mod offset_fetch;

pub use admin::{delete_groups, describe_groups, list_groups, offset_delete};
pub use coordinator::find_coordinator;
pub use membership::{heartbeat, join_group, leave_group, sync_group};
pub use offset_commit::offset_commit;
pub use offset_fetch::offset_fetch;

use crate::errors::code::INVALID_REQUEST;

fn opt(s: &Option<StrBytes>) -> Option<String> {
    s.as_ref().map(|s| s.to_string())
}
