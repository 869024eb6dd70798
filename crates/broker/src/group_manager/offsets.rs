//! OffsetCommit and TxnOffsetCommit (stored by the pure coordinator, answered once replicated),
//! OffsetFetch, OffsetDelete and the transaction markers that complete pending offsets.

use runnel_group::{OffsetCommitRequest, TxnOffsetCommitRequest};
use tokio::sync::oneshot;

use super::*;

impl GroupManager {
    /// OffsetCommit: validated and stored by the pure coordinator (within the partition's
    /// `max.message.bytes`), answered once its records are replicated.
    pub(super) fn commit(
        &mut self,
        now: i64,
        mut req: OffsetCommitRequest,
        reply: oneshot::Sender<(i16, PartitionCodes)>,
    ) {
        let all = |req: &OffsetCommitRequest, code: i16| -> (i16, PartitionCodes) {
            let codes = req
                .offsets
                .iter()
                .map(|o| (o.topic.clone(), o.partition, code))
                .collect();
            (code, codes)
        };
        let p = match self.route(&req.group_id) {
            Ok(p) => p,
            Err(code) => {
                let _ = reply.send(all(&req, code));
                return;
            }
        };
        if let Some(groups) = self
            .consumer_groups
            .get(&p)
            .filter(|g| g.contains(&req.group_id))
        {
            // A KIP-848 member commits with its member epoch; once it checks out, the offsets
            // are stored the same way as a simple commit.
            if let Err(code) =
                groups.is_member_epoch_valid(&req.group_id, &req.member_id, req.generation_id)
            {
                let _ = reply.send(all(&req, code));
                return;
            }
            req.generation_id = -1;
            req.member_id.clear();
            req.group_instance_id = None;
        }
        let Some(max_batch_bytes) = self.max_batch_bytes(p) else {
            let _ = reply.send(all(&req, NOT_COORDINATOR));
            return;
        };
        let commit = self
            .coordinator(p)
            .begin_offset_commit(now, &req, max_batch_bytes);
        let (code, codes, token) = (commit.code, commit.codes, commit.token);
        let written = self.persist(p, commit.records);
        self.when_commit_written(
            p,
            written,
            token,
            Box::new(move |err| {
                let _ = reply.send((code, with_write_error(codes, err)));
            }),
        );
    }

    /// TxnOffsetCommit: validated by the pure coordinator, its records appended as one
    /// transactional batch of the producer, answered once replicated; the offsets stay
    /// pending until the transaction's marker ([`Command::TxnCompleted`]).
    pub(super) fn txn_commit(
        &mut self,
        now: i64,
        mut req: TxnOffsetCommitRequest,
        reply: oneshot::Sender<PartitionCodes>,
    ) {
        let all = |req: &TxnOffsetCommitRequest, code: i16| -> PartitionCodes {
            req.offsets
                .iter()
                .map(|o| (o.topic.clone(), o.partition, code))
                .collect()
        };
        let p = match self.route(&req.group_id) {
            Ok(p) => p,
            Err(code) => {
                let _ = reply.send(all(&req, code));
                return;
            }
        };
        if let Err(code) = self.check_txn_member(p, &mut req) {
            let _ = reply.send(all(&req, code));
            return;
        }
        let Some(max_batch_bytes) = self.max_batch_bytes(p) else {
            let _ = reply.send(all(&req, NOT_COORDINATOR));
            return;
        };
        let commit = self
            .coordinator(p)
            .begin_txn_offset_commit(now, &req, max_batch_bytes);
        let (codes, token) = (commit.codes, commit.token);
        let producer = (req.producer_id, req.producer_epoch);
        let written = self.persist_as(p, commit.records, Some(producer));
        self.when_commit_written(
            p,
            written,
            token,
            Box::new(move |err| {
                let _ = reply.send(with_write_error(codes, err));
            }),
        );
    }

