//! Committed offsets (spec H.2 items 5-6, H.6): OffsetCommit validation and storage,
//! OffsetFetch, OffsetDelete, and KIP-211 expiry. A commit is validated and returned as
//! records with a token; its offsets are *pending* (Kafka's `pendingOffsetCommits`) until the
//! shell reports the records written and replicated ([`GroupCoordinator::complete_offset_commit`]),
//! and only then does OffsetFetch see them. So a reader never sees an offset that a
//! coordinator failover could take back, and committed offsets never go backwards.

use super::{GroupCoordinator, InflightCommit};
use crate::api::{CommitOffset, CommittedOffset, OffsetCommitRequest, OffsetsRecord};
use crate::batch_size::record_batch_size;
use crate::codec::{self, fits_int16_string};
use crate::config::GroupConfig;
use crate::errors::*;
use crate::group::{Group, StoredOffset};
use crate::state::GroupState;
use crate::subscription::CONSUMER_PROTOCOL_TYPE;

/// Per-partition results `(topic, partition, error code)`.
pub type PartitionCodes = Vec<(String, i32, i16)>;

/// Offsets a commit accepted, stored once its records are written.
pub(super) type AcceptedOffsets = Vec<((String, i32), StoredOffset)>;

/// Group code, partition codes, records, accepted offsets.
type CommitParts = (i16, PartitionCodes, Vec<OffsetsRecord>, AcceptedOffsets);

/// What [`GroupCoordinator::begin_offset_commit`] decided: the answer's codes, the records to
/// write, and the token to complete once they are written.
#[derive(Debug)]
pub struct OffsetCommit {
    pub code: i16,
    pub codes: PartitionCodes,
    pub records: Vec<OffsetsRecord>,
    pub token: u64,
}

impl GroupCoordinator {
    /// OffsetCommit. Returns a group-level code (non-zero when every partition failed for the
    /// same group-level reason: 22, 25, 27, 82, 24), the per-partition codes (always one per
    /// requested partition, in order; 12 OFFSET_METADATA_TOO_LARGE is per partition) and the
    /// records to append before answering.
    ///
    /// A commit with generation < 0 is a "simple" commit: accepted when the group is unknown
    /// (an Empty group is created for it) or Empty; otherwise the group's membership rules
    /// apply (Kafka's `doCommitOffsets` order: fenced 82, simple, unknown member 25, wrong
    /// generation 22, CompletingRebalance 27). Commits during PreparingRebalance from the
    /// current generation are accepted: the member learns of the rebalance by heartbeat.
    ///
    /// `max_batch_bytes` is the offsets partition's `max.message.bytes`: a commit whose records
    /// would not fit one batch stores nothing and its valid partitions get 28
    /// INVALID_COMMIT_OFFSET_SIZE (Kafka's `GroupMetadataManager.storeOffsets` maps the
    /// append's RecordTooLarge to it), a final answer instead of a retriable failure.
    ///
    /// The offsets become pending under the returned token; the shell completes it with
    /// [`Self::complete_offset_commit`] once the records are written (or failed).
    pub fn begin_offset_commit(
        &mut self,
        now_ms: i64,
        req: &OffsetCommitRequest,
        max_batch_bytes: usize,
    ) -> OffsetCommit {
        let token = self.take_commit_token();
        let (code, codes, records, accepted) =
            self.commit_inner(now_ms, req, max_batch_bytes, token);
        if !accepted.is_empty() {
            if let Some(g) = self.groups.get_mut(&req.group_id) {
                for (tp, _) in &accepted {
                    g.pending_offsets.insert(tp.clone(), token);
                }
            }
            let commit = InflightCommit {
                group_id: req.group_id.clone(),
                offsets: accepted,
            };
            self.inflight_commits.insert(token, commit);
        }
        self.debug_check();
        OffsetCommit {
            code,
            codes,
            records,
            token,
        }
    }

    /// The write of commit `token` finished: if `written`, its offsets become the committed
    /// ones (unless a later commit of the same partition completed first, or the offsets
    /// were deleted meanwhile: Kafka's `onOffsetCommitAppend`); either way they stop being
    /// pending. Unknown tokens (a reloaded coordinator) are ignored.
    pub fn complete_offset_commit(&mut self, token: u64, written: bool) {
        if self.complete_txn_offset_write(token, written) {
            return;
        }
        let Some(commit) = self.inflight_commits.remove(&token) else {
            return;
        };
        let Some(g) = self.groups.get_mut(&commit.group_id) else {
            return;
        };
        for (tp, stored) in commit.offsets {
            let Some(latest) = g.pending_offsets.get(&tp).copied() else {
                continue;
            };
            if latest == token {
                g.pending_offsets.remove(&tp);
            }
            if written {
                g.offsets.insert(tp, stored);
            }
        }
        self.debug_check();
    }

