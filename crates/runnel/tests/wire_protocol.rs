//! Framing and negotiation against a real broker process: ApiVersions (incl. the v0 fallback and
//! the tagged-field layout old librdkafka needs), the KIP-714 telemetry handshake and bad input
//! closing only its own connection.

mod support;

use bytes::{Buf, BufMut, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, StrBytes};
use support::*;

#[test]
fn api_versions_v3_has_no_default_tagged_fields() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    let req = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("itest"))
        .with_client_software_version(StrBytes::from_static_str("1.0"));
    let frame = wire.request_bytes(ApiKey::ApiVersions, 3, &req);
    wire.send_raw(&frame);
    let mut body = wire.read_response(ApiKey::ApiVersions, 3);
    let resp = ApiVersionsResponse::decode(&mut body.clone(), 3).unwrap();
    assert_eq!(resp.error_code, 0);
    assert!(resp
        .api_keys
        .iter()
        .any(|k| k.api_key == ApiKey::Produce as i16 && k.min_version == 3 && k.max_version == 13));
    // librdkafka 2.0.2 fails with "Read underflow" if the response carries tagged fields that
    // hold their defaults: the body holds exactly what a re-encoding of the decoded response
    // holds (a default field is never written).
    let mut again = BytesMut::new();
    kafka_protocol::protocol::Encodable::encode(&resp, &mut again, 3).unwrap();
    assert_eq!(&again[..], &body[..], "no default tagged fields");
    // Features, as Kafka 3.3+: before v4 a feature whose minimum level is 0 is left out
    // (KAFKA-17492), so only metadata.version is listed; the finalized levels are all there.
    let names: Vec<&str> = resp
        .supported_features
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(names, vec!["metadata.version"]);
    assert!(resp.finalized_features_epoch >= 0);
    let group = resp
        .finalized_features
        .iter()
        .find(|f| f.name.as_str() == "group.version")
        .expect("group.version finalized");
    assert_eq!((group.min_version_level, group.max_version_level), (1, 1));
    assert!(!resp.zk_migration_ready);
    // v4 lists every supported feature, minimum 0 included.
    let resp: ApiVersionsResponse = wire.call(ApiKey::ApiVersions, 4, &req);
    let names: Vec<&str> = resp
        .supported_features
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(
        names,
        vec![
            "group.version",
            "kraft.version",
            "metadata.version",
            "transaction.version"
        ]
    );
    body.advance(body.len());
}

#[test]
fn unsupported_api_versions_version_gets_v0_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    let frame = wire.request_bytes(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default());
    // Rewrite the version field to 99 (header v1 layout: size, key, version, ...).
    let mut frame = frame.to_vec();
    frame[6..8].copy_from_slice(&99i16.to_be_bytes());
    wire.send_raw(&frame);
    let mut body = wire.read_response(ApiKey::ApiVersions, 0);
    let resp = ApiVersionsResponse::decode(&mut body, 0).unwrap();
    assert_eq!(resp.error_code, 35, "UNSUPPORTED_VERSION");
    assert!(resp
        .api_keys
        .iter()
        .any(|k| k.api_key == ApiKey::ApiVersions as i16 && k.max_version >= 3));
    // The connection stays usable.
    let resp: ApiVersionsResponse =
        wire.call(ApiKey::ApiVersions, 2, &ApiVersionsRequest::default());
    assert_eq!(resp.error_code, 0);
}

/// KIP-714 as a broker without a metrics plugin answers it (Kafka's `ClientMetricsManager`
/// with no subscription): a new instance id for the zero id, the client's own id kept, no
/// requested metrics (so the client pushes nothing); a push is dropped, INVALID_REQUEST
/// without an instance id.
#[test]
fn telemetry_subscribes_to_no_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    let first: GetTelemetrySubscriptionsResponse = wire.call(
        ApiKey::GetTelemetrySubscriptions,
        0,
        &GetTelemetrySubscriptionsRequest::default(),
    );
    assert_eq!(first.error_code, 0, "{first:?}");
    assert!(!first.client_instance_id.is_nil(), "{first:?}");
    assert!(first.requested_metrics.is_empty(), "{first:?}");
    let id = first.client_instance_id;
    let again: GetTelemetrySubscriptionsResponse = wire.call(
        ApiKey::GetTelemetrySubscriptions,
        0,
        &GetTelemetrySubscriptionsRequest::default().with_client_instance_id(id),
    );
    assert_eq!(again.client_instance_id, id);
    let push = |wire: &mut Wire, id| -> PushTelemetryResponse {
        let req = PushTelemetryRequest::default()
            .with_client_instance_id(id)
            .with_metrics(bytes::Bytes::from_static(b"m"));
        wire.call(ApiKey::PushTelemetry, 0, &req)
    };
    assert_eq!(push(&mut wire, id).error_code, 0);
    assert_eq!(
        push(&mut wire, uuid::Uuid::nil()).error_code,
        42,
        "INVALID_REQUEST"
    );
}

