//! Transactional offsets (TxnOffsetCommit, KIP-98): pending per producer id until the
//! transaction's marker, invisible to OffsetFetch (UNSTABLE_OFFSET_COMMIT with
//! `require_stable`), materialized by COMMIT, dropped by ABORT, and the same after a reload
//! of the partition's log (markers replayed in order).

use runnel_group::*;

use crate::common::*;

const MAX_BATCH: usize = 1 << 20;
const PID: i64 = 4000;

fn txn_request(
    group: &str,
    pid: i64,
    generation: i32,
    member: &str,
    offset: i64,
) -> TxnOffsetCommitRequest {
    TxnOffsetCommitRequest {
        group_id: group.to_string(),
        producer_id: pid,
        producer_epoch: 0,
        generation_id: generation,
        member_id: member.to_string(),
        group_instance_id: None,
        offsets: vec![CommitOffset {
            topic: "t".to_string(),
            partition: 0,
            offset,
            leader_epoch: -1,
            metadata: None,
        }],
    }
}

/// OffsetFetch of t-0: (offset, code).
fn fetched(c: &GroupCoordinator, group: &str, require_stable: bool) -> (Option<i64>, i16) {
    let topics = [("t".to_string(), vec![0])];
    let (code, offsets) = c.fetch_offsets_stable(group, Some(&topics), require_stable);
    assert_eq!(code, 0);
    (offsets[0].2.as_ref().map(|o| o.offset), offsets[0].3)
}

/// A TxnOffsetCommit written at once; returns its records.
fn txn_commit(c: &mut GroupCoordinator, req: &TxnOffsetCommitRequest) -> Vec<OffsetsRecord> {
    let commit = c.begin_txn_offset_commit(0, req, MAX_BATCH);
    assert_eq!(commit.codes, vec![("t".to_string(), 0, 0)]);
    assert_eq!(commit.records.len(), 1);
    c.complete_offset_commit(commit.token, true);
    c.check_invariants().unwrap();
    commit.records
}

#[test]
fn transactional_offsets_are_pending_until_commit_and_dropped_on_abort() {
    let mut c = coordinator(config());
    txn_commit(&mut c, &txn_request("g", PID, -1, "", 5));
    assert_eq!(fetched(&c, "g", false), (None, 0), "invisible while open");
    assert_eq!(
        fetched(&c, "g", true),
        (None, errors::UNSTABLE_OFFSET_COMMIT),
        "require_stable: unstable"
    );
    assert_eq!(c.pending_txn_producers("g"), vec![PID]);
    assert_eq!(c.complete_transaction(PID, false), 0);
    assert_eq!(fetched(&c, "g", true), (None, 0), "aborted: dropped");

    txn_commit(&mut c, &txn_request("g", PID, -1, "", 7));
    assert_eq!(
        c.complete_transaction(PID + 1, true),
        0,
        "another producer's marker"
    );
    assert_eq!(fetched(&c, "g", false), (None, 0));
    assert_eq!(c.complete_transaction(PID, true), 1);
    assert_eq!(fetched(&c, "g", true), (Some(7), 0));
    assert!(c.pending_txn_producers("g").is_empty());
}

#[test]
fn a_failed_write_drops_its_pending_offsets() {
    let mut c = coordinator(config());
    let commit = c.begin_txn_offset_commit(0, &txn_request("g", PID, -1, "", 5), MAX_BATCH);
    assert_eq!(fetched(&c, "g", true).1, errors::UNSTABLE_OFFSET_COMMIT);
    c.complete_offset_commit(commit.token, false);
    assert_eq!(fetched(&c, "g", true), (None, 0));
    c.complete_transaction(PID, true);
    assert_eq!(fetched(&c, "g", true), (None, 0), "nothing to commit");
}

#[test]
fn a_plain_commit_written_after_the_transactional_one_wins() {
    let mut c = coordinator(config());
    txn_commit(&mut c, &txn_request("g", PID, -1, "", 5));
    let (code, _, _) = c.commit_offsets(0, &commit_request("g", -1, "", &[("t", 0, 9)]), MAX_BATCH);
    assert_eq!(code, 0);
    c.complete_transaction(PID, true);
    assert_eq!(
        fetched(&c, "g", false),
        (Some(9), 0),
        "the later plain commit stays"
    );

    // The other order: the transactional commit is the later record.
    let (code, _, _) =
        c.commit_offsets(0, &commit_request("g", -1, "", &[("t", 0, 10)]), MAX_BATCH);
    assert_eq!(code, 0);
    txn_commit(&mut c, &txn_request("g", PID, -1, "", 11));
    c.complete_transaction(PID, true);
    assert_eq!(fetched(&c, "g", false), (Some(11), 0));
}