    /// [`Self::begin_offset_commit`] and its completion as written at once: for callers whose
    /// records are durable when this returns (tests of the coordinator's rules).
    pub fn commit_offsets(
        &mut self,
        now_ms: i64,
        req: &OffsetCommitRequest,
        max_batch_bytes: usize,
    ) -> (i16, PartitionCodes, Vec<OffsetsRecord>) {
        let commit = self.begin_offset_commit(now_ms, req, max_batch_bytes);
        self.complete_offset_commit(commit.token, true);
        (commit.code, commit.codes, commit.records)
    }

    fn commit_inner(
        &mut self,
        now_ms: i64,
        req: &OffsetCommitRequest,
        max_batch_bytes: usize,
        token: u64,
    ) -> CommitParts {
        let all = |code: i16| {
            let codes = req
                .offsets
                .iter()
                .map(|o| (o.topic.clone(), o.partition, code))
                .collect();
            (code, codes, Vec::new(), Vec::new())
        };
        // Kafka accepts an empty group id here (for backward compatibility); it must still
        // fit the record key.
        if !fits_int16_string(&req.group_id) {
            return all(INVALID_GROUP_ID);
        }
        if !self.groups.contains_key(&req.group_id) {
            if req.generation_id >= 0 {
                return all(ILLEGAL_GENERATION);
            }
            self.groups.insert(
                req.group_id.clone(),
                Group::new(req.group_id.clone(), now_ms),
            );
        }
        let cfg = &self.config;
        let Some(g) = self.groups.get_mut(&req.group_id) else {
            return all(ILLEGAL_GENERATION);
        };
        if g.is_static_member_fenced(&req.member_id, req.group_instance_id.as_deref()) {
            return all(FENCED_INSTANCE_ID);
        }
        if req.generation_id < 0 && g.is(GroupState::Empty) {
            let (codes, records, accepted) =
                store_offsets(cfg, g, now_ms, &req.offsets, max_batch_bytes, token);
            return (NONE, codes, records, accepted);
        }
        let generation = g.generation;
        let state = g.state;
        let Some(m) = g.members.get_mut(&req.member_id) else {
            return all(UNKNOWN_MEMBER_ID);
        };
        if req.generation_id != generation {
            return all(ILLEGAL_GENERATION);
        }
        match state {
            GroupState::Stable | GroupState::PreparingRebalance => {
                m.refresh_session(now_ms);
                let (codes, records, accepted) =
                    store_offsets(cfg, g, now_ms, &req.offsets, max_batch_bytes, token);
                (NONE, codes, records, accepted)
            }
            GroupState::CompletingRebalance => all(REBALANCE_IN_PROGRESS),
            // A group with members is never Empty or Dead.
            GroupState::Empty | GroupState::Dead => all(UNKNOWN_MEMBER_ID),
        }
    }

