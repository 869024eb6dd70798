//! Rebuilding groups from a `__consumer_offsets` partition when this broker becomes its leader
//! (Kafka's `loadGroupsAndOffsets` + `onGroupLoaded`), and dropping them when it stops being
//! the leader (`onGroupUnloaded`).

use std::collections::BTreeMap;

use super::rebalance::prepare_rebalance;
use super::txn_offsets::materialize;
use super::GroupCoordinator;
use crate::api::{JoinResponse, LoadRecord, OffsetsRecord, Output, SyncResponse};
use crate::codec::{self, GroupMetadataValue, OffsetsKey};
use crate::errors::NOT_COORDINATOR;
use crate::group::{Group, PendingTxnOffset, StoredOffset};
use crate::member::Member;
use crate::state::GroupState;

type LoadedOffsets = BTreeMap<String, BTreeMap<(String, i32), StoredOffset>>;
/// Transactional offsets read so far, per producer id: (group, partition) -> offset.
type PendingLoaded = BTreeMap<i64, BTreeMap<(String, (String, i32)), StoredOffset>>;
/// One group's pending transactional offsets, per producer id.
type TxnOffsets = BTreeMap<i64, BTreeMap<(String, i32), PendingTxnOffset>>;

impl GroupCoordinator {
    /// Replays the records of one `__consumer_offsets` partition, in log order: the last
    /// value per key wins and tombstones delete. Groups with a metadata record come back
    /// Stable (members, assignments, leader) or Empty; groups with only offsets come back
    /// Empty. Loaded members get a fresh session from `now_ms`. Undecodable records are skipped
    /// with a warning; KIP-848 group records (key versions 3..=8, 16) are left to
    /// [`ConsumerGroups::load`](crate::ConsumerGroups::load). Groups already held under the
    /// same ids are replaced; call [`unload`](Self::unload) first to answer their parked
    /// requests.
    pub fn load(&mut self, now_ms: i64, records: impl IntoIterator<Item = OffsetsRecord>) {
        self.load_log(now_ms, records.into_iter().map(LoadRecord::from));
    }

    /// [`Self::load`] of a partition's log with its transactions (Kafka's
    /// `loadGroupsAndOffsets`): offsets from a transactional batch are pending under their
    /// producer id until that producer's marker, which materializes them (COMMIT, over an
    /// older committed offset only) or drops them (ABORT); those still without a marker stay
    /// pending in their group, as before the failover.
    pub fn load_log(&mut self, now_ms: i64, records: impl IntoIterator<Item = LoadRecord>) {
        let mut offsets: LoadedOffsets = BTreeMap::new();
        let mut metadata: BTreeMap<String, Option<GroupMetadataValue>> = BTreeMap::new();
        let mut pending: PendingLoaded = BTreeMap::new();
        let mut position: u64 = 0;
        for entry in records {
            position += 1;
            let (producer_id, rec) = match entry {
                LoadRecord::Record {
                    producer_id,
                    record,
                } => (producer_id, record),
                LoadRecord::Marker {
                    producer_id,
                    commit,
                } => {
                    let done = pending.remove(&producer_id).unwrap_or_default();
                    if commit {
                        for ((group, tp), stored) in done {
                            materialize(offsets.entry(group).or_default(), tp, stored);
                        }
                    }
                    continue;
                }
            };
            if crate::consumer_group::is_consumer_group_key(&rec.key) {
                // KIP-848 groups: `ConsumerGroups::load` replays these.
                continue;
            }
            match codec::decode_key(&rec.key) {
                Ok(OffsetsKey::Offset {
                    group,
                    topic,
                    partition,
                }) => {
                    let decoded = rec
                        .value
                        .as_deref()
                        .map(codec::decode_offset_value_with_expiry);
                    let stored = match decoded {
                        None => None,
                        Some(Ok(v)) => Some(StoredOffset {
                            committed: v.committed,
                            expire_timestamp: v.expire_timestamp,
                            position,
                        }),
                        Some(Err(e)) => {
                            tracing::warn!(%e, "skipping undecodable offset value");
                            continue;
                        }
                    };
                    match (producer_id, stored) {
                        (Some(pid), Some(stored)) => {
                            pending
                                .entry(pid)
                                .or_default()
                                .insert((group, (topic, partition)), stored);
                        }
                        // A transactional batch holds no tombstones.
                        (Some(_), None) => {}
                        (None, None) => {
                            offsets
                                .entry(group)
                                .or_default()
                                .remove(&(topic, partition));
                        }
                        (None, Some(stored)) => {
                            offsets
                                .entry(group)
                                .or_default()
                                .insert((topic, partition), stored);
                        }
                    }
                }
                // Group metadata is never transactional.
                Ok(OffsetsKey::Group { .. }) if producer_id.is_some() => {}
                Ok(OffsetsKey::Group { group }) => {
                    match rec.value.as_deref().map(codec::decode_group_value) {
                        None => {
                            metadata.insert(group, None);
                        }
                        Some(Ok(v)) => {
                            metadata.insert(group, Some(v));
                        }
                        Some(Err(e)) => tracing::warn!(%e, "skipping undecodable group value"),
                    }
                }
                Err(e) => tracing::warn!(%e, "skipping undecodable __consumer_offsets key"),
            }
        }
        // Positions are commit tokens from now on: later commits must order after them.
        self.next_commit_token = self.next_commit_token.max(position.saturating_add(1));
        let mut open: BTreeMap<String, TxnOffsets> = BTreeMap::new();
        for (pid, entries) in pending {
            for ((group, tp), stored) in entries {
                let token = stored.position;
                open.entry(group)
                    .or_default()
                    .entry(pid)
                    .or_default()
                    .insert(tp, PendingTxnOffset { stored, token });
            }
        }

        let mut ids: Vec<String> = metadata.keys().cloned().collect();
        ids.extend(offsets.keys().cloned());
        ids.extend(open.keys().cloned());
        ids.sort();
        ids.dedup();
        for id in ids {
            let group_offsets = offsets.remove(&id).unwrap_or_default();
            let value = metadata.remove(&id).flatten();
            let group_pending = open.remove(&id).unwrap_or_default();
            if value.is_none() && group_offsets.is_empty() && group_pending.is_empty() {
                // Deleted (tombstoned group, all offsets tombstoned).
                self.groups.remove(&id);
                continue;
            }
            let mut g = match value {
                Some(v) => group_from_record(&id, v, now_ms),
                None => Group::new(id.clone(), now_ms),
            };
            g.offsets = group_offsets;
            g.pending_txn_offsets = group_pending;
            if g.members.len() > self.config.max_size {
                // Over capacity (the limit was lowered): rebalance so that only max_size
                // members get back in (Kafka's onGroupLoaded).
                let mut out = Vec::new();
                prepare_rebalance(&self.config, &mut g, now_ms, &mut out);
                debug_assert!(out.is_empty());
            }
            self.groups.insert(id, g);
        }
        self.debug_check();
    }

