//! The protocol's stories end to end: join, incremental revoke-then-assign, leave, session
//! and revocation timeouts, metadata growth, static membership, regex, range, describe.

use runnel_group::consumer_group::*;

use crate::common::*;

#[test]
fn one_member_joins_and_gets_all_partitions() {
    let mut h = Harness::new(config());
    h.topic("t", 4);
    let r = h.join("g", "m1", &["t"]);
    assert_eq!(r.error_code, 0);
    assert_eq!(r.member_id.as_deref(), Some("m1"));
    assert_eq!(r.member_epoch, 1);
    assert_eq!(r.assignment, Some(wire(&h.asg(&[("t", &[0, 1, 2, 3])]))));
    let d = h.describe("g");
    assert_eq!(
        (d.state.as_str(), d.group_epoch, d.assignment_epoch),
        ("Stable", 1, 1)
    );
    assert_eq!(d.assignor_name, "uniform");
    assert_eq!(d.members[0].target_assignment[0].topic_name, "t");
    // A plain heartbeat changes nothing and carries no assignment.
    let r = h.hb("g", "m1", 1, None);
    assert_eq!(
        (r.error_code, r.member_epoch, r.assignment.clone()),
        (0, 1, None)
    );
    assert_eq!(h.c.list(), vec![("g".to_string(), "Stable".to_string())]);
}

#[test]
fn v0_join_gets_a_server_generated_member_id() {
    let mut h = Harness::new(config());
    h.topic("t", 1);
    let r = h.send(ConsumerHeartbeat {
        api_version: 0,
        ..join_req("g", "", &["t"])
    });
    assert_eq!(r.error_code, 0);
    assert_eq!(r.member_id.as_deref(), Some("gen-1"));
}

/// The KIP-848 core: the second member only gets partitions after the first acknowledged
/// their revocation; nobody waits for anybody else.
fn two_stable_members(h: &mut Harness) {
    h.topic("t", 4);
    let all = h.asg(&[("t", &[0, 1, 2, 3])]);
    assert_eq!(h.join("g", "m1", &["t"]).member_epoch, 1);

    let r = h.join("g", "m2", &["t"]);
    assert_eq!((r.error_code, r.member_epoch), (0, 2));
    assert_eq!(
        r.assignment,
        Some(vec![]),
        "m2 gets nothing while m1 owns everything"
    );
    assert_eq!(h.describe("g").state, "Reconciling");

    // m1 is asked to revoke half, and stays at epoch 1 until it confirms.
    let r = h.hb("g", "m1", 1, Some(&all));
    assert_eq!(r.member_epoch, 1);
    let kept = from_wire(r.assignment.as_ref().unwrap());
    assert_eq!(count(&kept), 2);

    // m2 still gets nothing: the partitions are pending revocation on m1.
    let r = h.hb("g", "m2", 2, Some(&Assignment::new()));
    assert_eq!((r.member_epoch, r.assignment.clone()), (2, None));
    // A heartbeat without owned partitions is no acknowledgement.
    let r = h.hb("g", "m1", 1, None);
    assert_eq!((r.member_epoch, r.assignment.clone()), (1, None));

    // m1 acknowledges: it moves to epoch 2, and its assignment did not change.
    let r = h.hb("g", "m1", 1, Some(&kept));
    assert_eq!((r.member_epoch, r.assignment.clone()), (2, None));

    // m2 now gets the released half.
    let r = h.hb("g", "m2", 2, Some(&Assignment::new()));
    let got = from_wire(r.assignment.as_ref().unwrap());
    assert_eq!(count(&got), 2);
    assert!(got[&h.id("t")].is_disjoint(&kept[&h.id("t")]));
    let d = h.describe("g");
    assert_eq!((d.state.as_str(), d.group_epoch), ("Stable", 2));
}

#[test]
fn second_member_gets_partitions_only_after_revocation_is_acknowledged() {
    let mut h = Harness::new(config());
    two_stable_members(&mut h);
}

