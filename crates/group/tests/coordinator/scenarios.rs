//! End-to-end group scenarios (spec H.2, H.6).

use bytes::Bytes;
use runnel_group::codec::{self, OffsetsKey};
use runnel_group::errors::*;
use runnel_group::subscription::subscription_topics;
use runnel_group::*;

use crate::common::*;

#[test]
fn three_members_form_one_generation() {
    let mut h = Harness::new(GroupConfig {
        initial_rebalance_delay_ms: 3000,
        ..config()
    });
    let t0 = h.now;
    let mut ids = Vec::new();
    let mut parked = Vec::new();
    for (i, c) in ["c1", "c2", "c3"].iter().enumerate() {
        h.now = t0 + i as i64 * 100;
        let (id, r, outs) = h.join_new("g", c);
        assert!(outs.is_empty(), "parked: {outs:?}");
        ids.push(id);
        parked.push(r);
    }
    assert_eq!(h.c.describe_group("g").state, "PreparingRebalance");
    // The initial delay fires at t0+3000 and is extended once because members kept coming.
    assert!(h.tick_to(t0 + 2999).is_empty());
    assert!(h.tick_to(t0 + 3000).is_empty());
    let outs = h.tick_to(t0 + 6000);
    let responses: Vec<JoinResponse> = parked.iter().map(|r| join_of(&outs, *r).unwrap()).collect();
    for (resp, id) in responses.iter().zip(&ids) {
        assert_eq!(resp.error_code, 0);
        assert_eq!(resp.generation_id, 1);
        assert_eq!(resp.leader, ids[0], "first joiner leads");
        assert_eq!(&resp.member_id, id);
        assert_eq!(resp.protocol_name.as_deref(), Some("range"));
        assert_eq!(resp.protocol_type.as_deref(), Some("consumer"));
    }
    assert_eq!(
        responses[0].members.len(),
        3,
        "leader gets every subscription"
    );
    for m in &responses[0].members {
        assert_eq!(subscription_topics(&m.metadata).unwrap(), vec!["t"]);
    }
    assert!(responses[1].members.is_empty() && responses[2].members.is_empty());
    assert_eq!(h.c.describe_group("g").state, "CompletingRebalance");
    // Heartbeats between join and sync are fine.
    assert_eq!(h.heartbeat("g", 1, &ids[1]), 0);

    let log_before = h.log.len();
    h.complete_sync("g", 1, &ids[0], &ids);
    let d = h.c.describe_group("g");
    assert_eq!(d.state, "Stable");
    assert_eq!(d.protocol, "range");
    assert_eq!(d.members.len(), 3);
    for m in &d.members {
        assert_eq!(
            m.assignment,
            Bytes::from(format!("{}-assignment", m.member_id))
        );
    }
    // The leader's sync persisted the group with every assignment.
    assert_eq!(h.log.len(), log_before + 1);
    let v = last_group_value(&h.log, "g").unwrap();
    assert_eq!(v.generation, 1);
    assert_eq!(v.leader.as_deref(), Some(ids[0].as_str()));
    assert_eq!(v.members.len(), 3);
    assert!(v
        .members
        .iter()
        .all(|m| m.assignment == format!("{}-assignment", m.member_id)));
}

#[test]
fn leader_sync_fills_missing_assignments_and_ignores_strangers() {
    let mut h = Harness::new(config());
    let (a, ra, _) = h.join_new("g", "a");
    let (b, rb, _) = h.join_new("g", "b");
    let mut outs = h.advance(0);
    outs.extend(h.advance(0));
    let gen = join_of(&outs, ra).unwrap().generation_id;
    assert_eq!(join_of(&outs, rb).unwrap().leader, a);
    let (rf, o) = h.sync(sync_request("g", gen, &b));
    assert!(o.is_empty());
    let mut req = sync_request("g", gen, &a);
    req.assignments = vec![
        (a.clone(), Bytes::from_static(b"x")),
        ("stranger".into(), Bytes::from_static(b"y")),
    ];
    let (rl, o) = h.sync(req);
    assert_eq!(
        sync_of(&o, rl).unwrap().assignment,
        Bytes::from_static(b"x")
    );
    let follower = sync_of(&o, rf).unwrap();
    assert_eq!(follower.error_code, 0);
    assert!(follower.assignment.is_empty());
    // A late sync in Stable gets the stored assignment at once.
    let (r, o) = h.sync(sync_request("g", gen, &a));
    assert_eq!(sync_of(&o, r).unwrap().assignment, Bytes::from_static(b"x"));
}

