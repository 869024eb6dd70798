//! KIP-848 group state as `__consumer_offsets` records, in Kafka's formats (the
//! `ConsumerGroup*Key` / `*Value` schemas of Kafka's group coordinator, written as
//! `GroupCoordinatorRecordHelpers` does), so a coordinator failover or restart rebuilds the
//! groups instead of making every member rejoin.
//!
//! | key version | key                                   | value (flexible v0)                          |
//! |-------------|---------------------------------------|----------------------------------------------|
//! | 3           | ConsumerGroupMetadataKey (group)      | group epoch                                  |
//! | 4           | ConsumerGroupPartitionMetadataKey     | subscribed topics: id, name, partitions      |
//! | 5           | ConsumerGroupMemberMetadataKey (+member) | instance/rack/client ids, subscription, rebalance timeout, assignor; tag 0: a classic member's session timeout and protocols |
//! | 6           | ConsumerGroupTargetAssignmentMetadataKey | assignment epoch                          |
//! | 7           | ConsumerGroupTargetAssignmentMemberKey (+member) | the member's target partitions    |
//! | 8           | ConsumerGroupCurrentMemberAssignmentKey (+member) | member epoch, previous epoch, state, assigned and pending-revocation partitions |
//!
//! Keys are non-flexible (int16 version, int16-length strings); values start with an int16
//! version (0) followed by the flexible encoding (compact strings and arrays, tagged fields).
//! A member that goes is tombstoned (current assignment, target, metadata, in Kafka's order);
//! a deleted group additionally tombstones its target epoch, partition metadata and epoch.
//!
//! The records of a decision are the difference between the group's durable projection
//! ([`DurableGroup`]) before and after it, so "what the log holds" is defined once and the
//! loader (`ConsumerGroups::load`) rebuilds exactly that projection. Session and revocation
//! deadlines are soft state (restarted from the load time, as Kafka reschedules its timers on
//! load); resolved regexes are recomputed on load.
//!
//! Decoding never panics and never allocates more than the bytes present: every length is
//! checked against the bytes left.

use std::collections::{BTreeMap, BTreeSet};

use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

use super::api::Assignment;
use super::group::ConsumerGroup;
use super::member::{Member, MemberState};
use crate::api::OffsetsRecord;
use crate::codec::{put_str, CodecError, Reader};

/// `ConsumerGroupMetadataKey` version.
pub const GROUP_METADATA_KEY_VERSION: i16 = 3;
/// `ConsumerGroupPartitionMetadataKey` version.
pub const PARTITION_METADATA_KEY_VERSION: i16 = 4;
/// `ConsumerGroupMemberMetadataKey` version.
pub const MEMBER_METADATA_KEY_VERSION: i16 = 5;
/// `ConsumerGroupTargetAssignmentMetadataKey` version.
pub const TARGET_METADATA_KEY_VERSION: i16 = 6;
/// `ConsumerGroupTargetAssignmentMemberKey` version.
pub const TARGET_MEMBER_KEY_VERSION: i16 = 7;
/// `ConsumerGroupCurrentMemberAssignmentKey` version.
pub const CURRENT_ASSIGNMENT_KEY_VERSION: i16 = 8;
/// `ConsumerGroupRegularExpressionKey` (Kafka 4.0): not written by Runnel (regexes are
/// resolved again on load), skipped when read.
pub const REGULAR_EXPRESSION_KEY_VERSION: i16 = 16;
/// Every value above is version 0.
const VALUE_VERSION: i16 = 0;

/// Whether `key` is a KIP-848 consumer-group record (key versions 3..=8 and 16), which the
/// classic loader leaves to [`ConsumerGroups::load`](super::ConsumerGroups::load).
pub fn is_consumer_group_key(key: &[u8]) -> bool {
    match key {
        [a, b, ..] => {
            let v = i16::from_be_bytes([*a, *b]);
            (GROUP_METADATA_KEY_VERSION..=CURRENT_ASSIGNMENT_KEY_VERSION).contains(&v)
                || v == REGULAR_EXPRESSION_KEY_VERSION
        }
        _ => false,
    }
}

/// A decoded consumer-group record key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerGroupKey {
    Metadata {
        group: String,
    },
    PartitionMetadata {
        group: String,
    },
    MemberMetadata {
        group: String,
        member: String,
    },
    TargetMetadata {
        group: String,
    },
    TargetMember {
        group: String,
        member: String,
    },
    CurrentAssignment {
        group: String,
        member: String,
    },
    /// Key version 16, not used by Runnel.
    RegularExpression,
}

impl ConsumerGroupKey {
    fn version(&self) -> i16 {
        match self {
            ConsumerGroupKey::Metadata { .. } => GROUP_METADATA_KEY_VERSION,
            ConsumerGroupKey::PartitionMetadata { .. } => PARTITION_METADATA_KEY_VERSION,
            ConsumerGroupKey::MemberMetadata { .. } => MEMBER_METADATA_KEY_VERSION,
            ConsumerGroupKey::TargetMetadata { .. } => TARGET_METADATA_KEY_VERSION,
            ConsumerGroupKey::TargetMember { .. } => TARGET_MEMBER_KEY_VERSION,
            ConsumerGroupKey::CurrentAssignment { .. } => CURRENT_ASSIGNMENT_KEY_VERSION,
            ConsumerGroupKey::RegularExpression => REGULAR_EXPRESSION_KEY_VERSION,
        }
    }

