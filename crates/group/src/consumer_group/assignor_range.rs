//! The `range` server-side assignor: per topic, the subscribed members sorted by member id get
//! contiguous ranges, the first `partitions % members` one partition more, like the classic
//! RangeAssignor. Predictable (co-partitioned topics land on the same member) rather than
//! balanced across topics or sticky.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::api::Assignment;
use super::assignor::MemberSpec;

pub(crate) fn assign(
    members: &[MemberSpec<'_>],
    partitions: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .iter()
        .map(|m| (m.id.to_string(), Assignment::new()))
        .collect();
    for (topic, count) in partitions {
        let mut subscribers: Vec<&str> = members
            .iter()
            .filter(|m| m.topics.contains(topic))
            .map(|m| m.id)
            .collect();
        subscribers.sort_unstable();
        if subscribers.is_empty() {
            continue;
        }
        let count = (*count).max(0) as usize;
        let per = count / subscribers.len();
        let extra = count % subscribers.len();
        for (i, id) in subscribers.iter().enumerate() {
            let start = i * per + i.min(extra);
            let len = per + usize::from(i < extra);
            if len == 0 {
                continue;
            }
            let set = (start..start + len).map(|p| p as i32).collect();
            if let Some(a) = out.get_mut(*id) {
                a.insert(*topic, set);
            }
        }
    }
    out
}