fn still_serving(broker: &TestBroker) {
    let mut wire = broker.connect();
    let resp: MetadataResponse = wire.call(ApiKey::Metadata, 9, &MetadataRequest::default());
    assert_eq!(resp.brokers.len(), 1);
}

#[test]
fn bad_frames_close_only_their_connection() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    // A healthy connection opened before the abuse must keep working afterwards.
    let mut healthy = broker.connect();
    let _: ApiVersionsResponse =
        healthy.call(ApiKey::ApiVersions, 2, &ApiVersionsRequest::default());

    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "length prefix above socket.request.max.bytes",
            0x7fff_fff0i32.to_be_bytes().to_vec(),
        ),
        ("negative length prefix", (-5i32).to_be_bytes().to_vec()),
        ("frame shorter than a header", {
            let mut b = BytesMut::new();
            b.put_i32(3);
            b.put_slice(&[0, 3, 0]);
            b.to_vec()
        }),
        ("unknown api key", {
            let mut b = BytesMut::new();
            b.put_i32(10);
            b.put_i16(9999);
            b.put_i16(0);
            b.put_i32(1);
            b.put_i16(-1);
            b.to_vec()
        }),
        ("unsupported produce version", {
            let mut b = BytesMut::new();
            b.put_i32(10);
            b.put_i16(0);
            b.put_i16(1);
            b.put_i32(1);
            b.put_i16(-1);
            b.to_vec()
        }),
        ("metadata body of garbage", {
            let mut b = BytesMut::new();
            b.put_i32(14);
            b.put_i16(3);
            b.put_i16(9);
            b.put_i32(1);
            b.put_i16(-1);
            b.put_slice(&[0xff, 0xff, 0xff, 0x7f]);
            b.to_vec()
        }),
        ("forged huge array length", {
            // Produce v9 with a topic array claiming 2^31-1 elements.
            let mut b = BytesMut::new();
            b.put_i16(0);
            b.put_i16(9);
            b.put_i32(1);
            b.put_i16(-1);
            b.put_u8(0); // header tagged fields
            b.put_u8(0); // transactional id: null
            b.put_i16(1); // acks
            b.put_i32(1000); // timeout
            b.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x07]); // compact array length
            let mut f = BytesMut::new();
            f.put_i32(b.len() as i32);
            f.extend_from_slice(&b);
            f.to_vec()
        }),
    ];
    for (what, bytes) in cases {
        let mut wire = broker.connect();
        wire.send_raw(&bytes);
        assert!(wire.closed_by_peer(), "{what}: connection should be closed");
        still_serving(&broker);
    }
    let mut rng_state = 0x2545F4914F6CDD1Du64;
    for _ in 0..20 {
        let mut wire = broker.connect();
        let mut garbage = Vec::with_capacity(64);
        for _ in 0..64 {
            rng_state ^= rng_state << 13;
            rng_state ^= rng_state >> 7;
            rng_state ^= rng_state << 17;
            garbage.push(rng_state as u8);
        }
        wire.send_raw(&garbage);
        drop(wire);
    }
    let _: ApiVersionsResponse =
        healthy.call(ApiKey::ApiVersions, 2, &ApiVersionsRequest::default());
    still_serving(&broker);
}

#[test]
fn truncated_frame_then_disconnect_does_not_hurt() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    let mut b = BytesMut::new();
    b.put_i32(100);
    b.put_slice(&[0, 18, 0, 2]);
    wire.send_raw(&b);
    drop(wire);
    still_serving(&broker);
}
