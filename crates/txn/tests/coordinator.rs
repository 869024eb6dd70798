//! The coordinator's decisions, driven the way the shell drives them: decide, write, report
//! the write, answer.

use proptest::prelude::*;
use runnel_txn::codec;
use runnel_txn::errors::*;
use runnel_txn::{
    Decision, EndRequest, InitAnswer, InitRequest, TopicPartition, TxnConfig, TxnCoordinator,
    TxnState,
};

const ID: &str = "tx";

fn tp(topic: &str, p: i32) -> TopicPartition {
    TopicPartition::new(topic, p)
}

fn init_req(pid: i64, epoch: i16, fresh: Option<i64>) -> InitRequest {
    InitRequest {
        transactional_id: ID.into(),
        timeout_ms: 60_000,
        producer_id: pid,
        producer_epoch: epoch,
        fresh_producer_id: fresh,
    }
}

/// Applies a decision as the shell does (the write replicates) and returns its answer.
fn settle<T>(c: &mut TxnCoordinator, d: Decision<T>) -> T {
    match d {
        Decision::Answer(a) => a,
        Decision::Write(w, a) => {
            c.complete_write(&w.transactional_id, true);
            a
        }
    }
}

fn init(c: &mut TxnCoordinator, now: i64) -> (i64, i16) {
    let fresh = c.get(ID).is_none().then_some(1000);
    let req = init_req(-1, -1, fresh);
    let d = c.init_producer_id(now, &req);
    match settle(c, d) {
        InitAnswer::Granted {
            producer_id,
            producer_epoch,
        } => (producer_id, producer_epoch),
        other => panic!("{other:?}"),
    }
}

fn state(c: &TxnCoordinator) -> TxnState {
    c.get(ID).unwrap().state
}

/// Commits or aborts an ongoing transaction all the way (Prepare, markers, Complete).
fn finish(c: &mut TxnCoordinator, now: i64, pid: i64, epoch: i16, commit: bool) {
    let Decision::Write(w, NONE) = c.end_txn(now, ID, pid, epoch, commit) else {
        panic!("end_txn")
    };
    let job = c
        .complete_write(&w.transactional_id, true)
        .expect("marker job");
    assert_eq!(job.commit, commit);
    let w = c.markers_written(now, &job).expect("complete");
    assert!(c.complete_write(&w.transactional_id, true).is_none());
}

#[test]
fn a_new_id_gets_a_producer_id_then_epoch_zero() {
    let mut c = TxnCoordinator::new(TxnConfig::default());
    assert_eq!(
        c.init_producer_id(0, &init_req(-1, -1, None)),
        Decision::Answer(InitAnswer::NeedProducerId)
    );
    assert_eq!(init(&mut c, 0), (1000, 0));
    assert_eq!(state(&c), TxnState::Empty);
    // A second InitProducerId (a restarted producer) bumps the epoch.
    assert_eq!(init(&mut c, 1), (1000, 1));
}

#[test]
fn timeouts_above_the_maximum_are_refused() {
    let mut c = TxnCoordinator::new(TxnConfig::default());
    let mut req = init_req(-1, -1, Some(1));
    req.timeout_ms = 900_001;
    assert_eq!(
        c.init_producer_id(0, &req),
        Decision::Answer(InitAnswer::Failed(INVALID_TRANSACTION_TIMEOUT))
    );
    req.timeout_ms = 0;
    assert_eq!(
        c.init_producer_id(0, &req),
        Decision::Answer(InitAnswer::Failed(INVALID_TRANSACTION_TIMEOUT))
    );
}

