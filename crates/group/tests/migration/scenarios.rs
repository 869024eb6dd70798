//! The migration paths one at a time: upgrade, classic members served by a consumer group,
//! downgrade, the policy, failed appends, failover, refusals and timeouts.

use runnel_group::codec::{self, OffsetsKey};
use runnel_group::consumer_group::records::ConsumerGroupKey;
use runnel_group::*;

use super::clients::{ClassicClient, KipClient, Phase};
use super::world::{World, CLASSIC_SESSION, REBALANCE};
use super::Fleet;

fn world(policy: MigrationPolicy) -> World {
    let mut w = World::new(ConsumerGroupConfig {
        migration_policy: policy,
        ..ConsumerGroupConfig::default()
    });
    w.topic("t", 4);
    w
}

/// A classic group of one eager member owning all of `t`.
fn classic_group(w: &mut World) -> Fleet {
    let mut f = Fleet::default();
    f.classic.push(ClassicClient::new("g", "a", &["t"], false));
    f.run(w, 20);
    assert_eq!(f.classic[0].phase, Phase::Stable);
    assert_eq!(f.owned_by(w, "a"), 4);
    f
}

/// A first JoinGroup through MEMBER_ID_REQUIRED to the answer of its join phase.
fn join_classic(w: &mut World, mut req: JoinRequest) -> JoinResponse {
    let id = w.join(req.clone());
    let r = w.take_join(id).expect("answered at once");
    assert_eq!(r.error_code, 79, "{r:?}");
    req.member_id = r.member_id;
    let id = w.join(req);
    w.tick(0);
    w.take_join(id).expect("the join phase completed")
}

/// The log index of a group's last record of one kind, and whether it was a value (`true`)
/// or a tombstone.
type LastWrite = Option<(usize, bool)>;

/// Where in the log the group's classic metadata was last written (`Some(true)`) or
/// tombstoned (`Some(false)`), and the same for its consumer-group epoch record.
fn last_writes(w: &World, group: &str) -> (LastWrite, LastWrite) {
    let mut classic = None;
    let mut consumer = None;
    for (i, r) in w.log.iter().enumerate() {
        if consumer_group::is_consumer_group_key(&r.key) {
            if let Ok(ConsumerGroupKey::Metadata { group: g }) = ConsumerGroupKey::decode(&r.key) {
                if g == group {
                    consumer = Some((i, r.value.is_some()));
                }
            }
            continue;
        }
        if let Ok(OffsetsKey::Group { group: g }) = codec::decode_key(&r.key) {
            if g == group {
                classic = Some((i, r.value.is_some()));
            }
        }
    }
    (classic, consumer)
}

/// Caught: a ConsumerGroupHeartbeat to a classic group with members was refused
/// (GROUP_ID_NOT_FOUND); Kafka converts the group and both consumers share the partitions,
/// the classic one keeping its partitions until it gives them up by rejoining.
#[test]
fn upgrade_keeps_the_classic_assignment_then_shares_the_partitions() {
    let mut w = world(MigrationPolicy::Bidirectional);
    let mut f = classic_group(&mut w);
    let generation = f.classic[0].generation;
    f.kip.push(KipClient::new("g", "b", &["t"]));
    let r = f.kip[0].poll(&mut w);
    assert_eq!(r.error_code, 0, "{r:?}");
    f.check_exclusive(&w);
    assert!(w.consumer.contains("g") && !w.classic.has_members("g"));
    let d = w.consumer.describe(&["g".to_string()], &w.topics).remove(0);
    let a = d
        .members
        .iter()
        .find(|m| m.member_id == f.classic[0].member_id)
        .unwrap();
    assert_eq!(
        a.member_epoch, generation,
        "the classic generation is its epoch"
    );
    assert_eq!(a.assignment[0].partitions, vec![0, 1, 2, 3]);
    assert!(
        d.group_epoch > generation,
        "the join bumped the group epoch"
    );
    // The log: the classic metadata tombstoned first, then the consumer group.
    let (classic, consumer) = last_writes(&w, "g");
    let (ci, classic_live) = classic.unwrap();
    let (ki, consumer_live) = consumer.unwrap();
    assert!(!classic_live && consumer_live && ci < ki);
    w.check_durable();

    f.run(&mut w, 50);
    assert_eq!(f.owned_by(&w, "a"), 2);
    assert_eq!(f.owned_by(&w, "b"), 2);
    assert!(f.covers(&w, "t"));
    assert_eq!(f.classic[0].last_heartbeat, 0);
}

