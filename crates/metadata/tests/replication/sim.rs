//! Issue 4: a deterministic simulation of replication. Three brokers (the real pure decisions
//! of `runnel_metadata::replication` inside a small imperative shell), a controller (the real
//! `MetadataImage`, `offline_election` and `validate_alter_partition`), a lossy, delaying,
//! partitionable network, random crashes and restarts, an acks=all producer
//! (`min.insync.replicas` = 2) and a consumer reading below the HW. Checked after every tick
//! and at the end:
//!
//! 1. every acknowledged record is committed where it was acknowledged, and after healing it
//!    is in the leader's log at that offset, once, in acknowledgement order;
//! 2. every member of the controller's ISR holds every committed record, identical, and no
//!    two leaders ever expose different records below their HW;
//! 3. every record the consumer read is committed, and in the final log at its offset;
//! 4. a leader's HW never goes back within its leader epoch (and an epoch has one leader);
//! 5. the controller elects only live in-sync replicas.
//!
//! Each seed draws its own knobs (lag time, session timeout, loss, delays, crash and
//! partition rates, DivergingEpoch or OffsetForLeaderEpoch truncation, assignment order).
//! `SIM_SEED=N` runs one seed, `SIM_SEEDS=N` runs seeds `0..N` (default 200), `SIM_STEPS=N`
//! changes the ticks per seed (default 2500). A failure prints the seed, its knobs, the last
//! events and the brokers' states:
//! `SIM_SEED=N cargo test -p runnel-metadata --test replication sim`.

mod broker;
mod check;
mod client;
mod controller;
mod net;
mod rng;
mod world;

use std::time::Instant;

use world::{run_seed, Mutation, Params, Stats};

const DEFAULT_SEEDS: u64 = 200;
const DEFAULT_STEPS: u64 = 2_500;

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v} is not a number")),
    )
}

fn steps() -> u64 {
    env_u64("SIM_STEPS").unwrap_or(DEFAULT_STEPS)
}

#[test]
fn sim_replication_under_crashes_and_partitions() {
    let started = Instant::now();
    let seeds: Vec<u64> = match env_u64("SIM_SEED") {
        Some(seed) => vec![seed],
        None => (0..env_u64("SIM_SEEDS").unwrap_or(DEFAULT_SEEDS)).collect(),
    };
    let mut total = Stats::default();
    for &seed in &seeds {
        match run_seed(Params::draw(seed, steps(), None)) {
            Ok(stats) => total.add(&stats),
            Err(report) => panic!("{report}"),
        }
    }
    println!(
        "replication sim: {} seeds x {} steps in {:?}\n{total:#?}",
        seeds.len(),
        steps(),
        started.elapsed()
    );
    if seeds.len() as u64 >= DEFAULT_SEEDS / 2 {
        // The run must not be vacuous: faults happened and the protocol did its work.
        assert!(total.acked > 1_000 * total.seeds, "too few acknowledged records: {total:#?}");
        assert!(total.consumer_reads > 0 && total.crashes > 0 && total.cuts > 0);
        assert!(total.elections > total.seeds, "too few elections");
        assert!(total.truncated_records > 0, "no follower ever truncated");
        assert!(total.shrinks_committed > 0 && total.expands_committed > 0);
        assert!(total.zombie_acks > 0 || total.seeds < DEFAULT_SEEDS);
    }
}

/// Runs seeds with a deliberate bug until one fails; the checks must catch it.
fn assert_caught(mutation: Mutation, max_seeds: u64, expect: &str) {
    for seed in 0..max_seeds {
        if let Err(report) = run_seed(Params::draw(seed, 1_500, Some(mutation))) {
            assert!(
                report.contains(expect),
                "{mutation:?} was caught, but not by '{expect}':\n{report}"
            );
            return;
        }
    }
    panic!("{mutation:?}: no seed of {max_seeds} caught the bug");
}

#[test]
fn sim_catches_acks_at_the_leo() {
    assert_caught(Mutation::AckAtLeo, 40, "invariant 1");
}

#[test]
fn sim_catches_an_unclean_election() {
    assert_caught(Mutation::UncleanElection, 40, "invariant");
}

#[test]
fn sim_catches_followers_that_never_truncate() {
    assert_caught(Mutation::SkipTruncation, 40, "invariant 2");
}

#[test]
fn sim_catches_a_consumer_reading_past_the_hw() {
    assert_caught(Mutation::ConsumerReadsLeo, 40, "invariant 3");
}