#[test]
fn member_leaves_and_the_other_takes_its_partitions() {
    let mut h = Harness::new(config());
    two_stable_members(&mut h);
    let r = h.hb("g", "m2", -1, None);
    assert_eq!(
        (r.error_code, r.member_id.as_deref(), r.member_epoch),
        (0, Some("m2"), -1)
    );
    assert_eq!(h.describe("g").state, "Assigning");
    let mine = h.assignments("g")["m1"].clone();
    let r = h.hb("g", "m1", 2, Some(&mine));
    assert_eq!(r.member_epoch, 3);
    assert_eq!(r.assignment, Some(wire(&h.asg(&[("t", &[0, 1, 2, 3])]))));
    assert_eq!(h.describe("g").state, "Stable");
    // The last member leaving empties the group.
    h.hb("g", "m1", -1, None);
    assert_eq!(h.describe("g").state, "Empty");
    assert_eq!(h.c.delete("g"), 0);
    assert!(!h.c.contains("g"));
}

#[test]
fn a_group_config_override_sets_that_groups_session_and_interval_only() {
    let mut h = Harness::new(config());
    let timeouts = GroupTimeouts {
        session_timeout_ms: 50_000,
        heartbeat_interval_ms: 7_000,
    };
    h.c.set_group_timeouts([("g".to_string(), timeouts)].into());
    h.topic("t", 2);
    h.topic("u", 2);
    assert_eq!(h.join("g", "m1", &["t"]).heartbeat_interval_ms, 7_000);
    assert_eq!(h.join("other", "o1", &["u"]).heartbeat_interval_ms, 5_000);
    // Silent for 45 s: the broker default expires "other"'s member, "g"'s keeps 50 s.
    h.tick(45_000);
    assert_eq!(h.describe("other").members.len(), 0);
    assert_eq!(h.describe("g").members.len(), 1);
    h.tick(5_000);
    assert_eq!(h.describe("g").members.len(), 0);
}

#[test]
fn session_expiry_via_tick_hands_partitions_over() {
    let mut h = Harness::new(config());
    two_stable_members(&mut h);
    let mine = h.assignments("g")["m1"].clone();
    // m1 keeps heartbeating; m2 goes silent.
    h.tick(40_000);
    h.hb("g", "m1", 2, Some(&mine));
    h.tick(4_999);
    assert_eq!(
        h.describe("g").members.len(),
        2,
        "not yet: 44.999 s since m2's heartbeat"
    );
    h.tick(1);
    assert_eq!(h.describe("g").members.len(), 1);
    let r = h.hb("g", "m1", 2, Some(&mine));
    assert_eq!(r.member_epoch, 3);
    assert_eq!(count(&from_wire(r.assignment.as_ref().unwrap())), 4);
    // The expired member is unknown now.
    assert_eq!(h.hb("g", "m2", 2, None).error_code, 25);
}

#[test]
fn revocation_not_acknowledged_within_rebalance_timeout_fences_the_member() {
    let mut h = Harness::new(config());
    h.topic("t", 4);
    let all = h.asg(&[("t", &[0, 1, 2, 3])]);
    h.join("g", "m1", &["t"]);
    h.join("g", "m2", &["t"]);
    let r = h.hb("g", "m1", 1, Some(&all));
    assert_eq!(r.member_epoch, 1);
    // m1 keeps reporting everything (never revokes) but heartbeats in time.
    for _ in 0..5 {
        h.tick(5_000);
        h.hb("g", "m1", 1, Some(&all));
        h.hb("g", "m2", 2, Some(&Assignment::new()));
    }
    h.tick(5_000); // 30 s after the revocation request
    let members: Vec<String> = h
        .describe("g")
        .members
        .into_iter()
        .map(|m| m.member_id)
        .collect();
    assert_eq!(members, vec!["m2".to_string()]);
    let r = h.hb("g", "m2", 2, Some(&Assignment::new()));
    assert_eq!(count(&from_wire(r.assignment.as_ref().unwrap())), 4);
    assert_eq!(h.hb("g", "m1", 1, Some(&all)).error_code, 25);
}

