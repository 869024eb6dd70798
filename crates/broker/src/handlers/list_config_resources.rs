//! ListConfigResources (API 74, KIP-1142; v0 was ListClientMetricsResources): DESCRIBE_CONFIGS
//! on the cluster (CLUSTER_AUTHORIZATION_FAILED). v0 lists client-metrics resources only, of
//! which Runnel has none. v1 lists the resources of the requested types (all of topic 2,
//! broker 4, broker logger 8, client metrics 16 and group 32 when the list is empty): every
//! topic, every registered broker (as its id) for broker and broker-logger, and each group
//! with config overrides. Another type is INVALID_REQUEST.

use std::sync::Arc;

use kafka_protocol::messages::list_config_resources_response::ConfigResource;
use kafka_protocol::messages::{ListConfigResourcesRequest, ListConfigResourcesResponse};
use runnel_metadata::acl::{AclOperation, ResourceType, CLUSTER_NAME};

use super::str_bytes;
use crate::context::{Broker, RequestContext};
use crate::errors::code;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const BROKER_LOGGER: i8 = 8;
const CLIENT_METRICS: i8 = 16;
const GROUP: i8 = 32;
const ALL: [i8; 5] = [TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP];

pub async fn handle(
    broker: &Arc<Broker>,
    request: ListConfigResourcesRequest,
    version: i16,
    ctx: &RequestContext,
) -> ListConfigResourcesResponse {
    if !broker.authorized(
        ctx,
        AclOperation::DescribeConfigs,
        ResourceType::Cluster,
        CLUSTER_NAME,
    ) {
        return ListConfigResourcesResponse::default()
            .with_error_code(code::CLUSTER_AUTHORIZATION_FAILED);
    }
    let types: Vec<i8> = if version == 0 {
        vec![CLIENT_METRICS]
    } else if request.resource_types.is_empty() {
        ALL.to_vec()
    } else {
        request.resource_types.clone()
    };
    if types.iter().any(|t| !ALL.contains(t)) {
        return ListConfigResourcesResponse::default().with_error_code(code::INVALID_REQUEST);
    }
    let image = broker.image();
    let mut out = Vec::new();
    let mut add = |name: &str, kind: i8| {
        let r = ConfigResource::default().with_resource_name(str_bytes(name));
        // v0 entries carry no type (client metrics implied).
        out.push(if version >= 1 {
            r.with_resource_type(kind)
        } else {
            r
        });
    };
    for &t in &types {
        match t {
            TOPIC => image.topics.keys().for_each(|n| add(n, TOPIC)),
            BROKER | BROKER_LOGGER => image.brokers.keys().for_each(|id| add(&id.to_string(), t)),
            GROUP => image
                .configs
                .iter()
                .filter_map(|(r, c)| match r {
                    runnel_metadata::records::ConfigResource::Group(g) if !c.is_empty() => Some(g),
                    _ => None,
                })
                .for_each(|g| add(g, GROUP)),
            _ => {}
        }
    }
    ListConfigResourcesResponse::default().with_config_resources(out)
}
