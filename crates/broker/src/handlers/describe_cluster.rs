//! DescribeCluster (API 60): the live brokers, the cluster id and the active controller.

use std::sync::Arc;

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};

use super::str_bytes;
use crate::context::Broker;

pub async fn handle(
    broker: &Arc<Broker>,
    _request: DescribeClusterRequest,
    _version: i16,
) -> DescribeClusterResponse {
    let image = broker.image();
    let brokers = image
        .live_brokers()
        .map(|b| {
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(b.id))
                .with_host(str_bytes(&b.host))
                .with_port(b.port as i32)
                .with_rack(b.rack.as_deref().map(str_bytes))
        })
        .collect();
    DescribeClusterResponse::default()
        .with_cluster_id(str_bytes(&broker.cluster_id))
        .with_controller_id(BrokerId(broker.controller_id()))
        .with_brokers(brokers)
}
