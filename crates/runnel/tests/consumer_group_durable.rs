//! Durable KIP-848 groups against the real binary: a broker killed with SIGKILL and started
//! again on its data dir answers the members' next heartbeats at the epochs and with the
//! assignments they had (their records are replayed from `__consumer_offsets`), instead of
//! UNKNOWN_MEMBER_ID and a rejoin storm. Also the protocol rules around them: ListGroups v5
//! (group types), OffsetFetch v9 (member epochs), and the migration between the protocols (a
//! classic member served by a consumer group, a refused upgrade).

mod support;

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use support::*;
use uuid::Uuid;

type Owned = BTreeMap<Uuid, BTreeSet<i32>>;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// A KIP-848 member speaking raw ConsumerGroupHeartbeat v1.
struct Member {
    group: String,
    id: String,
    epoch: i32,
    owned: Owned,
}

impl Member {
    fn new(group: &str, id: &str) -> Self {
        Member {
            group: group.into(),
            id: id.into(),
            epoch: 0,
            owned: Owned::new(),
        }
    }

    /// One heartbeat reporting what it owns; takes the assignment of a successful answer.
    fn heartbeat(&mut self, wire: &mut Wire) -> ConsumerGroupHeartbeatResponse {
        let join = self.epoch == 0;
        let owned = self
            .owned
            .iter()
            .map(|(t, ps)| {
                TopicPartitions::default()
                    .with_topic_id(*t)
                    .with_partitions(ps.iter().copied().collect())
            })
            .collect();
        let req = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(s(&self.group)))
            .with_member_id(s(&self.id))
            .with_member_epoch(self.epoch)
            .with_rebalance_timeout_ms(if join { 30_000 } else { -1 })
            .with_subscribed_topic_names(join.then(|| vec![TopicName(s("t"))]))
            .with_topic_partitions(Some(owned));
        let resp: ConsumerGroupHeartbeatResponse =
            wire.call(ApiKey::ConsumerGroupHeartbeat, 1, &req);
        if resp.error_code == 0 {
            self.epoch = resp.member_epoch;
            if let Some(a) = &resp.assignment {
                self.owned = a
                    .topic_partitions
                    .iter()
                    .map(|tp| (tp.topic_id, tp.partitions.iter().copied().collect()))
                    .collect();
            }
        }
        resp
    }
}

fn wait_for_coordinator(addr: &str, group: &str) {
    wait_until("a group coordinator", || {
        let req = FindCoordinatorRequest::default().with_key(s(group));
        Wire::try_connect(addr)
            .and_then(|mut w| {
                w.try_call::<_, FindCoordinatorResponse>(ApiKey::FindCoordinator, 3, &req)
            })
            .is_some_and(|r| r.error_code == 0)
    });
}

fn describe(wire: &mut Wire, group: &str) -> consumer_group_describe_response::DescribedGroup {
    let req = ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s(group))]);
    let mut resp: ConsumerGroupDescribeResponse = wire.call(ApiKey::ConsumerGroupDescribe, 0, &req);
    resp.groups.remove(0)
}

/// (group epoch, assignment epoch, member id -> (member epoch, assignment)).
type Described = (i32, i32, BTreeMap<String, (i32, Owned)>);

fn summary(g: &consumer_group_describe_response::DescribedGroup) -> Described {
    let members = g
        .members
        .iter()
        .map(|m| {
            let owned = m
                .assignment
                .topic_partitions
                .iter()
                .map(|tp| (tp.topic_id, tp.partitions.iter().copied().collect()))
                .collect();
            (m.member_id.to_string(), (m.member_epoch, owned))
        })
        .collect();
    (g.group_epoch, g.assignment_epoch, members)
}

/// Two members heartbeat (acknowledging) until the group is Stable.
fn settle(wire: &mut Wire, members: &mut [Member]) {
    wait_until("a stable group", || {
        for m in members.iter_mut() {
            assert_eq!(m.heartbeat(wire).error_code, 0);
        }
        describe(wire, &members[0].group).group_state.as_str() == "Stable"
    });
}

