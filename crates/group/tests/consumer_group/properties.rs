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

/// Topics the churn property may create, and the subscriptions it picks from.
const POOL: [&str; 4] = ["t0", "t1", "t2", "x0"];
const REGEXES: [&str; 4] = ["t[01]", "t.*", "^(x.*)|(t2)$", "nomatch.*"];

#[derive(Debug, Clone)]
enum ChurnOp {
    /// Join if absent, else heartbeat (acknowledging).
    Poll(usize),
    PollNoAck(usize),
    /// Change the subscription: a subset of `POOL` (bit mask) and maybe a regex.
    Subscribe(usize, u8, Option<usize>),
    /// librdkafka's unsubscribe: leave with -1; the next `Poll` rejoins with epoch 0.
    Unsubscribe(usize),
    Crash(usize),
    CreateTopic(usize, i32),
    Tick(i64),
}

fn churn_op() -> impl Strategy<Value = ChurnOp> {
    prop_oneof![
        6 => (0usize..4).prop_map(ChurnOp::Poll),
        2 => (0usize..4).prop_map(ChurnOp::PollNoAck),
        4 => (0usize..4, 0u8..16, proptest::option::of(0usize..REGEXES.len()))
            .prop_map(|(k, mask, rx)| ChurnOp::Subscribe(k, mask, rx)),
        2 => (0usize..4).prop_map(ChurnOp::Unsubscribe),
        1 => (0usize..4).prop_map(ChurnOp::Crash),
        2 => (0usize..POOL.len(), 1i32..5).prop_map(|(t, n)| ChurnOp::CreateTopic(t, n)),
        2 => (0i64..12_000).prop_map(ChurnOp::Tick),
    ]
}

/// What the coordinator should converge to for one client: every partition of the existing
/// topics it names or its regex matches (the whole-name match of `regex_matches`).
fn subscribed_topics(h: &Harness, c: &Client) -> BTreeSet<String> {
    h.topics
        .topics
        .keys()
        .filter(|t| c.topics.contains(t) || c.regex.as_deref().is_some_and(|r| regex_matches(r, t)))
        .cloned()
        .collect()
}

/// The few patterns of `REGEXES`, matched by hand so the oracle does not share the engine.
fn regex_matches(pattern: &str, topic: &str) -> bool {
    match pattern {
        "t[01]" => topic == "t0" || topic == "t1",
        "t.*" => topic.starts_with('t'),
        "^(x.*)|(t2)$" => topic.starts_with('x') || topic == "t2",
        _ => false,
    }
}

/// Partitions owned by clients the coordinator still counts as members must be disjoint
/// (a fenced client may still believe it owns some; it is not a member any more).
fn client_owned_disjoint(h: &Harness, clients: &[Option<Client>]) -> Result<(), String> {
    let members: BTreeSet<String> = h.assignments("g").into_keys().collect();
    let mut seen = BTreeSet::new();
    for c in clients.iter().flatten() {
        if !members.contains(&c.member_id) {
            continue;
        }
        for (t, ps) in &c.owned {
            for p in ps {
                if !seen.insert((*t, *p)) {
                    return Err(format!("{t}-{p} owned by two clients: {clients:?}"));
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Random joins, leaves (unsubscribe), crashes, subscription changes (literal and regex,
    /// sent once then omitted as unchanged, as librdkafka does), topic creations and time:
    /// a well-formed heartbeat never gets an error other than a fencing one (never
    /// INVALID_REQUEST), no partition is ever owned by two members (pending revocations
    /// included) nor by two live clients, and once everyone keeps heartbeating the group
    /// converges within a rebalance timeout to every client owning exactly the partitions
    /// the uniform assignor gives its subscription, all subscribed partitions owned once.
    #[test]
    fn subscription_churn_never_invalid_never_two_owners_and_converges(
        ops in proptest::collection::vec(churn_op(), 1..100),
    ) {
        let mut h = Harness::new(config());
        h.topic("t0", 3);
        let mut clients: Vec<Option<Client>> = vec![None; 4];
        let mut incarnation = 0;
        for op in ops {
            match op {
                ChurnOp::Poll(k) | ChurnOp::PollNoAck(k) => {
                    let ack = matches!(op, ChurnOp::Poll(_));
                    let c = clients[k].get_or_insert_with(|| {
                        incarnation += 1;
                        Client::new("g", &format!("m{k}-{incarnation}"), &["t0"])
                    });
                    c.poll(&mut h, ack);
                }
                ChurnOp::Subscribe(k, mask, rx) => {
                    if let Some(c) = clients[k].as_mut() {
                        let names: Vec<String> = (0..POOL.len())
                            .filter(|i| mask & (1 << i) != 0)
                            .map(|i| POOL[i].to_string())
                            .collect();
                        c.subscribe(&names, rx.map(|i| REGEXES[i]));
                    }
                }
                ChurnOp::Unsubscribe(k) => {
                    if let Some(c) = clients[k].as_mut() {
                        if c.epoch != 0 {
                            let r = c.leave(&mut h);
                            prop_assert!(r.error_code == 0 || r.error_code == 25, "{r:?}");
                        }
                    }
                }
                ChurnOp::Crash(k) => clients[k] = None,
                ChurnOp::CreateTopic(t, n) => {
                    if !h.topics.topics.contains_key(POOL[t]) {
                        h.topic(POOL[t], n);
                    }
                }
                ChurnOp::Tick(ms) => h.tick(ms),
            }
            client_owned_disjoint(&h, &clients).map_err(TestCaseError::fail)?;
        }

        // Crashed members' sessions run out while the others keep heartbeating.
        for _ in 0..10 {
            h.tick(5_000);
            for c in clients.iter_mut().flatten() {
                c.poll(&mut h, true);
            }
        }
        // Convergence within one rebalance timeout, heartbeating every second.
        let mut waited = 0;
        loop {
            let before: Vec<_> = clients.iter().flatten().map(|c| (c.epoch, c.owned.clone())).collect();
            for c in clients.iter_mut().flatten() {
                c.poll(&mut h, true);
            }
            client_owned_disjoint(&h, &clients).map_err(TestCaseError::fail)?;
            let after: Vec<_> = clients.iter().flatten().map(|c| (c.epoch, c.owned.clone())).collect();
            if before == after && h.describe("g").state != "Assigning" {
                break;
            }
            prop_assert!(waited < i64::from(REBALANCE_TIMEOUT), "no convergence: {:?}", h.describe("g"));
            h.tick(1_000);
            waited += 1_000;
        }
        let d = h.describe("g");
        let live: Vec<&Client> = clients.iter().flatten().collect();
        prop_assert_eq!(d.members.len(), live.len());
        if live.is_empty() {
            return Ok(());
        }
        prop_assert_eq!(d.state.as_str(), "Stable");
        let server = h.assignments("g");
        let mut owned = BTreeSet::new();
        let mut wanted = BTreeSet::new();
        for c in &live {
            prop_assert_eq!(&server[&c.member_id], &c.owned, "client and coordinator disagree");
            let subscribed = subscribed_topics(&h, c);
            for (t, ps) in &c.owned {
                let name = h.topics.name_of(t).unwrap().to_string();
                prop_assert!(subscribed.contains(&name), "{} owns {name}, not subscribed", c.member_id);
                for p in ps {
                    prop_assert!(owned.insert((*t, *p)));
                }
            }
            for name in subscribed {
                let (id, n) = h.topics.topics[&name];
                wanted.extend((0..n).map(|p| (id, p)));
            }
        }
        prop_assert_eq!(owned, wanted, "every subscribed partition owned exactly once");
    }
}
