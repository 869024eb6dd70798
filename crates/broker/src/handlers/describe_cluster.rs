//! DescribeCluster (API 60): the live brokers, the cluster id and a controller id, as a Kafka
//! broker listener answers it (`AuthHelper.computeDescribeClusterResponse` with endpoint type
//! BROKER). The controller id is a live broker, this one when it is (see
//! `Broker::controller_id`): clients send admin requests there and it forwards them to the
//! active controller. Asking a
//! broker listener for the controllers (endpoint type 2, KIP-919) is MISMATCHED_ENDPOINT_TYPE,
//! as in Kafka, where only a controller listener describes the controllers; Runnel's
//! controller listener speaks the quorum's protocol, not Kafka's. v2 (KIP-1073) lists fenced
//! brokers too when asked (`include_fenced_brokers`), each with `is_fenced`.

use std::sync::Arc;

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};

use super::metadata::authorized_operations;
use super::str_bytes;
use crate::context::{Broker, RequestContext};
use crate::errors::code;
use crate::errors::code::{MISMATCHED_ENDPOINT_TYPE, UNSUPPORTED_ENDPOINT_TYPE};

/// KIP-919's endpoint types (org.apache.kafka.clients.admin.EndpointType).
const ENDPOINT_BROKER: i8 = 1;
const ENDPOINT_CONTROLLER: i8 = 2;

pub async fn handle(
    broker: &Arc<Broker>,
    request: DescribeClusterRequest,
    version: i16,
    ctx: &RequestContext,
) -> DescribeClusterResponse {
    if let Some(refusal) = check_endpoint_type(request.endpoint_type, version) {
        return refusal;
    }
    let image = broker.image();
    // v2 (KIP-1073): `include_fenced_brokers` adds the registered but fenced brokers, marked.
    let with_fenced = version >= 2 && request.include_fenced_brokers;
    let brokers: Vec<DescribeClusterBroker> = image
        .brokers
        .values()
        .filter(|b| with_fenced || !b.fenced)
        // Brokers without the client's listener are left out, as Kafka's.
        .filter_map(|b| {
            let (host, port) = broker.endpoint_of(b, &ctx.listener)?;
            let d = DescribeClusterBroker::default()
                .with_broker_id(BrokerId(b.id))
                .with_host(str_bytes(&host))
                .with_port(i32::from(port))
                .with_rack(b.rack.as_deref().map(str_bytes));
            Some(if version >= 2 {
                d.with_is_fenced(b.fenced)
            } else {
                d
            })
        })
        .collect();
    // As Kafka: a controller id the broker list does not hold (or only as fenced) is -1.
    let live = |id: i32| image.live_brokers().any(|b| b.id == id);
    let controller_id = broker.controller_id();
    let controller_id = if live(controller_id) {
        controller_id
    } else {
        -1
    };
    let response = DescribeClusterResponse::default()
        .with_cluster_id(str_bytes(&broker.cluster_id))
        .with_controller_id(BrokerId(controller_id))
        .with_cluster_authorized_operations(authorized_operations::cluster_operations(
            request.include_cluster_authorized_operations,
        ))
        .with_brokers(brokers);
    if version >= 1 {
        response.with_endpoint_type(ENDPOINT_BROKER)
    } else {
        response
    }
}

/// Kafka's answer to an endpoint type a broker listener does not serve, or None to go on. v0
/// requests cannot carry another type than brokers (the field's default), so its
/// INVALID_REQUEST branch is Kafka's and unreachable here.
fn check_endpoint_type(endpoint_type: i8, version: i16) -> Option<DescribeClusterResponse> {
    let refuse = |v1_code: i16, message: String| {
        let error = if version == 0 {
            code::INVALID_REQUEST
        } else {
            v1_code
        };
        Some(
            DescribeClusterResponse::default()
                .with_error_code(error)
                .with_error_message(Some(str_bytes(&message))),
        )
    };
    match endpoint_type {
        ENDPOINT_BROKER => None,
        ENDPOINT_CONTROLLER => refuse(
            MISMATCHED_ENDPOINT_TYPE,
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER".into(),
        ),
        other => refuse(
            UNSUPPORTED_ENDPOINT_TYPE,
            format!("Unsupported endpoint type {other}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_types_as_kafka() {
        assert!(check_endpoint_type(1, 1).is_none());
        assert!(check_endpoint_type(1, 0).is_none());
        let controllers = check_endpoint_type(2, 1).expect("refused");
        assert_eq!(controllers.error_code, 114);
        assert_eq!(controllers.controller_id.0, -1);
        assert_eq!(check_endpoint_type(123, 1).map(|r| r.error_code), Some(115));
        assert_eq!(
            check_endpoint_type(123, 1).and_then(|r| r.error_message.map(|m| m.to_string())),
            Some("Unsupported endpoint type 123".to_string())
        );
        assert_eq!(check_endpoint_type(2, 0).map(|r| r.error_code), Some(42));
        assert_eq!(check_endpoint_type(0, 1).map(|r| r.error_code), Some(115));
    }
}