#[test]
fn a_restarted_coordinator_keeps_member_epochs_and_assignments() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = TestBroker::start(dir.path(), &["offsets.topic.num.partitions=1"]);
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("t", 4, 1, &[]).0, 0);
    wait_for_coordinator(&broker.addr, "g");
    let mut members = [
        Member::new("g", "member-a-0000000001"),
        Member::new("g", "member-b-0000000001"),
    ];
    settle(&mut wire, &mut members);
    let before = summary(&describe(&mut wire, "g"));
    assert_eq!(before.2.len(), 2);
    assert!(members
        .iter()
        .all(|m| m.owned.values().map(BTreeSet::len).sum::<usize>() == 2));

    broker.restart();
    wait_for_coordinator(&broker.addr, "g");
    let mut wire = broker.connect();
    assert_eq!(summary(&describe(&mut wire, "g")), before);
    for m in &mut members {
        let (epoch, owned) = (m.epoch, m.owned.clone());
        let r = m.heartbeat(&mut wire);
        assert_eq!((r.error_code, r.member_epoch), (0, epoch), "{r:?}");
        assert_eq!(m.owned, owned);
    }
    // The loaded state is checked, not just accepted: an epoch from the future is fenced.
    let mut ghost = Member::new("g", &members[0].id);
    ghost.epoch = members[0].epoch + 5;
    assert_eq!(ghost.heartbeat(&mut wire).error_code, 110);
}

#[test]
fn list_groups_v5_offset_fetch_v9_and_migration_on_the_wire() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(
        dir.path(),
        &[
            "offsets.topic.num.partitions=1",
            "group.initial.rebalance.delay.ms=0",
        ],
    );
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("t", 2, 1, &[]).0, 0);
    wait_for_coordinator(&broker.addr, "g");
    let mut m = Member::new("g", "member-a-0000000001");
    assert_eq!(m.heartbeat(&mut wire).error_code, 0);

    // A classic group with a member.
    let join = JoinGroupRequest::default()
        .with_group_id(GroupId(s("cg")))
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(30_000)
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
        )
        .with_name(s("range"))
        // ConsumerProtocolSubscription v0: no topics, null user data.
        .with_metadata(bytes::Bytes::from_static(&[
            0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
        ]))]);
    let r: JoinGroupResponse = wire.call(ApiKey::JoinGroup, 3, &join);
    assert_eq!(r.error_code, 0);

    // ListGroups v5: group types, filtered case-insensitively.
    let list = |wire: &mut Wire, types: &[&str]| -> Vec<(String, String)> {
        let req =
            ListGroupsRequest::default().with_types_filter(types.iter().map(|t| s(t)).collect());
        let resp: ListGroupsResponse = wire.call(ApiKey::ListGroups, 5, &req);
        resp.groups
            .iter()
            .map(|g| (g.group_id.to_string(), g.group_type.to_string()))
            .collect()
    };
    assert_eq!(
        list(&mut wire, &[]),
        vec![
            ("cg".to_string(), "classic".to_string()),
            ("g".to_string(), "consumer".to_string())
        ]
    );
    assert_eq!(
        list(&mut wire, &["Consumer"]),
        vec![("g".to_string(), "consumer".to_string())]
    );

    // OffsetFetch v9: the member's id and epoch are checked.
    let fetch = |wire: &mut Wire, member: Option<&str>, epoch: i32| -> i16 {
        let req = OffsetFetchRequest::default().with_groups(vec![
            offset_fetch_request::OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(s("g")))
                .with_member_id(member.map(s))
                .with_member_epoch(epoch)
                .with_topics(None),
        ]);
        let resp: OffsetFetchResponse = wire.call(ApiKey::OffsetFetch, 9, &req);
        resp.groups[0].error_code
    };
    assert_eq!(fetch(&mut wire, Some(&m.id), m.epoch), 0);
    assert_eq!(fetch(&mut wire, Some(&m.id), m.epoch + 1), 113);
    assert_eq!(fetch(&mut wire, Some("stranger"), m.epoch), 25);
    assert_eq!(fetch(&mut wire, None, -1), 0, "an admin's fetch");

    // Migration: a classic join to the consumer group is served by it (Kafka does so
    // whatever `group.consumer.migration.policy` says): the answer names no leader, carries
    // the member's epoch as the generation and the protocol it listed. A KIP-848 heartbeat to
    // the classic group cannot upgrade it (its member never synced, so it has no assignment
    // to keep) and is refused as without migration.
    let r: JoinGroupResponse = wire.call(
        ApiKey::JoinGroup,
        3,
        &join.clone().with_group_id(GroupId(s("g"))),
    );
    assert_eq!(r.error_code, 0, "{r:?}");
    assert!(!r.member_id.is_empty() && r.leader.is_empty(), "{r:?}");
    assert_eq!(r.protocol_name.as_deref(), Some("range"));
    assert!(r.generation_id > 0, "{r:?}");
    let r = Member::new("cg", "member-c-0000000001").heartbeat(&mut wire);
    assert_eq!(r.error_code, 69, "GROUP_ID_NOT_FOUND: {r:?}");
    assert_eq!(
        r.error_message.as_deref(),
        Some("Group cg is not a consumer group")
    );
}

