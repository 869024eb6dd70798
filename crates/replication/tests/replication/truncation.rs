//! Spec E.5: the follower's truncation point and the leader's DivergingEpoch, with the
//! spec's example, the KIP-279 iterative case, and a property test over generated histories
//! (elections, appends, partial replication): after truncating and replaying the leader's
//! suffix, the follower's log equals the leader's.

use proptest::prelude::*;
use runnel_replication::*;

fn cache(entries: &[(i32, i64)]) -> LeaderEpochCache {
    LeaderEpochCache::from_entries(entries.iter().map(|&(epoch, start_offset)| EpochEntry {
        epoch,
        start_offset,
    }))
}

fn eo(epoch: i32, end_offset: i64) -> EpochEndOffset {
    EpochEndOffset { epoch, end_offset }
}

fn done(offset: i64) -> TruncationState {
    TruncationState {
        offset,
        completed: true,
    }
}

#[test]
fn spec_example_old_leader_truncates_to_150() {
    let leader = cache(&[(0, 0), (1, 100), (2, 150)]);
    let follower = cache(&[(0, 0), (1, 100)]);
    let asked = follower.latest_epoch().unwrap();
    assert_eq!(asked, 1);
    let reply = leader.end_offset_for(asked, 180);
    assert_eq!(reply, eo(1, 150));
    assert_eq!(truncation_point(&follower, 170, 120, reply), done(150));
    // The same via Fetch v12+: last fetched epoch 1 at offset 170 diverges at (1, 150).
    assert_eq!(diverging_epoch(&leader, 180, 1, 170), Some(eo(1, 150)));
}

#[test]
fn iterative_truncation_when_the_follower_never_saw_the_leaders_epoch() {
    // Leader: epoch 0 at 0..40, 1 at 40..60, 3 from 60. Follower: 0 at 0..50, 2 at 50..80.
    let leader = cache(&[(0, 0), (1, 40), (3, 60)]);
    let mut follower = cache(&[(0, 0), (2, 50)]);
    let reply = leader.end_offset_for(2, 100);
    assert_eq!(reply, eo(1, 60));
    let first = truncation_point(&follower, 80, 10, reply);
    assert_eq!(
        first,
        TruncationState {
            offset: 50,
            completed: false
        },
        "the follower knows epoch 0, not 1: cut to the end of 0 and ask again"
    );
    follower.truncate_from_end(first.offset);
    let reply = leader.end_offset_for(follower.latest_epoch().unwrap(), 100);
    assert_eq!(reply, eo(0, 40));
    assert_eq!(truncation_point(&follower, 50, 10, reply), done(40));
}

#[test]
fn follower_without_divergence_keeps_its_log() {
    let leader = cache(&[(0, 0), (1, 100), (2, 150)]);
    let follower = cache(&[(0, 0), (1, 100), (2, 150)]);
    let reply = leader.end_offset_for(2, 200);
    assert_eq!(truncation_point(&follower, 170, 160, reply), done(170));
    assert_eq!(diverging_epoch(&leader, 200, 2, 170), None);
    assert_eq!(
        diverging_epoch(&leader, 200, 1, 150),
        None,
        "epoch 1 ended at 150"
    );
    assert_eq!(diverging_epoch(&leader, 200, -1, 170), None, "not sent");
}