#[test]
fn fourth_member_triggers_rebalance_and_everyone_rejoins() {
    let mut h = Harness::new(config());
    let (gen, leader, ids) = h.stable_group("g", &["c1", "c2", "c3"]);
    let (d, rd, outs) = h.join_new("g", "c4");
    assert!(outs.is_empty());
    assert_eq!(h.c.describe_group("g").state, "PreparingRebalance");
    for id in &ids {
        assert_eq!(h.heartbeat("g", gen, id), REBALANCE_IN_PROGRESS);
    }
    // Commits of the current generation are still accepted while preparing.
    assert_eq!(
        h.commit(&commit_request("g", gen, &ids[1], &[("t", 0, 5)]))
            .0,
        0
    );
    let mut rejoin = Vec::new();
    for id in &ids {
        let (r, outs) = h.join(join_request("g", id, "x"));
        rejoin.push((id.clone(), r));
        if id != ids.last().unwrap() {
            assert!(outs.is_empty());
        } else {
            // The last re-join completes the phase in the same call.
            let all: Vec<_> = rejoin
                .iter()
                .map(|(_, r)| join_of(&outs, *r).unwrap())
                .collect();
            let new = join_of(&outs, rd).unwrap();
            assert_eq!(new.generation_id, gen + 1);
            assert!(all
                .iter()
                .all(|r| r.generation_id == gen + 1 && r.leader == leader));
            assert_eq!(all[0].members.len(), 4);
            assert!(new.members.is_empty());
        }
    }
    let mut members = ids.clone();
    members.push(d);
    h.complete_sync("g", gen + 1, &leader, &members);
    assert_eq!(h.c.describe_group("g").members.len(), 4);
}

#[test]
fn session_expiry_removes_member_and_rebalances() {
    let mut h = Harness::new(config());
    let (gen, leader, ids) = h.stable_group("g", &["c1", "c2", "c3"]);
    let t = h.now;
    // c1 and c2 heartbeat; c3 goes silent.
    for step in 1..=4 {
        h.now = t + step * 3000;
        assert_eq!(h.heartbeat("g", gen, &ids[0]), 0);
        assert_eq!(h.heartbeat("g", gen, &ids[1]), 0);
        h.tick_to(h.now);
    }
    // 12 s > 10 s session: c3 was removed at t+10000 (ticks ran at 3 s steps).
    let d = h.c.describe_group("g");
    assert_eq!(d.state, "PreparingRebalance");
    assert_eq!(d.members.len(), 2);
    assert!(d.members.iter().all(|m| m.member_id != ids[2]));
    assert_eq!(h.heartbeat("g", gen, &ids[2]), UNKNOWN_MEMBER_ID);
    let (r0, _) = h.join(join_request("g", &ids[0], "c1"));
    let (r1, outs) = h.join(join_request("g", &ids[1], "c2"));
    assert_eq!(join_of(&outs, r0).unwrap().generation_id, gen + 1);
    assert_eq!(join_of(&outs, r1).unwrap().leader, leader);
}

#[test]
fn members_that_do_not_rejoin_are_dropped_at_rebalance_timeout() {
    let mut h = Harness::new(config());
    let (gen, _leader, ids) = h.stable_group("g", &["c1", "c2"]);
    // c1 re-joins with new metadata; c2 keeps heartbeating but never re-joins.
    let mut req = join_request("g", &ids[0], "c1");
    req.protocols = protocols(&["t", "u"]);
    let (r, outs) = h.join(req);
    assert!(outs.is_empty());
    let start = h.now;
    for step in 1..6 {
        h.now = start + step * 5000;
        assert_eq!(h.heartbeat("g", gen, &ids[1]), REBALANCE_IN_PROGRESS);
        assert!(h.tick_to(h.now).is_empty());
    }
    assert!(h.tick_to(start + REBALANCE as i64 - 1).is_empty());
    let outs = h.tick_to(start + REBALANCE as i64);
    let resp = join_of(&outs, r).unwrap();
    assert_eq!(resp.generation_id, gen + 1);
    assert_eq!(resp.members.len(), 1);
    assert_eq!(h.heartbeat("g", gen + 1, &ids[1]), UNKNOWN_MEMBER_ID);
}