#[test]
fn partition_growth_bumps_the_group_epoch_and_assigns_the_new_partitions() {
    let mut h = Harness::new(config());
    two_stable_members(&mut h);
    let m1 = h.assignments("g")["m1"].clone();
    h.topic("t", 6);
    let r = h.hb("g", "m1", 2, Some(&m1));
    assert_eq!(r.member_epoch, 3);
    let m1 = from_wire(r.assignment.as_ref().unwrap());
    assert_eq!(count(&m1), 3);
    let m2 = h.assignments("g")["m2"].clone();
    let r = h.hb("g", "m2", 2, Some(&m2));
    assert_eq!(r.member_epoch, 3);
    assert_eq!(count(&from_wire(r.assignment.as_ref().unwrap())), 3);
    let d = h.describe("g");
    assert_eq!((d.state.as_str(), d.group_epoch), ("Stable", 3));
    // A topic that appears later is picked up too.
    let r = h.hb("g", "m1", 3, None);
    assert_eq!(r.member_epoch, 3);
}

#[test]
fn subscribing_to_a_topic_created_later() {
    let mut h = Harness::new(config());
    let r = h.join("g", "m1", &["later"]);
    assert_eq!((r.member_epoch, r.assignment.clone()), (1, Some(vec![])));
    h.topic("later", 2);
    let r = h.hb("g", "m1", 1, None);
    assert_eq!(r.member_epoch, 2);
    assert_eq!(r.assignment, Some(wire(&h.asg(&[("later", &[0, 1])]))));
}

#[test]
fn lost_response_previous_epoch_with_subset_is_accepted() {
    let mut h = Harness::new(config());
    two_stable_members(&mut h);
    // m1 is at epoch 2, previous epoch 1; it never saw the bump and reports its kept half.
    let mine = h.assignments("g")["m1"].clone();
    let r = h.hb("g", "m1", 1, Some(&mine));
    assert_eq!((r.error_code, r.member_epoch), (0, 2));
}

#[test]
fn fenced_member_rejoins_with_epoch_zero_and_same_id() {
    let mut h = Harness::new(config());
    two_stable_members(&mut h);
    assert_eq!(h.hb("g", "m1", 7, None).error_code, 110);
    let r = h.join("g", "m1", &["t"]);
    assert_eq!((r.error_code, r.member_epoch), (0, 2));
    assert_eq!(count(&from_wire(r.assignment.as_ref().unwrap())), 2);
}

#[test]
fn range_assignor_when_requested() {
    let mut h = Harness::new(config());
    h.topic("t", 5);
    let range = |m: &str| ConsumerHeartbeat {
        server_assignor: Some("range".into()),
        ..join_req("g", m, &["t"])
    };
    h.send(range("b"));
    h.send(range("a"));
    let d = h.describe("g");
    assert_eq!(d.assignor_name, "range");
    let target: Vec<(String, Vec<i32>)> = d
        .members
        .iter()
        .map(|m| {
            (
                m.member_id.clone(),
                m.target_assignment[0].partitions.clone(),
            )
        })
        .collect();
    assert_eq!(
        target,
        vec![("a".into(), vec![0, 1, 2]), ("b".into(), vec![3, 4])]
    );
}

#[test]
fn static_member_restart_keeps_its_partitions_without_a_rebalance() {
    let mut h = Harness::new(config());
    h.topic("t", 4);
    let stat = |m: &str, i: &str| ConsumerHeartbeat {
        instance_id: Some(i.into()),
        ..join_req("g", m, &["t"])
    };
    h.send(stat("a1", "ia"));
    let mut b = h.send(stat("b1", "ib"));
    let a_parts = {
        let all = h.asg(&[("t", &[0, 1, 2, 3])]);
        let r = h.send(ConsumerHeartbeat {
            instance_id: Some("ia".into()),
            ..hb_req("g", "a1", 1, Some(&all))
        });
        let kept = from_wire(r.assignment.as_ref().unwrap());
        h.send(ConsumerHeartbeat {
            instance_id: Some("ia".into()),
            ..hb_req("g", "a1", 1, Some(&kept))
        });
        kept
    };
    b = h.send(ConsumerHeartbeat {
        instance_id: Some("ib".into()),
        ..hb_req("g", "b1", b.member_epoch, Some(&Assignment::new()))
    });
    assert_eq!(h.describe("g").state, "Stable");
    let epoch = h.describe("g").group_epoch;

    // The instance id is held: another member cannot take it.
    assert_eq!(h.send(stat("a2", "ia")).error_code, 111);
    // Heartbeats for the instance must come from its member id.
    assert_eq!(
        h.send(ConsumerHeartbeat {
            instance_id: Some("ia".into()),
            ..hb_req("g", "zz", 2, None)
        })
        .error_code,
        82
    );

    // Temporary leave, then a restart under a new member id.
    let r = h.send(ConsumerHeartbeat {
        instance_id: Some("ia".into()),
        ..hb_req("g", "a1", -2, None)
    });
    assert_eq!((r.error_code, r.member_epoch), (0, -2));
    let r = h.send(stat("a2", "ia"));
    assert_eq!(r.error_code, 0);
    assert_eq!(r.assignment, Some(wire(&a_parts)));
    assert_eq!(r.member_epoch, epoch);
    assert_eq!(h.describe("g").group_epoch, epoch, "no rebalance");
    assert_eq!(b.error_code, 0);
    let ids: Vec<String> = h
        .describe("g")
        .members
        .into_iter()
        .map(|m| m.member_id)
        .collect();
    assert_eq!(ids, vec!["a2".to_string(), "b1".to_string()]);
}

