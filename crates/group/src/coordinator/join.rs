//! JoinGroup (spec H.2 item 1; Kafka's `handleJoinGroup`, `doUnknownJoinGroup`,
//! `doJoinGroup`, `addMemberAndRebalance`, `updateStaticMemberAndRebalance`).

use bytes::Bytes;

use super::rebalance::{maybe_prepare_rebalance, prepare_rebalance, try_complete_join};
use super::GroupCoordinator;
use crate::api::{JoinRequest, JoinResponse, Output, RequestId};
use crate::codec::fits_int16_string;
use crate::config::GroupConfig;
use crate::errors::*;
use crate::group::Group;
use crate::member::{dedup_protocols, Member, NEW_MEMBER_JOIN_TIMEOUT_MS};
use crate::state::GroupState;

/// Room left in an int16 string for the "-" + UUID suffix of generated member ids.
const MAX_ID_PREFIX_BYTES: usize = i16::MAX as usize - 64;

/// A join after validation: the fields every path needs.
struct Join<'a> {
    req_id: RequestId,
    req: &'a JoinRequest,
    protocols: Vec<(String, Bytes)>,
    rebalance_timeout_ms: i32,
}

impl Join<'_> {
    fn reply_error(&self, member_id: &str, code: i16, out: &mut Vec<Output>) {
        out.push(Output::Join(
            self.req_id,
            JoinResponse::error(member_id, code),
        ));
    }
}

impl GroupCoordinator {
    /// JoinGroup. Immediate answers (errors, 79 MEMBER_ID_REQUIRED with the generated id for
    /// v4+ dynamic members, the static-member fast path, a follower re-joining a Stable group)
    /// come back as `Output::Join(req_id, ..)` in the returned `Vec`; otherwise the join is
    /// parked until the join phase completes and answered from a later call (another join,
    /// a sync, a leave, or `tick`).
    pub fn join(&mut self, now_ms: i64, req_id: RequestId, req: JoinRequest) -> Vec<Output> {
        let mut out = Vec::new();
        self.join_inner(now_ms, req_id, &req, &mut out);
        self.debug_check();
        super::persist_first(out)
    }

    fn join_inner(
        &mut self,
        now_ms: i64,
        req_id: RequestId,
        req: &JoinRequest,
        out: &mut Vec<Output>,
    ) {
        let join = Join {
            req_id,
            req,
            protocols: dedup_protocols(&req.protocols),
            // v0 had no rebalance timeout; Kafka uses the session timeout.
            rebalance_timeout_ms: if req.api_version == 0 {
                req.session_timeout_ms
            } else {
                req.rebalance_timeout_ms
            },
        };
        if let Some(refused) = self.refused_join(req) {
            out.push(Output::Join(req_id, refused));
            return;
        }
        let is_unknown = req.member_id.is_empty();
        let created = !self.groups.contains_key(&req.group_id);
        if created {
            if !is_unknown {
                return join.reply_error(&req.member_id, UNKNOWN_MEMBER_ID, out);
            }
            self.groups.insert(
                req.group_id.clone(),
                Group::new(req.group_id.clone(), now_ms),
            );
        }
        let GroupCoordinator {
            config,
            groups,
            new_member_suffix,
            ..
        } = self;
        let Some(g) = groups.get_mut(&req.group_id) else {
            return join.reply_error(&req.member_id, UNKNOWN_MEMBER_ID, out);
        };

        if !accept_joining_member(config, g, &req.member_id) {
            if g.has(&req.member_id) {
                super::rebalance::remove_member_and_update_group(
                    config,
                    g,
                    &req.member_id,
                    now_ms,
                    out,
                );
            }
            join.reply_error("", GROUP_MAX_SIZE_REACHED, out);
        } else if is_unknown {
            do_unknown_join(config, g, now_ms, &join, new_member_suffix, out);
        } else {
            do_join(config, g, now_ms, &join, out);
        }
        if g.is(GroupState::PreparingRebalance) {
            try_complete_join(config, g, now_ms, out);
        }
        // A group created by a join that was refused leaves nothing behind.
        if created
            && g.is(GroupState::Empty)
            && g.members.is_empty()
            && g.pending.is_empty()
            && g.offsets.is_empty()
        {
            groups.remove(&req.group_id);
        }
    }
}

