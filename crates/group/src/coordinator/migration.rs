//! The classic half of the online migration (Kafka's `validateOnlineUpgrade` minus the policy,
//! the classic half of `convertToConsumerGroup`, and `ClassicGroup.fromConsumerGroup`): a
//! classic group hands its members over to a new consumer group, or takes over the members a
//! consumer group left. The committed offsets stay here either way (this coordinator holds
//! every group's offsets). [`crate::migration::Shard`] runs both halves as one decision.

use std::collections::BTreeMap;

use super::rebalance::prepare_rebalance;
use super::GroupCoordinator;
use crate::api::{JoinResponse, OffsetsRecord, Output, SyncResponse};
use crate::codec;
use crate::consumer_protocol::{self, TopicPartitions};
use crate::errors::REBALANCE_IN_PROGRESS;
use crate::group::Group;
use crate::member::Member;
use crate::migration::{ConvertedGroup, ConvertedMember};
use crate::state::GroupState;
use crate::subscription::CONSUMER_PROTOCOL_TYPE;

/// What this coordinator held for a group before a conversion, put back if the conversion's
/// records cannot be appended.
#[derive(Debug)]
pub(crate) struct ClassicUndo {
    group_id: String,
    before: Option<Group>,
}

impl GroupCoordinator {
    /// Hands the members of classic group `group_id` over to an upgrade: `Err` (why) unless
    /// the group uses the "consumer" protocol type, has at most `max_size` members (the
    /// consumer groups' cap) and every member's assignment can be read. Then parked joins and
    /// syncs are told REBALANCE_IN_PROGRESS, the group's metadata is tombstoned (returned
    /// records) and only its offsets stay here.
    pub(crate) fn take_for_upgrade(
        &mut self,
        now_ms: i64,
        group_id: &str,
        max_size: usize,
    ) -> Result<(ConvertedGroup, Vec<Output>, Vec<OffsetsRecord>, ClassicUndo), String> {
        let g = self
            .groups
            .get_mut(group_id)
            .ok_or("the classic group does not exist")?;
        if g.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) {
            return Err("the group does not use the consumer embedded protocol".into());
        }
        if g.members.len() > max_size {
            return Err("the group size exceeds the consumer group maximum size".into());
        }
        let mut members = Vec::with_capacity(g.members.len());
        for m in g.members.values() {
            let assignment = consumer_protocol::decode_assignment(&m.assignment)
                .map_err(|_| "the embedded consumer protocol is malformed".to_string())?;
            members.push(converted_member(m, assignment));
        }
        let converted = ConvertedGroup {
            group_id: group_id.to_string(),
            generation: g.generation,
            protocol_name: g.protocol_name.clone(),
            members,
        };
        let mut out = Vec::new();
        for m in g.members.values_mut() {
            if let Some(r) = m.awaiting_join.take() {
                let answer = JoinResponse::error(m.id.clone(), REBALANCE_IN_PROGRESS);
                out.push(Output::Join(r, answer));
            }
            if let Some(r) = m.awaiting_sync.take() {
                out.push(Output::Sync(r, SyncResponse::error(REBALANCE_IN_PROGRESS)));
            }
        }
        let before = self.groups.remove(group_id);
        if let Some(offsets) = before.as_ref().and_then(|b| offsets_only(b, now_ms)) {
            self.groups.insert(group_id.to_string(), offsets);
        }
        let tombstone = OffsetsRecord {
            key: codec::group_key(group_id),
            value: None,
        };
        let undo = ClassicUndo {
            group_id: group_id.to_string(),
            before,
        };
        self.debug_check();
        Ok((converted, out, vec![tombstone], undo))
    }

    /// Takes over the members a consumer group left behind (Kafka's `fromConsumerGroup` and
    /// `convertToClassicGroup`): a Stable group at the consumer group's epoch whose members
    /// own their target assignments (written in their subscription's version), its metadata
    /// record returned, then a rebalance so they join as classic members. Offsets already
    /// held for the group stay.
    pub(crate) fn adopt_downgraded(
        &mut self,
        now_ms: i64,
        converted: ConvertedGroup,
    ) -> (Vec<OffsetsRecord>, Vec<Output>, ClassicUndo) {
        let id = converted.group_id.clone();
        let before = self.groups.remove(&id);
        let mut g = match before.as_ref().and_then(|b| offsets_only(b, now_ms)) {
            Some(g) => g,
            None => Group::new(id.clone(), now_ms),
        };
        g.generation = converted.generation;
        g.protocol_type = Some(CONSUMER_PROTOCOL_TYPE.to_string());
        let mut assignments: BTreeMap<String, TopicPartitions> = BTreeMap::new();
        for c in converted.members {
            assignments.insert(c.id.clone(), c.assignment);
            let mut m = Member {
                id: c.id,
                instance_id: c.instance_id,
                client_id: c.client_id,
                client_host: c.client_host,
                rebalance_timeout_ms: c.rebalance_timeout_ms,
                session_timeout_ms: c.session_timeout_ms,
                protocol_type: CONSUMER_PROTOCOL_TYPE.to_string(),
                protocols: crate::member::dedup_protocols(&c.protocols),
                assignment: bytes::Bytes::new(),
                awaiting_join: None,
                awaiting_sync: None,
                is_new: false,
                deadline_ms: 0,
                join_seq: 0,
            };
            m.refresh_session(now_ms);
            g.add(m);
        }
        let protocol = g.select_protocol().unwrap_or_default();
        for m in g.members.values_mut() {
            let version =
                consumer_protocol::subscription_version(&m.metadata(&protocol)).unwrap_or(0);
            let partitions = assignments.remove(&m.id).unwrap_or_default();
            m.assignment = consumer_protocol::encode_assignment(version, &partitions);
        }
        g.protocol_name = Some(protocol);
        g.subscribed_topics = g.compute_subscribed_topics();
        g.state = GroupState::Stable;
        g.state_timestamp = Some(now_ms);
        let record = g.metadata_record();
        let mut out = Vec::new();
        prepare_rebalance(&self.config, &mut g, now_ms, &mut out);
        self.groups.insert(id.clone(), g);
        self.debug_check();
        let undo = ClassicUndo {
            group_id: id,
            before,
        };
        (vec![record], out, undo)
    }

    /// Puts a group back as it was before a conversion whose records were not appended.
    pub(crate) fn restore(&mut self, undo: ClassicUndo) {
        match undo.before {
            Some(g) => self.groups.insert(undo.group_id, g),
            None => self.groups.remove(&undo.group_id),
        };
        self.debug_check();
    }
}

/// The group without its members: what stays of it here once a consumer group has them (its
/// committed, pending and transactional offsets); `None` when there is nothing to keep.
fn offsets_only(g: &Group, now_ms: i64) -> Option<Group> {
    if g.offsets.is_empty() && g.pending_offsets.is_empty() && g.pending_txn_offsets.is_empty() {
        return None;
    }
    let mut kept = Group::new(g.id.clone(), now_ms);
    kept.offsets = g.offsets.clone();
    kept.pending_offsets = g.pending_offsets.clone();
    kept.pending_txn_offsets = g.pending_txn_offsets.clone();
    Some(kept)
}

fn converted_member(m: &Member, assignment: TopicPartitions) -> ConvertedMember {
    ConvertedMember {
        id: m.id.clone(),
        instance_id: m.instance_id.clone(),
        client_id: m.client_id.clone(),
        client_host: m.client_host.clone(),
        rebalance_timeout_ms: m.rebalance_timeout_ms,
        session_timeout_ms: m.session_timeout_ms,
        protocols: m.protocols.clone(),
        assignment,
    }
}