/// Regexes are resolved in the background (Kafka resolves them asynchronously): the join that
/// brings a new regex gets nothing for it; the tick that resolves it bumps the group epoch and
/// the next heartbeat gets the matched topics. A topic created later that matches is picked up
/// by the next refresh.
#[test]
fn regex_subscription_follows_matching_topics() {
    let mut h = Harness::new(config());
    h.topic("orders-eu", 2);
    h.topic("payments", 2);
    let r = h.send(ConsumerHeartbeat {
        subscribed_topic_names: None,
        subscribed_topic_regex: Some("orders-.*".into()),
        ..join_req("g", "m1", &[])
    });
    assert_eq!(r.error_code, 0);
    assert_eq!(r.assignment, Some(vec![]));
    let epoch = r.member_epoch;
    h.tick(100);
    let r = h.hb("g", "m1", epoch, Some(&Assignment::new()));
    assert_eq!(r.member_epoch, epoch + 1);
    assert_eq!(r.assignment, Some(wire(&h.asg(&[("orders-eu", &[0, 1])]))));
    h.topic("orders-us", 1);
    h.tick(10_001);
    let r = h.hb("g", "m1", epoch + 1, None);
    assert_eq!(r.member_epoch, epoch + 2);
    assert_eq!(count(&from_wire(r.assignment.as_ref().unwrap())), 3);
    let d = h.describe("g");
    assert_eq!(
        d.members[0].subscribed_topic_regex.as_deref(),
        Some("orders-.*")
    );
}

/// librdkafka's 0045_resubscribe_with_regex: a member subscribed to a literal topic switches
/// to a regex plus another literal topic; the first answer assigns the literal topic alone
/// (the regex is not resolved yet), the regex's topics follow after the background refresh.
/// Caught: the regex was resolved inside the heartbeat, so all 10 partitions came at once.
#[test]
fn a_resubscribe_to_a_regex_gets_the_literal_topic_first() {
    let mut h = Harness::new(config());
    h.topic("topic_regex1", 4);
    h.topic("topic_regex2", 4);
    h.topic("topic_a", 2);
    let mut c = Client::new("g", "m1", &["topic_regex1"]);
    c.poll(&mut h, true);
    c.poll(&mut h, true);
    assert_eq!(c.owned, h.asg(&[("topic_regex1", &[0, 1, 2, 3])]));
    let r = h.send(ConsumerHeartbeat {
        subscribed_topic_names: Some(vec!["topic_a".into()]),
        subscribed_topic_regex: Some("^.*topic_regex.*".into()),
        ..hb_req("g", "m1", c.epoch, Some(&c.owned))
    });
    assert_eq!(r.error_code, 0);
    // Revoke topic_regex1 first (it is not subscribed until the regex resolves).
    assert_eq!(r.assignment, Some(vec![]));
    c.owned.clear();
    c.poll(&mut h, true);
    assert_eq!(c.owned, h.asg(&[("topic_a", &[0, 1])]));
    h.tick(100);
    c.poll(&mut h, true);
    c.poll(&mut h, true);
    assert_eq!(
        c.owned,
        h.asg(&[
            ("topic_a", &[0, 1]),
            ("topic_regex1", &[0, 1, 2, 3]),
            ("topic_regex2", &[0, 1, 2, 3])
        ])
    );
}

