//! Whether this broker reads a partition for the fetcher (hosted here, a role that may serve
//! it, the current leader epoch, a registered follower of the current broker epoch) and, for a
//! follower, what its fetch position tells the leader (KIP-595's diverging epoch, the ISR).

use std::sync::Arc;

use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::fetch_response::{
    EpochEndOffset as FetchEpochEndOffset, PartitionData,
};
use kafka_protocol::messages::BrokerId;
use runnel_replication::{check_follower_fetch, check_leader_epoch, EpochEndOffset};

use super::plan::Plan;
use super::read::Answer;
use super::response::partition_error;
use crate::context::Broker;
use crate::errors::code;
use crate::handlers::fetch_follower_read;
use crate::replica::partition::{FollowerPosition, Partition};

/// Whether this broker reads `fp` for the request: the partition hosted here, a role that may
/// serve this fetcher (leader, or a follower serving a KIP-392 consumer), the current leader
/// epoch, and for a follower its registration and position. Anything else is the answer.
pub(super) fn admit(
    broker: &Arc<Broker>,
    plan: &Plan,
    name: &str,
    fp: &FetchPartition,
) -> Result<(Arc<Partition>, crate::replica::partition::Role), Box<Answer>> {
    let index = fp.partition;
    let refuse = |code| Box::new(Answer::error(partition_error(index, code)));
    let Some(partition) = broker.replicas.get(name, index) else {
        let code = if broker.image().partition(name, index).is_some() {
            code::NOT_LEADER_OR_FOLLOWER
        } else {
            code::UNKNOWN_TOPIC_OR_PARTITION
        };
        return Err(refuse(code));
    };
    let role = partition.role();
    let leader_here = role.leader == broker.node_id;
    if !leader_here
        && !fetch_follower_read::may_read_at_follower(plan.client.as_ref(), &role, broker.node_id)
    {
        return Err(refuse(code::NOT_LEADER_OR_FOLLOWER));
    }
    check_leader_epoch(fp.current_leader_epoch, role.leader_epoch).map_err(refuse)?;
    if leader_here {
        let preferred = fetch_follower_read::preferred_replica(
            broker,
            &partition,
            plan.client.as_ref(),
            fp.fetch_offset,
        );
        if let Some(replica) = preferred {
            let data = fetch_follower_read::redirect(&partition, index, replica);
            // Answered at once, as an error is (Kafka's `hasPreferredReadReplica`).
            return Err(Box::new(Answer {
                data,
                bytes: 0,
                error: true,
            }));
        }
    }
    if let Some(who) = plan.follower {
        let registered = broker.image().brokers.get(&who.replica_id).map(|b| b.epoch);
        check_follower_fetch(who, broker.node_id, &role.replicas, registered).map_err(refuse)?;
        if let Some(answer) = follower_position(broker, &partition, who.replica_id, fp, plan) {
            return Err(Box::new(answer));
        }
    }
    Ok((partition, role))
}

/// A verified follower's fetch position: `Some` answers a diverging log (nothing is read);
/// otherwise a position inside our log is recorded as the follower's LEO and log start (it may
/// move the HW, the ISR and the low watermark) by [`Partition::serve_follower_fetch`].
fn follower_position(
    broker: &Arc<Broker>,
    partition: &Arc<Partition>,
    replica_id: i32,
    fp: &FetchPartition,
    plan: &Plan,
) -> Option<Answer> {
    let index = fp.partition;
    let last_fetched_epoch = (plan.version >= 12).then_some(fp.last_fetched_epoch);
    let position = partition.serve_follower_fetch(
        replica_id,
        fp.fetch_offset,
        last_fetched_epoch,
        fp.log_start_offset,
    );
    match position {
        FollowerPosition::Diverging {
            epoch_end,
            high_watermark: hw,
            log_start_offset,
        } => Some(Answer::error(diverging_answer(
            index,
            epoch_end,
            hw,
            log_start_offset,
        ))),
        FollowerPosition::Recorded { propose } => {
            if let Some(request) = propose {
                crate::replica::isr::propose(broker.controller.clone(), partition.clone(), request);
            }
            None
        }
        // The read answers OFFSET_OUT_OF_RANGE; the position counts for nothing.
        FollowerPosition::OutsideLog => None,
    }
}

/// The answer to a follower whose log diverged from ours (KIP-595's DivergingEpoch): where
/// to truncate, no records. Its fetch position is not a position in *our* log, so it neither
/// moved the HW nor earned an ISR place (as in Kafka).
///
/// An undefined answer (`runnel_replication::EpochEndOffset::UNDEFINED`: we know no epoch at
/// or below the follower's) cannot travel as a DivergingEpoch: the field's -1 epoch means
/// "none" on the wire (Kafka's `FetchResponse.isDivergingEpoch`). It is answered
/// OFFSET_OUT_OF_RANGE with our HW instead, as before; the follower then cuts back to our
/// HW. A leader records its own epoch at its LEO on election, and fencing has checked that
/// the follower fetches in that epoch, so a follower's last fetched epoch is never above our
/// latest and this answer needs a leader whose epoch cache is empty.
fn diverging_answer(
    index: i32,
    epoch_end: EpochEndOffset,
    hw: i64,
    log_start: i64,
) -> PartitionData {
    if epoch_end.epoch < 0 || epoch_end.end_offset < 0 {
        return partition_error(index, code::OFFSET_OUT_OF_RANGE)
            .with_high_watermark(hw)
            .with_last_stable_offset(hw)
            .with_log_start_offset(log_start);
    }
    PartitionData::default()
        .with_partition_index(index)
        .with_high_watermark(hw)
        .with_last_stable_offset(hw)
        .with_log_start_offset(log_start)
        .with_diverging_epoch(
            FetchEpochEndOffset::default()
                .with_epoch(epoch_end.epoch)
                .with_end_offset(epoch_end.end_offset),
        )
        .with_preferred_read_replica(BrokerId(-1))
        .with_records(Some(Default::default()))
}