#[test]
fn commit_goes_through_prepare_markers_and_complete() {
    let mut c = TxnCoordinator::new(TxnConfig::default());
    let (pid, epoch) = init(&mut c, 0);
    let d = c.add_partitions(5, ID, pid, epoch, &[tp("a", 0), tp("b", 1)]);
    assert!(matches!(d, Decision::Write(_, NONE)));
    // While the write is pending the id is busy.
    assert_eq!(
        c.end_txn(6, ID, pid, epoch, true),
        Decision::Answer(CONCURRENT_TRANSACTIONS)
    );
    settle(&mut c, d);
    assert_eq!(state(&c), TxnState::Ongoing);
    assert_eq!(c.get(ID).unwrap().start_ms, 5);
    // Adding a partition already in the transaction writes nothing.
    assert_eq!(
        c.add_partitions(7, ID, pid, epoch, &[tp("a", 0)]),
        Decision::Answer(NONE)
    );
    let Decision::Write(w, NONE) = c.end_txn(8, ID, pid, epoch, true) else {
        panic!()
    };
    let job = c.complete_write(&w.transactional_id, true).unwrap();
    assert_eq!(state(&c), TxnState::PrepareCommit);
    assert_eq!(job.partitions, vec![tp("a", 0), tp("b", 1)]);
    // Markers pending: the next transaction waits, a retried commit too.
    assert_eq!(
        c.add_partitions(9, ID, pid, epoch, &[tp("a", 0)]),
        Decision::Answer(CONCURRENT_TRANSACTIONS)
    );
    assert_eq!(
        c.end_txn(9, ID, pid, epoch, true),
        Decision::Answer(CONCURRENT_TRANSACTIONS)
    );
    assert_eq!(
        c.end_txn(9, ID, pid, epoch, false),
        Decision::Answer(INVALID_TXN_STATE)
    );
    let w = c.markers_written(10, &job).unwrap();
    c.complete_write(&w.transactional_id, true);
    assert_eq!(state(&c), TxnState::CompleteCommit);
    assert!(c.get(ID).unwrap().partitions.is_empty());
    assert_eq!(
        c.end_txn(11, ID, pid, epoch, true),
        Decision::Answer(NONE),
        "a retried commit"
    );
    // The next transaction starts from CompleteCommit.
    let d = c.add_partitions(12, ID, pid, epoch, &[tp("c", 0)]);
    settle(&mut c, d);
    assert_eq!(c.get(ID).unwrap().start_ms, 12);
    finish(&mut c, 13, pid, epoch, false);
    assert_eq!(state(&c), TxnState::CompleteAbort);
}

/// Known case 9 of docs/faults.md: the CompleteCommit write after the markers was not
/// replicated in time, nothing wrote it again, and the id answered CONCURRENT_TRANSACTIONS to
/// every request (AddPartitionsToTxn, AddOffsetsToTxn, InitProducerId) for good. Kafka's
/// `TransactionMarkerChannelManager` retries that append; here the tick does.
#[test]
fn a_completion_whose_write_failed_is_written_again_by_the_tick() {
    let mut c = TxnCoordinator::new(TxnConfig::default());
    let (pid, epoch) = init(&mut c, 0);
    let d = c.add_partitions(1, ID, pid, epoch, &[tp("a", 0)]);
    settle(&mut c, d);
    let Decision::Write(w, NONE) = c.end_txn(2, ID, pid, epoch, true) else {
        panic!("end_txn")
    };
    let job = c
        .complete_write(&w.transactional_id, true)
        .expect("marker job");
    let w = c.markers_written(3, &job).expect("complete");
    assert!(c.complete_write(&w.transactional_id, false).is_none());
    assert_eq!(state(&c), TxnState::PrepareCommit);
    assert_eq!(
        c.add_partitions(4, ID, pid, epoch, &[tp("a", 0)]),
        Decision::Answer(CONCURRENT_TRANSACTIONS)
    );
    for (now, replicated) in [(1_000, false), (2_000, true)] {
        let writes = c.tick(now);
        assert_eq!(writes.len(), 1, "the completion again at {now}");
        let written = writes[0]
            .value
            .as_ref()
            .map(|m| (m.state, m.partitions.len()));
        assert_eq!(written, Some((TxnState::CompleteCommit, 0)));
        assert!(c.complete_write(ID, replicated).is_none());
    }
    assert_eq!(state(&c), TxnState::CompleteCommit);
    assert!(c.tick(3_000).is_empty(), "nothing owed any more");
    let d = c.add_partitions(3_001, ID, pid, epoch, &[tp("b", 0)]);
    assert!(matches!(d, Decision::Write(_, NONE)), "{d:?}");
}