    /// Drops every group for which `owned` returns true (this broker no longer leads its
    /// partition). Parked joins and syncs are answered with 16 NOT_COORDINATOR so clients
    /// re-discover the coordinator.
    pub fn unload(&mut self, mut owned: impl FnMut(&str) -> bool) -> Vec<Output> {
        let mut out = Vec::new();
        let ids: Vec<String> = self.groups.keys().filter(|id| owned(id)).cloned().collect();
        for id in ids {
            let Some(g) = self.groups.remove(&id) else {
                continue;
            };
            for m in g.members.into_values() {
                if let Some(r) = m.awaiting_join {
                    out.push(Output::Join(r, JoinResponse::error(&m.id, NOT_COORDINATOR)));
                }
                if let Some(r) = m.awaiting_sync {
                    out.push(Output::Sync(r, SyncResponse::error(NOT_COORDINATOR)));
                }
            }
        }
        super::persist_first(out)
    }
}

/// A group as its metadata record describes it: Stable with its members if it has any (and a
/// protocol), else Empty.
fn group_from_record(id: &str, v: GroupMetadataValue, now_ms: i64) -> Group {
    let mut g = Group::new(id.to_owned(), now_ms);
    g.generation = v.generation;
    g.protocol_type = Some(v.protocol_type.clone()).filter(|t| !t.is_empty());
    g.state_timestamp = Some(v.current_state_timestamp).filter(|t| *t >= 0);
    if let (Some(protocol), false) = (v.protocol.clone(), v.members.is_empty()) {
        g.protocol_name = Some(protocol.clone());
        for m in v.members {
            let duplicate_instance = m
                .group_instance_id
                .as_ref()
                .is_some_and(|i| g.static_members.contains_key(i));
            if g.has(&m.member_id) || duplicate_instance {
                tracing::warn!(group = id, member = %m.member_id, "skipping duplicate member");
                continue;
            }
            let mut member = Member {
                id: m.member_id,
                instance_id: m.group_instance_id,
                client_id: m.client_id,
                client_host: m.client_host,
                rebalance_timeout_ms: m.rebalance_timeout,
                session_timeout_ms: m.session_timeout,
                protocol_type: v.protocol_type.clone(),
                protocols: vec![(protocol.clone(), m.subscription)],
                assignment: m.assignment,
                awaiting_join: None,
                awaiting_sync: None,
                is_new: false,
                deadline_ms: 0,
                join_seq: 0,
            };
            member.refresh_session(now_ms);
            g.add(member);
        }
        if let Some(leader) = v.leader.filter(|l| g.has(l)) {
            g.leader = Some(leader);
        }
        // Group::new starts Empty; a loaded group with members is Stable (Kafka's loadGroup).
        g.state = GroupState::Stable;
    } else {
        g.protocol_name = None;
        g.leader = None;
    }
    g.subscribed_topics = g.compute_subscribed_topics();
    g
}
