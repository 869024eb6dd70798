//! A classic group's membership: JoinGroup (11), SyncGroup (14), Heartbeat (12) and
//! LeaveGroup (13), translated to and from `runnel_group`'s requests.

use std::sync::Arc;

use bytes::Bytes;

use kafka_protocol::messages::*;
use runnel_group::{HeartbeatRequest as GroupHeartbeat, JoinRequest, SyncRequest};

use super::opt;
use crate::context::{Broker, RequestContext};
use crate::handlers::str_bytes;

pub async fn join_group(
    broker: &Arc<Broker>,
    request: JoinGroupRequest,
    version: i16,
    ctx: &RequestContext,
) -> JoinGroupResponse {
    let req = JoinRequest {
        group_id: request.group_id.0.to_string(),
        member_id: request.member_id.to_string(),
        group_instance_id: opt(&request.group_instance_id),
        client_id: ctx.client_id.clone(),
        client_host: ctx.client_host(),
        session_timeout_ms: request.session_timeout_ms,
        rebalance_timeout_ms: if version >= 1 {
            request.rebalance_timeout_ms
        } else {
            request.session_timeout_ms
        },
        protocol_type: request.protocol_type.to_string(),
        protocols: request
            .protocols
            .iter()
            .map(|p| (p.name.to_string(), Bytes::copy_from_slice(&p.metadata)))
            .collect(),
        api_version: version,
    };
    let r = broker.groups.join(req).await;
    let members = r
        .members
        .into_iter()
        .map(|m| {
            join_group_response::JoinGroupResponseMember::default()
                .with_member_id(str_bytes(&m.member_id))
                .with_group_instance_id(if version >= 5 {
                    m.group_instance_id.as_deref().map(str_bytes)
                } else {
                    None
                })
                .with_metadata(m.metadata)
        })
        .collect();
    let response = JoinGroupResponse::default()
        .with_error_code(r.error_code)
        .with_generation_id(r.generation_id)
        .with_leader(str_bytes(&r.leader))
        .with_member_id(str_bytes(&r.member_id))
        .with_members(members);
    if version >= 7 {
        response
            .with_protocol_type(r.protocol_type.as_deref().map(str_bytes))
            .with_protocol_name(r.protocol_name.as_deref().map(str_bytes))
    } else {
        // Before v7 the protocol name is a non-null string.
        response.with_protocol_name(Some(str_bytes(r.protocol_name.as_deref().unwrap_or(""))))
    }
}

pub async fn sync_group(
    broker: &Arc<Broker>,
    request: SyncGroupRequest,
    version: i16,
) -> SyncGroupResponse {
    let req = SyncRequest {
        group_id: request.group_id.0.to_string(),
        generation_id: request.generation_id,
        member_id: request.member_id.to_string(),
        group_instance_id: opt(&request.group_instance_id),
        protocol_type: opt(&request.protocol_type),
        protocol_name: opt(&request.protocol_name),
        assignments: request
            .assignments
            .iter()
            .map(|a| {
                (
                    a.member_id.to_string(),
                    Bytes::copy_from_slice(&a.assignment),
                )
            })
            .collect(),
    };
    let r = broker.groups.sync(req).await;
    let response = SyncGroupResponse::default()
        .with_error_code(r.error_code)
        .with_assignment(r.assignment);
    if version >= 5 {
        response
            .with_protocol_type(r.protocol_type.as_deref().map(str_bytes))
            .with_protocol_name(r.protocol_name.as_deref().map(str_bytes))
    } else {
        response
    }
}

pub async fn heartbeat(
    broker: &Arc<Broker>,
    request: HeartbeatRequest,
    _version: i16,
) -> HeartbeatResponse {
    let code = broker
        .groups
        .heartbeat(GroupHeartbeat {
            group_id: request.group_id.0.to_string(),
            generation_id: request.generation_id,
            member_id: request.member_id.to_string(),
            group_instance_id: opt(&request.group_instance_id),
        })
        .await;
    HeartbeatResponse::default().with_error_code(code)
}

pub async fn leave_group(
    broker: &Arc<Broker>,
    request: LeaveGroupRequest,
    version: i16,
) -> LeaveGroupResponse {
    let members: Vec<(String, Option<String>)> = if version >= 3 {
        request
            .members
            .iter()
            .map(|m| (m.member_id.to_string(), opt(&m.group_instance_id)))
            .collect()
    } else {
        vec![(request.member_id.to_string(), None)]
    };
    let (code, codes) = broker
        .groups
        .leave(request.group_id.0.to_string(), members.clone())
        .await;
    if version < 3 {
        // One member: its own code is the answer.
        let code = if code != 0 {
            code
        } else {
            codes.first().copied().unwrap_or(0)
        };
        return LeaveGroupResponse::default().with_error_code(code);
    }
    let members = members
        .into_iter()
        .zip(codes)
        .map(|((member_id, instance), code)| {
            leave_group_response::MemberResponse::default()
                .with_member_id(str_bytes(&member_id))
                .with_group_instance_id(instance.as_deref().map(str_bytes))
                .with_error_code(code)
        })
        .collect();
    LeaveGroupResponse::default()
        .with_error_code(code)
        .with_members(members)
}