#[test]
fn leave_triggers_rebalance_and_last_leave_empties_group() {
    let mut h = Harness::new(config());
    let (gen, leader, ids) = h.stable_group("g", &["c1", "c2"]);
    // The leader leaves: the other member becomes leader of the next generation.
    let (top, codes, outs) = h.leave("g", &leader);
    assert_eq!((top, codes), (0, vec![0]));
    assert!(outs.is_empty());
    assert_eq!(h.c.describe_group("g").state, "PreparingRebalance");
    let other = ids.iter().find(|i| **i != leader).unwrap().clone();
    let (r, outs) = h.join(join_request("g", &other, "c2"));
    let resp = join_of(&outs, r).unwrap();
    assert_eq!(resp.generation_id, gen + 1);
    assert_eq!(resp.leader, other);
    h.complete_sync("g", gen + 1, &other, std::slice::from_ref(&other));
    // The last member leaves: Empty, next generation, persisted.
    let (_, codes, outs) = h.leave("g", &other);
    assert_eq!(codes, vec![0]);
    let v = last_group_value(&persisted(&outs), "g").unwrap();
    assert_eq!(v.generation, gen + 2);
    assert!(v.members.is_empty() && v.protocol.is_none() && v.leader.is_none());
    assert_eq!(v.protocol_type, "consumer");
    let d = h.c.describe_group("g");
    assert_eq!((d.state.as_str(), d.members.len()), ("Empty", 0));
}

#[test]
fn leave_answers_parked_requests() {
    let mut h = Harness::new(config());
    let (gen, leader, ids) = h.stable_group("g", &["c1", "c2"]);
    let follower = ids.iter().find(|i| **i != leader).unwrap().clone();
    // Force a new generation where the follower syncs (parked) and then leaves.
    let (r0, _) = h.join(join_request("g", &leader, "c1"));
    let (r1, outs) = h.join(join_request("g", &follower, "c2"));
    assert!(join_of(&outs, r0).is_some() && join_of(&outs, r1).is_some());
    let (rs, outs) = h.sync(sync_request("g", gen + 1, &follower));
    assert!(outs.is_empty());
    let (_, _, outs) = h.leave("g", &follower);
    assert_eq!(sync_of(&outs, rs).unwrap().error_code, UNKNOWN_MEMBER_ID);
}

fn static_join(group: &str, member: &str, instance: &str) -> JoinRequest {
    JoinRequest {
        group_instance_id: Some(instance.into()),
        ..join_request(group, member, instance)
    }
}

