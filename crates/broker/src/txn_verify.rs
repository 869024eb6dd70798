//! KIP-890 part 1 on the partition leader: a transactional batch is appended only if the
//! transaction coordinator says the producer's transaction is ongoing and holds the partition
//! (AddPartitionsToTxn v4+ with `verify_only`), so a late write cannot open a hanging
//! transaction. A producer whose transaction is already open on the partition (its first
//! batch passed) is not asked about again until a marker ends it: the producer state is
//! Kafka's verification guard.
//!
//! KIP-890 part 2 (transaction version 2: Produce v12+, TxnOffsetCommit v5+, whose clients
//! send no AddPartitionsToTxn / AddOffsetsToTxn) asks the coordinator to *add* the partition
//! instead (`verify_only` false, Kafka's `TransactionSupportedOperation.addPartition`); a
//! producer whose epoch the coordinator has moved past is refused either way.
//!
//! The coordinator of a transactional id is the leader of `__transaction_state` partition
//! `partition_for_group(id, partitions)` (Java's `abs(hashCode) % partitions`, the group
//! coordinator's rule).

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, ProducerId, TransactionalId,
};
use runnel_metadata::MetadataImage;

use crate::errors::code;
use crate::errors::code::{
    CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
    NETWORK_EXCEPTION, NOT_COORDINATOR, PRODUCER_FENCED, TRANSACTION_ABORTABLE,
};
use crate::handlers::topic_name;

pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";
const VERIFY_VERSION: i16 = 4;
const VERIFY_TIMEOUT: Duration = Duration::from_secs(10);

/// The produce error for a verification answer (Kafka's `ReplicaManager` and
/// `AddPartitionsToTxnManager`): errors an older client may not retry become the retriable
/// NOT_ENOUGH_REPLICAS (no metadata refresh), PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH,
/// TRANSACTION_ABORTABLE INVALID_TXN_STATE, the rest pass through (INVALID_TXN_STATE: the
/// partition is not in an ongoing transaction). After an implicit add (`added`, transaction
/// version 2) CONCURRENT_TRANSACTIONS stays itself: the version 2 client retries it, and it is
/// common while the previous transaction's markers are written.
pub fn produce_error(verification: i16, added: bool) -> i16 {
    match verification {
        CONCURRENT_TRANSACTIONS if added => CONCURRENT_TRANSACTIONS,
        CONCURRENT_TRANSACTIONS
        | NETWORK_EXCEPTION
        | COORDINATOR_LOAD_IN_PROGRESS
        | COORDINATOR_NOT_AVAILABLE
        | NOT_COORDINATOR => code::NOT_ENOUGH_REPLICAS,
        PRODUCER_FENCED => code::INVALID_PRODUCER_EPOCH,
        TRANSACTION_ABORTABLE => code::INVALID_TXN_STATE,
        other => other,
    }
}

/// The address of the coordinator of `transactional_id`, or the verification error to use.
pub fn coordinator_address(image: &MetadataImage, transactional_id: &str) -> Result<String, i16> {
    let topic = image
        .topic(TRANSACTION_STATE_TOPIC)
        .ok_or(COORDINATOR_NOT_AVAILABLE)?;
    let count = i32::try_from(topic.partitions.len()).map_err(|_| COORDINATOR_NOT_AVAILABLE)?;
    if count == 0 {
        return Err(COORDINATOR_NOT_AVAILABLE);
    }
    let index = runnel_group::partition_for_group(transactional_id, count);
    let leader = topic
        .partitions
        .get(&index)
        .map(|p| p.leader)
        .ok_or(COORDINATOR_NOT_AVAILABLE)?;
    image
        .brokers
        .get(&leader)
        .filter(|b| !b.fenced)
        .map(|b| format!("{}:{}", b.host, b.port))
        .ok_or(COORDINATOR_NOT_AVAILABLE)
}

/// One producer's partitions to verify.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verify {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// topic -> partitions.
    pub partitions: BTreeMap<String, Vec<i32>>,
    /// Add the partitions (transaction version 2) rather than only verify them.
    pub add: bool,
}

/// Asks the coordinator; the verification error code per (topic, partition) (NONE: ongoing).
pub async fn verify(image: &MetadataImage, v: &Verify) -> BTreeMap<(String, i32), i16> {
    let all = |code: i16| {
        v.partitions
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |p| ((t.clone(), *p), code)))
            .collect()
    };
    let addr = match coordinator_address(image, &v.transactional_id) {
        Ok(a) => a,
        Err(code) => return all(code),
    };
    let topics = v
        .partitions
        .iter()
        .map(|(t, ps)| {
            AddPartitionsToTxnTopic::default()
                .with_name(topic_name(t))
                .with_partitions(ps.clone())
        })
        .collect();
    let request = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(crate::handlers::str_bytes(
                &v.transactional_id,
            )))
            .with_producer_id(ProducerId(v.producer_id))
            .with_producer_epoch(v.producer_epoch)
            .with_verify_only(!v.add)
            .with_topics(topics),
    ]);
    let answer: Result<AddPartitionsToTxnResponse, String> = crate::inter_broker::exchange(
        &addr,
        ApiKey::AddPartitionsToTxn,
        VERIFY_VERSION,
        &request,
        VERIFY_TIMEOUT,
    )
    .await;
    match answer {
        Err(e) => {
            tracing::info!(%addr, error = %e, "transaction verification failed");
            all(NETWORK_EXCEPTION)
        }
        Ok(r) if r.error_code != code::NONE => all(r.error_code),
        Ok(r) => {
            // A partition the answer leaves out was not verified.
            let mut out: BTreeMap<(String, i32), i16> = all(code::INVALID_TXN_STATE);
            for result in r.results_by_transaction {
                for t in result.topic_results {
                    for p in t.results_by_partition {
                        let key = (t.name.0.to_string(), p.partition_index);
                        if let Some(slot) = out.get_mut(&key) {
                            *slot = p.partition_error_code;
                        }
                    }
                }
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verification_errors_map_to_kafkas_produce_errors() {
        for added in [false, true] {
            assert_eq!(produce_error(code::NONE, added), code::NONE);
            assert_eq!(
                produce_error(code::INVALID_TXN_STATE, added),
                code::INVALID_TXN_STATE
            );
            for retriable in [
                NETWORK_EXCEPTION,
                COORDINATOR_LOAD_IN_PROGRESS,
                COORDINATOR_NOT_AVAILABLE,
                NOT_COORDINATOR,
            ] {
                assert_eq!(produce_error(retriable, added), code::NOT_ENOUGH_REPLICAS);
            }
            assert_eq!(
                produce_error(PRODUCER_FENCED, added),
                code::INVALID_PRODUCER_EPOCH
            );
            assert_eq!(
                produce_error(TRANSACTION_ABORTABLE, added),
                code::INVALID_TXN_STATE
            );
        }
        assert_eq!(
            produce_error(CONCURRENT_TRANSACTIONS, false),
            code::NOT_ENOUGH_REPLICAS
        );
        assert_eq!(
            produce_error(CONCURRENT_TRANSACTIONS, true),
            CONCURRENT_TRANSACTIONS
        );
    }

    #[test]
    fn no_transaction_state_topic_means_no_coordinator() {
        let image = MetadataImage::empty("c".into());
        assert_eq!(
            coordinator_address(&image, "t"),
            Err(COORDINATOR_NOT_AVAILABLE)
        );
    }
}
