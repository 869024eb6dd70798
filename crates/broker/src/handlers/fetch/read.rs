//! One pass over the requested partitions, on the blocking pool: each partition admitted
//! (`admit`), its read located under the log lock and its bytes read without it, within what
//! is left of the response's records budget.

use std::sync::Arc;

use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::fetch_response::{AbortedTransaction, PartitionData};
use kafka_protocol::messages::{BrokerId, FetchResponse};
use runnel_log::{LogError, ReadPlan, ReadResult};

use super::admit::admit;
use super::plan::Plan;
use super::response::{assemble, partition_error};
use crate::context::Broker;
use crate::errors::code;
use crate::handlers::fetch_follower_read;
use crate::replica::partition::Partition;

/// What one partition's pass produced.
pub(super) struct Answer {
    pub(super) data: PartitionData,
    pub(super) bytes: usize,
    pub(super) error: bool,
}

impl Answer {
    pub(super) fn error(data: PartitionData) -> Answer {
        Answer {
            data,
            bytes: 0,
            error: true,
        }
    }
}

/// One pass over the requested partitions: (response, bytes of records, any partition error).
/// Runs on the blocking pool (it reads segment files).
pub(super) fn read_once(broker: &Arc<Broker>, plan: &Plan) -> (FetchResponse, usize, bool) {
    let mut budget = plan.max_bytes;
    let mut total = 0usize;
    let mut errors = false;
    let mut by_topic: Vec<Vec<PartitionData>> = plan.topics.iter().map(|_| Vec::new()).collect();
    for w in &plan.wanted {
        let topic = &plan.topics[w.topic];
        let answer = match &topic.resolved {
            None => Answer::error(partition_error(w.fetch.partition, code::UNKNOWN_TOPIC_ID)),
            Some(name) => read_partition(broker, plan, name, &w.fetch, budget, total == 0),
        };
        total += answer.bytes;
        budget = budget.saturating_sub(answer.bytes);
        errors |= answer.error;
        by_topic[w.topic].push(answer.data);
    }
    (assemble(plan, by_topic), total, errors)
}

/// Reads one partition within `budget` (`first`: nothing was returned yet, so one batch may
/// exceed the limits).
fn read_partition(
    broker: &Arc<Broker>,
    plan: &Plan,
    name: &str,
    fp: &FetchPartition,
    budget: usize,
    first: bool,
) -> Answer {
    let index = fp.partition;
    let (partition, role) = match admit(broker, plan, name, fp) {
        Ok(admitted) => admitted,
        Err(answer) => return *answer,
    };
    // Read before the log lock (lock order). A leader's LSO only grows; a follower serving
    // consumers (KIP-392) may have truncated since, so the read stays capped by the HW taken
    // under the lock.
    let lso = partition.last_stable_offset();
    let (located, aborted) = locate(&partition, plan, fp, budget, first, lso);
    let result: Result<ReadResult, (LogError, i64, i64)> = match located {
        Located::Nothing(read) => Ok(read),
        // Reading located bytes fails only with I/O errors or corruption (no offsets needed).
        Located::Read(plan) => plan.execute().map_err(|e| (e, -1, -1)),
        Located::Failed(e, hw, start) => Err((e, hw, start)),
    };
    match result {
        Ok(read) => {
            let n = read.records.len();
            if plan.client.is_some() {
                fetch_follower_read::served(&partition, broker.node_id, &role, fp.fetch_offset, n);
            }
            Answer {
                data: PartitionData::default()
                    .with_partition_index(index)
                    .with_high_watermark(read.high_watermark)
                    .with_last_stable_offset(lso.min(read.high_watermark))
                    .with_log_start_offset(read.log_start_offset)
                    .with_aborted_transactions(aborted)
                    .with_preferred_read_replica(BrokerId(-1))
                    .with_records(Some(read.records)),
                bytes: n,
                error: false,
            }
        }
        Err((LogError::OffsetOutOfRange { .. }, hw, start)) => Answer::error(
            partition_error(index, code::OFFSET_OUT_OF_RANGE)
                .with_high_watermark(hw)
                .with_last_stable_offset(hw)
                .with_log_start_offset(start),
        ),
        Err((e, _, _)) => {
            tracing::error!(topic = %name, partition = index, error = %e, "read failed");
            Answer::error(partition_error(index, code::KAFKA_STORAGE_ERROR))
        }
    }
}

/// Locates the read under the log lock (the bytes are read without it): up to the LEO for a
/// follower, the HW for a consumer, the LSO (`lso`) for read_committed, which also gets the
/// aborted transactions of the range.
fn locate(
    partition: &Partition,
    plan: &Plan,
    fp: &FetchPartition,
    budget: usize,
    first: bool,
    lso: i64,
) -> (Located, Option<Vec<AbortedTransaction>>) {
    let log = partition.lock_log();
    let hw = log.high_watermark();
    let upper = if plan.follower.is_some() {
        log.log_end_offset()
    } else if plan.read_committed {
        lso.min(hw)
    } else {
        hw
    };
    let aborted = plan
        .read_committed
        .then(|| aborted_transactions(&log, fp.fetch_offset, upper));
    let max = usize::try_from(fp.partition_max_bytes)
        .unwrap_or(0)
        .min(budget);
    let in_range =
        fp.fetch_offset >= log.log_start_offset() && fp.fetch_offset <= log.log_end_offset();
    let located = if in_range && fp.fetch_offset >= upper {
        // Between the HW and the LEO: nothing visible yet, not an error.
        Located::Nothing(ReadResult {
            records: Default::default(),
            log_start_offset: log.log_start_offset(),
            log_end_offset: log.log_end_offset(),
            high_watermark: hw,
        })
    } else {
        match log.plan_read(fp.fetch_offset, max, upper, first) {
            Ok(plan) => Located::Read(plan),
            Err(e) => Located::Failed(e, hw, log.log_start_offset()),
        }
    };
    (located, aborted)
}

/// The aborted transactions of `from..upper`, as a Fetch response lists them.
fn aborted_transactions(
    log: &runnel_log::PartitionLog,
    from: i64,
    upper: i64,
) -> Vec<AbortedTransaction> {
    log.aborted_txns(from, upper)
        .into_iter()
        .map(|t| {
            AbortedTransaction::default()
                .with_producer_id(kafka_protocol::messages::ProducerId(t.producer_id))
                .with_first_offset(t.first_offset)
        })
        .collect()
}

enum Located {
    Nothing(ReadResult),
    Read(ReadPlan),
    Failed(LogError, i64, i64),
}