/// The records of an upgrade hold the classic member's protocol: a failover rebuilds it as a
/// classic member (same epoch, partitions, session), and nobody has to rejoin.
#[test]
fn a_migrated_group_survives_a_failover() {
    let mut w = world(MigrationPolicy::Bidirectional);
    let mut f = classic_group(&mut w);
    f.kip.push(KipClient::new("g", "b", &["t"]));
    f.run(&mut w, 50);
    assert!(f.covers(&w, "t"));
    let before = w.consumer.durable_view();
    let classic_meta = &before["g"].members[&f.classic[0].member_id].classic;
    assert_eq!(
        classic_meta.as_ref().map(|c| c.session_timeout_ms),
        Some(CLASSIC_SESSION)
    );
    w.failover();
    assert_eq!(w.consumer.durable_view(), before);
    let joins = f.classic[0].last_join.clone();
    let epoch = f.kip[0].epoch;
    f.run(&mut w, 30);
    assert_eq!(
        f.classic[0].last_join, joins,
        "the classic member did not rejoin"
    );
    assert_eq!(f.kip[0].epoch, epoch);
    assert_eq!(f.owned_by(&w, "a"), 2);
    assert_eq!(f.owned_by(&w, "b"), 2);
}

/// Caught (had no downgrade): when the last consumer-protocol member leaves, the group is a
/// classic group again and its classic member gets every partition back.
#[test]
fn downgrade_when_the_last_consumer_member_leaves() {
    let mut w = world(MigrationPolicy::Bidirectional);
    let mut f = classic_group(&mut w);
    f.kip.push(KipClient::new("g", "b", &["t"]));
    f.run(&mut w, 50);
    assert_eq!(f.owned_by(&w, "b"), 2);
    let r = f.kip[0].leave(&mut w);
    assert_eq!(r.error_code, 0);
    assert!(!w.consumer.contains("g"), "the consumer group is gone");
    assert!(w.classic.has_members("g"));
    let (classic, consumer) = last_writes(&w, "g");
    let (ci, classic_live) = classic.unwrap();
    let (ki, consumer_live) = consumer.unwrap();
    assert!(
        classic_live && !consumer_live && ki < ci,
        "tombstones, then the classic record"
    );
    w.check_durable();
    f.kip.clear();
    f.run(&mut w, 50);
    assert_eq!(f.owned_by(&w, "a"), 4);
    assert_eq!(f.classic[0].phase, Phase::Stable);
    let description = w.classic.describe_group("g");
    assert_eq!(description.state, "Stable");
    // A failover rebuilds the classic group.
    w.failover();
    assert!(w.classic.has_members("g") && !w.consumer.contains("g"));
    f.run(&mut w, 20);
    assert_eq!(f.owned_by(&w, "a"), 4);
}

/// `disabled` keeps the refusal Kafka answers when no upgrade is possible, with the same
/// code and message, and leaves the classic group alone.
#[test]
fn disabled_policy_refuses_the_upgrade() {
    for policy in [MigrationPolicy::Disabled, MigrationPolicy::Downgrade] {
        let mut w = world(policy);
        let mut f = classic_group(&mut w);
        f.kip.push(KipClient::new("g", "b", &["t"]));
        let r = f.kip[0].poll(&mut w);
        assert_eq!(r.error_code, 69, "{policy:?}");
        assert_eq!(
            r.error_message.as_deref(),
            Some("Group g is not a consumer group")
        );
        assert!(!w.consumer.contains("g"));
        f.run(&mut w, 20);
        assert_eq!(f.owned_by(&w, "a"), 4);
        assert_eq!(f.classic[0].last_heartbeat, 0);
    }
}

