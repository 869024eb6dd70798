//! Spec E.5: the leader-epoch cache (Kafka's `LeaderEpochFileCache`) and OffsetForLeaderEpoch.

use runnel_replication::*;

fn cache(entries: &[(i32, i64)]) -> LeaderEpochCache {
    LeaderEpochCache::from_entries(entries.iter().map(|&(epoch, start_offset)| EpochEntry {
        epoch,
        start_offset,
    }))
}

fn pairs(c: &LeaderEpochCache) -> Vec<(i32, i64)> {
    c.entries()
        .iter()
        .map(|e| (e.epoch, e.start_offset))
        .collect()
}

fn eo(epoch: i32, end_offset: i64) -> EpochEndOffset {
    EpochEndOffset { epoch, end_offset }
}

#[test]
fn spec_example_leader_answers() {
    let leader = cache(&[(0, 0), (1, 100), (2, 150)]);
    assert_eq!(leader.end_offset_for(1, 200), eo(1, 150));
    assert_eq!(leader.end_offset_for(0, 200), eo(0, 100));
    assert_eq!(leader.end_offset_for(2, 200), eo(2, 200), "latest: its LEO");
}

#[test]
fn largest_known_epoch_at_or_below_the_requested_one() {
    let c = cache(&[(1, 0), (4, 50), (7, 90)]);
    assert_eq!(c.end_offset_for(5, 120), eo(4, 90));
    assert_eq!(c.end_offset_for(6, 120), eo(4, 90));
    assert_eq!(c.end_offset_for(3, 120), eo(1, 50));
    assert_eq!(c.end_offset_for(7, 120), eo(7, 120));
}

#[test]
fn unknown_epochs() {
    let c = cache(&[(1, 10), (4, 50)]);
    assert_eq!(
        c.end_offset_for(9, 80),
        EpochEndOffset::UNDEFINED,
        "newer than all"
    );
    assert_eq!(c.end_offset_for(-1, 80), EpochEndOffset::UNDEFINED);
    assert_eq!(
        c.end_offset_for(0, 80),
        eo(0, 10),
        "older than all: Kafka answers (requested, first start offset)"
    );
    assert_eq!(
        LeaderEpochCache::new().end_offset_for(0, 0),
        EpochEndOffset::UNDEFINED
    );
    assert_eq!(EpochEndOffset::UNDEFINED, eo(-1, -1));
}

#[test]
fn assign_keeps_epochs_and_offsets_strictly_increasing() {
    let mut c = cache(&[(0, 0), (1, 100)]);
    c.assign(1, 120);
    assert_eq!(
        pairs(&c),
        [(0, 0), (1, 100)],
        "same epoch, later offset: no-op"
    );
    c.assign(1, 90);
    assert_eq!(
        pairs(&c),
        [(0, 0), (1, 90)],
        "same epoch, earlier offset: replaced"
    );
    c.assign(3, 150);
    c.assign(4, 150);
    assert_eq!(
        pairs(&c),
        [(0, 0), (1, 90), (4, 150)],
        "an empty epoch is superseded"
    );
    c.assign(2, 200);
    assert_eq!(
        pairs(&c),
        [(0, 0), (1, 90), (2, 200)],
        "a lower epoch drops newer ones"
    );
    c.assign(5, 50);
    assert_eq!(
        pairs(&c),
        [(0, 0), (5, 50)],
        "a lower offset drops later ones"
    );
    c.assign(-1, 60);
    c.assign(6, -1);
    assert_eq!(
        pairs(&c),
        [(0, 0), (5, 50)],
        "no epoch / no offset: ignored"
    );
    assert_eq!(c.latest_epoch(), Some(5));
    assert_eq!(
        c.latest_entry(),
        Some(EpochEntry {
            epoch: 5,
            start_offset: 50
        })
    );
}

#[test]
fn truncate_from_end_drops_epochs_starting_at_or_after_the_offset() {
    let mut c = cache(&[(0, 0), (1, 100), (2, 150)]);
    c.truncate_from_end(151);
    assert_eq!(pairs(&c), [(0, 0), (1, 100), (2, 150)]);
    c.truncate_from_end(150);
    assert_eq!(pairs(&c), [(0, 0), (1, 100)]);
    c.truncate_from_end(-1);
    assert_eq!(pairs(&c), [(0, 0), (1, 100)], "-1 is not an offset");
    c.truncate_from_end(0);
    assert_eq!(pairs(&c), []);
    assert_eq!(c.latest_epoch(), None);
}

#[test]
fn truncate_from_start_keeps_the_epoch_of_the_first_record() {
    let mut c = cache(&[(0, 0), (1, 100), (2, 150)]);
    c.truncate_from_start(120);
    assert_eq!(pairs(&c), [(1, 120), (2, 150)]);
    c.truncate_from_start(150);
    assert_eq!(pairs(&c), [(2, 150)]);
    c.truncate_from_start(10);
    assert_eq!(
        pairs(&c),
        [(2, 150)],
        "before the first entry: nothing to do"
    );
}

/// The log persists its checkpoint only when the cache says it changed.
#[test]
fn every_change_and_only_a_change_is_reported() {
    let mut c = LeaderEpochCache::new();
    assert!(c.assign(0, 0));
    assert!(!c.assign(0, 10), "same epoch, later offset");
    assert!(!c.assign(-1, 10), "no epoch");
    assert!(c.assign(2, 50));
    assert!(!c.truncate_from_end(51), "nothing starts at or after 51");
    assert!(!c.truncate_from_start(0), "already starts there");
    assert!(c.truncate_from_start(10));
    assert!(!c.truncate_from_start(10), "again: no change");
    assert!(c.truncate_from_end(50));
    assert_eq!(
        c.entries(),
        &[EpochEntry {
            epoch: 0,
            start_offset: 10
        }]
    );
}