    /// The key bytes (int16 version, then the int16-length strings).
    pub fn encode(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(32);
        b.put_i16(self.version());
        match self {
            ConsumerGroupKey::Metadata { group }
            | ConsumerGroupKey::PartitionMetadata { group }
            | ConsumerGroupKey::TargetMetadata { group } => put_str(&mut b, group),
            ConsumerGroupKey::MemberMetadata { group, member }
            | ConsumerGroupKey::TargetMember { group, member }
            | ConsumerGroupKey::CurrentAssignment { group, member } => {
                put_str(&mut b, group);
                put_str(&mut b, member);
            }
            ConsumerGroupKey::RegularExpression => {}
        }
        b.freeze()
    }

    /// Decodes a key of versions 3..=8 or 16 (`UnsupportedVersion` for any other).
    pub fn decode(b: &[u8]) -> Result<Self, CodecError> {
        let mut r = Reader::new(b);
        let key = match r.i16()? {
            GROUP_METADATA_KEY_VERSION => ConsumerGroupKey::Metadata { group: r.string()? },
            PARTITION_METADATA_KEY_VERSION => {
                ConsumerGroupKey::PartitionMetadata { group: r.string()? }
            }
            MEMBER_METADATA_KEY_VERSION => ConsumerGroupKey::MemberMetadata {
                group: r.string()?,
                member: r.string()?,
            },
            TARGET_METADATA_KEY_VERSION => ConsumerGroupKey::TargetMetadata { group: r.string()? },
            TARGET_MEMBER_KEY_VERSION => ConsumerGroupKey::TargetMember {
                group: r.string()?,
                member: r.string()?,
            },
            CURRENT_ASSIGNMENT_KEY_VERSION => ConsumerGroupKey::CurrentAssignment {
                group: r.string()?,
                member: r.string()?,
            },
            REGULAR_EXPRESSION_KEY_VERSION => ConsumerGroupKey::RegularExpression,
            v => return Err(CodecError::UnsupportedVersion(v)),
        };
        Ok(key)
    }

    fn group(&self) -> Option<&str> {
        match self {
            ConsumerGroupKey::Metadata { group }
            | ConsumerGroupKey::PartitionMetadata { group }
            | ConsumerGroupKey::TargetMetadata { group }
            | ConsumerGroupKey::MemberMetadata { group, .. }
            | ConsumerGroupKey::TargetMember { group, .. }
            | ConsumerGroupKey::CurrentAssignment { group, .. } => Some(group),
            ConsumerGroupKey::RegularExpression => None,
        }
    }
}

/// The `ClassicMemberMetadata` of a member that uses the classic protocol inside a consumer
/// group (tagged field 0 of `ConsumerGroupMemberMetadataValue`): the session timeout it asked
/// for and the protocols (assignor name, subscription bytes) of its last JoinGroup.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClassicMemberMetadata {
    pub session_timeout_ms: i32,
    pub protocols: Vec<(String, Bytes)>,
}

/// `ConsumerGroupMemberMetadataValue` v0, with its tagged `ClassicMemberMetadata` for a member
/// that uses the classic protocol.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberMetadata {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// Sorted, as Kafka writes them.
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
    pub classic: Option<ClassicMemberMetadata>,
}

/// `ConsumerGroupCurrentMemberAssignmentValue` v0.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CurrentAssignment {
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    /// Kafka's `MemberState` values: 0 stable, 1 unrevoked partitions, 2 unreleased partitions.
    pub state: i8,
    pub assigned: Assignment,
    pub pending_revocation: Assignment,
}

/// Everything the log holds about one group: what [`ConsumerGroups::load`] rebuilds and what
/// the records of a decision move from and to.
///
/// [`ConsumerGroups::load`]: super::ConsumerGroups::load
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DurableGroup {
    pub group_epoch: i32,
    /// Subscribed topics that exist: name -> (id, partitions).
    pub subscription_metadata: BTreeMap<String, (Uuid, i32)>,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, MemberMetadata>,
    pub current: BTreeMap<String, CurrentAssignment>,
    pub target: BTreeMap<String, Assignment>,
}

fn state_value(s: MemberState) -> i8 {
    match s {
        MemberState::Stable => 0,
        MemberState::UnrevokedPartitions => 1,
        MemberState::UnreleasedPartitions => 2,
    }
}

fn state_of(v: i8) -> Option<MemberState> {
    match v {
        0 => Some(MemberState::Stable),
        1 => Some(MemberState::UnrevokedPartitions),
        2 => Some(MemberState::UnreleasedPartitions),
        _ => None,
    }
}

