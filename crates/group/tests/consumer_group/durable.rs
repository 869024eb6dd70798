//! Durable KIP-848 groups: the records `take_records` returns after each decision, replayed
//! by `load` into a fresh coordinator (a failover), rebuild the same groups; a failed append
//! (`revert_records`) leaves memory as the log has it.

use proptest::prelude::*;
use runnel_group::consumer_group::records::{replay, ConsumerGroupKey};
use runnel_group::consumer_group::*;
use runnel_group::{GroupConfig, GroupCoordinator, OffsetsRecord};

use crate::common::*;

/// Appends the records of the decisions so far to `log`.
fn persist(h: &mut Harness, log: &mut Vec<OffsetsRecord>) {
    log.extend(h.c.take_records());
}

/// A coordinator that took over the partition: everything replayed from `log`.
fn reload(h: &Harness, log: &[OffsetsRecord]) -> ConsumerGroups {
    let mut c = coordinator(config());
    c.load(h.now, log, &h.topics);
    c.check_invariants().unwrap();
    c
}

fn static_join(group: &str, member: &str, instance: &str, topics: &[&str]) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        instance_id: Some(instance.into()),
        ..join_req(group, member, topics)
    }
}

#[test]
fn a_failover_keeps_member_epochs_and_assignments() {
    let mut h = Harness::new(config());
    let mut log = Vec::new();
    h.topic("t", 4);
    let mut a = Client::new("g", "a", &["t"]);
    let mut b = Client::new("g", "b", &["t"]);
    for _ in 0..4 {
        a.poll(&mut h, true);
        b.poll(&mut h, true);
        persist(&mut h, &mut log);
    }
    assert_eq!(h.describe("g").state, "Stable");
    let before = h.describe("g");

    // The new coordinator answers the members' next heartbeats at their epochs: no rejoin,
    // no new epoch, the same partitions.
    h.c = reload(&h, &log);
    assert_eq!(h.describe("g"), before);
    let (ea, eb) = (a.epoch, b.epoch);
    let r = a.poll(&mut h, true);
    assert_eq!((r.error_code, r.member_epoch), (0, ea));
    let r = b.poll(&mut h, true);
    assert_eq!((r.error_code, r.member_epoch), (0, eb));
    assert!(h.c.take_records().is_empty(), "nothing changed");
    assert_eq!(h.assignments("g")["a"], a.owned);
    assert_eq!(h.assignments("g")["b"], b.owned);
}

#[test]
fn a_member_leaving_writes_tombstones_and_a_deleted_group_is_gone_on_load() {
    let mut h = Harness::new(config());
    let mut log = Vec::new();
    h.topic("t", 2);
    h.join("g", "a", &["t"]);
    persist(&mut h, &mut log);
    h.hb("g", "a", -1, None);
    let records = h.c.take_records();
    let tombstones: Vec<ConsumerGroupKey> = records
        .iter()
        .filter(|r| r.value.is_none())
        .map(|r| ConsumerGroupKey::decode(&r.key).unwrap())
        .collect();
    let member = |k: fn(String, String) -> ConsumerGroupKey| k("g".into(), "a".into());
    assert_eq!(
        tombstones,
        vec![
            member(|group, member| ConsumerGroupKey::CurrentAssignment { group, member }),
            member(|group, member| ConsumerGroupKey::TargetMember { group, member }),
            member(|group, member| ConsumerGroupKey::MemberMetadata { group, member }),
        ]
    );
    log.extend(records);
    let loaded = reload(&h, &log);
    assert_eq!(loaded.durable_view(), h.c.durable_view());
    assert_eq!(loaded.list(), vec![("g".to_string(), "Empty".to_string())]);

    assert_eq!(h.c.delete("g"), 0);
    persist(&mut h, &mut log);
    assert!(replay(&log).is_empty());
    assert!(reload(&h, &log).list().is_empty());
}

