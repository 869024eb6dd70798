//! A failed log directory answers KAFKA_STORAGE_ERROR to every write, before the idempotence
//! checks, on every partition it holds (known case 6 of the fault campaign, docs/faults.md).
//!
//! Caught by `scripts/faults --time 900 --nemesis partition,kill,pause,term,disk --seed 31`:
//! a disk filled on the leader of `faults-1` and `faults-2`; a batch of the librdkafka
//! producer to `faults-1` was refused (the write failed, the log failed), and its next
//! pipelined batch was answered OUT_OF_ORDER_SEQUENCE_NUMBER, because the sequence check ran
//! before the failed-log check. librdkafka reads a sequence gap as "an earlier request
//! failed, nothing later was written", bumps its epoch and resends every unacknowledged batch
//! under new sequences, including its batch to `faults-2`, already written and replicated but
//! not yet acknowledged: one value at two offsets. `faults-2`, in the same directory, kept
//! accepting writes until the broker had stopped. Kafka takes the whole log directory offline
//! at the first I/O error and answers KAFKA_STORAGE_ERROR from then on.
//!
//! One test per binary: the fault is armed for the whole process.

mod support;

use std::sync::Arc;

use runnel_broker::replica::partition::{log_config, Partition, Role};
use runnel_log::fault::{arm_process_wide, Fault};
use runnel_log::LogManager;
use runnel_metadata::topic_config::{effective_topic_config, BrokerDefaults};
use support::idempotent_batch;

use runnel_codes::KAFKA_STORAGE_ERROR;

fn leader_role() -> Role {
    Role {
        leader: 1,
        leader_epoch: 0,
        isr: vec![1],
        replicas: vec![1],
        live_replicas: vec![1],
        partition_epoch: 0,
        config: Arc::new(effective_topic_config(
            &Default::default(),
            &BrokerDefaults::default(),
        )),
    }
}

fn leader(logs: &LogManager, index: i32) -> Partition {
    let role = leader_role();
    let id = uuid::Uuid::from_u128(7);
    let log = logs
        .get_or_create("t", index, id, log_config(&role.config))
        .expect("log opens");
    Partition::new("t".into(), index, id, log, role, 1, 30_000)
}

fn code(p: &Partition, seq: i32) -> i16 {
    match p.append_as_leader(&idempotent_batch(seq, 2, 0), 1, 1) {
        Ok(_) => 0,
        Err(e) => e.code,
    }
}

#[test]
fn a_failed_directory_refuses_with_a_storage_error_before_checking_sequences() {
    let dir = tempfile::tempdir().expect("temp dir");
    let logs = LogManager::open(dir.path().to_path_buf(), log_config(&leader_role().config))
        .expect("log dir opens");
    let (p0, p1) = (leader(&logs, 0), leader(&logs, 1));
    assert_eq!(code(&p0, 0), 0);
    assert_eq!(code(&p1, 0), 0);

    arm_process_wide(Fault::LogWrite);
    assert_eq!(code(&p0, 2), KAFKA_STORAGE_ERROR, "the failed write");
    assert_eq!(
        code(&p0, 4),
        KAFKA_STORAGE_ERROR,
        "the next pipelined batch learns of the disk, not of a sequence gap (45)"
    );
    assert_eq!(
        code(&p1, 2),
        KAFKA_STORAGE_ERROR,
        "another partition of the failed directory accepts nothing either"
    );
    assert_eq!(
        p1.lock_log().log_end_offset(),
        2,
        "nothing written after the failure"
    );
}