impl DurableGroup {
    /// The durable projection of a group in memory.
    pub(crate) fn of(g: &ConsumerGroup) -> Self {
        DurableGroup {
            group_epoch: g.group_epoch,
            subscription_metadata: g.subscription_metadata.clone(),
            assignment_epoch: g.assignment_epoch,
            members: g
                .members
                .iter()
                .map(|(id, m)| (id.clone(), member_metadata(m)))
                .collect(),
            current: g
                .members
                .iter()
                .map(|(id, m)| {
                    let c = CurrentAssignment {
                        member_epoch: m.member_epoch,
                        previous_member_epoch: m.previous_member_epoch,
                        state: state_value(m.state),
                        assigned: m.assigned.clone(),
                        pending_revocation: m.pending_revocation.clone(),
                    };
                    (id.clone(), c)
                })
                .collect(),
            target: g.target.clone(),
        }
    }

    /// The group this projection describes, its members' deadlines started at `now_ms`
    /// (`session_timeout_ms`, or a classic member's own, for the session; the member's
    /// rebalance timeout for a pending revocation, as Kafka reschedules both timers on load).
    pub(crate) fn into_group(
        self,
        id: &str,
        now_ms: i64,
        session_timeout_ms: i32,
    ) -> ConsumerGroup {
        let mut g = ConsumerGroup::new(id);
        g.group_epoch = self.group_epoch;
        g.assignment_epoch = self.assignment_epoch;
        g.subscription_metadata = self.subscription_metadata;
        let mut current = self.current;
        for (mid, meta) in self.members {
            let mut m = Member::new(mid.clone());
            m.instance_id = meta.instance_id;
            m.rack_id = meta.rack_id;
            m.client_id = meta.client_id;
            m.client_host = meta.client_host;
            m.subscribed_topic_names = meta.subscribed_topic_names.into_iter().collect();
            m.subscribed_topic_regex = meta.subscribed_topic_regex;
            m.rebalance_timeout_ms = meta.rebalance_timeout_ms;
            m.server_assignor = meta.server_assignor;
            m.classic = meta.classic;
            if let Some(c) = current.remove(&mid) {
                m.member_epoch = c.member_epoch;
                m.previous_member_epoch = c.previous_member_epoch;
                m.state = state_of(c.state).unwrap_or(MemberState::Stable);
                m.assigned = c.assigned;
                m.pending_revocation = c.pending_revocation;
            }
            let session = m.session_timeout_ms(session_timeout_ms);
            m.session_deadline_ms = now_ms.saturating_add(i64::from(session.max(0)));
            m.revocation_deadline_ms = (m.state == MemberState::UnrevokedPartitions)
                .then(|| now_ms.saturating_add(i64::from(m.rebalance_timeout_ms.max(0))));
            g.put_member(m);
        }
        g.target = self
            .target
            .into_iter()
            .filter(|(mid, _)| g.members.contains_key(mid))
            .collect();
        g
    }
}

fn member_metadata(m: &Member) -> MemberMetadata {
    MemberMetadata {
        instance_id: m.instance_id.clone(),
        rack_id: m.rack_id.clone(),
        client_id: m.client_id.clone(),
        client_host: m.client_host.clone(),
        subscribed_topic_names: m.subscribed_topic_names.iter().cloned().collect(),
        subscribed_topic_regex: m.subscribed_topic_regex.clone(),
        rebalance_timeout_ms: m.rebalance_timeout_ms,
        server_assignor: m.server_assignor.clone(),
        classic: m.classic.clone(),
    }
}

// ---------------------------------------------------------------------------------------------
// Records of a decision

fn record(key: ConsumerGroupKey, value: Option<Bytes>) -> OffsetsRecord {
    OffsetsRecord {
        key: key.encode(),
        value,
    }
}