impl GroupCoordinator {
    /// The checks every JoinGroup passes before any group looks at it, whichever protocol the
    /// group runs (Kafka's `GroupCoordinatorService.joinGroup`): a group id (24), strings that
    /// fit the records (42), a session timeout within `group.min/max.session.timeout.ms`
    /// (26). `Some` is the answer refusing it.
    pub fn refused_join(&self, req: &JoinRequest) -> Option<JoinResponse> {
        if req.group_id.is_empty() {
            return Some(JoinResponse::error(&req.member_id, INVALID_GROUP_ID));
        }
        if !strings_fit(req) {
            return Some(JoinResponse::error("", INVALID_REQUEST));
        }
        let cfg = &self.config;
        if req.session_timeout_ms < cfg.min_session_timeout_ms
            || req.session_timeout_ms > cfg.max_session_timeout_ms
        {
            return Some(JoinResponse::error(&req.member_id, INVALID_SESSION_TIMEOUT));
        }
        None
    }
}

/// Every string we may have to write into an int16-length record field must fit.
fn strings_fit(req: &JoinRequest) -> bool {
    fits_int16_string(&req.group_id)
        && fits_int16_string(&req.member_id)
        && req.client_id.len() <= MAX_ID_PREFIX_BYTES
        && req
            .group_instance_id
            .as_ref()
            .is_none_or(|i| i.len() <= MAX_ID_PREFIX_BYTES)
        && fits_int16_string(&req.client_host)
        && fits_int16_string(&req.protocol_type)
        && req.protocols.iter().all(|(n, _)| fits_int16_string(n))
}

/// Kafka's `acceptJoiningMember` (`group.max.size`): during a rebalance the cap applies to
/// the members that have joined it; otherwise to the group size. Known members are let in.
fn accept_joining_member(cfg: &GroupConfig, g: &Group, member_id: &str) -> bool {
    match g.state {
        GroupState::Empty | GroupState::Dead => true,
        GroupState::PreparingRebalance => {
            g.members
                .get(member_id)
                .is_some_and(|m| m.awaiting_join.is_some())
                || g.num_awaiting_join() < cfg.max_size
        }
        GroupState::CompletingRebalance | GroupState::Stable => {
            g.has(member_id) || g.members.len() < cfg.max_size
        }
    }
}

/// A join with an empty member id: generate one; a static member takes over its slot, a v4+
/// dynamic member is told its id (79) and remembered as pending, older clients join directly.
fn do_unknown_join(
    cfg: &GroupConfig,
    g: &mut Group,
    now_ms: i64,
    join: &Join<'_>,
    suffix: &mut super::MemberIdGenerator,
    out: &mut Vec<Output>,
) {
    let req = join.req;
    if !g.supports_protocols(&req.protocol_type, &join.protocols) {
        return join.reply_error("", INCONSISTENT_GROUP_PROTOCOL, out);
    }
    let instance = req.group_instance_id.as_deref();
    let require_known_member_id = req.api_version >= 4 && instance.is_none();
    if require_known_member_id && g.pending.len() >= cfg.max_size {
        // Runnel bound: pending ids are capped like members, so a client looping on empty
        // member ids cannot grow the group without limit.
        return join.reply_error("", GROUP_MAX_SIZE_REACHED, out);
    }
    let prefix = instance.unwrap_or(&req.client_id);
    let new_id = format!("{prefix}-{}", suffix());
    debug_assert!(!g.has(&new_id) && !g.pending.contains_key(&new_id));
    if g.has_static_member(instance) {
        update_static_member_and_rebalance(cfg, g, now_ms, join, new_id, out);
    } else if require_known_member_id {
        let deadline = now_ms.saturating_add(i64::from(req.session_timeout_ms));
        g.pending.insert(new_id.clone(), deadline);
        join.reply_error(&new_id, MEMBER_ID_REQUIRED, out);
    } else {
        add_member_and_rebalance(cfg, g, now_ms, join, new_id, out);
    }
}

