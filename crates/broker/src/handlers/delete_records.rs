//! DeleteRecords (API 21): moves the log start offset; `-1` means "up to the high watermark".

use std::sync::Arc;

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use crate::context::Broker;
use crate::errors::code;

fn result(index: i32, code: i16, low_watermark: i64) -> DeleteRecordsPartitionResult {
    DeleteRecordsPartitionResult::default()
        .with_partition_index(index)
        .with_error_code(code)
        .with_low_watermark(low_watermark)
}

pub async fn handle(
    broker: &Arc<Broker>,
    request: DeleteRecordsRequest,
    _version: i16,
) -> DeleteRecordsResponse {
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let name = topic.name.0.as_str();
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let index = p.partition_index;
                    let partition = match super::led_partition(broker, name, index) {
                        Ok(p) => p,
                        Err(code) => return result(index, code, -1),
                    };
                    let mut log = partition.log.lock();
                    let hw = log.high_watermark();
                    let target = if p.offset == -1 { hw } else { p.offset };
                    if target < 0 || target > hw {
                        return result(index, code::OFFSET_OUT_OF_RANGE, -1);
                    }
                    match log.delete_records_before(target) {
                        Ok(low) => result(index, code::NONE, low),
                        Err(e) => {
                            tracing::error!(topic = %name, partition = index, error = %e, "delete records failed");
                            result(index, code::KAFKA_STORAGE_ERROR, -1)
                        }
                    }
                })
                .collect();
            DeleteRecordsTopicResult::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    DeleteRecordsResponse::default().with_topics(topics)
}
