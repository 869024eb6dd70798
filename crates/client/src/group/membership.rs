//! The requests of one rebalance round (spec H.2) — JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup — each built for the negotiated version, plus the leader's job: decode every
//! member's subscription, run the chosen assignor, encode one assignment per member.
//! Error codes are returned, not raised, because the caller's reaction depends on them
//! (re-join, reset the member id, rediscover the coordinator, or give up).

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::assignors::{Assignor, Member, PartitionsPerTopic};
use super::protocol::{decode_subscription, encode_assignment, Assignment, PROTOCOL_TYPE};
use crate::client::Client;
use crate::connection::Connection;
use crate::error::{ClientError, Result};

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

/// Who is asking: the identity fields every group request carries.
#[derive(Debug, Clone)]
pub struct Identity {
    /// `group.id`.
    pub group: String,
    /// Current member id ("" before the first join).
    pub member_id: String,
    /// `group.instance.id`.
    pub instance_id: Option<String>,
}

/// Session and rebalance timeouts sent in JoinGroup.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// `session.timeout.ms`.
    pub session: Duration,
    /// `max.poll.interval.ms`: how long the coordinator waits for members to re-join.
    pub rebalance: Duration,
}

fn ms(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}

/// Sends JoinGroup. It blocks on the broker until the round completes, so the wait allowed is
/// the rebalance timeout plus a margin (as Java's `rebalanceTimeout + 5 s`).
pub async fn join_group(
    conn: &Connection,
    who: &Identity,
    timeouts: Timeouts,
    protocols: &[(String, Bytes)],
    request_timeout: Duration,
) -> Result<JoinGroupResponse> {
    let version = conn.negotiated::<JoinGroupRequest>()?;
    let mut req = JoinGroupRequest::default();
    req.group_id = GroupId(s(&who.group));
    req.session_timeout_ms = ms(timeouts.session);
    if version >= 1 {
        req.rebalance_timeout_ms = ms(timeouts.rebalance);
    }
    req.member_id = s(&who.member_id);
    if version >= 5 {
        req.group_instance_id = who.instance_id.as_deref().map(s);
    } else if who.instance_id.is_some() {
        return Err(ClientError::kafka(
            35,
            Some("static membership (group.instance.id) needs JoinGroup v5".into()),
        ));
    }
    req.protocol_type = s(PROTOCOL_TYPE);
    req.protocols = protocols
        .iter()
        .map(|(name, metadata)| {
            let mut p = JoinGroupRequestProtocol::default();
            p.name = s(name);
            p.metadata = metadata.clone();
            p
        })
        .collect();
    let wait = (timeouts.rebalance + Duration::from_secs(5)).max(request_timeout);
    conn.send_at(&req, version, wait).await
}

/// Sends SyncGroup (the leader with every member's assignment, the others with none).
pub async fn sync_group(
    conn: &Connection,
    who: &Identity,
    generation: i32,
    protocol: &str,
    assignments: Vec<(String, Bytes)>,
    wait: Duration,
) -> Result<SyncGroupResponse> {
    let version = conn.negotiated::<SyncGroupRequest>()?;
    let mut req = SyncGroupRequest::default();
    req.group_id = GroupId(s(&who.group));
    req.generation_id = generation;
    req.member_id = s(&who.member_id);
    if version >= 3 {
        req.group_instance_id = who.instance_id.as_deref().map(s);
    }
    if version >= 5 {
        req.protocol_type = Some(s(PROTOCOL_TYPE));
        req.protocol_name = Some(s(protocol));
    }
    req.assignments = assignments
        .into_iter()
        .map(|(member, bytes)| {
            let mut a = SyncGroupRequestAssignment::default();
            a.member_id = StrBytes::from_string(member);
            a.assignment = bytes;
            a
        })
        .collect();
    conn.send_at(&req, version, wait).await
}

