//! Issue 10: an acks=all Produce waiting for its replication does not hold up the next Produce
//! on its connection (`server::pipeline`): the next one is read and appended meanwhile, and
//! both answers still come back in request order. A producer that keeps many requests in
//! flight on one connection (librdkafka with `linger.ms=0`) is then served at its rate, not
//! at one replication round trip per request.

mod support;

use bytes::{Buf, Bytes};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, StrBytes};
use std::io::Read;
use support::cluster::{partition_states, Cluster};
use support::{batch, wait_until, Wire};

const TOPIC: &str = "pipelined";

fn produce(value: &str, timeout_ms: i32) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(timeout_ms)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch(
                        &[(None, value)],
                        kafka_protocol::records::Compression::None,
                    ))),
            ])])
}

/// Reads one Produce v9 response off `stream`: (correlation id, error code, base offset).
fn read_produce_response(stream: &mut std::net::TcpStream) -> (i32, i16, i64) {
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).expect("response size");
    let mut buf = vec![0u8; i32::from_be_bytes(size).max(0) as usize];
    stream.read_exact(&mut buf).expect("response body");
    let mut buf = Bytes::from(buf);
    let header =
        ResponseHeader::decode(&mut buf, ApiKey::Produce.response_header_version(9)).unwrap();
    let resp = ProduceResponse::decode(&mut buf, 9).expect("a produce response");
    assert_eq!(buf.remaining(), 0);
    let p = &resp.responses[0].partition_responses[0];
    (header.correlation_id, p.error_code, p.base_offset)
}

#[test]
fn a_produce_waiting_for_replication_lets_the_next_produce_append() {
    // A frozen follower stays in the ISR (and registered) for the whole test, so the first
    // acks=all Produce cannot complete until it thaws.
    let cluster = Cluster::start(
        3,
        &[
            "replica.lag.time.max.ms=300000",
            "broker.session.timeout.ms=300000",
        ],
    );
    let bootstrap = cluster.addr(0);
    assert_eq!(support::cluster::create(&bootstrap, TOPIC, 1, 3), 0);
    wait_until("a leader and a full ISR", || {
        partition_states(&bootstrap, TOPIC).is_some_and(|s| s[0].leader > 0 && s[0].isr.len() == 3)
    });
    let state = partition_states(&bootstrap, TOPIC).unwrap().remove(0);
    let leader = cluster.index_of(state.leader);
    let follower = cluster.index_of(*state.isr.iter().find(|id| **id != state.leader).unwrap());
    let leader_log = cluster.nodes[leader]
        .data_dir
        .join(format!("{TOPIC}-0"))
        .join("00000000000000000000.log");
    let appended = |marker: &[u8]| {
        std::fs::read(&leader_log).is_ok_and(|b| b.windows(marker.len()).any(|w| w == marker))
    };

    cluster.pause(follower);
    let mut wire = Wire::connect(&cluster.addr(leader));
    let mut frames = wire.request_bytes(ApiKey::Produce, 9, &produce("waits-for-the-isr", 120_000));
    frames.extend_from_slice(&wire.request_bytes(
        ApiKey::Produce,
        9,
        &produce("appended-meanwhile", 120_000),
    ));
    wire.send_raw(&frames);
    // Served one at a time, the second request would not even be read before the first is
    // answered, which needs the frozen follower (or 120 s).
    wait_until("the second produce appended while the first waits", || {
        appended(b"appended-meanwhile")
    });
    assert!(appended(b"waits-for-the-isr"));

    cluster.resume(follower);
    let mut stream = wire.into_stream();
    assert_eq!(read_produce_response(&mut stream), (1, 0, 0));
    assert_eq!(read_produce_response(&mut stream), (2, 0, 1));
}