/// ConsumerProtocolSubscription v0 of topic "t" (no user data).
const SUBSCRIPTION_T: &[u8] = &[0, 0, 0, 0, 0, 1, 0, 1, b't', 0xff, 0xff, 0xff, 0xff];

/// ConsumerProtocolAssignment v0 of "t" partitions 0..4.
fn assignment_all() -> bytes::Bytes {
    let mut b = vec![0, 0, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 4];
    for p in 0..4i32 {
        b.extend_from_slice(&p.to_be_bytes());
    }
    b.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]);
    bytes::Bytes::from(b)
}

/// How many partitions an embedded assignment of one topic holds.
fn assigned_count(a: &[u8]) -> i32 {
    if a.len() < 12 {
        return 0;
    }
    let name = usize::from(u16::from_be_bytes([a[6], a[7]]));
    let at = 8 + name;
    i32::from_be_bytes([a[at], a[at + 1], a[at + 2], a[at + 3]])
}

fn classic_join(wire: &mut Wire, group: &str, member: &str) -> JoinGroupResponse {
    let req = JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(member))
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(30_000)
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
        )
        .with_name(s("range"))
        .with_metadata(bytes::Bytes::from_static(SUBSCRIPTION_T))]);
    wire.call(ApiKey::JoinGroup, 5, &req)
}

fn classic_sync(
    wire: &mut Wire,
    group: &str,
    member: &str,
    generation: i32,
    assignment: Option<bytes::Bytes>,
) -> SyncGroupResponse {
    let assignments = assignment
        .map(|a| {
            vec![sync_group_request::SyncGroupRequestAssignment::default()
                .with_member_id(s(member))
                .with_assignment(a)]
        })
        .unwrap_or_default();
    let req = SyncGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(member))
        .with_generation_id(generation)
        .with_protocol_type(Some(s("consumer")))
        .with_protocol_name(Some(s("range")))
        .with_assignments(assignments);
    wire.call(ApiKey::SyncGroup, 5, &req)
}

fn classic_heartbeat(wire: &mut Wire, group: &str, member: &str, generation: i32) -> i16 {
    let req = HeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(member))
        .with_generation_id(generation);
    let resp: HeartbeatResponse = wire.call(ApiKey::Heartbeat, 4, &req);
    resp.error_code
}