#[test]
fn undefined_replies() {
    let follower = cache(&[(0, 0), (5, 100)]);
    assert_eq!(
        truncation_point(&follower, 170, 120, EpochEndOffset::UNDEFINED),
        done(120),
        "nothing to compare: fall back to the HW"
    );
    assert_eq!(
        truncation_point(&follower, 100, 120, EpochEndOffset::UNDEFINED),
        done(100),
        "never above the LEO"
    );
    assert_eq!(truncation_point(&follower, 170, 0, eo(-1, 130)), done(130));
    // Leader epoch 3 unknown to the follower, no epoch <= 3 known either... here it knows 0.
    assert_eq!(
        truncation_point(&follower, 170, 0, eo(3, 140)),
        TruncationState {
            offset: 100,
            completed: false
        }
    );
    let later = cache(&[(4, 50)]);
    assert_eq!(
        truncation_point(&later, 170, 0, eo(3, 40)),
        done(40),
        "knows no epoch <= 3: truncate to the leader's end"
    );
    // The leader has never seen the follower's epoch (too new): DivergingEpoch says so.
    let leader = cache(&[(0, 0), (2, 30)]);
    assert_eq!(
        diverging_epoch(&leader, 90, 7, 60),
        Some(EpochEndOffset::UNDEFINED)
    );
}

// ---- property test: generated histories ------------------------------------------------

/// A replica: its log as the epoch of each record (records with the same epoch at the same
/// offset are the same record, since one leader writes an epoch), its epoch cache, and HW.
#[derive(Debug, Clone, Default)]
struct Replica {
    log: Vec<i32>,
    cache: LeaderEpochCache,
    hw: i64,
}

impl Replica {
    fn leo(&self) -> i64 {
        self.log.len() as i64
    }

    fn truncate(&mut self, offset: i64) {
        self.log.truncate(offset as usize);
        self.cache.truncate_from_end(offset);
        self.hw = self.hw.min(offset);
    }

    /// Appends what the leader has from our LEO, at most `max` records, as a follower does:
    /// assigning each new epoch at its first offset.
    fn copy_from(&mut self, leader: &Replica, max: usize) {
        let from = self.log.len();
        for (i, &epoch) in leader.log.iter().enumerate().skip(from).take(max) {
            self.cache.assign(epoch, i as i64);
            self.log.push(epoch);
        }
        self.hw = leader.hw.min(self.leo());
    }
}

#[derive(Debug, Clone, Copy)]
enum Hop {
    /// Replica `i` becomes leader of the next epoch (clean or not: any replica).
    Elect(usize),
    Append(usize),
    /// Replica `i` syncs with the leader (truncation protocol) then copies `n` records.
    Replicate(usize, usize),
}

fn hop(n: usize) -> impl Strategy<Value = Hop> {
    prop_oneof![
        1 => (0..n).prop_map(Hop::Elect),
        3 => (1usize..6).prop_map(Hop::Append),
        3 => (0..n, 0usize..8).prop_map(|(i, k)| Hop::Replicate(i, k)),
    ]
}

/// The OffsetForLeaderEpoch protocol: ask for the latest epoch, truncate, repeat until done.
fn sync_by_offset_for_leader_epoch(f: &mut Replica, leader: &Replica) -> usize {
    for round in 1..=64 {
        let state = match f.cache.latest_epoch() {
            None => done(f.hw.min(f.leo())),
            Some(epoch) => {
                let reply = leader.cache.end_offset_for(epoch, leader.leo());
                truncation_point(&f.cache, f.leo(), f.hw, reply)
            }
        };
        assert!(state.offset <= f.leo(), "truncation never extends the log");
        f.truncate(state.offset);
        if state.completed {
            return round;
        }
    }
    panic!("truncation did not converge");
}

/// The Fetch v12+ protocol: fetch with the last fetched epoch until no divergence.
fn sync_by_diverging_epoch(f: &mut Replica, leader: &Replica) {
    for _ in 0..64 {
        // Kafka starts `lastFetchedEpoch` from the epoch cache's latest epoch, not the last
        // record's: a replica that led an epoch without writing has it only in its cache,
        // and must still learn that the leader's history differs there.
        let last_epoch = f.cache.latest_epoch().unwrap_or(-1);
        match diverging_epoch(&leader.cache, leader.leo(), last_epoch, f.leo()) {
            None => return,
            Some(reply) => {
                let state = truncation_point(&f.cache, f.leo(), f.hw, reply);
                f.truncate(state.offset);
            }
        }
    }
    panic!("DivergingEpoch did not converge");
}

