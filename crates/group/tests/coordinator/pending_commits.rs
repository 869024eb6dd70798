//! Offsets being written are invisible to OffsetFetch (Kafka's `pendingOffsetCommits`).
//!
//! Caught by the fault campaign (issue 11, seeds 11-14): a coordinator cut off from its
//! followers served a commit it had not replicated; after the failover the new coordinator
//! answered the older offset, so a group's committed offset went backwards.

use runnel_group::*;

use crate::common::*;

const MAX_BATCH: usize = 1 << 20;

fn fetched(c: &GroupCoordinator, group: &str) -> Option<i64> {
    let topics = [("t".to_string(), vec![0])];
    let (code, offsets) = c.fetch_offsets(group, Some(&topics));
    assert_eq!(code, 0);
    offsets[0].2.as_ref().map(|o| o.offset)
}

fn begin(c: &mut GroupCoordinator, offset: i64) -> OffsetCommit {
    let req = commit_request("g", -1, "", &[("t", 0, offset)]);
    let commit = c.begin_offset_commit(0, &req, MAX_BATCH);
    assert_eq!(commit.code, 0);
    assert_eq!(commit.records.len(), 1, "the record to write");
    commit
}

#[test]
fn a_commit_is_visible_only_once_written() {
    let mut c = coordinator(config());
    let first = begin(&mut c, 5);
    assert_eq!(fetched(&c, "g"), None, "pending: not yet in the log");
    c.complete_offset_commit(first.token, true);
    assert_eq!(fetched(&c, "g"), Some(5));

    let failed = begin(&mut c, 6);
    assert_eq!(
        fetched(&c, "g"),
        Some(5),
        "the committed offset until the write completes"
    );
    c.complete_offset_commit(failed.token, false);
    assert_eq!(fetched(&c, "g"), Some(5), "a failed write never shows");
}

#[test]
fn a_later_commit_completed_first_is_not_overwritten_by_an_earlier_one() {
    let mut c = coordinator(config());
    let earlier = begin(&mut c, 7);
    let later = begin(&mut c, 8);
    c.complete_offset_commit(later.token, true);
    assert_eq!(fetched(&c, "g"), Some(8));
    c.complete_offset_commit(earlier.token, true);
    assert_eq!(fetched(&c, "g"), Some(8));

    // In log order, each completion moves the offset forward.
    let a = begin(&mut c, 9);
    let b = begin(&mut c, 10);
    c.complete_offset_commit(a.token, true);
    assert_eq!(fetched(&c, "g"), Some(9));
    c.complete_offset_commit(b.token, true);
    assert_eq!(fetched(&c, "g"), Some(10));
}

#[test]
fn deleted_offsets_do_not_come_back_when_a_pending_commit_completes() {
    let mut c = coordinator(config());
    let pending = begin(&mut c, 3);
    let (code, codes, tombstones) = c.delete_offsets("g", &[("t".to_string(), vec![0])]);
    assert_eq!((code, codes[0].2), (0, 0));
    assert_eq!(
        tombstones.len(),
        1,
        "the pending record may be in the log: tombstone it"
    );
    c.complete_offset_commit(pending.token, true);
    assert_eq!(fetched(&c, "g"), None);
}

#[test]
fn a_group_with_only_a_pending_commit_is_not_expired_as_dead() {
    let mut c = coordinator(config());
    let pending = begin(&mut c, 4);
    // Past any expiry scan: the group is Empty, has no committed offsets yet, but one pending.
    let _ = c.tick(config().offsets_retention_ms.saturating_mul(3));
    c.complete_offset_commit(pending.token, true);
    assert_eq!(fetched(&c, "g"), Some(4));
}
