//! Administrative group APIs: ListGroups (16), DescribeGroups (15), DeleteGroups (42).

use super::GroupCoordinator;
use crate::api::{GroupDescription, OffsetsRecord};
use crate::codec;
use crate::errors::*;
use crate::state::GroupState;

impl GroupCoordinator {
    /// ListGroups: `(group id, protocol type, state name)` sorted by id, filtered by state
    /// names (compared case-insensitively; empty = all).
    pub fn list_groups(&self, states: &[String]) -> Vec<(String, String, String)> {
        self.groups
            .values()
            .filter(|g| {
                states.is_empty()
                    || states
                        .iter()
                        .any(|s| s.eq_ignore_ascii_case(g.state.name()))
            })
            .map(|g| {
                (
                    g.id.clone(),
                    g.protocol_type.clone().unwrap_or_default(),
                    g.state.name().to_owned(),
                )
            })
            .collect()
    }

    /// DescribeGroups for one group. Unknown groups are described as "Dead" with error 0,
    /// like Kafka; member metadata and assignments are filled only when Stable.
    pub fn describe_group(&self, group_id: &str) -> GroupDescription {
        match self.groups.get(group_id) {
            Some(g) => g.describe(),
            None => GroupDescription {
                error_code: NONE,
                group_id: group_id.to_owned(),
                state: GroupState::Dead.name().to_owned(),
                protocol_type: String::new(),
                protocol: String::new(),
                members: Vec::new(),
            },
        }
    }

    /// DeleteGroups: only Empty groups can be deleted (68 NON_EMPTY_GROUP otherwise; 69
    /// GROUP_ID_NOT_FOUND if unknown). Returns per-group codes in request order and the
    /// tombstones (every offset, then the group record if it had a generation).
    pub fn delete_groups(
        &mut self,
        group_ids: &[String],
    ) -> (Vec<(String, i16)>, Vec<OffsetsRecord>) {
        let mut results = Vec::with_capacity(group_ids.len());
        let mut records = Vec::new();
        for id in group_ids {
            let code = match self.groups.get_mut(id) {
                None => GROUP_ID_NOT_FOUND,
                Some(g) if g.is(GroupState::Empty) => {
                    for (t, p) in std::mem::take(&mut g.offsets).into_keys() {
                        records.push(OffsetsRecord {
                            key: codec::offset_key(id, &t, p),
                            value: None,
                        });
                    }
                    self.remove_dead_group(id, &mut records);
                    NONE
                }
                Some(_) => NON_EMPTY_GROUP,
            };
            results.push((id.clone(), code));
        }
        self.debug_check();
        (results, records)
    }
}