#[test]
fn end_txn_without_a_transaction_is_invalid() {
    let mut c = TxnCoordinator::new(TxnConfig::default());
    let (pid, epoch) = init(&mut c, 0);
    assert_eq!(
        c.end_txn(1, ID, pid, epoch, true),
        Decision::Answer(INVALID_TXN_STATE)
    );
    assert_eq!(
        c.end_txn(1, ID, pid + 1, epoch, true),
        Decision::Answer(INVALID_PRODUCER_ID_MAPPING)
    );
    assert_eq!(
        c.end_txn(1, "other", pid, epoch, true),
        Decision::Answer(INVALID_PRODUCER_ID_MAPPING)
    );
}

#[test]
fn a_second_producer_fences_the_first_and_aborts_its_transaction() {
    let mut c = TxnCoordinator::new(TxnConfig::default());
    let (pid, epoch) = init(&mut c, 0);
    let d = c.add_partitions(1, ID, pid, epoch, &[tp("a", 0)]);
    settle(&mut c, d);
    // The new producer's InitProducerId aborts the open transaction with epoch + 1.
    let Decision::Write(w, InitAnswer::Failed(CONCURRENT_TRANSACTIONS)) =
        c.init_producer_id(2, &init_req(-1, -1, None))
    else {
        panic!()
    };
    assert_eq!(w.value.as_ref().unwrap().state, TxnState::PrepareAbort);
    assert_eq!(w.value.as_ref().unwrap().producer_epoch, epoch + 1);
    let job = c.complete_write(ID, true).unwrap();
    assert!(!job.commit);
    assert_eq!(job.producer_epoch, epoch + 1);
    // The old producer is fenced.
    assert_eq!(
        c.end_txn(3, ID, pid, epoch, true),
        Decision::Answer(PRODUCER_FENCED)
    );
    assert_eq!(
        c.add_partitions(3, ID, pid, epoch, &[tp("a", 0)]),
        Decision::Answer(PRODUCER_FENCED)
    );
    // The new producer retries while the markers are pending.
    assert_eq!(
        c.init_producer_id(3, &init_req(-1, -1, None)),
        Decision::Answer(InitAnswer::Failed(CONCURRENT_TRANSACTIONS))
    );
    let w = c.markers_written(4, &job).unwrap();
    c.complete_write(&w.transactional_id, true);
    assert_eq!(init(&mut c, 5), (pid, epoch + 2));
}

#[test]
fn kip_360_epoch_bump_and_its_retry() {
    let mut c = TxnCoordinator::new(TxnConfig::default());
    let (pid, epoch) = init(&mut c, 0);
    let d = c.init_producer_id(1, &init_req(pid, epoch, None));
    assert_eq!(
        settle(&mut c, d),
        InitAnswer::Granted {
            producer_id: pid,
            producer_epoch: epoch + 1
        }
    );
    // The answer was lost: the same request again gets the same epoch.
    let d = c.init_producer_id(2, &init_req(pid, epoch, None));
    assert_eq!(
        settle(&mut c, d),
        InitAnswer::Granted {
            producer_id: pid,
            producer_epoch: epoch + 1
        }
    );
    let d = c.init_producer_id(3, &init_req(pid, epoch + 1, None));
    settle(&mut c, d);
    // An epoch older than the current and the last one is fenced, another producer id too.
    assert_eq!(
        c.init_producer_id(3, &init_req(pid, epoch, None)),
        Decision::Answer(InitAnswer::Failed(PRODUCER_FENCED))
    );
    assert_eq!(
        c.init_producer_id(3, &init_req(pid + 7, 0, None)),
        Decision::Answer(InitAnswer::Failed(PRODUCER_FENCED))
    );
}