/// Kafka serves a classic member joining a consumer group with members whatever the policy;
/// with downgrades not allowed the group stays a consumer group when the consumer-protocol
/// member leaves, and keeps serving the classic one.
#[test]
fn classic_members_are_served_by_a_consumer_group_whatever_the_policy() {
    for policy in [MigrationPolicy::Disabled, MigrationPolicy::Upgrade] {
        let mut w = world(policy);
        let mut f = Fleet::default();
        f.kip.push(KipClient::new("g", "b", &["t"]));
        f.run(&mut w, 5);
        assert_eq!(f.owned_by(&w, "b"), 4);
        f.classic.push(ClassicClient::new("g", "a", &["t"], false));
        f.run(&mut w, 50);
        assert_eq!(
            (f.owned_by(&w, "a"), f.owned_by(&w, "b")),
            (2, 2),
            "{policy:?}"
        );
        f.kip[0].leave(&mut w);
        f.kip.clear();
        assert!(w.consumer.has_members("g"), "{policy:?}: no downgrade");
        f.run(&mut w, 50);
        assert_eq!(f.owned_by(&w, "a"), 4);
        w.check_durable();
    }
}

/// A cooperative classic member inside a consumer group gives partitions back by rejoining
/// without them (Kafka's UNREVOKED_PARTITIONS for classic members): nobody consumes a
/// partition twice on the way.
#[test]
fn cooperative_classic_members_revoke_before_the_partitions_move() {
    let mut w = world(MigrationPolicy::Bidirectional);
    w.topic("t", 6);
    let mut f = Fleet::default();
    f.classic.push(ClassicClient::new("g", "a", &["t"], true));
    f.run(&mut w, 20);
    assert_eq!(f.owned_by(&w, "a"), 6);
    f.kip.push(KipClient::new("g", "b", &["t"]));
    f.classic.push(ClassicClient::new("g", "c", &["t"], true));
    f.run(&mut w, 80);
    assert!(f.covers(&w, "t"));
    for who in ["a", "b", "c"] {
        assert_eq!(f.owned_by(&w, who), 2, "{who}");
    }
}

/// Offsets a classic member commits in a consumer group are checked against its epoch as a
/// generation (ILLEGAL_GENERATION when it differs) and survive both conversions.
#[test]
fn offsets_are_checked_and_kept_across_the_conversions() {
    let mut w = world(MigrationPolicy::Bidirectional);
    let mut f = classic_group(&mut w);
    let commit = |w: &mut World, generation: i32, member: &str, offset: i64| {
        w.commit(OffsetCommitRequest {
            group_id: "g".into(),
            generation_id: generation,
            member_id: member.into(),
            group_instance_id: None,
            offsets: vec![CommitOffset {
                topic: "t".into(),
                partition: 0,
                offset,
                leader_epoch: -1,
                metadata: None,
            }],
        })
    };
    let (a, generation) = (f.classic[0].member_id.clone(), f.classic[0].generation);
    assert_eq!(commit(&mut w, generation, &a, 5), 0);
    f.kip.push(KipClient::new("g", "b", &["t"]));
    f.kip[0].poll(&mut w);
    assert_eq!(w.committed("g", "t", 0), Some(5), "kept by the upgrade");
    assert_eq!(
        commit(&mut w, generation, &a, 6),
        0,
        "its epoch is its generation"
    );
    assert_eq!(
        commit(&mut w, generation + 7, &a, 7),
        22,
        "ILLEGAL_GENERATION"
    );
    let epoch = f.kip[0].epoch;
    assert_eq!(commit(&mut w, epoch + 1, "b", 8), 113, "STALE_MEMBER_EPOCH");
    f.run(&mut w, 50);
    f.kip[0].leave(&mut w);
    f.kip.clear();
    assert_eq!(w.committed("g", "t", 0), Some(6), "kept by the downgrade");
    w.failover();
    assert_eq!(w.committed("g", "t", 0), Some(6));
}