#[test]
fn member_checks_follow_kafka_for_transactional_commits() {
    let mut h = Harness::new(config());
    let (generation, leader, _) = h.stable_group("g", &["a"]);
    let check = |h: &mut Harness, req: TxnOffsetCommitRequest, want: i16| {
        let commit = h.c.begin_txn_offset_commit(h.now, &req, MAX_BATCH);
        assert_eq!(commit.codes, vec![("t".to_string(), 0, want)], "{req:?}");
        h.c.complete_offset_commit(commit.token, true);
    };
    check(&mut h, txn_request("g", PID, generation, &leader, 1), 0);
    check(
        &mut h,
        txn_request("g", PID, generation + 1, &leader, 1),
        errors::ILLEGAL_GENERATION,
    );
    check(
        &mut h,
        txn_request("g", PID, generation, "nobody", 1),
        errors::UNKNOWN_MEMBER_ID,
    );
    // v0-v2 carry no member: accepted in any state (unlike OffsetCommit).
    check(&mut h, txn_request("g", PID, -1, "", 1), 0);
    // An unknown group with a generation.
    check(
        &mut h,
        txn_request("other", PID, 3, "m", 1),
        errors::ILLEGAL_GENERATION,
    );
    check(
        &mut h,
        txn_request("", PID, -1, "", 1),
        errors::INVALID_GROUP_ID,
    );
    let mut fenced = txn_request("g", PID, generation, &leader, 1);
    fenced.group_instance_id = Some("i-1".into());
    check(&mut h, fenced, errors::UNKNOWN_MEMBER_ID);
}

#[test]
fn a_group_with_only_pending_offsets_is_not_expired() {
    let mut h = Harness::new(config());
    let commit =
        h.c.begin_txn_offset_commit(h.now, &txn_request("g", PID, -1, "", 5), MAX_BATCH);
    h.c.complete_offset_commit(commit.token, true);
    let retention = h.c.config().offsets_retention_ms;
    h.advance(retention + 1);
    h.advance(retention + 1);
    assert!(
        h.c.groups().any(|g| g == "g"),
        "the group waits for its marker"
    );
    h.c.complete_transaction(PID, true);
    assert_eq!(fetched(&h.c, "g", false), (Some(5), 0));
}

fn data(pid: Option<i64>, record: OffsetsRecord) -> LoadRecord {
    LoadRecord::Record {
        producer_id: pid,
        record,
    }
}

#[test]
fn reload_honours_markers() {
    let mut c = coordinator(config());
    let committed = txn_commit(&mut c, &txn_request("g", PID, -1, "", 7));
    let aborted = txn_commit(&mut c, &txn_request("h", PID + 1, -1, "", 3));
    let open = txn_commit(&mut c, &txn_request("k", PID + 2, -1, "", 4));
    let (_, _, plain) =
        c.commit_offsets(0, &commit_request("h", -1, "", &[("t", 0, 1)]), MAX_BATCH);
    let log = vec![
        data(None, plain[0].clone()),
        data(Some(PID), committed[0].clone()),
        data(Some(PID + 1), aborted[0].clone()),
        data(Some(PID + 2), open[0].clone()),
        LoadRecord::Marker {
            producer_id: PID + 1,
            commit: false,
        },
        LoadRecord::Marker {
            producer_id: PID,
            commit: true,
        },
    ];
    let mut loaded = coordinator(config());
    loaded.load_log(0, log);
    loaded.check_invariants().unwrap();
    assert_eq!(
        fetched(&loaded, "g", true),
        (Some(7), 0),
        "committed by its marker"
    );
    assert_eq!(
        fetched(&loaded, "h", true),
        (Some(1), 0),
        "aborted: the plain offset stays"
    );
    assert_eq!(
        fetched(&loaded, "k", true),
        (None, errors::UNSTABLE_OFFSET_COMMIT),
        "no marker yet: still pending"
    );
    assert_eq!(loaded.pending_txn_producers("k"), vec![PID + 2]);
    // Its marker after the reload still completes it, and new commits order after it.
    loaded.complete_transaction(PID + 2, true);
    assert_eq!(fetched(&loaded, "k", true), (Some(4), 0));
    let (code, _, _) =
        loaded.commit_offsets(0, &commit_request("k", -1, "", &[("t", 0, 5)]), MAX_BATCH);
    assert_eq!(code, 0);
    assert_eq!(fetched(&loaded, "k", true), (Some(5), 0));
}

#[test]
fn reload_keeps_a_later_plain_commit_over_a_committed_transactional_one() {
    let mut c = coordinator(config());
    let txn = txn_commit(&mut c, &txn_request("g", PID, -1, "", 5));
    let (_, _, plain) =
        c.commit_offsets(0, &commit_request("g", -1, "", &[("t", 0, 9)]), MAX_BATCH);
    let mut loaded = coordinator(config());
    loaded.load_log(
        0,
        vec![
            data(Some(PID), txn[0].clone()),
            data(None, plain[0].clone()),
            LoadRecord::Marker {
                producer_id: PID,
                commit: true,
            },
        ],
    );
    assert_eq!(fetched(&loaded, "g", false), (Some(9), 0));
}