    /// OffsetFetch: the committed offsets of the listed partitions (None = not committed), or
    /// of every committed partition when `partitions` is None. Unknown groups have none.
    /// Results follow the request order (sorted by topic and partition for "all").
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<&[(String, Vec<i32>)]>,
    ) -> (i16, Vec<(String, i32, Option<CommittedOffset>)>) {
        let group = self.groups.get(group_id);
        let result = match partitions {
            None => group
                .map(|g| {
                    g.offsets
                        .iter()
                        .map(|((t, p), o)| (t.clone(), *p, Some(o.committed.clone())))
                        .collect()
                })
                .unwrap_or_default(),
            Some(topics) => topics
                .iter()
                .flat_map(|(t, ps)| ps.iter().map(move |p| (t, *p)))
                .map(|(t, p)| {
                    let committed = group
                        .and_then(|g| g.offsets.get(&(t.clone(), p)))
                        .map(|o| o.committed.clone());
                    (t.clone(), p, committed)
                })
                .collect(),
        };
        (NONE, result)
    }

    /// OffsetDelete (API 47). Group-level errors: 24 (empty id), 69 (unknown group), 68 (a
    /// non-consumer group with members). For a "consumer" group with members, partitions of
    /// topics some member subscribes to get 86 and are kept; the rest are deleted (tombstones
    /// returned). Deleting the last offsets of an Empty group deletes the group too.
    pub fn delete_offsets(
        &mut self,
        group_id: &str,
        partitions: &[(String, Vec<i32>)],
    ) -> (i16, PartitionCodes, Vec<OffsetsRecord>) {
        if group_id.is_empty() {
            return (INVALID_GROUP_ID, Vec::new(), Vec::new());
        }
        let Some(g) = self.groups.get_mut(group_id) else {
            return (GROUP_ID_NOT_FOUND, Vec::new(), Vec::new());
        };
        let requested: Vec<(String, i32)> = partitions
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
            .collect();
        let subscribed = |g: &Group, topic: &str| match g.state {
            GroupState::Empty => false,
            _ => g.is_subscribed_to_topic(topic),
        };
        let is_consumer = g.protocol_type.as_deref() == Some(CONSUMER_PROTOCOL_TYPE);
        if !g.is(GroupState::Empty) && !is_consumer {
            return (NON_EMPTY_GROUP, Vec::new(), Vec::new());
        }
        let codes: PartitionCodes = requested
            .iter()
            .map(|(t, p)| {
                let code = if subscribed(g, t) {
                    GROUP_SUBSCRIBED_TO_TOPIC
                } else {
                    NONE
                };
                (t.clone(), *p, code)
            })
            .collect();
        let eligible: Vec<(String, i32)> = codes
            .iter()
            .filter(|(_, _, c)| *c == NONE)
            .map(|(t, p, _)| (t.clone(), *p))
            .collect();
        let mut records = Vec::new();
        if !eligible.is_empty() {
            let dead = cleanup_group(g, |g| remove_offsets(g, &eligible), &mut records);
            if dead && g.pending.is_empty() {
                self.remove_dead_group(group_id, &mut records);
            }
        }
        self.debug_check();
        (NONE, codes, records)
    }

    /// KIP-211 expiry over every group (Kafka's `cleanupGroupMetadata`): offsets of an Empty
    /// group expire `offsets_retention_ms` after it became Empty; offsets of a Stable consumer
    /// group expire that long after their commit if no member subscribes to the topic; simple
    /// commits (no protocol type) expire that long after their commit; value-v1 offsets at
    /// their explicit expire timestamp. An Empty group left with no offsets (and no pending
    /// joiners) is deleted. Returns the tombstones.
    pub(super) fn expire_offsets(&mut self, now_ms: i64) -> Vec<OffsetsRecord> {
        let retention = self.config.offsets_retention_ms;
        let mut records = Vec::new();
        let mut dead = Vec::new();
        for (id, g) in self.groups.iter_mut() {
            let is_dead = cleanup_group(
                g,
                |g| {
                    let expired = expired_offsets(g, now_ms, retention);
                    remove_offsets(g, &expired)
                },
                &mut records,
            );
            if is_dead && g.pending.is_empty() {
                dead.push(id.clone());
            }
        }
        for id in dead {
            self.remove_dead_group(&id, &mut records);
        }
        records
    }

    /// Drops a group whose state is gone, with the group tombstone if it ever had a
    /// generation (a group used only for offset storage never had a metadata record).
    pub(super) fn remove_dead_group(&mut self, group_id: &str, records: &mut Vec<OffsetsRecord>) {
        if let Some(g) = self.groups.remove(group_id) {
            debug_assert!(g.is(GroupState::Empty));
            if g.generation > 0 {
                records.push(OffsetsRecord {
                    key: codec::group_key(group_id),
                    value: None,
                });
            }
        }
    }
}