/// A join with a member id.
fn do_join(cfg: &GroupConfig, g: &mut Group, now_ms: i64, join: &Join<'_>, out: &mut Vec<Output>) {
    let req = join.req;
    let member_id = req.member_id.as_str();
    let instance = req.group_instance_id.as_deref();
    if !g.supports_protocols(&req.protocol_type, &join.protocols) {
        return join.reply_error(member_id, INCONSISTENT_GROUP_PROTOCOL, out);
    }
    if g.pending.contains_key(member_id) {
        // Pending ids are only handed to dynamic members (Kafka throws here; we answer 25).
        if instance.is_some() {
            return join.reply_error(member_id, UNKNOWN_MEMBER_ID, out);
        }
        return add_member_and_rebalance(cfg, g, now_ms, join, member_id.to_owned(), out);
    }
    if g.is_static_member_fenced(member_id, instance) {
        return join.reply_error(member_id, FENCED_INSTANCE_ID, out);
    }
    let instance_not_found = instance.is_some() && !g.has_static_member(instance);
    let Some(member) = g.members.get(member_id).filter(|_| !instance_not_found) else {
        return join.reply_error(member_id, UNKNOWN_MEMBER_ID, out);
    };
    let matches = member.matches(&join.protocols);
    match g.state {
        GroupState::PreparingRebalance => {
            update_member_and_rebalance(cfg, g, now_ms, join, out);
        }
        GroupState::CompletingRebalance if matches => {
            // The member lost the join response: answer again from the current generation.
            let members = if g.is_leader(member_id) {
                g.current_member_metadata()
            } else {
                Vec::new()
            };
            out.push(current_generation_response(
                g,
                join.req_id,
                member_id,
                members,
            ));
        }
        GroupState::Stable if matches && !g.is_leader(member_id) => {
            // A follower with unchanged metadata just gets the generation back and syncs.
            out.push(current_generation_response(
                g,
                join.req_id,
                member_id,
                Vec::new(),
            ));
        }
        GroupState::CompletingRebalance | GroupState::Stable => {
            // Changed metadata, or the leader asking for a rebalance (e.g. topic metadata
            // changed on its side).
            update_member_and_rebalance(cfg, g, now_ms, join, out);
        }
        GroupState::Empty | GroupState::Dead => {
            join.reply_error(member_id, UNKNOWN_MEMBER_ID, out);
        }
    }
}

fn current_generation_response(
    g: &Group,
    req_id: RequestId,
    member_id: &str,
    members: Vec<crate::api::JoinMember>,
) -> Output {
    Output::Join(
        req_id,
        JoinResponse {
            error_code: NONE,
            generation_id: g.generation,
            protocol_type: g.protocol_type.clone(),
            protocol_name: g.protocol_name.clone(),
            leader: g.leader.clone().unwrap_or_default(),
            member_id: member_id.to_owned(),
            members,
            skip_assignment: false,
        },
    )
}

/// A brand-new member: parked in the join phase with the new-member join timeout as its
/// deadline (it has no session yet), then a rebalance.
fn add_member_and_rebalance(
    cfg: &GroupConfig,
    g: &mut Group,
    now_ms: i64,
    join: &Join<'_>,
    member_id: String,
    out: &mut Vec<Output>,
) {
    let req = join.req;
    let member = Member {
        id: member_id,
        instance_id: req.group_instance_id.clone(),
        client_id: req.client_id.clone(),
        client_host: req.client_host.clone(),
        rebalance_timeout_ms: join.rebalance_timeout_ms,
        session_timeout_ms: req.session_timeout_ms,
        protocol_type: req.protocol_type.clone(),
        protocols: join.protocols.clone(),
        assignment: Bytes::new(),
        awaiting_join: Some(join.req_id),
        awaiting_sync: None,
        is_new: true,
        deadline_ms: now_ms.saturating_add(NEW_MEMBER_JOIN_TIMEOUT_MS),
        join_seq: 0,
    };
    // Only the very first rebalance of a group extends its initial delay.
    if g.is(GroupState::PreparingRebalance) && g.generation == 0 {
        g.new_member_added = true;
    }
    g.add(member);
    maybe_prepare_rebalance(cfg, g, now_ms, out);
}

