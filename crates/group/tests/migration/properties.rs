//! Random histories of classic and KIP-848 consumers joining, leaving and crashing in one
//! group, with failovers, under every migration policy: no partition is ever consumed by two
//! live clients, both coordinators' invariants hold, what a failover would rebuild equals the
//! live consumer groups, and once the churn stops the live clients converge to consuming
//! every partition exactly once.

use proptest::prelude::*;
use runnel_group::{ConsumerGroupConfig, MigrationPolicy};

use super::clients::{ClassicClient, KipClient};
use super::world::World;
use super::Fleet;

#[derive(Debug, Clone)]
enum Op {
    AddClassic,
    AddKip,
    LeaveClassic(usize),
    LeaveKip(usize),
    CrashClassic(usize),
    CrashKip(usize),
    Failover,
    Run(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::AddClassic),
        3 => Just(Op::AddKip),
        1 => any::<usize>().prop_map(Op::LeaveClassic),
        1 => any::<usize>().prop_map(Op::LeaveKip),
        1 => any::<usize>().prop_map(Op::CrashClassic),
        1 => any::<usize>().prop_map(Op::CrashKip),
        1 => Just(Op::Failover),
        4 => (1usize..40).prop_map(Op::Run),
    ]
}

fn policy() -> impl Strategy<Value = MigrationPolicy> {
    prop_oneof![
        Just(MigrationPolicy::Bidirectional),
        Just(MigrationPolicy::Upgrade),
        Just(MigrationPolicy::Downgrade),
        Just(MigrationPolicy::Disabled),
    ]
}

fn apply(w: &mut World, f: &mut Fleet, op: Op, cooperative: bool, n: &mut usize) {
    match op {
        Op::AddClassic => {
            *n += 1;
            let name = format!("classic-{n}");
            f.classic
                .push(ClassicClient::new("g", &name, &["t"], cooperative));
        }
        Op::AddKip => {
            *n += 1;
            f.kip.push(KipClient::new("g", &format!("kip-{n}"), &["t"]));
        }
        Op::LeaveClassic(i) if !f.classic.is_empty() => {
            let mut c = f.classic.remove(i % f.classic.len());
            if !c.member_id.is_empty() {
                c.leave(w);
            }
        }
        Op::LeaveKip(i) if !f.kip.is_empty() => {
            let mut k = f.kip.remove(i % f.kip.len());
            k.leave(w);
        }
        // A crashed client consumes nothing; the coordinator fences it by its timeouts.
        Op::CrashClassic(i) if !f.classic.is_empty() => {
            f.classic.remove(i % f.classic.len());
        }
        Op::CrashKip(i) if !f.kip.is_empty() => {
            f.kip.remove(i % f.kip.len());
        }
        Op::Failover => w.failover(),
        Op::Run(steps) => f.run(w, steps),
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn migration_never_gives_a_partition_to_two_consumers(
        policy in policy(),
        cooperative in any::<bool>(),
        partitions in 1i32..7,
        ops in proptest::collection::vec(op(), 1..25),
    ) {
        let mut w = World::new(ConsumerGroupConfig {
            migration_policy: policy,
            ..ConsumerGroupConfig::default()
        });
        w.topic("t", partitions);
        let mut f = Fleet::default();
        let mut n = 0;
        for op in ops {
            apply(&mut w, &mut f, op, cooperative, &mut n);
            f.check_exclusive(&w);
            w.check_durable();
        }
        // Quiet: every crashed member's session (45 s at most) and rebalance timeout (30 s)
        // run out, and the live clients settle.
        f.run(&mut w, 900);
        w.check_durable();
        if !f.classic.is_empty() || !f.kip.is_empty() {
            prop_assert!(f.covers(&w, "t"), "not converged: {:?}", f.owners(&w));
        }
    }
}
