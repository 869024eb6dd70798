//! Transactional offsets (KIP-98, Kafka's `GroupCoordinator.handleTxnCommitOffsets` and the
//! 4.x `OffsetMetadataManager.commitTransactionalOffset`): a TxnOffsetCommit is validated like
//! an OffsetCommit with the transactional rules, its records go to the log in the producer's
//! transactional batch, and its offsets stay *pending per producer id*, invisible to
//! OffsetFetch, until the transaction's marker reaches the group's `__consumer_offsets`
//! partition: COMMIT materializes them (over an older committed offset only), ABORT drops
//! them. OffsetFetch with `require_stable` answers UNSTABLE_OFFSET_COMMIT for a partition
//! with pending transactional offsets.

use std::collections::BTreeMap;

use super::offsets::{store_offsets, OffsetCommit};
use super::GroupCoordinator;
use crate::api::{CommittedOffset, TxnOffsetCommitRequest};
use crate::codec::fits_int16_string;
use crate::errors::*;
use crate::group::{Group, PendingTxnOffset, StoredOffset};
use crate::state::GroupState;

/// A TxnOffsetCommit whose records are being written.
#[derive(Debug)]
pub(crate) struct InflightTxnCommit {
    pub group_id: String,
    pub producer_id: i64,
    pub partitions: Vec<(String, i32)>,
}

/// One partition of an OffsetFetch answer: committed offset (None: none or unstable) and its
/// error code.
pub type FetchedOffset = (String, i32, Option<CommittedOffset>, i16);

