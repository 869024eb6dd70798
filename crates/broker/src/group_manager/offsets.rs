//! OffsetCommit and TxnOffsetCommit: stored by the pure coordinator, answered once replicated.

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
                let mut codes = codes;
                if err != 0 {
                    for c in &mut codes {
                        if c.2 == 0 {
                            c.2 = err;
                        }
                    }
                }
                let _ = reply.send((code, codes));
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
        if let Some(groups) = self
            .consumer_groups
            .get(&p)
            .filter(|g| g.contains(&req.group_id))
        {
            // A KIP-848 group: a request naming a member is checked against its member epoch
            // (a stale one is ILLEGAL_GENERATION for TxnOffsetCommit, as in Kafka); then the
            // offsets are stored like a simple commit's.
            let names_member = req.generation_id >= 0 || !req.member_id.is_empty();
            if names_member {
                if let Err(code) =
                    groups.is_member_epoch_valid(&req.group_id, &req.member_id, req.generation_id)
                {
                    let code = if code == STALE_MEMBER_EPOCH {
                        runnel_group::errors::ILLEGAL_GENERATION
                    } else {
                        code
                    };
                    let _ = reply.send(all(&req, code));
                    return;
                }
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
            .begin_txn_offset_commit(now, &req, max_batch_bytes);
        let (codes, token) = (commit.codes, commit.token);
        let producer = (req.producer_id, req.producer_epoch);
        let written = self.persist_as(p, commit.records, Some(producer));
        self.when_commit_written(
            p,
            written,
            token,
            Box::new(move |err| {
                let mut codes = codes;
                if err != 0 {
                    for c in &mut codes {
                        if c.2 == 0 {
                            c.2 = err;
                        }
                    }
                }
                let _ = reply.send(codes);
            }),
        );
    }

    /// The `max.message.bytes` of a `__consumer_offsets` partition hosted here.
    pub(super) fn max_batch_bytes(&self, partition: i32) -> Option<usize> {
        let p = self.replicas.get(OFFSETS_TOPIC, partition)?;
        let max = p.role().config.max_message_bytes;
        Some(usize::try_from(max).unwrap_or(0))
    }
}