/// The records that move the log from `old` to `new` for group `id` (`None`: the group does
/// not exist). Ordered as Kafka's coordinator writes them: departed members' tombstones
/// (current assignment, target, metadata), changed member metadata, partition metadata, group
/// epoch, changed targets, assignment epoch, changed current assignments; a deleted group
/// ends with the tombstones of its assignment epoch, partition metadata and epoch.
pub fn records_between(
    id: &str,
    old: Option<&DurableGroup>,
    new: Option<&DurableGroup>,
) -> Vec<OffsetsRecord> {
    let empty = DurableGroup::default();
    let (o, n) = (old.unwrap_or(&empty), new.unwrap_or(&empty));
    let group = || id.to_string();
    let key_m = |m: &str| (group(), m.to_string());
    let mut out = Vec::new();
    for mid in o.members.keys().filter(|m| !n.members.contains_key(*m)) {
        let (group, member) = key_m(mid);
        out.push(record(
            ConsumerGroupKey::CurrentAssignment {
                group: group.clone(),
                member: member.clone(),
            },
            None,
        ));
        out.push(record(
            ConsumerGroupKey::TargetMember {
                group: group.clone(),
                member: member.clone(),
            },
            None,
        ));
        out.push(record(
            ConsumerGroupKey::MemberMetadata { group, member },
            None,
        ));
    }
    if new.is_none() {
        if old.is_some() {
            out.push(record(
                ConsumerGroupKey::TargetMetadata { group: group() },
                None,
            ));
            out.push(record(
                ConsumerGroupKey::PartitionMetadata { group: group() },
                None,
            ));
            out.push(record(ConsumerGroupKey::Metadata { group: group() }, None));
        }
        return out;
    }
    for (mid, meta) in &n.members {
        if o.members.get(mid) != Some(meta) {
            let (group, member) = key_m(mid);
            out.push(record(
                ConsumerGroupKey::MemberMetadata { group, member },
                Some(member_metadata_value(meta)),
            ));
        }
    }
    if old.is_none() || o.subscription_metadata != n.subscription_metadata {
        out.push(record(
            ConsumerGroupKey::PartitionMetadata { group: group() },
            Some(partition_metadata_value(&n.subscription_metadata)),
        ));
    }
    if old.is_none() || o.group_epoch != n.group_epoch {
        out.push(record(
            ConsumerGroupKey::Metadata { group: group() },
            Some(epoch_value(n.group_epoch)),
        ));
    }
    for mid in o.target.keys() {
        // A target dropped while its member stays (a departed member's went above).
        if !n.target.contains_key(mid) && n.members.contains_key(mid) {
            let (group, member) = key_m(mid);
            out.push(record(
                ConsumerGroupKey::TargetMember { group, member },
                None,
            ));
        }
    }
    for (mid, t) in &n.target {
        if o.target.get(mid) != Some(t) {
            let (group, member) = key_m(mid);
            out.push(record(
                ConsumerGroupKey::TargetMember { group, member },
                Some(target_member_value(t)),
            ));
        }
    }
    if old.is_none() || o.assignment_epoch != n.assignment_epoch {
        out.push(record(
            ConsumerGroupKey::TargetMetadata { group: group() },
            Some(epoch_value(n.assignment_epoch)),
        ));
    }
    for (mid, c) in &n.current {
        if o.current.get(mid) != Some(c) {
            let (group, member) = key_m(mid);
            out.push(record(
                ConsumerGroupKey::CurrentAssignment { group, member },
                Some(current_assignment_value(c)),
            ));
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Loading

/// One group as read so far: the last value of each key.
#[derive(Default)]
struct Replayed {
    epoch: Option<i32>,
    subscription_metadata: BTreeMap<String, (Uuid, i32)>,
    assignment_epoch: i32,
    members: BTreeMap<String, MemberMetadata>,
    current: BTreeMap<String, CurrentAssignment>,
    target: BTreeMap<String, Assignment>,
}

/// Replays consumer-group records in log order (last value per key wins, tombstones delete)
/// into the groups they describe: a group exists while its epoch record does; a member
/// while its metadata record does (a member without a current assignment record is at
/// epoch 0, owning nothing). Other records are ignored; undecodable ones are skipped with a
/// warning, like the classic loader does.
pub fn replay<'a>(
    records: impl IntoIterator<Item = &'a OffsetsRecord>,
) -> BTreeMap<String, DurableGroup> {
    let mut groups: BTreeMap<String, Replayed> = BTreeMap::new();
    for rec in records {
        if !is_consumer_group_key(&rec.key) {
            continue;
        }
        let key = match ConsumerGroupKey::decode(&rec.key) {
            Ok(k) => k,
            Err(e) => {
                tracing::warn!(%e, "skipping undecodable consumer group key");
                continue;
            }
        };
        let Some(gid) = key.group() else {
            continue;
        };
        if let Err(e) = apply(
            groups.entry(gid.to_string()).or_default(),
            &key,
            rec.value.as_deref(),
        ) {
            tracing::warn!(%e, group = gid, "skipping undecodable consumer group record");
        }
    }
    groups
        .into_iter()
        .filter_map(|(id, r)| {
            let group_epoch = r.epoch?;
            let current: BTreeMap<String, CurrentAssignment> = r
                .members
                .keys()
                .map(|m| {
                    let c = r.current.get(m).cloned().unwrap_or(CurrentAssignment {
                        member_epoch: 0,
                        previous_member_epoch: -1,
                        ..Default::default()
                    });
                    (m.clone(), c)
                })
                .collect();
            let target = r
                .target
                .into_iter()
                .filter(|(m, _)| r.members.contains_key(m))
                .collect();
            let g = DurableGroup {
                group_epoch,
                subscription_metadata: r.subscription_metadata,
                assignment_epoch: r.assignment_epoch.min(group_epoch),
                members: r.members,
                current,
                target,
            };
            Some((id, g))
        })
        .collect()
}

fn apply(r: &mut Replayed, key: &ConsumerGroupKey, value: Option<&[u8]>) -> Result<(), CodecError> {
    match key {
        ConsumerGroupKey::Metadata { .. } => match value {
            None => *r = Replayed::default(),
            Some(v) => r.epoch = Some(decode_epoch_value(v)?),
        },
        ConsumerGroupKey::PartitionMetadata { .. } => {
            r.subscription_metadata = match value {
                None => BTreeMap::new(),
                Some(v) => decode_partition_metadata_value(v)?,
            }
        }
        ConsumerGroupKey::TargetMetadata { .. } => {
            r.assignment_epoch = match value {
                None => 0,
                Some(v) => decode_epoch_value(v)?,
            }
        }
        ConsumerGroupKey::MemberMetadata { member, .. } => match value {
            None => {
                r.members.remove(member);
            }
            Some(v) => {
                r.members
                    .insert(member.clone(), decode_member_metadata_value(v)?);
            }
        },
        ConsumerGroupKey::TargetMember { member, .. } => match value {
            None => {
                r.target.remove(member);
            }
            Some(v) => {
                r.target
                    .insert(member.clone(), decode_target_member_value(v)?);
            }
        },
        ConsumerGroupKey::CurrentAssignment { member, .. } => match value {
            None => {
                r.current.remove(member);
            }
            Some(v) => {
                r.current
                    .insert(member.clone(), decode_current_assignment_value(v)?);
            }
        },
        ConsumerGroupKey::RegularExpression => {}
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Flexible value encoding

fn put_uvarint(b: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        b.put_u8(u8::try_from(v & 0x7f).unwrap_or_default() | 0x80);
        v >>= 7;
    }
    b.put_u8(u8::try_from(v).unwrap_or_default());
}

fn put_len(b: &mut BytesMut, n: usize) {
    put_uvarint(b, u64::try_from(n).unwrap_or(u64::MAX).saturating_add(1));
}

fn put_compact_str(b: &mut BytesMut, s: &str) {
    put_len(b, s.len());
    b.put_slice(s.as_bytes());
}

fn put_compact_nullable_str(b: &mut BytesMut, s: Option<&str>) {
    match s {
        None => put_uvarint(b, 0),
        Some(s) => put_compact_str(b, s),
    }
}

/// No tagged fields.
fn put_no_tags(b: &mut BytesMut) {
    put_uvarint(b, 0);
}

fn put_topic_partitions(b: &mut BytesMut, a: &Assignment) {
    put_len(b, a.len());
    for (t, ps) in a {
        b.put_slice(t.as_bytes());
        put_len(b, ps.len());
        for p in ps {
            b.put_i32(*p);
        }
        put_no_tags(b);
    }
}

fn value_header() -> BytesMut {
    let mut b = BytesMut::with_capacity(64);
    b.put_i16(VALUE_VERSION);
    b
}

fn epoch_value(epoch: i32) -> Bytes {
    let mut b = value_header();
    b.put_i32(epoch);
    put_no_tags(&mut b);
    b.freeze()
}

/// `ConsumerGroupPartitionMetadataValue` v0 (the deprecated rack lists written empty, as
/// Kafka 4 does).
fn partition_metadata_value(m: &BTreeMap<String, (Uuid, i32)>) -> Bytes {
    let mut b = value_header();
    put_len(&mut b, m.len());
    for (name, (id, partitions)) in m {
        b.put_slice(id.as_bytes());
        put_compact_str(&mut b, name);
        b.put_i32(*partitions);
        put_len(&mut b, 0);
        put_no_tags(&mut b);
    }
    put_no_tags(&mut b);
    b.freeze()
}

fn put_compact_bytes(b: &mut BytesMut, v: &[u8]) {
    put_len(b, v.len());
    b.put_slice(v);
}

/// The `ClassicMemberMetadata` struct (flexible): session timeout, supported protocols.
fn classic_metadata_struct(c: &ClassicMemberMetadata) -> BytesMut {
    let mut b = BytesMut::with_capacity(32);
    b.put_i32(c.session_timeout_ms);
    put_len(&mut b, c.protocols.len());
    for (name, metadata) in &c.protocols {
        put_compact_str(&mut b, name);
        put_compact_bytes(&mut b, metadata);
        put_no_tags(&mut b);
    }
    put_no_tags(&mut b);
    b
}

/// The member value's tagged fields: tag 0 `ClassicMemberMetadata` when set, written as
/// Kafka's generated code writes a nullable struct in a tagged field (its size counts a
/// leading presence byte, 1).
fn put_member_tags(b: &mut BytesMut, classic: Option<&ClassicMemberMetadata>) {
    let Some(c) = classic else {
        return put_no_tags(b);
    };
    let body = classic_metadata_struct(c);
    put_uvarint(b, 1);
    put_uvarint(b, 0);
    put_uvarint(
        b,
        u64::try_from(body.len())
            .unwrap_or(u64::MAX)
            .saturating_add(1),
    );
    put_uvarint(b, 1);
    b.put_slice(&body);
}

fn member_metadata_value(m: &MemberMetadata) -> Bytes {
    let mut b = value_header();
    put_compact_nullable_str(&mut b, m.instance_id.as_deref());
    put_compact_nullable_str(&mut b, m.rack_id.as_deref());
    put_compact_str(&mut b, &m.client_id);
    put_compact_str(&mut b, &m.client_host);
    put_len(&mut b, m.subscribed_topic_names.len());
    for t in &m.subscribed_topic_names {
        put_compact_str(&mut b, t);
    }
    put_compact_nullable_str(&mut b, m.subscribed_topic_regex.as_deref());
    b.put_i32(m.rebalance_timeout_ms);
    put_compact_nullable_str(&mut b, m.server_assignor.as_deref());
    put_member_tags(&mut b, m.classic.as_ref());
    b.freeze()
}

fn target_member_value(a: &Assignment) -> Bytes {
    let mut b = value_header();
    put_topic_partitions(&mut b, a);
    put_no_tags(&mut b);
    b.freeze()
}

fn current_assignment_value(c: &CurrentAssignment) -> Bytes {
    let mut b = value_header();
    b.put_i32(c.member_epoch);
    b.put_i32(c.previous_member_epoch);
    b.put_i8(c.state);
    put_topic_partitions(&mut b, &c.assigned);
    put_topic_partitions(&mut b, &c.pending_revocation);
    put_no_tags(&mut b);
    b.freeze()
}

// ---------------------------------------------------------------------------------------------
// Flexible value decoding

/// A bounds-checked reader of the flexible encoding.
struct Flex<'a> {
    buf: &'a [u8],
}

impl<'a> Flex<'a> {
    /// Checks the value's version (0; a newer one is refused, never misread).
    fn value(b: &'a [u8]) -> Result<Self, CodecError> {
        let mut f = Flex { buf: b };
        let v = f.i16()?;
        if v != VALUE_VERSION {
            return Err(CodecError::UnsupportedVersion(v));
        }
        Ok(f)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        if self.buf.len() < n {
            return Err(CodecError::Truncated);
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn i8(&mut self) -> Result<i8, CodecError> {
        let b = self.take(1)?;
        Ok(i8::from_be_bytes([b[0]]))
    }

    fn i16(&mut self) -> Result<i16, CodecError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Result<i32, CodecError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn uuid(&mut self) -> Result<Uuid, CodecError> {
        let b = self.take(16)?;
        let mut a = [0u8; 16];
        a.copy_from_slice(b);
        Ok(Uuid::from_bytes(a))
    }

    fn uvarint(&mut self) -> Result<u64, CodecError> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = self.take(1)?[0];
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(CodecError::Truncated)
    }

    /// A compact length: `None` for null (0), else the length, which must fit in the bytes
    /// left at `min_element_size` bytes per element.
    fn len(&mut self, min_element_size: usize) -> Result<Option<usize>, CodecError> {
        let raw = self.uvarint()?;
        if raw == 0 {
            return Ok(None);
        }
        let n = usize::try_from(raw - 1).map_err(|_| CodecError::Truncated)?;
        if n.saturating_mul(min_element_size.max(1)) > self.buf.len() {
            return Err(CodecError::Truncated);
        }
        Ok(Some(n))
    }

    fn nullable_string(&mut self) -> Result<Option<String>, CodecError> {
        let Some(n) = self.len(1)? else {
            return Ok(None);
        };
        let raw = self.take(n)?;
        std::str::from_utf8(raw)
            .map(|s| Some(s.to_owned()))
            .map_err(|_| CodecError::InvalidUtf8)
    }

    fn string(&mut self) -> Result<String, CodecError> {
        self.nullable_string()?.ok_or(CodecError::UnexpectedNull)
    }

    fn array_len(&mut self, min_element_size: usize) -> Result<usize, CodecError> {
        self.len(min_element_size)?
            .ok_or(CodecError::UnexpectedNull)
    }

    /// Skips a tagged-field section (tags this reader does not know).
    fn skip_tags(&mut self) -> Result<(), CodecError> {
        self.tags(|_, _| Ok(()))
    }

    /// Reads a tagged-field section, handing each (tag, bytes) to `known`.
    fn tags(
        &mut self,
        mut known: impl FnMut(u64, &'a [u8]) -> Result<(), CodecError>,
    ) -> Result<(), CodecError> {
        let n = self.uvarint()?;
        for _ in 0..n {
            let tag = self.uvarint()?;
            let size = usize::try_from(self.uvarint()?).map_err(|_| CodecError::Truncated)?;
            let body = self.take(size)?;
            known(tag, body)?;
        }
        Ok(())
    }

    fn bytes(&mut self) -> Result<Bytes, CodecError> {
        let n = self.array_len(1)?;
        Ok(Bytes::copy_from_slice(self.take(n)?))
    }

    fn topic_partitions(&mut self) -> Result<Assignment, CodecError> {
        let n = self.array_len(16 + 1 + 1)?;
        let mut a = Assignment::new();
        for _ in 0..n {
            let t = self.uuid()?;
            let k = self.array_len(4)?;
            let mut ps = BTreeSet::new();
            for _ in 0..k {
                ps.insert(self.i32()?);
            }
            self.skip_tags()?;
            a.entry(t).or_default().extend(ps);
        }
        Ok(a)
    }
}

fn decode_epoch_value(b: &[u8]) -> Result<i32, CodecError> {
    let mut f = Flex::value(b)?;
    let epoch = f.i32()?;
    f.skip_tags()?;
    Ok(epoch)
}

fn decode_partition_metadata_value(b: &[u8]) -> Result<BTreeMap<String, (Uuid, i32)>, CodecError> {
    let mut f = Flex::value(b)?;
    let n = f.array_len(16 + 1 + 4 + 1 + 1)?;
    let mut out = BTreeMap::new();
    for _ in 0..n {
        let id = f.uuid()?;
        let name = f.string()?;
        let partitions = f.i32()?;
        // Deprecated rack lists: read and dropped.
        let racks = f.array_len(4 + 1 + 1)?;
        for _ in 0..racks {
            f.i32()?;
            let k = f.array_len(1)?;
            for _ in 0..k {
                f.string()?;
            }
            f.skip_tags()?;
        }
        f.skip_tags()?;
        out.insert(name, (id, partitions));
    }
    f.skip_tags()?;
    Ok(out)
}

fn decode_member_metadata_value(b: &[u8]) -> Result<MemberMetadata, CodecError> {
    let mut f = Flex::value(b)?;
    let instance_id = f.nullable_string()?;
    let rack_id = f.nullable_string()?;
    let client_id = f.string()?;
    let client_host = f.string()?;
    let n = f.array_len(1)?;
    let mut names = BTreeSet::new();
    for _ in 0..n {
        names.insert(f.string()?);
    }
    let subscribed_topic_regex = f.nullable_string()?;
    let rebalance_timeout_ms = f.i32()?;
    let server_assignor = f.nullable_string()?;
    let mut classic = None;
    f.tags(|tag, body| {
        if tag == 0 {
            classic = decode_classic_metadata(body)?;
        }
        Ok(())
    })?;
    Ok(MemberMetadata {
        instance_id,
        rack_id,
        client_id,
        client_host,
        subscribed_topic_names: names.into_iter().collect(),
        subscribed_topic_regex,
        rebalance_timeout_ms,
        server_assignor,
        classic,
    })
}

/// Tag 0 of a member value: a presence byte (0 = null), then the `ClassicMemberMetadata`.
fn decode_classic_metadata(b: &[u8]) -> Result<Option<ClassicMemberMetadata>, CodecError> {
    let mut f = Flex { buf: b };
    if f.uvarint()? == 0 {
        return Ok(None);
    }
    let session_timeout_ms = f.i32()?;
    let n = f.array_len(1 + 1 + 1)?;
    let mut protocols = Vec::with_capacity(n);
    for _ in 0..n {
        let name = f.string()?;
        let metadata = f.bytes()?;
        f.skip_tags()?;
        protocols.push((name, metadata));
    }
    f.skip_tags()?;
    Ok(Some(ClassicMemberMetadata {
        session_timeout_ms,
        protocols,
    }))
}

fn decode_target_member_value(b: &[u8]) -> Result<Assignment, CodecError> {
    let mut f = Flex::value(b)?;
    let a = f.topic_partitions()?;
    f.skip_tags()?;
    Ok(a)
}

fn decode_current_assignment_value(b: &[u8]) -> Result<CurrentAssignment, CodecError> {
    let mut f = Flex::value(b)?;
    let member_epoch = f.i32()?;
    let previous_member_epoch = f.i32()?;
    let state = f.i8()?;
    if state_of(state).is_none() {
        return Err(CodecError::UnsupportedVersion(i16::from(state)));
    }
    let assigned = f.topic_partitions()?;
    let pending_revocation = f.topic_partitions()?;
    f.skip_tags()?;
    Ok(CurrentAssignment {
        member_epoch,
        previous_member_epoch,
        state,
        assigned,
        pending_revocation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tp(t: u128, ps: &[i32]) -> (Uuid, BTreeSet<i32>) {
        (Uuid::from_u128(t), ps.iter().copied().collect())
    }

    /// Bytes checked by hand against Kafka's generated serializers for these schemas.
    #[test]
    fn key_and_epoch_value_bytes() {
        let k = ConsumerGroupKey::Metadata { group: "g".into() }.encode();
        assert_eq!(&k[..], &[0, 3, 0, 1, b'g']);
        let k = ConsumerGroupKey::CurrentAssignment {
            group: "g".into(),
            member: "m".into(),
        }
        .encode();
        assert_eq!(&k[..], &[0, 8, 0, 1, b'g', 0, 1, b'm']);
        assert_eq!(&epoch_value(7)[..], &[0, 0, 0, 0, 0, 7, 0]);
    }

    #[test]
    fn current_assignment_bytes() {
        let c = CurrentAssignment {
            member_epoch: 5,
            previous_member_epoch: 4,
            state: 1,
            assigned: [tp(1, &[0, 2])].into_iter().collect(),
            pending_revocation: Assignment::new(),
        };
        let v = current_assignment_value(&c);
        let mut want = vec![0, 0, 0, 0, 0, 5, 0, 0, 0, 4, 1, 2];
        want.extend_from_slice(Uuid::from_u128(1).as_bytes());
        want.extend_from_slice(&[3, 0, 0, 0, 0, 0, 0, 0, 2, 0, 1, 0]);
        assert_eq!(&v[..], &want[..]);
        assert_eq!(decode_current_assignment_value(&v), Ok(c));
    }

    #[test]
    fn member_metadata_with_an_unknown_tag_decodes() {
        let m = MemberMetadata {
            instance_id: Some("i".into()),
            rack_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            subscribed_topic_names: vec!["a".into(), "b".into()],
            subscribed_topic_regex: None,
            rebalance_timeout_ms: 30_000,
            server_assignor: Some("uniform".into()),
            classic: None,
        };
        let v = member_metadata_value(&m);
        // Replace the empty tag section with one unknown tag 1 of 3 bytes.
        let mut tagged = v[..v.len() - 1].to_vec();
        tagged.extend_from_slice(&[1, 1, 3, 9, 9, 9]);
        assert_eq!(decode_member_metadata_value(&tagged), Ok(m.clone()));
        assert_eq!(decode_member_metadata_value(&v), Ok(m));
    }

    /// A classic member's metadata is tag 0, a nullable struct: presence byte, session
    /// timeout, protocols (name, bytes), as Kafka's generated serializer writes it.
    #[test]
    fn classic_member_metadata_is_tag_zero() {
        let m = MemberMetadata {
            client_id: "c".into(),
            classic: Some(ClassicMemberMetadata {
                session_timeout_ms: 45_000,
                protocols: vec![("range".into(), Bytes::from_static(&[0, 1]))],
            }),
            ..Default::default()
        };
        let v = member_metadata_value(&m);
        #[rustfmt::skip]
        let tail: &[u8] = &[
            1, 0, 17, 1,                            // one tag: 0, 17 bytes, present
            0, 0, 0xaf, 0xc8,                       // session timeout 45000
            2, 6, b'r', b'a', b'n', b'g', b'e', 3, 0, 1, 0, // [("range", [0, 1])]
            0,                                      // struct tags
        ];
        assert!(v.ends_with(tail), "{:?}", &v[..]);
        assert_eq!(decode_member_metadata_value(&v), Ok(m.clone()));
        // A null struct (presence 0) reads as a consumer-protocol member.
        let mut null = v[..v.len() - tail.len()].to_vec();
        null.extend_from_slice(&[1, 0, 1, 0]);
        let mut plain = m;
        plain.classic = None;
        assert_eq!(decode_member_metadata_value(&null), Ok(plain));
    }

    #[test]
    fn forged_lengths_are_refused_without_allocating() {
        // An array claiming 2^62 topics in a few bytes.
        let mut b = value_header();
        put_uvarint(&mut b, 1 << 62);
        assert_eq!(
            decode_partition_metadata_value(&b),
            Err(CodecError::Truncated)
        );
        assert_eq!(
            decode_epoch_value(&[0, 1, 0, 0, 0, 1, 0]),
            Err(CodecError::UnsupportedVersion(1))
        );
        let bad_state = {
            let mut b = value_header();
            b.put_i32(1);
            b.put_i32(0);
            b.put_i8(9);
            b
        };
        assert!(decode_current_assignment_value(&bad_state).is_err());
    }

    proptest! {
        #[test]
        fn decoders_never_panic(b in proptest::collection::vec(any::<u8>(), 0..96)) {
            let _ = ConsumerGroupKey::decode(&b);
            let _ = decode_epoch_value(&b);
            let _ = decode_partition_metadata_value(&b);
            let _ = decode_member_metadata_value(&b);
            let _ = decode_target_member_value(&b);
            let _ = decode_current_assignment_value(&b);
            let _ = decode_classic_metadata(&b);
        }

        #[test]
        fn values_round_trip(
            names in proptest::collection::btree_set("[a-z]{0,6}", 0..4),
            regex in proptest::option::of("[a-z.*]{1,6}"),
            epoch in any::<i32>(), prev in any::<i32>(), state in 0i8..3,
            parts in proptest::collection::btree_map(0u128..4, proptest::collection::btree_set(0i32..50, 0..5), 0..4),
        ) {
            let a: Assignment = parts.into_iter().map(|(t, ps)| (Uuid::from_u128(t), ps)).collect();
            let m = MemberMetadata {
                instance_id: regex.clone(),
                rack_id: None,
                client_id: "client".into(),
                client_host: String::new(),
                subscribed_topic_names: names.iter().cloned().collect(),
                subscribed_topic_regex: regex,
                rebalance_timeout_ms: epoch,
                server_assignor: None,
                classic: (state == 1).then(|| ClassicMemberMetadata {
                    session_timeout_ms: prev,
                    protocols: names.iter().map(|n| (n.clone(), Bytes::copy_from_slice(n.as_bytes()))).collect(),
                }),
            };
            prop_assert_eq!(decode_member_metadata_value(&member_metadata_value(&m)), Ok(m));
            let c = CurrentAssignment { member_epoch: epoch, previous_member_epoch: prev, state, assigned: a.clone(), pending_revocation: a.clone() };
            prop_assert_eq!(decode_current_assignment_value(&current_assignment_value(&c)), Ok(c));
            prop_assert_eq!(decode_target_member_value(&target_member_value(&a)), Ok(a));
            let meta: BTreeMap<String, (Uuid, i32)> = names.into_iter().enumerate().map(|(i, n)| (n, (Uuid::from_u128(i as u128), epoch))).collect();
            prop_assert_eq!(decode_partition_metadata_value(&partition_metadata_value(&meta)), Ok(meta));
        }
    }
}