#[test]
fn static_member_rejoins_without_rebalance() {
    let mut h = Harness::new(config());
    // Static members (v5) get their id directly, no 79.
    let (ra, outs) = h.join(static_join("g", "", "i1"));
    assert!(outs.is_empty());
    let (rb, _) = h.join(static_join("g", "", "i2"));
    let mut outs = h.advance(0);
    outs.extend(h.advance(0));
    let a = join_of(&outs, ra).unwrap();
    let b = join_of(&outs, rb).unwrap();
    assert!(a.member_id.starts_with("i1-"));
    assert_eq!(a.leader, a.member_id);
    let gen = a.generation_id;
    h.complete_sync(
        "g",
        gen,
        &a.member_id,
        &[a.member_id.clone(), b.member_id.clone()],
    );

    // i1 (the leader) restarts: same subscription, unknown member id.
    let (r, outs) = h.join(static_join("g", "", "i1"));
    let resp = join_of(&outs, r).unwrap();
    assert_eq!(resp.error_code, 0);
    assert_eq!(resp.generation_id, gen, "no new generation");
    assert_ne!(resp.member_id, a.member_id);
    assert_eq!(
        resp.leader, a.member_id,
        "old leader id, so it does not re-assign"
    );
    assert!(resp.members.is_empty());
    assert_eq!(h.c.describe_group("g").state, "Stable");
    // Persisted with the new id, before the answer.
    assert!(matches!(outs[0], Output::Persist(_)));
    let v = last_group_value(&h.log, "g").unwrap();
    assert!(v.members.iter().any(|m| m.member_id == resp.member_id));
    assert!(v.members.iter().all(|m| m.member_id != a.member_id));
    // The new id syncs and gets the old assignment; the old id is fenced everywhere.
    let mut sreq = sync_request("g", gen, &resp.member_id);
    sreq.group_instance_id = Some("i1".into());
    let (rs, outs) = h.sync(sreq);
    assert_eq!(
        sync_of(&outs, rs).unwrap().assignment,
        Bytes::from(format!("{}-assignment", a.member_id))
    );
    let mut hb = heartbeat_request("g", gen, &a.member_id);
    hb.group_instance_id = Some("i1".into());
    assert_eq!(h.c.heartbeat(h.now, &hb), FENCED_INSTANCE_ID);
    assert_eq!(h.heartbeat("g", gen, &b.member_id), 0);

    // A restart with a changed subscription does rebalance.
    let mut changed = static_join("g", "", "i2");
    changed.protocols = protocols(&["other"]);
    let (r, outs) = h.join(changed);
    assert!(join_of(&outs, r).is_none());
    assert_eq!(h.c.describe_group("g").state, "PreparingRebalance");
}

/// Regression (proptest seed a2bef831): a static leader restarts in a Stable group. As in
/// Kafka's `replaceStaticMember`, the group's leader id moves to the new member id within the
/// same generation: the restarted member is answered with the old leader id (so it does not
/// assign), a follower re-joining afterwards is told the new id, and nothing names the old id
/// as a member any more.
#[test]
fn static_leader_restart_renames_leader_within_generation() {
    let mut h = Harness::new(config());
    // The static member joins first, so it leads.
    let (ra, outs) = h.join(static_join("g", "", "i1"));
    assert!(outs.is_empty());
    let (b_id, rb, outs) = h.join_new("g", "c2");
    assert!(outs.is_empty());
    let mut outs = h.advance(0);
    outs.extend(h.advance(0));
    let a = join_of(&outs, ra).unwrap();
    let b = join_of(&outs, rb).unwrap();
    assert_eq!((a.error_code, b.error_code), (0, 0));
    let gen = a.generation_id;
    let a_id = a.member_id.clone();
    assert!(a_id.starts_with("i1-"));
    assert_eq!(a.leader, a_id);
    assert_eq!(b.leader, a_id);
    h.complete_sync("g", gen, &a_id, &[a_id.clone(), b_id.clone()]);
    assert_eq!(h.c.describe_group("g").state, "Stable");

    // The static leader restarts with the same subscription.
    let (r, outs) = h.join(static_join("g", "", "i1"));
    let restarted = join_of(&outs, r).unwrap();
    assert_eq!(restarted.error_code, 0);
    assert_eq!(restarted.generation_id, gen);
    assert_eq!(
        restarted.leader, a_id,
        "old leader id: no trivial assignment"
    );
    let new_id = restarted.member_id.clone();
    assert_ne!(new_id, a_id);
    assert_eq!(
        h.c.generation_and_leader("g").unwrap().1,
        Some(new_id.clone())
    );
    let v = last_group_value(&h.log, "g").unwrap();
    assert_eq!(v.generation, gen);
    assert_eq!(v.leader.as_deref(), Some(new_id.as_str()));

    // A follower re-joining with unchanged metadata gets the same generation, led by the
    // renamed leader.
    let (r, outs) = h.join(join_request("g", &b_id, "c2"));
    let follower = join_of(&outs, r).unwrap();
    assert_eq!(follower.error_code, 0);
    assert_eq!(follower.generation_id, gen);
    assert_eq!(follower.leader, new_id);
    assert!(follower.members.is_empty());
    let d = h.c.describe_group("g");
    assert_eq!(d.state, "Stable");
    assert!(d.members.iter().all(|m| m.member_id != a_id));

    // The old id is fenced; the new one syncs and heartbeats in the same generation.
    let mut old = sync_request("g", gen, &a_id);
    old.group_instance_id = Some("i1".into());
    let (rs, outs) = h.sync(old);
    assert_eq!(sync_of(&outs, rs).unwrap().error_code, FENCED_INSTANCE_ID);
    let mut hb = heartbeat_request("g", gen, &new_id);
    hb.group_instance_id = Some("i1".into());
    assert_eq!(h.c.heartbeat(h.now, &hb), NONE);
}

