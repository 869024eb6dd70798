//! Connection against an in-process fake broker: framing, correlation ids, and the
//! ApiVersions step-down of spec K.2 (v3 rejected with a v0-layout answer, then v2).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, MetadataRequest, MetadataResponse, RequestHeader,
};
use kafka_protocol::protocol::{decode_request_header_from_buffer, Decodable, Encodable};
use runnel_client::{Connection, ConnectionConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

async fn read_request(stream: &mut TcpStream) -> (RequestHeader, Bytes) {
    let size = stream.read_i32().await.expect("size") as usize;
    let mut buf = vec![0u8; size];
    stream.read_exact(&mut buf).await.expect("frame");
    let mut frame = Bytes::from(buf);
    let header = decode_request_header_from_buffer(&mut frame).expect("header");
    (header, frame)
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

fn entry(key: ApiKey, min: i16, max: i16) -> ApiVersion {
    let mut v = ApiVersion::default();
    v.api_key = key as i16;
    v.min_version = min;
    v.max_version = max;
    v
}

#[tokio::test]
async fn api_versions_fallback_then_metadata() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let server = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.expect("accept");
        // 1. ApiVersions v3: answer UNSUPPORTED_VERSION in the v0 layout, advertising v0-2.
        let (h, _) = read_request(&mut s).await;
        assert_eq!((h.request_api_key, h.request_api_version), (18, 3));
        let mut body = BytesMut::new();
        body.put_i16(35);
        body.put_i32(1);
        body.put_i16(18);
        body.put_i16(0);
        body.put_i16(2);
        respond(&mut s, h.correlation_id, false, &body).await;
        // 2. ApiVersions v2: the real answer.
        let (h, _) = read_request(&mut s).await;
        assert_eq!((h.request_api_key, h.request_api_version), (18, 2));
        let mut resp = ApiVersionsResponse::default();
        resp.api_keys = vec![
            entry(ApiKey::ApiVersions, 0, 2),
            entry(ApiKey::Metadata, 0, 9),
        ];
        let mut body = BytesMut::new();
        resp.encode(&mut body, 2).expect("encode");
        respond(&mut s, h.correlation_id, false, &body).await;
        // 3. Metadata at min(client 12, broker 9) = 9, a flexible version (header v2 / v1).
        let (h, mut rest) = read_request(&mut s).await;
        assert_eq!((h.request_api_key, h.request_api_version), (3, 9));
        let req = MetadataRequest::decode(&mut rest, 9).expect("metadata request");
        assert!(req.topics.is_none());
        assert_eq!(rest.remaining(), 0);
        let mut resp = MetadataResponse::default();
        resp.controller_id = 7.into();
        let mut body = BytesMut::new();
        resp.encode(&mut body, 9).expect("encode");
        respond(&mut s, h.correlation_id, true, &body).await;
    });
    let conn = Connection::connect(&addr, ConnectionConfig::default())
        .await
        .expect("connect");
    assert_eq!(conn.version(ApiKey::Metadata).expect("negotiated"), 9);
    assert_eq!(conn.version(ApiKey::Produce).unwrap_err().code(), Some(35));
    let mut req = MetadataRequest::default();
    req.topics = None;
    let resp = conn.send(&req).await.expect("metadata");
    assert_eq!(resp.controller_id.0, 7);
    server.await.expect("server");
}

#[tokio::test]
async fn timeout_and_closed_connection_are_errors() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let server = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.expect("accept");
        let _ = read_request(&mut s).await;
        // Never answer; then hang up.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    });
    let config = ConnectionConfig {
        connect_timeout: std::time::Duration::from_millis(100),
        ..ConnectionConfig::default()
    };
    let err = Connection::connect(&addr, config).await.unwrap_err();
    assert!(
        matches!(err, runnel_client::ClientError::Timeout(..)),
        "{err}"
    );
    server.await.expect("server");
}