#[test]
fn assignment_is_sent_only_on_change_or_full_request() {
    let mut h = Harness::new(config());
    h.topic("t", 2);
    h.join("g", "m1", &["t"]);
    let owned = h.asg(&[("t", &[0, 1])]);
    assert_eq!(h.hb("g", "m1", 1, Some(&owned)).assignment, None);
    // A full request (all non-optional fields) gets it again.
    let full = ConsumerHeartbeat {
        member_epoch: 1,
        topic_partitions: Some(wire(&owned)),
        ..join_req("g", "m1", &["t"])
    };
    assert_eq!(h.send(full).assignment, Some(wire(&owned)));
}

#[test]
fn offset_commit_member_epoch_check() {
    let mut h = Harness::new(config());
    two_stable_members(&mut h);
    assert_eq!(h.c.is_member_epoch_valid("g", "m1", 2), Ok(()));
    assert_eq!(h.c.is_member_epoch_valid("g", "m1", 1), Err(113));
    assert_eq!(h.c.is_member_epoch_valid("g", "nobody", 2), Err(25));
    assert_eq!(h.c.is_member_epoch_valid("nope", "m1", 2), Err(25));
    assert_eq!(h.c.is_member_epoch_valid("g", "", -1), Err(25));
    h.hb("g", "m1", -1, None);
    h.hb("g", "m2", -1, None);
    assert_eq!(h.c.is_member_epoch_valid("g", "", -1), Ok(()));
}

#[test]
fn describe_unknown_group_and_request_order() {
    let mut h = Harness::new(config());
    h.topic("t", 1);
    h.join("g", "m1", &["t"]);
    let d = h.c.describe(&["nope".into(), "g".into()], &h.topics);
    assert_eq!(d[0].error_code, 69);
    assert_eq!(d[0].state, "Dead");
    assert_eq!((d[1].group_id.as_str(), d[1].error_code), ("g", 0));
    assert_eq!(h.c.delete("g"), 68);
    assert_eq!(h.c.delete("nope"), 69);
}

/// librdkafka's 0045_subscribe_update "many updates", at the coordinator: one member moves its
/// subscription over a sliding window of five of 36 topics, every seventh time unsubscribing
/// right after (leave with -1, rejoin with epoch 0 on the next subscribe), each change sent on
/// the heartbeat after it and then omitted as unchanged, sometimes before the previous
/// revocation was acknowledged. Every heartbeat is answered without error and the member
/// converges to exactly its last window within one rebalance timeout of heartbeats.
#[test]
fn many_subscription_updates_converge_to_the_last_subscription() {
    let mut h = Harness::new(config());
    let topics: Vec<String> = (0..36).map(|i| format!("topic{i}")).collect();
    for t in &topics {
        h.topic(t, 4);
    }
    let mut c = Client::new("g", "m1", &[]);
    let mut in_group = false;
    for i in 0..topics.len() {
        let window: Vec<String> = topics[i..(i + 5).min(topics.len())].to_vec();
        if in_group {
            c.subscribe(&window, None);
            // The change goes out before the member acknowledged anything of the previous one.
            let r = c.poll(&mut h, false);
            assert_eq!(r.error_code, 0, "update {i}: {r:?}");
        } else {
            c.topics = window.clone();
            c.regex = None;
            let r = c.poll(&mut h, true);
            assert_eq!(r.error_code, 0, "rejoin {i}: {r:?}");
            in_group = true;
        }
        let unsubscribed = i % 7 == 0;
        if unsubscribed {
            assert_eq!(c.leave(&mut h).error_code, 0);
            in_group = false;
        }
        if i % 5 == 0 || i == topics.len() - 1 {
            let want: Assignment = if unsubscribed {
                Assignment::new()
            } else {
                window.iter().map(|t| (h.id(t), (0..4).collect())).collect()
            };
            let mut waited = 0;
            while c.owned != want {
                assert!(
                    waited <= REBALANCE_TIMEOUT,
                    "update {i}: no convergence, owns {} of {}",
                    count(&c.owned),
                    count(&want)
                );
                h.tick(100);
                waited += 100;
                if in_group {
                    assert_eq!(c.poll(&mut h, true).error_code, 0);
                }
            }
        }
    }
}