#[test]
fn static_member_is_kept_through_rebalance_and_expires_by_session() {
    let mut h = Harness::new(config());
    let (ra, _) = h.join(static_join("g", "", "i1"));
    let outs = h.advance(0);
    let a = join_of(&outs, ra).unwrap();
    let gen = a.generation_id;
    h.complete_sync("g", gen, &a.member_id, std::slice::from_ref(&a.member_id));
    // A newcomer starts a rebalance; i1 keeps heartbeating but never re-joins.
    let start = h.now;
    let (late, rd, _) = h.join_new("g", "late");
    let mut hb = heartbeat_request("g", gen, &a.member_id);
    hb.group_instance_id = Some("i1".into());
    let mut resp = None;
    for step in 1..=6 {
        h.now = start + step * 5000;
        assert_eq!(h.c.heartbeat(h.now, &hb), REBALANCE_IN_PROGRESS);
        resp = resp.or_else(|| join_of(&h.tick_to(h.now), rd));
    }
    // At the rebalance timeout a dynamic member would be dropped; the static one stays, and
    // the leader role passes to a member that did re-join.
    let resp = resp.unwrap();
    assert_eq!(resp.generation_id, gen + 1);
    assert_eq!(resp.leader, late);
    assert_eq!(resp.members.len(), 2);
    // Without heartbeats it is removed by its session timeout.
    h.now += SESSION as i64 - 1;
    assert_eq!(h.heartbeat("g", gen + 1, &late), 0);
    h.advance(1);
    let d = h.c.describe_group("g");
    assert!(d.members.iter().all(|m| m.member_id != a.member_id));
    assert_eq!(d.state, "PreparingRebalance");
}

#[test]
fn simple_commit_on_unknown_and_empty_group() {
    let mut h = Harness::new(config());
    let (top, codes) = h.commit(&commit_request(
        "simple",
        -1,
        "",
        &[("t", 0, 10), ("t", 1, 20)],
    ));
    assert_eq!(top, 0);
    assert_eq!(codes, vec![("t".into(), 0, 0), ("t".into(), 1, 0)]);
    assert_eq!(
        h.c.list_groups(&[]),
        vec![("simple".to_string(), String::new(), "Empty".to_string())]
    );
    let (code, fetched) =
        h.c.fetch_offsets("simple", Some(&[("t".to_string(), vec![0, 1, 2])]));
    assert_eq!(code, 0);
    assert_eq!(fetched[0].2.as_ref().unwrap().offset, 10);
    assert_eq!(fetched[0].2.as_ref().unwrap().metadata, "m10");
    assert_eq!(fetched[0].2.as_ref().unwrap().commit_timestamp, h.now);
    assert_eq!(fetched[1].2.as_ref().unwrap().offset, 20);
    assert!(fetched[2].2.is_none());
    // Records: offset key v1 + value v3.
    assert_eq!(h.log.len(), 2);
    assert_eq!(
        codec::decode_key(&h.log[0].key).unwrap(),
        OffsetsKey::Offset {
            group: "simple".into(),
            topic: "t".into(),
            partition: 0
        }
    );
    // An unknown group has nothing committed.
    let (_, none) =
        h.c.fetch_offsets("nope", Some(&[("t".to_string(), vec![0])]));
    assert!(none[0].2.is_none());
    assert!(h.c.fetch_offsets("nope", None).1.is_empty());
    // Once the group has members, simple commits are refused (25: "" is not a member).
    let (_gen, _, _) = h.stable_group("simple", &["c1"]);
    assert_eq!(
        h.commit(&commit_request("simple", -1, "", &[("t", 0, 11)]))
            .0,
        UNKNOWN_MEMBER_ID
    );
}