/// Caught: a KIP-848 heartbeat to a classic group with members was refused, and nothing
/// wrote a classic member inside a consumer group. Now the group is upgraded, and a broker
/// killed and restarted rebuilds it with its classic member (same epoch and partitions, known
/// to its next Heartbeat), which rejoins and gets its share.
#[test]
fn a_restarted_coordinator_keeps_a_migrated_group_with_its_classic_member() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = TestBroker::start(
        dir.path(),
        &[
            "offsets.topic.num.partitions=1",
            "group.initial.rebalance.delay.ms=0",
        ],
    );
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("t", 4, 1, &[]).0, 0);
    wait_for_coordinator(&broker.addr, "g");
    let r = classic_join(&mut wire, "g", "");
    assert_eq!(r.error_code, 79, "MEMBER_ID_REQUIRED");
    let id = r.member_id.to_string();
    let r = classic_join(&mut wire, "g", &id);
    assert_eq!((r.error_code, r.leader.to_string()), (0, id.clone()));
    let generation = r.generation_id;
    let r = classic_sync(&mut wire, "g", &id, generation, Some(assignment_all()));
    assert_eq!((r.error_code, assigned_count(&r.assignment)), (0, 4));

    let mut k = Member::new("g", "member-k-0000000001");
    let r = k.heartbeat(&mut wire);
    assert_eq!(r.error_code, 0, "upgraded: {r:?}");
    let before = summary(&describe(&mut wire, "g"));
    assert_eq!(
        before.2[&id].0, generation,
        "the classic generation is its epoch"
    );
    assert_eq!(
        before.2[&id].1.values().map(BTreeSet::len).sum::<usize>(),
        4
    );

    broker.restart();
    wait_for_coordinator(&broker.addr, "g");
    let mut wire = broker.connect();
    assert_eq!(summary(&describe(&mut wire, "g")), before);
    assert_eq!(
        classic_heartbeat(&mut wire, "g", &id, generation),
        27,
        "known and told to rejoin (not UNKNOWN_MEMBER_ID)"
    );
    let r = classic_join(&mut wire, "g", &id);
    assert_eq!(r.error_code, 0, "{r:?}");
    assert!(r.generation_id > generation && r.leader.is_empty(), "{r:?}");
    let r2 = classic_sync(&mut wire, "g", &id, r.generation_id, None);
    assert_eq!((r2.error_code, assigned_count(&r2.assignment)), (0, 2));
    wait_until("the KIP-848 member gets the other two", || {
        assert_eq!(k.heartbeat(&mut wire).error_code, 0);
        k.owned.values().map(BTreeSet::len).sum::<usize>() == 2
    });
    assert_eq!(classic_heartbeat(&mut wire, "g", &id, r.generation_id), 0);
}

/// `group.coordinator.rebalance.protocols=classic` turns KIP-848 off as in Kafka: both
/// consumer-group APIs answer UNSUPPORTED_VERSION (35), a classic group still works; Kafka's
/// default `classic,consumer` serves them, and a list without `classic` does not start.
#[test]
fn the_consumer_protocol_follows_group_coordinator_rebalance_protocols() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(
        dir.path(),
        &["group.coordinator.rebalance.protocols=classic"],
    );
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("t", 2, 1, &[]).0, 0);
    wait_for_coordinator(&broker.addr, "off");
    let mut m = Member::new("off", "m1");
    let resp = m.heartbeat(&mut wire);
    assert_eq!(resp.error_code, 35, "{resp:?}");
    let d = describe(&mut wire, "off");
    assert_eq!((d.group_id.0.as_str(), d.error_code), ("off", 35));
    let join = JoinGroupRequest::default()
        .with_group_id(GroupId(s("classic")))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s(""))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
        )
        .with_name(s("range"))
        .with_metadata(bytes::Bytes::new())]);
    wait_for_coordinator(&broker.addr, "classic");
    let joined: JoinGroupResponse = wire.call(ApiKey::JoinGroup, 5, &join);
    // v4+: the first join asks for a member id, as Kafka does (KIP-394).
    assert_eq!(joined.error_code, 79, "{joined:?}");
    drop(broker);

    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_runnel"))
        .args(["broker", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .args([
            "--override",
            "group.coordinator.rebalance.protocols=consumer",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("a broker without the classic protocol kept running");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(!status.success());
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(
        err.contains("Disabling the 'classic' protocol is not supported."),
        "{err}"
    );
}
