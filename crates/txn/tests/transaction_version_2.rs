//! Transaction version 2 (KIP-890 part 2): implicit adds from partition leaders, EndTxn v5's
//! epoch bump at every transaction end, its retries, the producer id rotation when the epochs
//! run out, and the coordinator's own aborts on a cluster finalized at 2. Driven as the shell
//! drives the coordinator: decide, write, report the write, answer.

use runnel_txn::codec;
use runnel_txn::errors::*;
use runnel_txn::{
    Decision, EndAnswer, EndRequest, InitAnswer, InitRequest, MarkerJob, TopicPartition, TxnConfig,
    TxnCoordinator, TxnMetadata, TxnState, TV_2,
};

const ID: &str = "tx";

fn tp(topic: &str, p: i32) -> TopicPartition {
    TopicPartition::new(topic, p)
}

fn settle<T>(c: &mut TxnCoordinator, d: Decision<T>) -> (T, Option<MarkerJob>) {
    match d {
        Decision::Answer(a) => (a, None),
        Decision::Write(w, a) => {
            let job = c.complete_write(&w.transactional_id, true);
            (a, job)
        }
    }
}

/// A coordinator with `ID` initialized at producer 1000, epoch 0.
fn initialized() -> TxnCoordinator {
    let mut c = TxnCoordinator::new(TxnConfig::default());
    let req = InitRequest {
        transactional_id: ID.into(),
        timeout_ms: 60_000,
        producer_id: -1,
        producer_epoch: -1,
        fresh_producer_id: Some(1000),
    };
    let d = c.init_producer_id(0, &req);
    assert_eq!(
        settle(&mut c, d).0,
        InitAnswer::Granted {
            producer_id: 1000,
            producer_epoch: 0
        }
    );
    c
}

/// A partition leader's implicit add (AddPartitionsToTxn v4+, `verify_only` false).
fn add(c: &mut TxnCoordinator, now: i64, pid: i64, epoch: i16, p: i32) -> i16 {
    let d = c.add_partitions_as(now, (ID, pid, epoch), &[tp("t", p)], TV_2);
    settle(c, d).0
}

fn end_req(pid: i64, epoch: i16, commit: bool) -> EndRequest {
    EndRequest {
        transactional_id: ID.into(),
        producer_id: pid,
        producer_epoch: epoch,
        commit,
        fresh_producer_id: None,
    }
}

fn end(c: &mut TxnCoordinator, now: i64, pid: i64, epoch: i16, commit: bool) -> EndAnswer {
    let d = c.end_txn_v2(now, &end_req(pid, epoch, commit));
    settle(c, d).0
}

fn ended(producer_id: i64, producer_epoch: i16) -> EndAnswer {
    EndAnswer::Ended {
        producer_id,
        producer_epoch,
    }
}

fn meta(c: &TxnCoordinator) -> &TxnMetadata {
    c.get(ID).expect("the id")
}

/// Writes the completion of the Prepare* whose job this is.
fn complete(c: &mut TxnCoordinator, now: i64, job: &MarkerJob) {
    let w = c.markers_written(now, job).expect("completion");
    assert!(c.complete_write(&w.transactional_id, true).is_none());
}

#[test]
fn a_commit_bumps_the_epoch_and_its_markers_carry_the_bumped_epoch() {
    let mut c = initialized();
    assert_eq!(add(&mut c, 1, 1000, 0, 0), NONE);
    assert_eq!(meta(&c).client_txn_version, TV_2);
    let d = c.end_txn_v2(2, &end_req(1000, 0, true));
    let Decision::Write(w, answer) = &d else {
        panic!("{d:?}")
    };
    assert_eq!(*answer, ended(1000, 1));
    let prepared = w.value.as_ref().expect("a value");
    assert_eq!(
        (prepared.state, prepared.producer_epoch),
        (TxnState::PrepareCommit, 1)
    );
    assert_eq!(prepared.last_producer_epoch, 0);
    let (_, job) = settle(&mut c, d);
    let job = job.expect("marker job");
    assert_eq!((job.producer_id, job.producer_epoch), (1000, 1));
    assert_eq!(job.partitions, vec![tp("t", 0)]);
    complete(&mut c, 3, &job);
    let m = meta(&c);
    assert_eq!(
        (m.state, m.producer_id, m.producer_epoch),
        (TxnState::CompleteCommit, 1000, 1)
    );
    // The next transaction runs at the bumped epoch and bumps it again.
    assert_eq!(add(&mut c, 4, 1000, 1, 1), NONE);
    assert_eq!(end(&mut c, 5, 1000, 1, false), ended(1000, 2));
}