/// A known member re-joins with (possibly) new metadata: park it and rebalance. A join it
/// had parked before (a retry from another connection) is answered with 27 so no parked
/// request is ever dropped.
fn update_member_and_rebalance(
    cfg: &GroupConfig,
    g: &mut Group,
    now_ms: i64,
    join: &Join<'_>,
    out: &mut Vec<Output>,
) {
    let member_id = join.req.member_id.as_str();
    if let Some(m) = g.members.get_mut(member_id) {
        if let Some(old) = m.awaiting_join.replace(join.req_id) {
            out.push(Output::Join(
                old,
                JoinResponse::error(member_id, REBALANCE_IN_PROGRESS),
            ));
        }
        m.protocols = join.protocols.clone();
        m.rebalance_timeout_ms = join.rebalance_timeout_ms;
        m.session_timeout_ms = join.req.session_timeout_ms;
    }
    maybe_prepare_rebalance(cfg, g, now_ms, out);
}

/// KIP-345: a static member restarted (empty member id, known instance id). It takes over
/// the old member's slot under a new id; the old id is fenced (its parked requests get 82).
/// In a Stable group whose protocol choice and this member's subscription are unchanged there
/// is no rebalance: the group record is persisted with the new id and the member is answered
/// at once with the current generation. The answer names the *previous* leader id, so a
/// restarted leader does not compute an assignment that a Stable group would never
/// distribute.
fn update_static_member_and_rebalance(
    cfg: &GroupConfig,
    g: &mut Group,
    now_ms: i64,
    join: &Join<'_>,
    new_id: String,
    out: &mut Vec<Output>,
) {
    let req = join.req;
    let previous_leader = g.leader.clone().unwrap_or_default();
    let Some(old_id) = g
        .static_member_id(req.group_instance_id.as_deref())
        .map(str::to_owned)
    else {
        return join.reply_error("", UNKNOWN_MEMBER_ID, out);
    };
    if let Some((old_join, old_sync)) = g.replace_static_member(&old_id, &new_id) {
        if let Some(r) = old_join {
            out.push(Output::Join(
                r,
                JoinResponse::error(&old_id, FENCED_INSTANCE_ID),
            ));
        }
        if let Some(r) = old_sync {
            out.push(Output::Sync(
                r,
                crate::api::SyncResponse::error(FENCED_INSTANCE_ID),
            ));
        }
    }
    let Some(m) = g.members.get_mut(&new_id) else {
        return join.reply_error("", UNKNOWN_MEMBER_ID, out);
    };
    let old_protocols = std::mem::replace(&mut m.protocols, join.protocols.clone());
    m.rebalance_timeout_ms = join.rebalance_timeout_ms;
    m.session_timeout_ms = req.session_timeout_ms;
    m.awaiting_join = Some(join.req_id);
    m.refresh_session(now_ms);
    match g.state {
        GroupState::Stable => {
            let current = g.protocol_name.clone();
            let unchanged = current.is_some()
                && g.select_protocol() == current
                && g.members.get(&new_id).is_some_and(|m| {
                    let p = current.as_deref().unwrap_or("");
                    old_protocols
                        .iter()
                        .find(|(n, _)| n == p)
                        .is_some_and(|(_, meta)| *meta == m.metadata(p))
                });
            if unchanged {
                if let Some(m) = g.members.get_mut(&new_id) {
                    m.awaiting_join = None;
                }
                out.push(Output::Persist(vec![g.metadata_record()]));
                let mut resp = current_generation_response(g, join.req_id, &new_id, Vec::new());
                if let Output::Join(_, r) = &mut resp {
                    r.leader = previous_leader;
                }
                out.push(resp);
            } else {
                maybe_prepare_rebalance(cfg, g, now_ms, out);
            }
        }
        // The leader may already have the old id in its member list: rebalance so the
        // assignment names the new id.
        GroupState::CompletingRebalance => prepare_rebalance(cfg, g, now_ms, out),
        GroupState::PreparingRebalance => {}
        GroupState::Empty | GroupState::Dead => {
            debug_assert!(false, "static member in a group without members");
            if let Some(m) = g.members.get_mut(&new_id) {
                m.awaiting_join = None;
            }
            join.reply_error(&new_id, UNKNOWN_MEMBER_ID, out);
        }
    }
}