fn simulate(n: usize, hops: &[Hop], via_fetch: bool) -> Vec<Replica> {
    let mut replicas = vec![Replica::default(); n];
    let mut leader = 0;
    let mut epoch = 0;
    replicas[0].cache.assign(0, 0);
    for &h in hops {
        match h {
            Hop::Elect(i) => {
                epoch += 1;
                leader = i;
                let leo = replicas[i].leo();
                replicas[i].cache.assign(epoch, leo);
            }
            Hop::Append(k) => {
                replicas[leader].log.extend(std::iter::repeat_n(epoch, k));
                let l = &mut replicas[leader];
                l.hw = l.hw.max(l.leo() / 2);
            }
            Hop::Replicate(i, k) if i != leader => {
                let l = replicas[leader].clone();
                if via_fetch {
                    sync_by_diverging_epoch(&mut replicas[i], &l);
                } else {
                    sync_by_offset_for_leader_epoch(&mut replicas[i], &l);
                }
                replicas[i].copy_from(&l, k);
                // Invariant: after syncing, a follower's log is a prefix of the leader's.
                let f = &replicas[i];
                assert_eq!(
                    &f.log[..],
                    &l.log[..f.log.len()],
                    "follower diverged after sync"
                );
            }
            Hop::Replicate(..) => {}
        }
    }
    let l = replicas[leader].clone();
    for (i, f) in replicas.iter_mut().enumerate() {
        if i != leader {
            if via_fetch {
                sync_by_diverging_epoch(f, &l);
            } else {
                sync_by_offset_for_leader_epoch(f, &l);
            }
            f.copy_from(&l, usize::MAX);
        }
    }
    replicas
}

proptest! {
    #![proptest_config(crate::config(1024, "tests/replication/regressions/truncation.txt"))]

    #[test]
    fn truncation_then_replay_makes_logs_identical(
        n in 2usize..=4,
        hops in proptest::collection::vec(hop(4), 1..60),
        via_fetch in any::<bool>(),
    ) {
        let hops: Vec<Hop> = hops
            .into_iter()
            .map(|h| match h {
                Hop::Elect(i) => Hop::Elect(i % n),
                Hop::Replicate(i, k) => Hop::Replicate(i % n, k),
                other => other,
            })
            .collect();
        let replicas = simulate(n, &hops, via_fetch);
        for r in &replicas[1..] {
            prop_assert_eq!(&r.log, &replicas[0].log);
        }
    }
}

/// The history the property test found (shrunk): replica 2 is elected in epoch 4 without
/// writing, follows again and appends epoch-2 records. Its `LastFetchedEpoch` must be 4 (from
/// its cache), or replica 3's divergent record at offset 0 (epoch 1) is never truncated.
#[test]
fn found_history_elected_without_writing_then_following() {
    use Hop::*;
    let hops = [
        Elect(3),
        Append(1),
        Elect(0),
        Append(2),
        Replicate(2, 1),
        Elect(0),
        Elect(2),
        Elect(0),
        Replicate(2, 1),
        Elect(2),
    ];
    for via_fetch in [true, false] {
        let replicas = simulate(4, &hops, via_fetch);
        for r in &replicas {
            assert_eq!(r.log, vec![2, 2], "via_fetch={via_fetch}");
        }
    }
}

/// The property test can fail: without the KIP-279 iteration (stopping after one round) the
/// iterative example leaves a divergent record.
#[test]
fn one_round_is_not_enough_in_the_iterative_case() {
    let leader = cache(&[(0, 0), (1, 40), (3, 60)]);
    let follower = cache(&[(0, 0), (2, 50)]);
    let reply = leader.end_offset_for(2, 100);
    let first = truncation_point(&follower, 80, 10, reply);
    assert!(!first.completed);
    assert!(
        first.offset > 40,
        "one round keeps offsets 40..50 of epoch 0"
    );
}