#[test]
fn commit_generation_checks() {
    let mut h = Harness::new(config());
    let (gen, leader, ids) = h.stable_group("g", &["c1", "c2"]);
    assert_eq!(
        h.commit(&commit_request("g", gen, &ids[0], &[("t", 0, 1)]))
            .0,
        0
    );
    let (top, codes) = h.commit(&commit_request(
        "g",
        gen + 1,
        &ids[0],
        &[("t", 0, 2), ("u", 3, 4)],
    ));
    assert_eq!(top, ILLEGAL_GENERATION);
    assert!(codes.iter().all(|c| c.2 == ILLEGAL_GENERATION) && codes.len() == 2);
    assert_eq!(
        h.commit(&commit_request("g", gen, "ghost", &[("t", 0, 2)]))
            .0,
        UNKNOWN_MEMBER_ID
    );
    assert_eq!(
        h.commit(&commit_request("unknown", 3, "m", &[("t", 0, 2)]))
            .0,
        ILLEGAL_GENERATION
    );
    // CompletingRebalance: 27 for the new generation, 22 for the old.
    h.join(join_request("g", &leader, "c1"));
    let other = ids.iter().find(|i| **i != leader).unwrap();
    h.join(join_request("g", other, "c2"));
    assert_eq!(h.c.describe_group("g").state, "CompletingRebalance");
    assert_eq!(
        h.commit(&commit_request("g", gen + 1, other, &[("t", 0, 3)]))
            .0,
        REBALANCE_IN_PROGRESS
    );
    assert_eq!(
        h.commit(&commit_request("g", gen, other, &[("t", 0, 3)])).0,
        ILLEGAL_GENERATION
    );
    let (_, fetched) = h.c.fetch_offsets("g", None);
    assert_eq!(fetched.len(), 1);
    assert_eq!(fetched[0].2.as_ref().unwrap().offset, 1);
}

#[test]
fn offsets_expire_after_group_empty_for_retention() {
    let retention = 100_000;
    let mut h = Harness::new(GroupConfig {
        offsets_retention_ms: retention,
        offsets_retention_check_interval_ms: 1,
        ..config()
    });
    let (gen, _, ids) = h.stable_group("g", &["c1"]);
    assert_eq!(
        h.commit(&commit_request("g", gen, &ids[0], &[("t", 0, 7)]))
            .0,
        0
    );
    // Stable and subscribed to "t": never expires, however old.
    for _ in 0..12 {
        h.now += 9_000;
        assert_eq!(h.heartbeat("g", gen, &ids[0]), 0);
        h.tick_to(h.now);
    }
    assert_eq!(h.c.fetch_offsets("g", None).1.len(), 1);
    h.leave("g", &ids[0]);
    let empty_at = h.now;
    h.tick_to(empty_at + retention - 1);
    assert_eq!(
        h.c.fetch_offsets("g", None).1.len(),
        1,
        "retention counts from Empty"
    );
    let outs = h.tick_to(empty_at + retention);
    let tombstones = persisted(&outs);
    assert_eq!(
        tombstones.len(),
        2,
        "offset + group tombstones: {tombstones:?}"
    );
    assert!(tombstones.iter().all(|r| r.value.is_none()));
    assert_eq!(
        codec::decode_key(&tombstones[1].key).unwrap(),
        OffsetsKey::Group { group: "g".into() }
    );
    assert!(h.c.fetch_offsets("g", None).1.is_empty());
    assert_eq!(h.c.groups().count(), 0);
}