#[test]
fn an_exhausted_epoch_rotates_the_producer_id() {
    let mut c = TxnCoordinator::new(TxnConfig::default());
    init(&mut c, 0);
    for _ in 0..(i16::MAX - 1) {
        let d = c.init_producer_id(1, &init_req(-1, -1, None));
        settle(&mut c, d);
    }
    assert_eq!(c.get(ID).unwrap().producer_epoch, i16::MAX - 1);
    assert_eq!(
        c.init_producer_id(2, &init_req(-1, -1, None)),
        Decision::Answer(InitAnswer::NeedProducerId)
    );
    let d = c.init_producer_id(2, &init_req(-1, -1, Some(2000)));
    assert_eq!(
        settle(&mut c, d),
        InitAnswer::Granted {
            producer_id: 2000,
            producer_epoch: 0
        }
    );
    assert_eq!(c.get(ID).unwrap().previous_producer_id, 1000);
}

#[test]
fn a_timed_out_transaction_is_aborted_with_a_bumped_epoch() {
    let mut c = TxnCoordinator::new(TxnConfig::default());
    let (pid, epoch) = init(&mut c, 0);
    let d = c.add_partitions(100, ID, pid, epoch, &[tp("a", 0)]);
    settle(&mut c, d);
    assert!(c.tick(100 + 60_000).is_empty(), "not yet");
    let writes = c.tick(100 + 60_001);
    assert_eq!(writes.len(), 1);
    let target = writes[0].value.clone().unwrap();
    assert_eq!(
        (target.state, target.producer_epoch),
        (TxnState::PrepareAbort, epoch + 1)
    );
    assert!(c.tick(100 + 60_002).is_empty(), "the write is pending");
    let job = c.complete_write(ID, true).unwrap();
    assert!(!job.commit);
    assert_eq!(
        c.end_txn(60_200, ID, pid, epoch, true),
        Decision::Answer(PRODUCER_FENCED)
    );
}

#[test]
fn idle_ids_expire_after_the_expiration_time() {
    let config = TxnConfig {
        id_expiration_ms: 1_000,
        ..TxnConfig::default()
    };
    let mut c = TxnCoordinator::new(config);
    init(&mut c, 0);
    assert!(c.tick(999).is_empty());
    let writes = c.tick(1_000);
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].value, None, "a tombstone");
    c.complete_write(ID, true);
    assert!(c.get(ID).is_none());
    assert_eq!(c.describe(ID), Err(TRANSACTIONAL_ID_NOT_FOUND));
}

#[test]
fn a_failed_write_leaves_the_state_unchanged() {
    let mut c = TxnCoordinator::new(TxnConfig::default());
    let d = c.init_producer_id(0, &init_req(-1, -1, Some(5)));
    assert!(matches!(d, Decision::Write(..)));
    c.complete_write(ID, false);
    assert!(c.get(ID).is_none(), "a never-written id leaves nothing");
    let (pid, epoch) = init(&mut c, 0);
    let _ = c.add_partitions(1, ID, pid, epoch, &[tp("a", 0)]);
    c.complete_write(ID, false);
    assert_eq!(state(&c), TxnState::Empty);
}

#[test]
fn verify_only_checks_the_ongoing_transaction() {
    let mut c = TxnCoordinator::new(TxnConfig::default());
    let (pid, epoch) = init(&mut c, 0);
    assert_eq!(
        c.verify_partitions(ID, pid, epoch, &[tp("a", 0)]),
        vec![INVALID_TXN_STATE]
    );
    let d = c.add_partitions(1, ID, pid, epoch, &[tp("a", 0)]);
    settle(&mut c, d);
    assert_eq!(
        c.verify_partitions(ID, pid, epoch, &[tp("a", 0), tp("a", 1)]),
        vec![NONE, INVALID_TXN_STATE]
    );
    assert_eq!(
        c.verify_partitions(ID, pid, epoch + 1, &[tp("a", 0)]),
        vec![PRODUCER_FENCED]
    );
    assert_eq!(
        c.verify_partitions("nope", pid, epoch, &[tp("a", 0)]),
        vec![INVALID_PRODUCER_ID_MAPPING]
    );
}