#[test]
fn the_old_epoch_is_fenced_once_the_transaction_ended() {
    let mut c = initialized();
    assert_eq!(add(&mut c, 1, 1000, 0, 0), NONE);
    let d = c.end_txn_v2(2, &end_req(1000, 0, true));
    let (_, job) = settle(&mut c, d);
    complete(&mut c, 3, &job.expect("job"));
    // A zombie's implicit add or verification with epoch 0.
    assert_eq!(add(&mut c, 4, 1000, 0, 0), PRODUCER_FENCED);
    assert_eq!(
        c.verify_partitions(ID, 1000, 0, &[tp("t", 0)]),
        vec![PRODUCER_FENCED]
    );
    // Once a later transaction moved on, epoch 0 is no retry any more.
    assert_eq!(add(&mut c, 5, 1000, 1, 0), NONE);
    assert_eq!(
        end(&mut c, 6, 1000, 0, true),
        EndAnswer::Failed(PRODUCER_FENCED)
    );
    assert_eq!(
        end(&mut c, 6, 1001, 1, true),
        EndAnswer::Failed(INVALID_PRODUCER_ID_MAPPING)
    );
    let mut other = end_req(1000, 1, true);
    other.transactional_id = "other".into();
    assert_eq!(
        c.end_txn_v2(6, &other),
        Decision::Answer(EndAnswer::Failed(INVALID_PRODUCER_ID_MAPPING))
    );
}

#[test]
fn retries_follow_kafkas_table() {
    let mut c = initialized();
    assert_eq!(add(&mut c, 1, 1000, 0, 0), NONE);
    let d = c.end_txn_v2(2, &end_req(1000, 0, true));
    let (_, job) = settle(&mut c, d);
    // PrepareCommit at epoch 1: the retry (epoch 0) waits, the current epoch is fenced.
    let now = 3;
    assert_eq!(
        end(&mut c, now, 1000, 0, true),
        EndAnswer::Failed(CONCURRENT_TRANSACTIONS)
    );
    assert_eq!(
        end(&mut c, now, 1000, 0, false),
        EndAnswer::Failed(INVALID_TXN_STATE)
    );
    assert_eq!(
        end(&mut c, now, 1000, 1, true),
        EndAnswer::Failed(PRODUCER_FENCED)
    );
    complete(&mut c, 4, &job.expect("job"));
    // CompleteCommit at epoch 1: commit retry NONE (nothing written), abort retry invalid,
    // commit current invalid.
    assert_eq!(
        c.end_txn_v2(5, &end_req(1000, 0, true)),
        Decision::Answer(ended(1000, 1))
    );
    assert_eq!(
        end(&mut c, 5, 1000, 0, false),
        EndAnswer::Failed(INVALID_TXN_STATE)
    );
    assert_eq!(
        end(&mut c, 5, 1000, 1, true),
        EndAnswer::Failed(INVALID_TXN_STATE)
    );
    // Abort current: a transaction that added nothing is aborted with a bump.
    let d = c.end_txn_v2(6, &end_req(1000, 1, false));
    let Decision::Write(w, answer) = &d else {
        panic!("{d:?}")
    };
    assert_eq!(*answer, ended(1000, 2));
    let prepared = w.value.as_ref().expect("value");
    assert_eq!(prepared.state, TxnState::PrepareAbort);
    assert!(prepared.partitions.is_empty());
    assert_eq!(prepared.start_ms, 6);
    let (_, job) = settle(&mut c, d);
    let job = job.expect("an empty marker job");
    assert!(job.partitions.is_empty());
    complete(&mut c, 7, &job);
    // CompleteAbort at epoch 2: abort retry NONE, commit either way invalid.
    assert_eq!(end(&mut c, 8, 1000, 1, false), ended(1000, 2));
    assert_eq!(
        end(&mut c, 8, 1000, 1, true),
        EndAnswer::Failed(INVALID_TXN_STATE)
    );
    assert_eq!(
        end(&mut c, 8, 1000, 2, true),
        EndAnswer::Failed(INVALID_TXN_STATE)
    );
}

#[test]
fn an_empty_transaction_may_be_aborted_but_not_committed() {
    let mut c = initialized();
    assert_eq!(
        end(&mut c, 1, 1000, 0, true),
        EndAnswer::Failed(INVALID_TXN_STATE)
    );
    // A retry from Empty is no retry: fenced.
    assert_eq!(
        end(&mut c, 1, 1000, -1, false),
        EndAnswer::Failed(PRODUCER_FENCED)
    );
    assert_eq!(end(&mut c, 1, 1000, 0, false), ended(1000, 1));
    assert_eq!(meta(&c).state, TxnState::PrepareAbort);
    // While the abort's write or markers are pending, requests wait.
    assert_eq!(
        end(&mut c, 2, 1000, 0, false),
        EndAnswer::Failed(CONCURRENT_TRANSACTIONS)
    );
}

#[test]
fn a_pending_write_answers_concurrent_transactions() {
    let mut c = initialized();
    assert_eq!(add(&mut c, 1, 1000, 0, 0), NONE);
    let Decision::Write(..) = c.end_txn_v2(2, &end_req(1000, 0, true)) else {
        panic!("a write")
    };
    assert_eq!(
        c.end_txn_v2(2, &end_req(1000, 0, true)),
        Decision::Answer(EndAnswer::Failed(CONCURRENT_TRANSACTIONS))
    );
    // The write fails: the state is unchanged and the request can be made again.
    c.complete_write(ID, false);
    assert_eq!(meta(&c).producer_epoch, 0);
    assert_eq!(end(&mut c, 3, 1000, 0, true), ended(1000, 1));
}

