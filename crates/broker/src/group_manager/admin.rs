//! ListGroups, DescribeGroups and DeleteGroups over the coordinator partitions of this node.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::oneshot;

use super::*;

impl GroupManager {
    /// DescribeGroups: each group described by its classic coordinator (KIP-848 groups are
    /// ConsumerGroupDescribe's).
    pub(super) fn describe_groups(&mut self, group_ids: Vec<String>) -> Vec<GroupDescription> {
        group_ids
            .into_iter()
            .map(|g| match self.route(&g) {
                Ok(p) => self.coordinator(p).describe_group(&g),
                Err(code) => describe_error(g, code),
            })
            .collect()
    }

    /// ListGroups over every partition this node coordinates: each id once, as a KIP-848
    /// group if it is one (its offsets live in the classic coordinator as an Empty group).
    pub(super) fn list_groups(&self, filter: &ListFilter) -> Vec<ListedGroup> {
        let matches = |wanted: &[String], value: &str| {
            wanted.is_empty() || wanted.iter().any(|w| w.trim().eq_ignore_ascii_case(value))
        };
        let mut out: BTreeMap<String, ListedGroup> = BTreeMap::new();
        for c in self.coordinators.values() {
            for (group_id, protocol_type, state) in c.list_groups(&[]) {
                let listed = ListedGroup {
                    group_id: group_id.clone(),
                    protocol_type,
                    state,
                    group_type: "classic".into(),
                };
                out.insert(group_id, listed);
            }
        }
        for consumer in self.consumer_groups.values() {
            for (group_id, state) in consumer.list() {
                let listed = ListedGroup {
                    group_id: group_id.clone(),
                    protocol_type: "consumer".into(),
                    state,
                    group_type: "consumer".into(),
                };
                out.insert(group_id, listed);
            }
        }
        out.into_values()
            .filter(|g| matches(&filter.states, &g.state) && matches(&filter.types, &g.group_type))
            .collect()
    }

    /// DeleteGroups: each group's tombstones go to its own partition; the answer waits for
    /// all of them.
    pub(super) fn delete_groups(
        &mut self,
        group_ids: Vec<String>,
        reply: oneshot::Sender<Vec<(String, i16)>>,
    ) {
        let mut out = Vec::with_capacity(group_ids.len());
        let mut writes: Vec<(i32, Written, std::ops::Range<usize>)> = Vec::new();
        for g in group_ids {
            match self.route(&g) {
                Ok(p) => {
                    // A KIP-848 group goes with its tombstones, then its offsets (held by the
                    // classic coordinator) with theirs.
                    let mut records = Vec::new();
                    let consumer = self.consumer_groups_of(p);
                    if consumer.contains(&g) {
                        let code = consumer.delete(&g);
                        if code != 0 {
                            out.push((g, code));
                            continue;
                        }
                        records = consumer.take_records();
                    }
                    let is_consumer = !records.is_empty();
                    let (mut results, classic) =
                        self.coordinator(p).delete_groups(std::slice::from_ref(&g));
                    if is_consumer {
                        for r in &mut results {
                            if r.1 == runnel_group::errors::GROUP_ID_NOT_FOUND {
                                r.1 = 0;
                            }
                        }
                    }
                    records.extend(classic);
                    let written = self.persist(p, records);
                    if let (true, Written::Failed(_)) = (is_consumer, written) {
                        self.consumer_groups_of(p).revert_records();
                    }
                    writes.push((p, written, out.len()..out.len() + results.len()));
                    out.extend(results);
                }
                Err(code) => out.push((g, code)),
            }
        }
        let gather = Arc::new(parking_lot::Mutex::new(DeleteAnswer {
            results: out,
            waiting: writes.len(),
            reply: Some(reply),
        }));
        if writes.is_empty() {
            gather.lock().finish_one(0..0, 0);
            return;
        }
        for (p, written, range) in writes {
            let gather = gather.clone();
            self.when_written(
                p,
                written,
                Box::new(move |err| gather.lock().finish_one(range, err)),
            );
        }
    }
}
