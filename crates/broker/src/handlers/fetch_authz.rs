//! Fetch's authorization, as Kafka's `handleFetchRequest`: a follower fetch (replica id >= 0)
//! needs CLUSTER_ACTION on the cluster, a consumer READ on each topic; every partition of a
//! refused topic is answered TOPIC_AUTHORIZATION_FAILED and never read. A filter step before
//! the fetch proper: refused topics leave the request and join the response afterwards.

use kafka_protocol::messages::fetch_request::FetchTopic;
use kafka_protocol::messages::fetch_response::FetchableTopicResponse;
use kafka_protocol::messages::{FetchRequest, FetchResponse};
use runnel_metadata::acl::AclOperation;

use super::fetch::partition_error;
use crate::context::{Broker, RequestContext};
use crate::errors::code;

/// Removes the topics the requester may not fetch from the request and returns them.
pub fn take_refused(
    broker: &Broker,
    ctx: &RequestContext,
    request: &mut FetchRequest,
    version: i16,
) -> Vec<FetchTopic> {
    let replica_id = if version >= 15 {
        request.replica_state.replica_id.0
    } else {
        request.replica_id.0
    };
    if replica_id >= 0 {
        if broker.authorized_cluster(ctx, AclOperation::ClusterAction) {
            return Vec::new();
        }
        return std::mem::take(&mut request.topics);
    }
    if broker.authorizer.is_none() {
        return Vec::new();
    }
    let image = broker.image();
    let (allowed, refused) = std::mem::take(&mut request.topics)
        .into_iter()
        .partition(|t| {
            let name = if version >= 13 {
                // An unknown id stays in the request, to be answered UNKNOWN_TOPIC_ID.
                match image.topic_by_id(&t.topic_id) {
                    Some(topic) => topic.name.clone(),
                    None => return true,
                }
            } else {
                t.topic.0.to_string()
            };
            broker.authorized_topic(ctx, AclOperation::Read, &name)
        });
    request.topics = allowed;
    refused
}

/// Adds the refused topics to the response, every partition TOPIC_AUTHORIZATION_FAILED.
pub fn answer_refused(
    mut response: FetchResponse,
    refused: Vec<FetchTopic>,
    version: i16,
) -> FetchResponse {
    for t in refused {
        let partitions = t
            .partitions
            .iter()
            .map(|p| partition_error(p.partition, code::TOPIC_AUTHORIZATION_FAILED))
            .collect();
        let mut out = FetchableTopicResponse::default().with_partitions(partitions);
        if version >= 13 {
            out.topic_id = t.topic_id;
        } else {
            out.topic = t.topic;
        }
        response.responses.push(out);
    }
    response
}