/// Sends one Heartbeat; returns its error code.
pub async fn heartbeat(
    conn: &Connection,
    who: &Identity,
    generation: i32,
    wait: Duration,
) -> Result<i16> {
    let version = conn.negotiated::<HeartbeatRequest>()?;
    let mut req = HeartbeatRequest::default();
    req.group_id = GroupId(s(&who.group));
    req.generation_id = generation;
    req.member_id = s(&who.member_id);
    if version >= 3 {
        req.group_instance_id = who.instance_id.as_deref().map(s);
    }
    Ok(conn.send_at(&req, version, wait).await?.error_code)
}

/// Sends LeaveGroup for this member (v0-v2 by member id, v3+ as a one-member batch); returns
/// the first error code.
pub async fn leave_group(conn: &Connection, who: &Identity, wait: Duration) -> Result<i16> {
    let version = conn.negotiated::<LeaveGroupRequest>()?;
    let mut req = LeaveGroupRequest::default();
    req.group_id = GroupId(s(&who.group));
    if version >= 3 {
        let mut m = MemberIdentity::default();
        m.member_id = s(&who.member_id);
        m.group_instance_id = who.instance_id.as_deref().map(s);
        req.members = vec![m];
    } else {
        req.member_id = s(&who.member_id);
    }
    let resp = conn.send_at(&req, version, wait).await?;
    Ok(if resp.error_code != 0 {
        resp.error_code
    } else {
        resp.members
            .iter()
            .map(|m| m.error_code)
            .find(|&c| c != 0)
            .unwrap_or(0)
    })
}

/// Decodes the members of a JoinGroup response for the assignor. A member whose
/// subscription cannot be read is kept with an empty subscription (it gets nothing) rather
/// than failing the whole group.
pub fn decode_members(members: &[JoinGroupResponseMember]) -> Vec<Member> {
    members
        .iter()
        .map(|m| {
            let subscription = match decode_subscription(&m.metadata) {
                Ok((_, sub)) => sub,
                Err(e) => {
                    tracing::warn!(member = %m.member_id, error = %e, "unreadable subscription");
                    Default::default()
                }
            };
            Member {
                member_id: m.member_id.to_string(),
                group_instance_id: m.group_instance_id.as_ref().map(|i| i.to_string()),
                subscription,
            }
        })
        .collect()
}

/// The leader's step: partition counts of every subscribed topic from fresh metadata, the
/// assignor's result, one encoded assignment per member.
pub async fn leader_assign(
    client: &Client,
    assignor: &dyn Assignor,
    members: &[Member],
) -> Result<Vec<(String, Bytes)>> {
    let topics: BTreeSet<String> = members
        .iter()
        .flat_map(|m| m.subscription.topics.iter().cloned())
        .collect();
    let topics: Vec<String> = topics.into_iter().collect();
    let (meta, errors) = client.refresh_metadata_with_errors(Some(&topics)).await?;
    for e in &errors {
        tracing::debug!(topic = %e.name, code = e.error_code, "subscribed topic not assignable");
    }
    let partitions: PartitionsPerTopic = topics
        .iter()
        .filter(|t| !errors.iter().any(|e| &e.name == *t))
        .filter_map(|t| {
            let info = meta.topics.get(t)?;
            Some((t.clone(), info.partitions.len() as i32))
        })
        .collect();
    let result = assignor.assign(&partitions, members);
    members
        .iter()
        .map(|m| {
            let assignment = Assignment {
                partitions: result.get(&m.member_id).cloned().unwrap_or_default(),
                user_data: None,
            };
            Ok((m.member_id.clone(), encode_assignment(&assignment, 0)?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::protocol::{encode_subscription, Subscription};

    #[test]
    fn unreadable_subscriptions_become_empty() {
        let mut good = JoinGroupResponseMember::default();
        good.member_id = s("a");
        good.metadata = encode_subscription(
            &Subscription {
                topics: vec!["t".into()],
                ..Default::default()
            },
            3,
        )
        .unwrap();
        let mut bad = JoinGroupResponseMember::default();
        bad.member_id = s("b");
        bad.metadata = Bytes::from_static(b"\x00");
        let members = decode_members(&[good, bad]);
        assert_eq!(members[0].subscription.topics, ["t"]);
        assert!(members[1].subscription.topics.is_empty());
    }
}