#[test]
fn stable_group_expires_offsets_of_unsubscribed_topics() {
    let retention = 50_000;
    let mut h = Harness::new(GroupConfig {
        offsets_retention_ms: retention,
        offsets_retention_check_interval_ms: 1,
        ..config()
    });
    let (gen, _, ids) = h.stable_group("g", &["c1"]);
    h.commit(&commit_request(
        "g",
        gen,
        &ids[0],
        &[("t", 0, 1), ("old", 0, 2)],
    ));
    for _ in 0..6 {
        h.now += 9_000;
        h.heartbeat("g", gen, &ids[0]);
        h.tick_to(h.now);
    }
    let (_, left) = h.c.fetch_offsets("g", None);
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].0, "t");
}

#[test]
fn simple_commit_offsets_expire_by_commit_time() {
    let mut h = Harness::new(GroupConfig {
        offsets_retention_ms: 1000,
        offsets_retention_check_interval_ms: 1,
        ..config()
    });
    h.commit(&commit_request("s", -1, "", &[("t", 0, 1)]));
    h.advance(500);
    h.commit(&commit_request("s", -1, "", &[("t", 1, 1)]));
    let outs = h.advance(500);
    assert_eq!(persisted(&outs).len(), 1);
    let outs = h.advance(500);
    // Last offset gone, and no group tombstone: it never had a generation.
    assert_eq!(persisted(&outs).len(), 1);
    assert_eq!(h.c.groups().count(), 0);
}

#[test]
fn initial_rebalance_delay() {
    let mut h = Harness::new(GroupConfig {
        initial_rebalance_delay_ms: 3000,
        ..config()
    });
    let t0 = h.now;
    let (_, r, _) = h.join_new("g", "c1");
    assert!(
        h.tick_to(t0 + 2999).is_empty(),
        "waits even though everyone joined"
    );
    let outs = h.tick_to(t0 + 3000);
    assert_eq!(join_of(&outs, r).unwrap().generation_id, 1);

    // Extensions stop at the rebalance timeout even if members keep arriving.
    let mut h = Harness::new(GroupConfig {
        initial_rebalance_delay_ms: 3000,
        ..config()
    });
    let mut req = join_request("g2", "", "c");
    req.api_version = 3; // no 79: joins directly
    req.rebalance_timeout_ms = 7000;
    let t0 = h.now;
    let (r, _) = h.join(req.clone());
    let mut completed_at = None;
    for step in 1..40 {
        h.now = t0 + step * 500;
        h.join(req.clone());
        if join_of(&h.tick_to(h.now), r).is_some() {
            completed_at = Some(h.now - t0);
            break;
        }
    }
    // 3000 + 3000 + min(3000, 1000) = 7000.
    assert_eq!(completed_at, Some(7000));
}

#[test]
fn new_member_join_wait_expires() {
    let mut h = Harness::new(config());
    let (gen, _, ids) = h.stable_group("g", &["c1"]);
    // A new member parks; c1 keeps heartbeating (27) but never re-joins. The rebalance
    // timeout (30 s) completes the phase without c1 well before the 5 min new-member wait.
    let (_, r, _) = h.join_new("g", "c2");
    h.now += 5000;
    assert_eq!(h.heartbeat("g", gen, &ids[0]), REBALANCE_IN_PROGRESS);
    let outs = h.advance(REBALANCE as i64);
    let resp = join_of(&outs, r).unwrap();
    assert_eq!(resp.leader, resp.member_id);
}

#[test]
fn delete_groups_and_offsets() {
    let mut h = Harness::new(config());
    let (gen, _, ids) = h.stable_group("g", &["c1"]);
    h.commit(&commit_request(
        "g",
        gen,
        &ids[0],
        &[("t", 0, 1), ("u", 0, 2)],
    ));
    // "t" is subscribed: 86; "u" is not: deleted.
    let (top, codes, records) =
        h.c.delete_offsets("g", &[("t".into(), vec![0]), ("u".into(), vec![0, 1])]);
    assert_eq!(top, 0);
    assert_eq!(
        codes,
        vec![
            ("t".into(), 0, GROUP_SUBSCRIBED_TO_TOPIC),
            ("u".into(), 0, 0),
            ("u".into(), 1, 0)
        ]
    );
    assert_eq!(records.len(), 1, "only offsets that existed get tombstones");
    assert_eq!(
        h.c.delete_groups(&["g".into()]).0,
        vec![("g".into(), NON_EMPTY_GROUP)]
    );
    h.leave("g", &ids[0]);
    let (results, records) = h.c.delete_groups(&["g".into(), "nope".into()]);
    assert_eq!(
        results,
        vec![("g".into(), 0), ("nope".into(), GROUP_ID_NOT_FOUND)]
    );
    assert_eq!(records.len(), 2, "offset t-0 and the group");
    assert!(records.iter().all(|r| r.value.is_none()));
    assert_eq!(h.c.describe_group("g").state, "Dead");
    assert_eq!(h.c.delete_offsets("g", &[]).0, GROUP_ID_NOT_FOUND);
    assert_eq!(h.c.delete_offsets("", &[]).0, INVALID_GROUP_ID);
}