#[test]
fn a_new_coordinator_resumes_pending_markers_from_the_log() {
    let mut c = TxnCoordinator::new(TxnConfig::default());
    let mut log = Vec::new();
    fn record<T>(log: &mut Vec<(bytes::Bytes, Option<bytes::Bytes>)>, d: &Decision<T>) {
        if let Decision::Write(w, _) = d {
            log.push(w.record(0));
        }
    }
    let d = c.init_producer_id(0, &init_req(-1, -1, Some(7)));
    record(&mut log, &d);
    settle(&mut c, d);
    let d = c.add_partitions(1, ID, 7, 0, &[tp("a", 3)]);
    record(&mut log, &d);
    settle(&mut c, d);
    let d = c.end_txn(2, ID, 7, 0, true);
    record(&mut log, &d);
    let mut fresh = TxnCoordinator::new(TxnConfig::default());
    let (jobs, skipped) = fresh.load(log.iter().map(|(k, v)| (&k[..], v.as_deref())));
    assert_eq!(skipped, 0);
    assert_eq!(jobs.len(), 1);
    assert!(jobs[0].commit);
    assert_eq!(jobs[0].partitions, vec![tp("a", 3)]);
    assert_eq!(fresh.describe(ID).unwrap().state, TxnState::PrepareCommit);
}

#[test]
fn list_filters_by_state_producer_and_duration() {
    let mut c = TxnCoordinator::new(TxnConfig::default());
    let (pid, epoch) = init(&mut c, 0);
    let d = c.add_partitions(10, ID, pid, epoch, &[tp("a", 0)]);
    settle(&mut c, d);
    assert_eq!(c.list(&[], &[], -1, 20).len(), 1);
    assert_eq!(c.list(&[TxnState::Empty], &[], -1, 20).len(), 0);
    assert_eq!(c.list(&[TxnState::Ongoing], &[pid], -1, 20).len(), 1);
    assert_eq!(c.list(&[], &[pid + 1], -1, 20).len(), 0);
    assert_eq!(c.list(&[], &[], 10, 20).len(), 1);
    assert_eq!(c.list(&[], &[], 11, 20).len(), 0);
}

#[derive(Debug, Clone)]
enum Op {
    Init(bool),
    Add(u8),
    End(bool),
    /// Transaction version 2: a partition leader's implicit add, EndTxn v5.
    AddV2(u8),
    EndV2(bool),
    Markers,
    Tick(u32),
    Fail,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        any::<bool>().prop_map(Op::Init),
        (0u8..4).prop_map(Op::Add),
        any::<bool>().prop_map(Op::End),
        (0u8..4).prop_map(Op::AddV2),
        any::<bool>().prop_map(Op::EndV2),
        Just(Op::Markers),
        (0u32..200_000).prop_map(Op::Tick),
        Just(Op::Fail),
    ]
}

