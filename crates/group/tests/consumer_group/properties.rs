//! Property tests over random join / leave / heartbeat / crash / time / metadata sequences:
//! no partition ever has two owners (counting partitions pending revocation), and once every
//! live member keeps heartbeating and acknowledging, the group settles with every subscribed
//! partition owned exactly once and sizes within one (uniform assignor).

use std::collections::BTreeSet;

use proptest::prelude::*;
use runnel_group::consumer_group::*;

use crate::common::*;

#[derive(Debug, Clone)]
enum Op {
    Join(usize),
    Poll(usize),
    PollNoAck(usize),
    Leave(usize),
    Crash(usize),
    Tick(i64),
    Grow(i32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0usize..5).prop_map(Op::Join),
        6 => (0usize..5).prop_map(Op::Poll),
        2 => (0usize..5).prop_map(Op::PollNoAck),
        1 => (0usize..5).prop_map(Op::Leave),
        1 => (0usize..5).prop_map(Op::Crash),
        2 => (0i64..20_000).prop_map(Op::Tick),
        1 => (1i32..4).prop_map(Op::Grow),
    ]
}

/// Every client polls (acknowledging) until nothing changes.
fn settle(h: &mut Harness, clients: &mut [Option<Client>]) {
    for _ in 0..50 {
        let mut changed = false;
        for c in clients.iter_mut().flatten() {
            let before = (c.epoch, c.owned.clone());
            c.poll(h, true);
            changed |= before != (c.epoch, c.owned.clone());
        }
        if !changed {
            return;
        }
    }
    panic!("group did not settle: {:?}", h.describe("g"));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn never_two_owners_and_settles_balanced(ops in proptest::collection::vec(op(), 1..80)) {
        let mut h = Harness::new(config());
        h.topic("a", 5);
        h.topic("b", 3);
        let mut clients: Vec<Option<Client>> = vec![None; 5];
        let mut incarnation = 0;
        for op in ops {
            match op {
                Op::Join(k) => {
                    if clients[k].is_none() {
                        incarnation += 1;
                        clients[k] = Some(Client::new("g", &format!("m{k}-{incarnation}"), &["a", "b"]));
                    }
                    if let Some(c) = clients[k].as_mut() {
                        c.poll(&mut h, true);
                    }
                }
                Op::Poll(k) => {
                    if let Some(c) = clients[k].as_mut() {
                        c.poll(&mut h, true);
                    }
                }
                Op::PollNoAck(k) => {
                    if let Some(c) = clients[k].as_mut() {
                        c.poll(&mut h, false);
                    }
                }
                Op::Leave(k) => {
                    if let Some(mut c) = clients[k].take() {
                        if c.epoch != 0 {
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
            }
            // Never two owners (Harness::send/tick already run check_invariants; also check
            // the described assignments independently).
            let mut seen = BTreeSet::new();
            for a in h.assignments("g").values() {
                for (t, ps) in a {
                    for p in ps {
                        prop_assert!(seen.insert((*t, *p)), "{t}-{p} has two owners");
                    }
                }
            }
        }

        // Crashed members' sessions run out; everyone else keeps going.
        let live: Vec<usize> = (0..5).filter(|k| clients[*k].is_some()).collect();
        for _ in 0..10 {
            h.tick(5_000);
            for c in clients.iter_mut().flatten() {
                c.poll(&mut h, true);
            }
        }
        settle(&mut h, &mut clients);

        let d = h.describe("g");
        if live.is_empty() {
            prop_assert!(d.members.is_empty() || d.error_code == 69);
            return Ok(());
        }
        prop_assert_eq!(d.state.as_str(), "Stable");
        prop_assert_eq!(d.members.len(), live.len());
        let total = (h.topics.topics["a"].1 + h.topics.topics["b"].1) as usize;
        let mut seen = BTreeSet::new();
        let mut sizes = Vec::new();
        for c in clients.iter().flatten() {
            let server = h.assignments("g")[&c.member_id].clone();
            prop_assert_eq!(&server, &c.owned, "client and coordinator disagree");
            sizes.push(count(&c.owned));
            for (t, ps) in &c.owned {
                for p in ps {
                    prop_assert!(seen.insert((*t, *p)));
                }
            }
        }
        prop_assert_eq!(seen.len(), total, "every partition owned exactly once");
        prop_assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1, "{:?}", sizes);
    }
}

/// Stickiness through the whole protocol: a third member joining a stable pair only takes
/// partitions off them; nobody swaps partitions it could keep.
#[test]
fn a_joining_member_only_takes_the_excess() {
    let mut h = Harness::new(config());
    h.topic("t", 9);
    let mut a = Client::new("g", "a", &["t"]);
    let mut b = Client::new("g", "b", &["t"]);
    let mut clients = [Some(a.clone()), Some(b.clone())];
    settle(&mut h, &mut clients);
    a = clients[0].clone().unwrap();
    b = clients[1].clone().unwrap();
    let (a0, b0) = (a.owned.clone(), b.owned.clone());
    let mut clients = [Some(a), Some(b), Some(Client::new("g", "c", &["t"]))];
    settle(&mut h, &mut clients);
    let owned: Vec<Assignment> = clients.iter().flatten().map(|c| c.owned.clone()).collect();
    let t = h.id("t");
    assert!(owned[0][&t].is_subset(&a0[&t]));
    assert!(owned[1][&t].is_subset(&b0[&t]), "{a0:?} {b0:?} {owned:?}");
    assert_eq!(owned.iter().map(count).collect::<Vec<_>>(), vec![3, 3, 3]);
}