#[test]
fn describe_and_list() {
    let mut h = Harness::new(config());
    assert_eq!(h.c.describe_group("x").state, "Dead");
    assert_eq!(h.c.describe_group("x").error_code, 0);
    let (_, r, _) = h.join_new("g", "c1");
    let d = h.c.describe_group("g");
    assert_eq!(d.state, "PreparingRebalance");
    assert_eq!(d.protocol, "");
    assert!(
        d.members[0].metadata.is_empty(),
        "no metadata unless Stable"
    );
    h.advance(0);
    let _ = r;
    h.commit(&commit_request("s", -1, "", &[("t", 0, 1)]));
    assert_eq!(
        h.c.list_groups(&["completingrebalance".into()]),
        vec![("g".into(), "consumer".into(), "CompletingRebalance".into())]
    );
    assert_eq!(h.c.list_groups(&[]).len(), 2);
    assert_eq!(h.c.list_groups(&["Stable".into()]).len(), 0);
    let ids: Vec<&str> = h.c.groups().collect();
    assert_eq!(ids, vec!["g", "s"]);
}

#[test]
fn protocol_vote_picks_most_common_first_choice() {
    let mut h = Harness::new(config());
    let both = |first: &str, second: &str| {
        vec![
            (first.to_string(), Bytes::from_static(b"1")),
            (second.to_string(), Bytes::from_static(b"2")),
        ]
    };
    let mut parked = Vec::new();
    for (c, p) in [
        ("a", both("range", "roundrobin")),
        ("b", both("roundrobin", "range")),
        ("c", both("roundrobin", "range")),
    ] {
        let (r, outs) = h.join(join_request("g", "", c));
        let id = join_of(&outs, r).unwrap().member_id;
        let mut req = join_request("g", &id, c);
        req.protocols = p;
        parked.push(h.join(req).0);
    }
    let mut outs = h.advance(0);
    outs.extend(h.advance(0));
    let resp = join_of(&outs, parked[0]).unwrap();
    assert_eq!(resp.protocol_name.as_deref(), Some("roundrobin"));
    assert!(resp
        .members
        .iter()
        .all(|m| m.metadata == Bytes::from_static(b"2") || m.metadata == Bytes::from_static(b"1")));
    // Leader "a" listed range first; its metadata for roundrobin is "2".
    let a = resp
        .members
        .iter()
        .find(|m| m.member_id == resp.member_id)
        .unwrap();
    assert_eq!(a.metadata, Bytes::from_static(b"2"));
}

#[test]
fn join_retry_during_completing_rebalance_returns_current_generation() {
    let mut h = Harness::new(config());
    let (a, ra, _) = h.join_new("g", "a");
    let (b, _, _) = h.join_new("g", "b");
    let mut outs = h.advance(0);
    outs.extend(h.advance(0));
    let gen = join_of(&outs, ra).unwrap().generation_id;
    // The leader lost its response and re-joins with the same metadata.
    let (r, outs) = h.join(join_request("g", &a, "a"));
    let resp = join_of(&outs, r).unwrap();
    assert_eq!((resp.generation_id, resp.members.len()), (gen, 2));
    let (r, outs) = h.join(join_request("g", &b, "b"));
    assert!(join_of(&outs, r).unwrap().members.is_empty());
    assert_eq!(h.c.describe_group("g").state, "CompletingRebalance");
}