/// Caught by design: without the revert, the coordinator would answer the next heartbeats
/// from a state the log never got, and a failover would take it back.
#[test]
fn a_failed_append_is_reverted() {
    let mut h = Harness::new(config());
    let mut log = Vec::new();
    h.topic("t", 2);
    h.join("g", "a", &["t"]);
    persist(&mut h, &mut log);
    let stable = h.c.durable_view();

    // b's join is not in the log: reverted, a's state is unchanged.
    assert_eq!(h.join("g", "b", &["t"]).error_code, 0);
    assert!(!h.c.take_records().is_empty());
    h.c.revert_records();
    assert_eq!(h.c.durable_view(), stable);
    assert_eq!(h.describe("g").members.len(), 1);
    // b retries: joins as new.
    let r = h.join("g", "b", &["t"]);
    assert_eq!((r.error_code, r.member_epoch), (0, 2));
    persist(&mut h, &mut log);
    assert_eq!(reload(&h, &log).durable_view(), h.c.durable_view());

    // A first join that fails leaves no group behind.
    h.join("g2", "x", &["t"]);
    h.c.take_records();
    h.c.revert_records();
    assert!(!h.c.contains("g2"));
}

#[test]
fn a_static_member_that_left_temporarily_gets_its_partitions_back_after_a_failover() {
    let mut h = Harness::new(config());
    let mut log = Vec::new();
    h.topic("t", 2);
    let r = h.send(static_join("g", "a1", "ia", &["t"]));
    let owned = from_wire(r.assignment.as_ref().unwrap());
    persist(&mut h, &mut log);
    let mut leave = hb_req("g", "a1", -2, None);
    leave.instance_id = Some("ia".into());
    assert_eq!(h.send(leave).error_code, 0);
    persist(&mut h, &mut log);

    h.c = reload(&h, &log);
    let r = h.send(static_join("g", "a2", "ia", &["t"]));
    assert_eq!(r.error_code, 0);
    assert_eq!(from_wire(r.assignment.as_ref().unwrap()), owned);
}

#[test]
fn a_reloaded_member_gets_a_fresh_session_and_is_fenced_when_it_runs_out() {
    let mut h = Harness::new(config());
    let mut log = Vec::new();
    h.topic("t", 1);
    h.join("g", "a", &["t"]);
    persist(&mut h, &mut log);
    h.now += 40_000;
    h.c = reload(&h, &log);
    h.tick(10_000);
    assert_eq!(
        h.describe("g").members.len(),
        1,
        "session restarted at load"
    );
    h.tick(35_001);
    assert!(h.describe("g").members.is_empty());
    persist(&mut h, &mut log);
    assert_eq!(reload(&h, &log).durable_view(), h.c.durable_view());
}

/// A regex subscription is resolved again on load, so the first heartbeat after a failover
/// does not drop the matched topics (and bump the epoch).
#[test]
fn regex_subscriptions_survive_a_failover() {
    let mut h = Harness::new(config());
    let mut log = Vec::new();
    h.topic("orders-eu", 2);
    h.topic("orders-us", 2);
    let mut c = Client::new("g", "a", &[]);
    c.regex = Some("orders-.*".into());
    c.poll(&mut h, true);
    h.tick(1);
    for _ in 0..3 {
        c.poll(&mut h, true);
    }
    persist(&mut h, &mut log);
    assert_eq!(count(&c.owned), 4);
    let epoch = c.epoch;
    h.c = reload(&h, &log);
    let r = c.poll(&mut h, true);
    assert_eq!((r.error_code, r.member_epoch), (0, epoch));
    assert!(h.c.take_records().is_empty());
}

/// The classic loader leaves KIP-848 records alone (no warning, no group).
#[test]
fn the_classic_loader_skips_consumer_group_records() {
    let mut h = Harness::new(config());
    let mut log = Vec::new();
    h.topic("t", 1);
    h.join("g", "a", &["t"]);
    persist(&mut h, &mut log);
    let mut classic = GroupCoordinator::new(GroupConfig::default());
    classic.load(0, log.iter().cloned());
    assert!(classic.list_groups(&[]).is_empty());
}