/// A failed append of the conversion's records leaves both coordinators as they were: the
/// heartbeat gets the write's error and a retry converts the group.
#[test]
fn a_failed_append_reverts_the_upgrade_and_the_downgrade() {
    let mut w = world(MigrationPolicy::Bidirectional);
    let mut f = classic_group(&mut w);
    f.kip.push(KipClient::new("g", "b", &["t"]));
    w.fail_next_append = Some(15);
    let log = w.log.len();
    assert_eq!(f.kip[0].poll(&mut w).error_code, 15);
    assert_eq!(w.log.len(), log);
    assert!(w.classic.has_members("g") && !w.consumer.contains("g"));
    f.classic[0].poll(&mut w);
    assert_eq!(
        f.classic[0].last_heartbeat, 0,
        "the classic group is untouched"
    );
    assert_eq!(f.kip[0].poll(&mut w).error_code, 0, "the retry upgrades");
    f.run(&mut w, 50);

    let before = w.consumer.durable_view();
    w.fail_next_append = Some(15);
    f.kip[0].leave(&mut w);
    assert_eq!(w.consumer.durable_view(), before, "the leave was reverted");
    assert!(!w.classic.has_members("g"));
    w.check_durable();
}

/// Kafka's `validateOnlineUpgrade` and the embedded protocol: another protocol type, a group
/// over `group.consumer.max.size`, or an assignment that cannot be read (a member that never
/// synced) keeps the group classic, with the parked requests untouched.
#[test]
fn upgrade_refusals() {
    // Not the consumer protocol type.
    let mut w = world(MigrationPolicy::Bidirectional);
    let mut req = ClassicClient::new("g", "a", &["t"], false).join_request();
    req.protocol_type = "connect".into();
    assert_eq!(join_classic(&mut w, req).error_code, 0);
    let mut b = KipClient::new("g", "b", &["t"]);
    assert_eq!(b.poll(&mut w).error_code, 69);

    // Too many members for a consumer group.
    let mut w = World::new(ConsumerGroupConfig {
        max_size: 1,
        ..ConsumerGroupConfig::default()
    });
    w.topic("t", 4);
    let mut f = Fleet::default();
    f.classic.push(ClassicClient::new("g", "a", &["t"], false));
    f.classic.push(ClassicClient::new("g", "c", &["t"], false));
    f.run(&mut w, 20);
    let mut b = KipClient::new("g", "b", &["t"]);
    assert_eq!(b.poll(&mut w).error_code, 69);
    // One member: converted, then the group is full for the joining member (81), and the
    // upgrade is undone.
    f.classic.pop().unwrap().leave(&mut w);
    f.run(&mut w, 20);
    assert_eq!(b.poll(&mut w).error_code, 81);
    assert!(w.classic.has_members("g") && !w.consumer.contains("g"));

    // A member that joined but never synced has no assignment to keep.
    let mut w = world(MigrationPolicy::Bidirectional);
    let req = ClassicClient::new("g", "a", &["t"], false).join_request();
    assert_eq!(join_classic(&mut w, req).error_code, 0);
    let mut b = KipClient::new("g", "b", &["t"]);
    let r = b.poll(&mut w);
    assert_eq!(r.error_code, 69, "{r:?}");
    assert_eq!(w.classic.describe_group("g").state, "CompletingRebalance");
}

/// Parked classic requests are told REBALANCE_IN_PROGRESS when the group upgrades (Kafka's
/// `completeAllJoinFutures` / `completeAllSyncFutures`), so their members rejoin the
/// consumer group.
#[test]
fn parked_requests_are_told_to_rejoin_on_upgrade() {
    let mut w = world(MigrationPolicy::Bidirectional);
    let mut f = Fleet::default();
    f.classic.push(ClassicClient::new("g", "a", &["t"], false));
    f.classic.push(ClassicClient::new("g", "c", &["t"], false));
    f.run(&mut w, 20);
    // "a" rejoins (parked in PreparingRebalance until "c" does too).
    f.classic[0].phase = Phase::Out;
    f.classic[0].owned.clear();
    f.classic[0].poll(&mut w);
    let Phase::Joining(parked) = f.classic[0].phase.clone() else {
        panic!("not joining");
    };
    assert_eq!(w.classic.describe_group("g").state, "PreparingRebalance");
    f.kip.push(KipClient::new("g", "b", &["t"]));
    assert_eq!(f.kip[0].poll(&mut w).error_code, 0);
    assert_eq!(w.take_join(parked).map(|r| r.error_code), Some(27));
    f.classic[0].phase = Phase::Out;
    f.run(&mut w, 60);
    assert!(f.covers(&w, "t"));
    for who in ["a", "b", "c"] {
        assert!(f.owned_by(&w, who) >= 1, "{who}");
    }
}