proptest! {
    /// Any sequence of requests, ticks, marker completions and failed writes moves the state
    /// only along legal transitions, the epoch never goes back, and a replay of the written
    /// records rebuilds the same state, at any finalized `transaction.version` and with
    /// version 1 and version 2 requests mixed.
    #[test]
    fn only_legal_transitions_and_replay_rebuilds_the_state(
        ops in proptest::collection::vec(op(), 1..60),
        tv in 0i16..=2,
    ) {
        let mut c = TxnCoordinator::new(TxnConfig { id_expiration_ms: 500_000, ..TxnConfig::default() });
        c.set_transaction_version(tv);
        let mut now = 0i64;
        let mut log: Vec<(bytes::Bytes, Option<bytes::Bytes>)> = Vec::new();
        let mut jobs = Vec::new();
        let mut pending: Option<String> = None;
        let mut last_epoch = -1i16;
        for op in ops {
            now += 10;
            let before = c.get(ID).map(|m| m.state);
            let write = match op {
                Op::Init(retry) => {
                    let (pid, epoch) = c.get(ID).map_or((-1, -1), |m| (m.producer_id, m.producer_epoch));
                    let req = if retry { init_req(pid, epoch, Some(9)) } else { init_req(-1, -1, Some(9)) };
                    match c.init_producer_id(now, &req) { Decision::Write(w, _) => Some(w), _ => None }
                }
                Op::Add(p) => {
                    let (pid, epoch) = c.get(ID).map_or((-1, -1), |m| (m.producer_id, m.producer_epoch));
                    match c.add_partitions(now, ID, pid, epoch, &[tp("t", p.into())]) { Decision::Write(w, _) => Some(w), _ => None }
                }
                Op::End(commit) => {
                    let (pid, epoch) = c.get(ID).map_or((-1, -1), |m| (m.producer_id, m.producer_epoch));
                    match c.end_txn(now, ID, pid, epoch, commit) { Decision::Write(w, _) => Some(w), _ => None }
                }
                Op::AddV2(p) => {
                    let (pid, epoch) = c.get(ID).map_or((-1, -1), |m| (m.producer_id, m.producer_epoch));
                    match c.add_partitions_as(now, (ID, pid, epoch), &[tp("t", p.into())], 2) { Decision::Write(w, _) => Some(w), _ => None }
                }
                Op::EndV2(commit) => {
                    let (pid, epoch) = c.get(ID).map_or((-1, -1), |m| (m.producer_id, m.producer_epoch));
                    let req = EndRequest { transactional_id: ID.into(), producer_id: pid, producer_epoch: epoch, commit, fresh_producer_id: Some(9) };
                    match c.end_txn_v2(now, &req) { Decision::Write(w, _) => Some(w), _ => None }
                }
                Op::Markers => jobs.pop().and_then(|job| c.markers_written(now, &job)),
                Op::Tick(dt) => { now += i64::from(dt); c.tick(now).pop() }
                Op::Fail => {
                    if let Some(id) = pending.take() { c.complete_write(&id, false); }
                    None
                }
            };
            if let Some(w) = write {
                prop_assert!(pending.is_none(), "a second write while one is pending");
                let target = w.value.as_ref().map_or(TxnState::Dead, |m| m.state);
                if let Some(from) = before {
                    prop_assert!(from.can_transition_to(target) || (from == TxnState::Ongoing && target == TxnState::PrepareAbort),
                        "{from:?} -> {target:?}");
                }
                // The shell replicates it (or the next Fail op drops it).
                log.push(w.record(codec::value_version(tv)));
                pending = Some(w.transactional_id.clone());
                if !matches!(op, Op::Fail) {
                    let id = pending.take().unwrap_or_default();
                    jobs.extend(c.complete_write(&id, true));
                }
            }
            match c.get(ID) {
                Some(m) => {
                    prop_assert!(m.producer_epoch >= last_epoch, "epoch went back");
                    last_epoch = m.producer_epoch;
                }
                // Expired (or never written): a later id starts over.
                None => last_epoch = -1,
            }
        }
        if pending.is_none() {
            let mut replayed = TxnCoordinator::new(TxnConfig::default());
            replayed.load(log.iter().map(|(k, v)| (&k[..], v.as_deref())));
            let a = c.describe(ID).ok().map(|m| (m.producer_id, m.producer_epoch, m.state, m.partitions.clone()));
            let b = replayed.describe(ID).ok().map(|m| (m.producer_id, m.producer_epoch, m.state, m.partitions.clone()));
            prop_assert_eq!(a, b);
        }
    }
}