impl GroupCoordinator {
    /// TxnOffsetCommit. The answer's codes are one per requested partition, in order (the
    /// API has no group-level code: a group-level failure is every partition's code). The
    /// accepted offsets are pending under the producer id at once (Kafka's
    /// `prepareTxnOffsetCommit`); the shell writes the records as a transactional batch of
    /// that producer and completes the token with [`Self::complete_offset_commit`] (a failed
    /// write drops them again).
    ///
    /// Validation, in Kafka's order: INVALID_GROUP_ID for an empty id; an unknown group is
    /// created for generation < 0, else ILLEGAL_GENERATION; an Empty group accepts generation
    /// < 0; a request naming a member (v3+: generation >= 0, a member id or an instance id)
    /// needs a known member (UNKNOWN_MEMBER_ID), the static owner of its instance id
    /// (FENCED_INSTANCE_ID) and the current generation (ILLEGAL_GENERATION); the older form
    /// (no member) is accepted in any state. Unlike OffsetCommit, CompletingRebalance is no
    /// error. Per partition: 17, 12 and 28 as for OffsetCommit.
    pub fn begin_txn_offset_commit(
        &mut self,
        now_ms: i64,
        req: &TxnOffsetCommitRequest,
        max_batch_bytes: usize,
    ) -> OffsetCommit {
        let token = self.take_commit_token();
        let all = |code: i16| OffsetCommit {
            code,
            codes: req
                .offsets
                .iter()
                .map(|o| (o.topic.clone(), o.partition, code))
                .collect(),
            records: Vec::new(),
            token,
        };
        if req.group_id.is_empty() || !fits_int16_string(&req.group_id) {
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
        if let Err(code) = validate_txn_member(g, req) {
            return all(code);
        }
        let (codes, records, accepted) =
            store_offsets(cfg, g, now_ms, &req.offsets, max_batch_bytes, token);
        if !accepted.is_empty() {
            let pending = g.pending_txn_offsets.entry(req.producer_id).or_default();
            let mut partitions = Vec::with_capacity(accepted.len());
            for (tp, stored) in accepted {
                partitions.push(tp.clone());
                pending.insert(tp, PendingTxnOffset { stored, token });
            }
            self.inflight_txn_commits.insert(
                token,
                InflightTxnCommit {
                    group_id: req.group_id.clone(),
                    producer_id: req.producer_id,
                    partitions,
                },
            );
        }
        self.debug_check();
        OffsetCommit {
            code: NONE,
            codes,
            records,
            token,
        }
    }

    /// The write of TxnOffsetCommit `token` finished (false if `token` is no such write):
    /// written, its offsets wait for the marker; failed, they are dropped unless a later
    /// TxnOffsetCommit of the same producer replaced them (Kafka's
    /// `failPendingTxnOffsetCommit`).
    pub(super) fn complete_txn_offset_write(&mut self, token: u64, written: bool) -> bool {
        let Some(commit) = self.inflight_txn_commits.remove(&token) else {
            return false;
        };
        if written {
            return true;
        }
        if let Some(g) = self.groups.get_mut(&commit.group_id) {
            if let Some(pending) = g.pending_txn_offsets.get_mut(&commit.producer_id) {
                for tp in &commit.partitions {
                    if pending.get(tp).is_some_and(|p| p.token == token) {
                        pending.remove(tp);
                    }
                }
                if pending.is_empty() {
                    g.pending_txn_offsets.remove(&commit.producer_id);
                }
            }
        }
        self.debug_check();
        true
    }

    /// The marker of producer `producer_id`'s transaction reached this coordinator's
    /// partition (Kafka's `handleTxnCompletion`): COMMIT makes its pending offsets the
    /// committed ones, each only over an older committed offset (a plain commit written after
    /// the transactional one wins); ABORT drops them. Every group of the partition is
    /// concerned. Returns how many offsets were materialized.
    pub fn complete_transaction(&mut self, producer_id: i64, commit: bool) -> usize {
        let mut materialized = 0;
        for g in self.groups.values_mut() {
            let Some(pending) = g.pending_txn_offsets.remove(&producer_id) else {
                continue;
            };
            if commit {
                for (tp, p) in pending {
                    materialized += usize::from(materialize(&mut g.offsets, tp, p.stored));
                }
            }
        }
        self.debug_check();
        materialized
    }

    /// OffsetFetch with per-partition codes: [`Self::fetch_offsets`], and with
    /// `require_stable` (v7+) UNSTABLE_OFFSET_COMMIT (and no offset) for every partition
    /// that has pending transactional offsets (Kafka's `hasPendingTransactionalOffsets`).
    pub fn fetch_offsets_stable(
        &self,
        group_id: &str,
        partitions: Option<&[(String, Vec<i32>)]>,
        require_stable: bool,
    ) -> (i16, Vec<FetchedOffset>) {
        let (code, found) = self.fetch_offsets(group_id, partitions);
        let fetched = found
            .into_iter()
            .map(|(t, p, committed)| {
                if require_stable && self.has_pending_txn_offset(group_id, &t, p) {
                    (t, p, None, UNSTABLE_OFFSET_COMMIT)
                } else {
                    (t, p, committed, NONE)
                }
            })
            .collect();
        (code, fetched)
    }

    /// Whether some open transaction holds an offset of `topic`-`partition` for the group.
    pub fn has_pending_txn_offset(&self, group_id: &str, topic: &str, partition: i32) -> bool {
        let key = (topic.to_owned(), partition);
        self.groups.get(group_id).is_some_and(|g| {
            g.pending_txn_offsets
                .values()
                .any(|offsets| offsets.contains_key(&key))
        })
    }

    /// The producer ids with pending transactional offsets in the group, sorted.
    pub fn pending_txn_producers(&self, group_id: &str) -> Vec<i64> {
        self.groups
            .get(group_id)
            .map(|g| g.pending_txn_offsets.keys().copied().collect())
            .unwrap_or_default()
    }
}

/// Stores `stored` as `tp`'s committed offset unless a younger one (later in the log) is
/// there. True if stored.
pub(super) fn materialize(
    offsets: &mut BTreeMap<(String, i32), StoredOffset>,
    tp: (String, i32),
    stored: StoredOffset,
) -> bool {
    match offsets.get(&tp) {
        Some(current) if current.position > stored.position => false,
        _ => {
            offsets.insert(tp, stored);
            true
        }
    }
}

/// Kafka's `ClassicGroup.validateOffsetCommit` with `isTransactional`.
fn validate_txn_member(g: &Group, req: &TxnOffsetCommitRequest) -> Result<(), i16> {
    if g.is(GroupState::Dead) {
        return Err(COORDINATOR_NOT_AVAILABLE);
    }
    if req.generation_id < 0 && g.is(GroupState::Empty) {
        return Ok(());
    }
    if req.generation_id >= 0 || !req.member_id.is_empty() || req.group_instance_id.is_some() {
        if let Some(instance) = req.group_instance_id.as_deref() {
            match g.static_members.get(instance) {
                None => return Err(UNKNOWN_MEMBER_ID),
                Some(owner) if *owner != req.member_id => return Err(FENCED_INSTANCE_ID),
                Some(_) => {}
            }
        }
        if !g.members.contains_key(&req.member_id) {
            return Err(UNKNOWN_MEMBER_ID);
        }
        if req.generation_id != g.generation {
            return Err(ILLEGAL_GENERATION);
        }
    }
    Ok(())
}