    /// A TxnOffsetCommit to a KIP-848 group: a request naming a member is checked against its
    /// member epoch (a stale one is ILLEGAL_GENERATION for TxnOffsetCommit, as in Kafka); then
    /// the member is taken off the request, whose offsets are stored like a simple commit's.
    fn check_txn_member(
        &self,
        partition: i32,
        req: &mut TxnOffsetCommitRequest,
    ) -> Result<(), i16> {
        let Some(groups) = self
            .consumer_groups
            .get(&partition)
            .filter(|g| g.contains(&req.group_id))
        else {
            return Ok(());
        };
        let names_member = req.generation_id >= 0 || !req.member_id.is_empty();
        if names_member {
            groups
                .is_member_epoch_valid(&req.group_id, &req.member_id, req.generation_id)
                .map_err(|code| {
                    if code == STALE_MEMBER_EPOCH {
                        runnel_group::errors::ILLEGAL_GENERATION
                    } else {
                        code
                    }
                })?;
        }
        req.generation_id = -1;
        req.member_id.clear();
        req.group_instance_id = None;
        Ok(())
    }

    /// OffsetFetch: a KIP-848 member (v9+) is checked first, then the classic coordinator,
    /// which holds every group's offsets, answers.
    pub(super) fn fetch_offsets(
        &mut self,
        group_id: &str,
        partitions: Option<Vec<(String, Vec<i32>)>>,
        require_stable: bool,
        member: Option<FetchMember>,
    ) -> FetchResult {
        let p = match self.route(group_id) {
            Ok(p) => p,
            Err(code) => return (code, Vec::new()),
        };
        let checked = member.map_or(Ok(()), |(id, epoch)| {
            self.consumer_groups_of(p)
                .validate_offset_fetch(group_id, id.as_deref(), epoch)
        });
        match checked {
            Ok(()) => self.coordinator(p).fetch_offsets_stable(
                group_id,
                partitions.as_deref(),
                require_stable,
            ),
            Err(code) => (code, Vec::new()),
        }
    }

    /// OffsetDelete: decided by the classic coordinator, answered once its tombstones are
    /// replicated (or with the error their write failed with).
    pub(super) fn delete_offsets(
        &mut self,
        group_id: String,
        partitions: Vec<(String, Vec<i32>)>,
        reply: oneshot::Sender<(i16, PartitionCodes)>,
    ) {
        let p = match self.route(&group_id) {
            Ok(p) => p,
            Err(code) => {
                let _ = reply.send((code, Vec::new()));
                return;
            }
        };
        let (code, codes, records) = self.coordinator(p).delete_offsets(&group_id, &partitions);
        let written = self.persist(p, records);
        self.when_written(
            p,
            written,
            Box::new(move |err| {
                let code = if err != 0 { err } else { code };
                let _ = reply.send((code, codes));
            }),
        );
    }

    /// A transaction marker replicated on `partition`: the producer's pending offsets are
    /// committed or dropped. Returns how many offsets it completed.
    pub(super) fn txn_completed(
        &mut self,
        partition: i32,
        producer_id: i64,
        commit: bool,
    ) -> usize {
        self.coordinators
            .get_mut(&partition)
            .map_or(0, |c| c.complete_transaction(producer_id, commit))
    }

    /// The `max.message.bytes` of a `__consumer_offsets` partition hosted here.
    pub(super) fn max_batch_bytes(&self, partition: i32) -> Option<usize> {
        let p = self.replicas.get(OFFSETS_TOPIC, partition)?;
        let max = p.role().config.max_message_bytes;
        Some(usize::try_from(max).unwrap_or(0))
    }
}

/// The codes of a commit once its write is done: `err` (the write failed) replaces the
/// partitions' successes, their own errors stand.
fn with_write_error(mut codes: PartitionCodes, err: i16) -> PartitionCodes {
    if err != 0 {
        for c in codes.iter_mut().filter(|c| c.2 == 0) {
            c.2 = err;
        }
    }
    codes
}
