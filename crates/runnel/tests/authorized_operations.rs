//! Authorized operations (KIP-430) and DescribeCluster's endpoint types (KIP-919) on a real
//! broker, byte for byte what a Kafka broker without an authorizer answers: every topic
//! operation (bits 3-8, 10, 11 = 3576) and every cluster operation (bits 5, 7-12 = 8096) when
//! asked for, i32::MIN when not; the cluster field only in Metadata v8-v10.

mod support;

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use support::*;

const NOT_REQUESTED: i32 = i32::MIN;
const ALL_TOPIC_OPERATIONS: i32 = 3576;
const ALL_CLUSTER_OPERATIONS: i32 = 8096;

fn topic(name: &str) -> metadata_request::MetadataRequestTopic {
    metadata_request::MetadataRequestTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(name.into()))))
}

fn metadata(
    wire: &mut Wire,
    version: i16,
    names: &[&str],
    topic_ops: bool,
    cluster_ops: bool,
) -> MetadataResponse {
    let req = MetadataRequest::default()
        .with_topics(Some(names.iter().map(|n| topic(n)).collect()))
        .with_allow_auto_topic_creation(false)
        .with_include_topic_authorized_operations(topic_ops)
        .with_include_cluster_authorized_operations(cluster_ops);
    wire.call(ApiKey::Metadata, version, &req)
}

#[test]
fn metadata_reports_every_operation_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("ops", 1, 1, &[]).0, 0);

    for version in 8..=10 {
        let resp = metadata(&mut wire, version, &["ops", "absent"], true, true);
        assert_eq!(resp.cluster_authorized_operations, ALL_CLUSTER_OPERATIONS);
        let ops: Vec<(i16, i32)> = resp
            .topics
            .iter()
            .map(|t| (t.error_code, t.topic_authorized_operations))
            .collect();
        // As Kafka without an authorizer: an unknown topic's operations are reported too.
        assert_eq!(
            ops,
            [(0, ALL_TOPIC_OPERATIONS), (3, ALL_TOPIC_OPERATIONS)],
            "v{version}"
        );
        let resp = metadata(&mut wire, version, &["ops"], false, false);
        assert_eq!(resp.cluster_authorized_operations, NOT_REQUESTED);
        assert_eq!(resp.topics[0].topic_authorized_operations, NOT_REQUESTED);
    }
    // v11+ no longer carries the cluster's operations (they moved to DescribeCluster).
    for version in 11..=12 {
        let resp = metadata(&mut wire, version, &["ops"], true, false);
        assert_eq!(
            resp.topics[0].topic_authorized_operations,
            ALL_TOPIC_OPERATIONS
        );
        assert_eq!(resp.cluster_authorized_operations, NOT_REQUESTED);
    }
    // By topic id (v12): found ids get them, unknown ids do not.
    let id = metadata(&mut wire, 12, &["ops"], false, false).topics[0].topic_id;
    let req = MetadataRequest::default()
        .with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default()
                .with_name(None)
                .with_topic_id(id),
            metadata_request::MetadataRequestTopic::default()
                .with_name(None)
                .with_topic_id(uuid::Uuid::from_u128(7)),
        ]))
        .with_allow_auto_topic_creation(false)
        .with_include_topic_authorized_operations(true);
    let resp: MetadataResponse = wire.call(ApiKey::Metadata, 12, &req);
    let ops: Vec<(i16, i32)> = resp
        .topics
        .iter()
        .map(|t| (t.error_code, t.topic_authorized_operations))
        .collect();
    assert_eq!(ops, [(0, ALL_TOPIC_OPERATIONS), (100, NOT_REQUESTED)]);
}

#[test]
fn describe_cluster_operations_and_endpoint_types() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    for version in 0..=1 {
        let asked: DescribeClusterResponse = wire.call(
            ApiKey::DescribeCluster,
            version,
            &DescribeClusterRequest::default().with_include_cluster_authorized_operations(true),
        );
        assert_eq!(asked.error_code, 0);
        assert_eq!(asked.cluster_authorized_operations, ALL_CLUSTER_OPERATIONS);
        assert_eq!(asked.controller_id.0, 1);
        assert_eq!(asked.endpoint_type, 1, "v{version}: a broker endpoint");
        let plain: DescribeClusterResponse = wire.call(
            ApiKey::DescribeCluster,
            version,
            &DescribeClusterRequest::default(),
        );
        assert_eq!(plain.cluster_authorized_operations, NOT_REQUESTED);
    }
    // KIP-919: the controllers are described by a controller listener only.
    let controllers: DescribeClusterResponse = wire.call(
        ApiKey::DescribeCluster,
        1,
        &DescribeClusterRequest::default().with_endpoint_type(2),
    );
    assert_eq!(controllers.error_code, 114, "MISMATCHED_ENDPOINT_TYPE");
    assert_eq!(
        controllers.error_message.as_deref(),
        Some("The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER")
    );
    assert!(controllers.brokers.is_empty());
    let unknown: DescribeClusterResponse = wire.call(
        ApiKey::DescribeCluster,
        1,
        &DescribeClusterRequest::default().with_endpoint_type(9),
    );
    assert_eq!(unknown.error_code, 115, "UNSUPPORTED_ENDPOINT_TYPE");
    assert_eq!(
        unknown.error_message.as_deref(),
        Some("Unsupported endpoint type 9")
    );
}
