//! Every batch in a replica's log is in its idempotent-producer state and nothing else is,
//! also when the disk refuses a write half-way through a truncation (the fault campaign's
//! disk nemesis, docs/faults.md).
//!
//! Caught: a follower's truncation cuts the `.log` file first and rewrites the index files
//! after; on a full disk that rewrite fails (ENOSPC), `Partition::truncate_to` returned the
//! error before rebuilding the producer state, so the state kept the batches just cut. Once the
//! replica led, a producer's retry of such a batch was answered as a duplicate with the offset
//! of a batch the log no longer held: an acknowledgment for a write that is not there. The
//! state is now rebuilt from what the log holds whatever the truncation's outcome (and the
//! I/O error fails the log, so the retry is refused with KAFKA_STORAGE_ERROR).
//!
//! One test per binary: the fault is armed for the whole process.

mod support;

use std::sync::Arc;

use runnel_broker::replica::partition::{log_config, Partition, Role};
use runnel_log::fault::{arm_process_wide, Fault};
use runnel_log::LogManager;
use runnel_metadata::topic_config::{effective_topic_config, BrokerDefaults};
use support::idempotent_batch;

/// Broker 1's role for `t-0` (replicas 1, 2, 3) led by `leader` in `leader_epoch`, with an
/// offset-index entry for every batch after the first (`index.interval.bytes` 0), so that a
/// truncation has index entries to rewrite.
fn role(leader: i32, leader_epoch: i32) -> Role {
    let mut config = effective_topic_config(&Default::default(), &BrokerDefaults::default());
    config.index_interval_bytes = 0;
    Role {
        leader,
        leader_epoch,
        isr: vec![1, 2, 3],
        replicas: vec![1, 2, 3],
        live_replicas: vec![1, 2, 3],
        partition_epoch: leader_epoch,
        config: Arc::new(config),
    }
}

#[test]
fn a_truncation_failing_after_the_cut_leaves_no_producer_state_of_the_cut_batches() {
    let dir = tempfile::tempdir().expect("temp dir");
    let follower = role(2, 0);
    let logs = LogManager::open(dir.path().to_path_buf(), log_config(&follower.config))
        .expect("log dir opens");
    let log = logs
        .get_or_create(
            "t",
            0,
            uuid::Uuid::from_u128(7),
            log_config(&follower.config),
        )
        .expect("log opens");
    let p = Partition::new(
        "t".into(),
        0,
        uuid::Uuid::from_u128(7),
        log,
        follower,
        1,
        30_000,
    );
    for (seq, base) in [(0, 0), (3, 3), (6, 6)] {
        p.append_as_follower(&idempotent_batch(seq, 3, base), 0)
            .expect("follower append");
    }
    // The leader never had the third batch. Cutting it works; rewriting the index after the
    // cut does not (a full disk).
    arm_process_wide(Fault::IndexWrite);
    assert!(
        p.truncate_to(6).is_err(),
        "the injected index write failure is reported"
    );
    assert_eq!(p.lock_log().log_end_offset(), 6, "the batch at 6 is cut");
    assert!(
        p.lock_log().failure().is_some(),
        "an I/O error takes the log out of service (the broker stops)"
    );
    // Until the broker has stopped, this replica may still be made leader; the producer
    // retries the batch it never saw acknowledged.
    p.set_role(role(1, 1));
    let retry = p.append_as_leader(&idempotent_batch(6, 3, 0), 1, 1);
    assert_eq!(
        retry
            .map(|a| (a.base_offset, a.duplicate))
            .map_err(|e| e.code),
        Err(56),
        "the retry of a cut batch gets KAFKA_STORAGE_ERROR, never the cut batch's offset"
    );
}
