//! The state-machine steps shared by every API and by the timers (Kafka's
//! `prepareRebalance`, `onCompleteJoin`, `removeMemberAndUpdateGroup`, assignment
//! propagation). Each takes the group and pushes the responses it completes onto `out`.

use crate::api::{JoinResponse, Output, SyncResponse};
use crate::config::GroupConfig;
use crate::errors::UNKNOWN_MEMBER_ID;
use crate::group::{Group, JoinTimer};
use crate::member::Member;
use crate::state::GroupState;

/// Starts a rebalance if the state allows one (Kafka's `maybePrepareRebalance`).
pub(super) fn maybe_prepare_rebalance(
    cfg: &GroupConfig,
    g: &mut Group,
    now_ms: i64,
    out: &mut Vec<Output>,
) {
    if g.state.can_rebalance() {
        prepare_rebalance(cfg, g, now_ms, out);
    }
}

/// Enters PreparingRebalance: parked syncs of an interrupted CompletingRebalance get 27, and
/// the join phase is timed: the initial delay for a group that was Empty, else the largest
/// member rebalance timeout. Completes at once if everyone has already joined.
pub(super) fn prepare_rebalance(
    cfg: &GroupConfig,
    g: &mut Group,
    now_ms: i64,
    out: &mut Vec<Output>,
) {
    if g.is(GroupState::CompletingRebalance) {
        reset_and_propagate_assignment_error(g, crate::errors::REBALANCE_IN_PROGRESS, out);
    }
    let timer = if g.is(GroupState::Empty) {
        let delay = i64::from(cfg.initial_rebalance_delay_ms.max(0));
        JoinTimer::Initial {
            deadline_ms: now_ms.saturating_add(delay),
            delay_ms: delay,
            remaining_ms: (g.rebalance_timeout_ms() - delay).max(0),
        }
    } else {
        JoinTimer::Rebalance {
            deadline_ms: now_ms.saturating_add(g.rebalance_timeout_ms()),
        }
    };
    g.transition_to(GroupState::PreparingRebalance, now_ms);
    g.join_timer = Some(timer);
    try_complete_join(cfg, g, now_ms, out);
}

/// Completes the join phase early when every member has re-joined (never during the
/// initial delay, which exists precisely to wait for more members).
pub(super) fn try_complete_join(
    cfg: &GroupConfig,
    g: &mut Group,
    now_ms: i64,
    out: &mut Vec<Output>,
) {
    if g.is(GroupState::PreparingRebalance)
        && matches!(g.join_timer, Some(JoinTimer::Rebalance { .. }))
        && g.all_members_joined()
    {
        complete_join(cfg, g, now_ms, out);
    }
}

/// The join timer fired: extend the initial delay while new members keep arriving (up to
/// the rebalance timeout), otherwise complete the join phase.
pub(super) fn on_join_timer(cfg: &GroupConfig, g: &mut Group, now_ms: i64, out: &mut Vec<Output>) {
    match g.join_timer {
        Some(JoinTimer::Initial {
            delay_ms,
            remaining_ms,
            ..
        }) if g.new_member_added && remaining_ms != 0 => {
            g.new_member_added = false;
            let delay = i64::from(cfg.initial_rebalance_delay_ms.max(0)).min(remaining_ms);
            g.join_timer = Some(JoinTimer::Initial {
                deadline_ms: now_ms.saturating_add(delay),
                delay_ms: delay,
                remaining_ms: (remaining_ms - delay_ms).max(0),
            });
        }
        Some(_) => complete_join(cfg, g, now_ms, out),
        None => debug_assert!(false, "join timer fired without a timer"),
    }
}