/// Validates and stores offsets: 17 for a topic name that cannot be keyed, 12 for metadata
/// longer than `offset.metadata.max.bytes` (UTF-16 units, like Java's `String.length`), and
/// 28 for every valid partition when their records exceed `max_batch_bytes` (nothing stored).
pub(super) fn store_offsets(
    cfg: &GroupConfig,
    g: &Group,
    now_ms: i64,
    offsets: &[CommitOffset],
    max_batch_bytes: usize,
    token: u64,
) -> (PartitionCodes, Vec<OffsetsRecord>, AcceptedOffsets) {
    let mut codes = Vec::with_capacity(offsets.len());
    let mut records = Vec::new();
    let mut accepted = Vec::new();
    for o in offsets {
        let metadata = o.metadata.as_deref().unwrap_or("");
        let code = if !fits_int16_string(&o.topic) {
            INVALID_TOPIC_EXCEPTION
        } else if !fits_int16_string(metadata)
            || metadata.encode_utf16().count() > cfg.offset_metadata_max_bytes
        {
            OFFSET_METADATA_TOO_LARGE
        } else {
            let committed = CommittedOffset {
                offset: o.offset,
                leader_epoch: o.leader_epoch,
                metadata: metadata.to_owned(),
                commit_timestamp: now_ms,
            };
            records.push(OffsetsRecord {
                key: codec::offset_key(&g.id, &o.topic, o.partition),
                value: Some(codec::offset_value(&committed)),
            });
            accepted.push((codes.len(), committed));
            NONE
        };
        codes.push((o.topic.clone(), o.partition, code));
    }
    if record_batch_size(&records) > max_batch_bytes {
        for (i, _) in accepted {
            codes[i].2 = INVALID_COMMIT_OFFSET_SIZE;
        }
        return (codes, Vec::new(), Vec::new());
    }
    let accepted = accepted
        .into_iter()
        .map(|(i, committed)| {
            let o = &offsets[i];
            let stored = StoredOffset {
                committed,
                expire_timestamp: None,
                position: token,
            };
            ((o.topic.clone(), o.partition), stored)
        })
        .collect();
    (codes, records, accepted)
}

/// Which offsets of `g` have expired at `now_ms` (Kafka's `removeExpiredOffsets`).
fn expired_offsets(g: &Group, now_ms: i64, retention_ms: i64) -> Vec<(String, i32)> {
    let expired = |o: &StoredOffset, base: i64| match o.expire_timestamp {
        None => now_ms.saturating_sub(base) >= retention_ms,
        Some(at) => now_ms >= at,
    };
    let empty = g.is(GroupState::Empty);
    let select = |f: &dyn Fn(&(String, i32), &StoredOffset) -> bool| -> Vec<(String, i32)> {
        g.offsets
            .iter()
            .filter(|(k, o)| f(k, o))
            .map(|(k, _)| k.clone())
            .collect()
    };
    match g.protocol_type.as_deref() {
        Some(_) if empty => {
            select(&|_, o| expired(o, g.state_timestamp.unwrap_or(o.committed.commit_timestamp)))
        }
        Some(CONSUMER_PROTOCOL_TYPE) => match &g.subscribed_topics {
            Some(topics) => {
                select(&|(t, _), o| !topics.contains(t) && expired(o, o.committed.commit_timestamp))
            }
            None => Vec::new(),
        },
        None => select(&|_, o| expired(o, o.committed.commit_timestamp)),
        Some(_) => Vec::new(),
    }
}

/// Removes the given offsets, returning how many were present.
/// A pending commit of a removed partition is dropped too (and gets its tombstone, since its
/// record may already be in the log), so its completion cannot bring the offset back.
fn remove_offsets(g: &mut Group, partitions: &[(String, i32)]) -> Vec<(String, i32)> {
    partitions
        .iter()
        .filter(|k| {
            let pending = g.pending_offsets.remove(*k).is_some();
            // Kafka's `removeOffsets` drops the partition's transactional offsets too.
            let mut pending_txn = false;
            for offsets in g.pending_txn_offsets.values_mut() {
                pending_txn |= offsets.remove(*k).is_some();
            }
            g.pending_txn_offsets.retain(|_, o| !o.is_empty());
            g.offsets.remove(*k).is_some() || pending || pending_txn
        })
        .cloned()
        .collect()
}

/// Kafka's `cleanupGroupMetadata` for one group: run `selector` to remove offsets, write
/// their tombstones, and report whether the group is now dead (Empty without offsets); the
/// caller then removes it with `remove_dead_group`.
fn cleanup_group(
    g: &mut Group,
    selector: impl FnOnce(&mut Group) -> Vec<(String, i32)>,
    records: &mut Vec<OffsetsRecord>,
) -> bool {
    for (t, p) in selector(g) {
        records.push(OffsetsRecord {
            key: codec::offset_key(&g.id, &t, p),
            value: None,
        });
    }
    g.is(GroupState::Empty)
        && g.offsets.is_empty()
        && g.pending_offsets.is_empty()
        && g.pending_txn_offsets.is_empty()
}