/// A classic member inside a consumer group is fenced by its own session timeout, and by its
/// rebalance timeout when told to rejoin and it does not; fencing the last consumer-protocol
/// member by its session downgrades the group.
#[test]
fn classic_members_are_fenced_by_their_timeouts() {
    let mut w = world(MigrationPolicy::Bidirectional);
    let mut f = classic_group(&mut w);
    f.kip.push(KipClient::new("g", "b", &["t"]));
    f.run(&mut w, 50);
    let a = f.classic.remove(0);
    // "a" stops heartbeating: fenced after its 10 s session, "b" takes everything.
    f.run(&mut w, (CLASSIC_SESSION / 100 + 20) as usize);
    assert!(!w.consumer.describe(&["g".into()], &w.topics)[0]
        .members
        .iter()
        .any(|m| m.member_id == a.member_id));
    assert_eq!(f.owned_by(&w, "b"), 4);

    // A classic member told to rejoin that never does is fenced after its rebalance timeout.
    let mut c = ClassicClient::new("g", "c", &["t"], false);
    for _ in 0..20 {
        c.poll(&mut w);
        f.step(&mut w, 100);
    }
    assert_eq!(c.phase, Phase::Stable);
    f.kip.push(KipClient::new("g", "d", &["t"]));
    f.run(&mut w, 3);
    c.poll(&mut w); // heartbeat: REBALANCE_IN_PROGRESS, and it stays silent after that
    assert_eq!(c.last_heartbeat, 27);
    // It stays silent; sessions of 10 s would fence it first, so it heartbeats (answered
    // 27 each time) without joining: only the join deadline can fence it.
    let mut left = false;
    for _ in 0..(REBALANCE / 100 + 20) {
        let code = w.heartbeat(HeartbeatRequest {
            group_id: "g".into(),
            generation_id: c.generation,
            member_id: c.member_id.clone(),
            group_instance_id: None,
        });
        if code == 25 {
            left = true;
            break;
        }
        f.step(&mut w, 100);
    }
    assert!(left, "fenced by the join timeout");

    // The consumer-protocol members' sessions run out: the group has no classic member left
    // to hand over, so it just empties.
    let mut w2 = world(MigrationPolicy::Bidirectional);
    let mut f2 = classic_group(&mut w2);
    f2.kip.push(KipClient::new("g", "b", &["t"]));
    f2.run(&mut w2, 50);
    f2.kip.clear(); // "b" crashes
    f2.run(&mut w2, 500);
    assert!(
        !w2.consumer.contains("g") && w2.classic.has_members("g"),
        "downgraded"
    );
    assert_eq!(f2.owned_by(&w2, "a"), 4);
}

/// ConsumerGroupHeartbeat checks the request before any upgrade: an invalid one is answered
/// INVALID_REQUEST and the classic group is untouched.
#[test]
fn an_invalid_heartbeat_does_not_upgrade() {
    let mut w = world(MigrationPolicy::Bidirectional);
    let mut f = classic_group(&mut w);
    let r = w.consumer_heartbeat(ConsumerHeartbeat {
        group_id: "g".into(),
        member_id: "b".into(),
        member_epoch: 0,
        rebalance_timeout_ms: -1,
        subscribed_topic_names: Some(vec!["t".into()]),
        topic_partitions: Some(vec![]),
        api_version: 1,
        ..Default::default()
    });
    assert_eq!(r.error_code, 42, "{r:?}");
    assert!(w.classic.has_members("g"));
    f.run(&mut w, 5);
    assert_eq!(f.classic[0].last_heartbeat, 0);
}
