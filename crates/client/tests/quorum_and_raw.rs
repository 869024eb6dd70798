//! The two requests behind `runnel metadata-quorum` and `runnel metadata`, against an
//! in-process fake broker: DescribeQuorum at the negotiated flexible version, and Runnel's raw
//! JSON request (api key 32000: request header v1, response header v0, not negotiated).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::describe_quorum_response::{PartitionData, ReplicaState, TopicData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, DescribeQuorumRequest, DescribeQuorumResponse, TopicName,
};
use kafka_protocol::protocol::{decode_request_header_from_buffer, Decodable, Encodable, StrBytes};
use runnel_client::admin::{describe_quorum_request, QuorumInfo};
use runnel_client::{ClientError, Connection, ConnectionConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

async fn read_frame(stream: &mut TcpStream) -> Bytes {
    let size = stream.read_i32().await.expect("size") as usize;
    let mut buf = vec![0u8; size];
    stream.read_exact(&mut buf).await.expect("frame");
    Bytes::from(buf)
}

async fn respond(stream: &mut TcpStream, correlation: i32, flexible_header: bool, body: &[u8]) {
    let mut out = BytesMut::new();
    out.put_i32((4 + usize::from(flexible_header) + body.len()) as i32);
    out.put_i32(correlation);
    if flexible_header {
        out.put_u8(0);
    }
    out.put_slice(body);
    stream.write_all(&out).await.expect("write");
}

/// Accepts one connection and completes the ApiVersions handshake advertising `apis`.
async fn handshake(listener: &TcpListener, apis: &[(ApiKey, i16, i16)]) -> TcpStream {
    let (mut s, _) = listener.accept().await.expect("accept");
    let mut frame = read_frame(&mut s).await;
    let h = decode_request_header_from_buffer(&mut frame).expect("header");
    assert_eq!(h.request_api_key, ApiKey::ApiVersions as i16);
    let mut resp = ApiVersionsResponse::default();
    resp.api_keys = apis
        .iter()
        .map(|(k, min, max)| {
            let mut v = ApiVersion::default();
            v.api_key = *k as i16;
            v.min_version = *min;
            v.max_version = *max;
            v
        })
        .collect();
    let mut body = BytesMut::new();
    resp.encode(&mut body, h.request_api_version)
        .expect("encode");
    respond(&mut s, h.correlation_id, false, &body).await;
    s
}

#[tokio::test]
async fn describe_quorum_at_v1() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let server = tokio::spawn(async move {
        let mut s = handshake(
            &listener,
            &[(ApiKey::ApiVersions, 0, 3), (ApiKey::DescribeQuorum, 0, 2)],
        )
        .await;
        let mut frame = read_frame(&mut s).await;
        let h = decode_request_header_from_buffer(&mut frame).expect("header");
        // min(client 1, broker 2) = 1; flexible from v0, so header v2.
        assert_eq!((h.request_api_key, h.request_api_version), (55, 1));
        let req = DescribeQuorumRequest::decode(&mut frame, 1).expect("request");
        assert_eq!(req, describe_quorum_request());
        let mut voter = ReplicaState::default();
        voter.replica_id = BrokerId(1);
        voter.log_end_offset = 10;
        voter.last_fetch_timestamp = 1_700_000_000_000;
        voter.last_caught_up_timestamp = 1_700_000_000_000;
        let mut p = PartitionData::default();
        p.leader_id = BrokerId(1);
        p.leader_epoch = 4;
        p.high_watermark = 10;
        p.current_voters = vec![voter];
        let mut t = TopicData::default();
        t.topic_name = TopicName(StrBytes::from_static_str("__cluster_metadata"));
        t.partitions = vec![p];
        let mut resp = DescribeQuorumResponse::default();
        resp.topics = vec![t];
        let mut body = BytesMut::new();
        resp.encode(&mut body, 1).expect("encode");
        respond(&mut s, h.correlation_id, true, &body).await;
    });
    let conn = Connection::connect(&addr, ConnectionConfig::default())
        .await
        .expect("connect");
    let resp = conn.send(&describe_quorum_request()).await.expect("send");
    let info = QuorumInfo::from_response(&resp).expect("quorum");
    assert_eq!(
        (info.leader_id, info.leader_epoch, info.high_watermark),
        (1, 4, 10)
    );
    assert_eq!(
        info.voters[0].last_caught_up_timestamp,
        Some(1_700_000_000_000)
    );
    server.await.expect("server");
}

#[tokio::test]
async fn raw_json_request_round_trip() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let server = tokio::spawn(async move {
        let mut s = handshake(&listener, &[(ApiKey::ApiVersions, 0, 3)]).await;
        let mut frame = read_frame(&mut s).await;
        // Header v1, parsed by hand: kafka-protocol does not know key 32000.
        assert_eq!(frame.get_i16(), 32000);
        assert_eq!(frame.get_i16(), 0);
        let correlation = frame.get_i32();
        let id_len = frame.get_i16() as usize;
        assert_eq!(&frame[..id_len], b"runnel-client");
        frame.advance(id_len);
        assert_eq!(&frame[..], br#"{"what":"events","since":5}"#);
        respond(&mut s, correlation, false, br#"{"events":[],"next":5}"#).await;
    });
    let conn = Connection::connect(&addr, ConnectionConfig::default())
        .await
        .expect("connect");
    let body = conn
        .send_raw(
            32000,
            0,
            br#"{"what":"events","since":5}"#,
            conn.request_timeout(),
        )
        .await
        .expect("raw");
    assert_eq!(&body[..], br#"{"events":[],"next":5}"#);
    server.await.expect("server");
}

#[tokio::test]
async fn unknown_raw_api_closes_the_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let server = tokio::spawn(async move {
        let mut s = handshake(&listener, &[(ApiKey::ApiVersions, 0, 3)]).await;
        // What Kafka does with an api key it does not know: hang up.
        let _ = read_frame(&mut s).await;
    });
    let conn = Connection::connect(&addr, ConnectionConfig::default())
        .await
        .expect("connect");
    let err = conn
        .send_raw(32000, 0, br#"{"what":"tree"}"#, conn.request_timeout())
        .await
        .unwrap_err();
    match err {
        ClientError::Io(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionAborted),
        other => panic!("expected a closed connection, got {other}"),
    }
    server.await.expect("server");
}