/// The metadata of an ongoing transaction at `epoch`, as a loaded log would have it.
fn loaded_at(epoch: i16) -> TxnCoordinator {
    let mut m = TxnMetadata::fresh(ID, 1000, 60_000, 0);
    m.producer_epoch = epoch;
    m.state = TxnState::Ongoing;
    m.start_ms = 0;
    m.partitions.insert(tp("t", 0));
    m.client_txn_version = TV_2;
    let key = codec::encode_key(ID);
    let value = codec::encode_value(&m, 1);
    let mut c = TxnCoordinator::new(TxnConfig::default());
    let (jobs, skipped) = c.load([(&key[..], Some(&value[..]))]);
    assert_eq!((jobs.len(), skipped), (0, 0));
    c
}

#[test]
fn an_exhausted_epoch_moves_to_a_fresh_producer_id_at_the_completion() {
    let exhausted = i16::MAX - 1;
    let mut c = loaded_at(exhausted);
    assert_eq!(
        c.end_txn_v2(1, &end_req(1000, exhausted, true)),
        Decision::Answer(EndAnswer::NeedProducerId)
    );
    let mut req = end_req(1000, exhausted, true);
    req.fresh_producer_id = Some(2000);
    let d = c.end_txn_v2(1, &req);
    let Decision::Write(w, answer) = &d else {
        panic!("{d:?}")
    };
    // The client goes on as producer 2000, epoch 0; the markers carry epoch MAX.
    assert_eq!(*answer, ended(2000, 0));
    let value = w.value.as_ref().expect("value");
    assert_eq!(
        (value.producer_epoch, value.next_producer_id),
        (i16::MAX, 2000)
    );
    // A coordinator that takes over now reads the rotation back from the v1 record.
    let (key, bytes) = w.record(1);
    let mut successor = TxnCoordinator::new(TxnConfig::default());
    let (jobs, _) = successor.load([(&key[..], bytes.as_deref())]);
    let (_, job) = settle(&mut c, d);
    let job = job.expect("job");
    assert_eq!(jobs, vec![job.clone()]);
    assert_eq!((job.producer_id, job.producer_epoch), (1000, i16::MAX));
    for coordinator in [&mut c, &mut successor] {
        complete(coordinator, 2, &job);
        let m = meta(coordinator);
        assert_eq!(
            (m.producer_id, m.producer_epoch, m.previous_producer_id),
            (2000, 0, 1000)
        );
        assert_eq!(m.next_producer_id, -1);
        // A retry of that EndTxn with the old identity is recognised.
        assert_eq!(end(coordinator, 3, 1000, exhausted, true), ended(2000, 0));
    }
}

#[test]
fn end_txn_v4_keeps_the_epoch_even_on_a_cluster_at_version_2() {
    let mut c = initialized();
    c.set_transaction_version(2);
    let d = c.add_partitions(1, ID, 1000, 0, &[tp("t", 0)]);
    assert_eq!(settle(&mut c, d).0, NONE);
    assert_eq!(meta(&c).client_txn_version, 0);
    let d = c.end_txn(2, ID, 1000, 0, true);
    let (_, job) = settle(&mut c, d);
    let job = job.expect("job");
    assert_eq!(job.producer_epoch, 0);
    complete(&mut c, 3, &job);
    assert_eq!(meta(&c).producer_epoch, 0);
    // And a v5 EndTxn on a cluster finalized at 0 still bumps (the request's version decides).
    let mut c = initialized();
    c.set_transaction_version(0);
    assert_eq!(add(&mut c, 1, 1000, 0, 0), NONE);
    assert_eq!(end(&mut c, 2, 1000, 0, true), ended(1000, 1));
}

#[test]
fn a_timeout_on_a_version_2_cluster_bumps_twice_and_fences_the_producer() {
    let mut c = initialized();
    c.set_transaction_version(2);
    assert_eq!(add(&mut c, 1, 1000, 0, 0), NONE);
    let writes = c.tick(60_002);
    let [w] = &writes[..] else {
        panic!("{writes:?}")
    };
    let value = w.value.as_ref().expect("value");
    assert_eq!(
        (value.state, value.producer_epoch, value.client_txn_version),
        (TxnState::PrepareAbort, 2, TV_2)
    );
    let job = c.complete_write(ID, true).expect("job");
    assert_eq!(job.producer_epoch, 2);
    complete(&mut c, 60_003, &job);
    // The timed-out producer's EndTxn is neither the current epoch nor a retry.
    assert_eq!(
        end(&mut c, 60_004, 1000, 0, false),
        EndAnswer::Failed(PRODUCER_FENCED)
    );
    // At level 0 the same timeout bumps once, as before.
    let mut c = initialized();
    let d = c.add_partitions(1, ID, 1000, 0, &[tp("t", 0)]);
    settle(&mut c, d);
    let writes = c.tick(60_002);
    assert_eq!(writes[0].value.as_ref().map(|m| m.producer_epoch), Some(1));
}
