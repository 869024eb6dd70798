//! A failed fsync takes the log directory out of service (issue 9, item 6; fsyncgate).
//!
//! Before: a partition whose fsync failed kept its leadership with a broken log, answering
//! errors for ever while no other replica could take over, and a later fsync of the same file
//! could report success for data that never reached the disk. Now the log fails for good (every
//! operation answers KAFKA_STORAGE_ERROR) and the broker's log-dir watch reports it, which makes
//! `runnel broker` stop (Kafka halts a broker whose last log directory failed).

mod support;

use std::time::Duration;

use bytes::{Buf, Bytes};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, StrBytes};
use runnel_log::fault::{arm_process_wide, Fault};
use support::{one_record_batch, request_frame, InProcessBroker, Outcome};

const LIMIT: Duration = Duration::from_secs(20);

fn answered(outcome: Outcome) -> Bytes {
    match outcome {
        Outcome::Answered(Some(b)) => b,
        other => panic!("expected an answer, got {other:?}"),
    }
}

fn produce_response(mut response: Bytes, version: i16) -> ProduceResponse {
    response.advance(4); // size prefix
    ResponseHeader::decode(
        &mut response,
        ApiKey::Produce.response_header_version(version),
    )
    .expect("response header");
    ProduceResponse::decode(&mut response, version).expect("produce response")
}

fn produce(broker: &InProcessBroker) -> i16 {
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("disk")))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(one_record_batch(None, b"must reach the disk"))),
            ])]);
    let response = produce_response(
        answered(broker.dispatch(
            request_frame(ApiKey::Produce, 9, &request, "log-dir-failure"),
            LIMIT,
        )),
        9,
    );
    response.responses[0].partition_responses[0].error_code
}

#[test]
fn a_failed_fsync_fails_the_log_for_good_and_is_reported_as_a_log_dir_failure() {
    // Every acknowledged write is fsynced first, so the fault hits the produce path.
    let broker = InProcessBroker::start(&["log.flush.interval.messages=1"]);
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(5_000)
        .with_topics(vec![create_topics_request::CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("disk")))
            .with_num_partitions(1)
            .with_replication_factor(1)]);
    answered(broker.dispatch(
        request_frame(ApiKey::CreateTopics, 5, &create, "log-dir-failure"),
        LIMIT,
    ));
    assert_eq!(produce(&broker), 0, "a healthy log acknowledges");
    assert!(
        broker
            .log_dir_failed_within(Duration::from_millis(600))
            .is_none(),
        "no failure reported while the log is healthy"
    );

    arm_process_wide(Fault::Sync);
    assert_eq!(
        produce(&broker),
        56,
        "the write whose fsync failed is not acknowledged"
    );
    let failure = broker
        .log_dir_failed_within(LIMIT)
        .expect("the log-dir watch reports the failed log");
    assert_eq!((failure.topic.as_str(), failure.partition), ("disk", 0));
    // No second fsync of the same files: the log refuses everything from now on.
    assert_eq!(produce(&broker), 56, "a failed log accepts nothing more");
}