#[derive(Debug, Clone)]
enum Op {
    Poll(usize),
    PollNoAck(usize),
    Subscribe(usize, u8),
    Leave(usize),
    Crash(usize),
    Tick(i64),
    Grow(i32),
    Delete,
    /// The append of the records since the last op fails.
    FailAppend,
    /// A failover: the log is replayed into a new coordinator.
    Failover,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0usize..4).prop_map(Op::Poll),
        2 => (0usize..4).prop_map(Op::PollNoAck),
        2 => (0usize..4, 1u8..8).prop_map(|(k, m)| Op::Subscribe(k, m)),
        1 => (0usize..4).prop_map(Op::Leave),
        1 => (0usize..4).prop_map(Op::Crash),
        2 => (0i64..30_000).prop_map(Op::Tick),
        1 => (1i32..3).prop_map(Op::Grow),
        1 => Just(Op::Delete),
        1 => Just(Op::FailAppend),
        1 => Just(Op::Failover),
    ]
}

const TOPICS: [&str; 3] = ["a", "b", "c"];

proptest! {
    #![proptest_config(ProptestConfig { cases: 150, ..ProptestConfig::default() })]

    /// Whatever the decisions, replaying the records written so far rebuilds an equal state:
    /// after every op, the log's replay equals the coordinator's durable view (a failed
    /// append reverts memory to it instead).
    #[test]
    fn replaying_the_records_rebuilds_an_equal_state(ops in proptest::collection::vec(op(), 1..60)) {
        let mut h = Harness::new(config());
        for t in TOPICS {
            h.topic(t, 3);
        }
        let mut log: Vec<OffsetsRecord> = Vec::new();
        let mut clients: Vec<Option<Client>> = vec![None; 4];
        let mut incarnation = 0;
        for op in ops {
            let mut failed = false;
            match op {
                Op::Poll(k) | Op::PollNoAck(k) => {
                    let c = clients[k].get_or_insert_with(|| {
                        incarnation += 1;
                        Client::new("g", &format!("m{k}-{incarnation}"), &["a", "b"])
                    });
                    let r = h.send(c.next_request(matches!(op, Op::Poll(_))));
                    match r.error_code {
                        0 => {
                            c.epoch = r.member_epoch;
                            c.subscription_changed = false;
                            if let Some(a) = &r.assignment {
                                c.owned = from_wire(a);
                            }
                        }
                        _ => {
                            c.epoch = 0;
                            c.owned.clear();
                        }
                    }
                }
                Op::Subscribe(k, mask) => {
                    if let Some(c) = clients[k].as_mut() {
                        let topics: Vec<String> = TOPICS
                            .iter()
                            .enumerate()
                            .filter(|(i, _)| mask & (1 << i) != 0)
                            .map(|(_, t)| t.to_string())
                            .collect();
                        c.subscribe(&topics, None);
                    }
                }
                Op::Leave(k) => {
                    if let Some(mut c) = clients[k].take() {
                        if c.epoch > 0 {
                            c.leave(&mut h);
                        }
                    }
                }
                Op::Crash(k) => clients[k] = None,
                Op::Tick(ms) => h.tick(ms),
                Op::Grow(n) => {
                    let now = h.topics.topics["a"].1;
                    h.topic("a", now + n);
                }
                Op::Delete => {
                    if h.c.delete("g") == 0 {
                        clients.iter_mut().for_each(|c| *c = None);
                    }
                }
                Op::FailAppend => failed = true,
                Op::Failover => {
                    persist(&mut h, &mut log);
                    h.c = reload(&h, &log);
                }
            }
            if failed {
                h.c.take_records();
                h.c.revert_records();
                h.c.check_invariants().unwrap();
                // The clients' last answers are lost with the append: they carry on from
                // what they had; the coordinator fences or tolerates them as Kafka would.
            } else {
                persist(&mut h, &mut log);
            }
            let replayed = reload(&h, &log);
            prop_assert_eq!(replayed.durable_view(), h.c.durable_view());
        }
    }
}
