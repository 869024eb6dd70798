//! Transactions on the partition (KIP-98): the coordinator's COMMIT / ABORT markers and the
//! open-transaction check of the produce path's verification.

use runnel_log::batch::BatchHeader;
use runnel_log::control::{self, Marker};

use super::append::Appended;
use super::producers::{index_aborted, snapshot_on_roll};
use super::Partition;
use crate::clock::now_ms;
use crate::errors::{code, KafkaError};

impl Partition {
    /// Leader side of WriteTxnMarkers (API 27): appends the coordinator's COMMIT / ABORT
    /// marker, which ends the producer's transaction here (an abort enters the `.txnindex`).
    /// Refused with the Kafka code when a newer producer or coordinator epoch was seen.
    pub fn write_marker(&self, marker: &Marker, node_id: i32) -> Result<Appended, KafkaError> {
        let role = self.role();
        if role.leader != node_id {
            return Err(KafkaError::new(code::NOT_LEADER_OR_FOLLOWER, String::new()));
        }
        let now = now_ms();
        let bytes = control::marker_batch(marker, now);
        let header = BatchHeader::parse(&bytes)
            .map_err(|e| KafkaError::new(e.kafka_error_code(), e.to_string()))?;
        let mut log = self.log.lock();
        let mut producers = self.producers.lock();
        producers.check_marker(marker).map_err(|c| {
            KafkaError::new(
                c,
                format!("stale marker for producer {}", marker.producer_id),
            )
        })?;
        let info = log
            .append(&bytes, &[header], role.leader_epoch)
            .map_err(|e| KafkaError::new(e.kafka_error_code(), e.to_string()))?;
        if let Some(aborted) = producers.apply_marker(marker, info.first_offset, now) {
            index_aborted(&mut log, aborted);
        }
        snapshot_on_roll(&mut log, &producers);
        drop(producers);
        self.after_leader_append(&mut log, info.last_offset);
        Ok(Appended {
            base_offset: info.first_offset,
            last_offset: info.last_offset,
            log_start_offset: info.log_start_offset,
            duplicate: false,
            log_append_time: -1,
            leader_epoch: role.leader_epoch,
        })
    }

    /// Whether `producer_id` has an open transaction on this partition, at any epoch: the
    /// tests' probe (the produce path's guard is [`Self::in_transaction_at`]).
    #[cfg(test)]
    pub fn in_transaction(&self, producer_id: i64) -> bool {
        self.producers.lock().in_transaction(producer_id)
    }

    /// Whether `producer_id` has an open transaction on this partition begun at
    /// `producer_epoch`: the produce path's verification guard, which keeps it from asking the
    /// coordinator again (`ProducerStateTable::in_transaction_at`).
    pub fn in_transaction_at(&self, producer_id: i64, producer_epoch: i16) -> bool {
        self.producers
            .lock()
            .in_transaction_at(producer_id, producer_epoch)
    }
}