/// Kafka's `onCompleteJoin`: drop dynamic members that did not re-join, make sure the leader
/// re-joined, start the next generation and answer every parked join (only the leader gets
/// the member list). A group left without members becomes Empty and is persisted. If only
/// static members remain and none re-joined, the phase is re-armed: their sessions decide.
pub(super) fn complete_join(_cfg: &GroupConfig, g: &mut Group, now_ms: i64, out: &mut Vec<Output>) {
    debug_assert!(g.is(GroupState::PreparingRebalance));
    let not_rejoined: Vec<String> = g
        .members
        .values()
        .filter(|m| m.awaiting_join.is_none() && m.instance_id.is_none())
        .map(|m| m.id.clone())
        .collect();
    for id in not_rejoined {
        if let Some(m) = g.remove(&id) {
            answer_removed(m, out);
        }
    }
    if !g.maybe_elect_new_joined_leader() && !g.members.is_empty() {
        g.join_timer = Some(JoinTimer::Rebalance {
            deadline_ms: now_ms.saturating_add(g.rebalance_timeout_ms()),
        });
        return;
    }
    init_next_generation(g, now_ms);
    if g.is(GroupState::Empty) {
        out.push(Output::Persist(vec![g.metadata_record()]));
        return;
    }
    let all = g.current_member_metadata();
    let leader = g.leader.clone().unwrap_or_default();
    let (generation, protocol_type, protocol_name) = (
        g.generation,
        g.protocol_type.clone(),
        g.protocol_name.clone(),
    );
    for m in g.members.values_mut() {
        if let Some(req) = m.awaiting_join.take() {
            out.push(Output::Join(
                req,
                JoinResponse {
                    error_code: 0,
                    generation_id: generation,
                    protocol_type: protocol_type.clone(),
                    protocol_name: protocol_name.clone(),
                    leader: leader.clone(),
                    member_id: m.id.clone(),
                    members: if m.id == leader {
                        all.clone()
                    } else {
                        Vec::new()
                    },
                    skip_assignment: false,
                },
            ));
        }
        m.refresh_session(now_ms);
        m.is_new = false;
    }
}

/// Kafka's `initNextGeneration`.
fn init_next_generation(g: &mut Group, now_ms: i64) {
    g.generation = g.generation.wrapping_add(1);
    if g.members.is_empty() {
        g.protocol_name = None;
        g.subscribed_topics = g.compute_subscribed_topics();
        g.transition_to(GroupState::Empty, now_ms);
    } else {
        // A common protocol always exists (every join is checked against all members), but
        // loaded records are not client-checked: fall back to the leader's first choice.
        let selected = g.select_protocol().unwrap_or_else(|| {
            g.leader
                .as_deref()
                .and_then(|l| g.members.get(l))
                .and_then(|m| m.protocols.first())
                .map(|(n, _)| n.clone())
                .unwrap_or_default()
        });
        g.protocol_name = Some(selected);
        g.subscribed_topics = g.compute_subscribed_topics();
        g.transition_to(GroupState::CompletingRebalance, now_ms);
    }
}

/// Removes a member (leave, session expiry) and lets the group react: a rebalance from
/// Stable/CompletingRebalance, a possible join completion from PreparingRebalance.
pub(super) fn remove_member_and_update_group(
    cfg: &GroupConfig,
    g: &mut Group,
    member_id: &str,
    now_ms: i64,
    out: &mut Vec<Output>,
) {
    let Some(m) = g.remove(member_id) else {
        return;
    };
    answer_removed(m, out);
    match g.state {
        GroupState::Dead | GroupState::Empty => {}
        GroupState::Stable | GroupState::CompletingRebalance => {
            maybe_prepare_rebalance(cfg, g, now_ms, out)
        }
        GroupState::PreparingRebalance => try_complete_join(cfg, g, now_ms, out),
    }
}

/// A removed member's parked requests get 25 UNKNOWN_MEMBER_ID (Kafka answers the join this
/// way; we also answer a parked sync, so every parked request completes exactly once).
pub(super) fn answer_removed(m: Member, out: &mut Vec<Output>) {
    if let Some(req) = m.awaiting_join {
        out.push(Output::Join(
            req,
            JoinResponse::error("", UNKNOWN_MEMBER_ID),
        ));
    }
    if let Some(req) = m.awaiting_sync {
        out.push(Output::Sync(req, SyncResponse::error(UNKNOWN_MEMBER_ID)));
    }
}

/// Clears every assignment and fails the parked syncs with `error`.
pub(super) fn reset_and_propagate_assignment_error(
    g: &mut Group,
    error: i16,
    out: &mut Vec<Output>,
) {
    debug_assert!(g.is(GroupState::CompletingRebalance));
    for m in g.members.values_mut() {
        m.assignment = bytes::Bytes::new();
        if let Some(req) = m.awaiting_sync.take() {
            out.push(Output::Sync(req, SyncResponse::error(error)));
        }
    }
}

/// Answers every parked sync with its member's assignment and refreshes their sessions.
pub(super) fn propagate_assignment(g: &mut Group, now_ms: i64, out: &mut Vec<Output>) {
    for m in g.members.values_mut() {
        if let Some(req) = m.awaiting_sync.take() {
            out.push(Output::Sync(
                req,
                SyncResponse {
                    error_code: 0,
                    protocol_type: g.protocol_type.clone(),
                    protocol_name: g.protocol_name.clone(),
                    assignment: m.assignment.clone(),
                },
            ));
            m.refresh_session(now_ms);
        }
    }
}
