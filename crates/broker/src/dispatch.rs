//! Decodes a request frame, routes it to its handler (the table, by API family, is
//! `dispatch/routes.rs`) and encodes the response frame.
//!
//! The version table here is the single source of truth: ApiVersions advertises exactly it, and
//! a request outside it closes the connection (ApiVersions itself gets Kafka's v0 fallback).

use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::context::{Broker, RequestContext};
use crate::handlers;
use crate::principal::ConnectionIdentity;

mod routes;
use routes::call_api;

/// Why a connection is being closed.
#[derive(Debug)]
pub struct DispatchError(pub String);

/// (api key, min version, max version) this broker implements (spec K.3).
pub const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 13),
    (ApiKey::Fetch, 4, 18),
    (ApiKey::ListOffsets, 1, 10),
    (ApiKey::Metadata, 0, 13),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::AlterUserScramCredentials, 0, 0),
    (ApiKey::DescribeClientQuotas, 0, 1),
    (ApiKey::AlterClientQuotas, 0, 1),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::InitProducerId, 0, 6),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DescribeCluster, 0, 2),
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::OffsetCommit, 2, 10),
    (ApiKey::OffsetFetch, 1, 10),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DescribeGroups, 0, 6),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::DescribeQuorum, 0, 2),
    (ApiKey::ElectLeaders, 0, 2),
    (ApiKey::AlterPartitionReassignments, 0, 1),
    (ApiKey::ListPartitionReassignments, 0, 0),
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
    (ApiKey::DescribeTopicPartitions, 0, 0),
    (ApiKey::DescribeLogDirs, 1, 4),
    (ApiKey::AlterReplicaLogDirs, 1, 2),
    (ApiKey::AddPartitionsToTxn, 0, 5),
    (ApiKey::AddOffsetsToTxn, 0, 4),
    (ApiKey::TxnOffsetCommit, 0, 5),
    (ApiKey::EndTxn, 0, 5),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::DescribeProducers, 0, 0),
    (ApiKey::ListTransactions, 0, 2),
    // v1 only: kafka-protocol (like Kafka 4.0, KIP-896) has no v0 of WriteTxnMarkers.
    (ApiKey::WriteTxnMarkers, 1, 1),
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
    (ApiKey::UpdateFeatures, 0, 2),
    (ApiKey::GetTelemetrySubscriptions, 0, 0),
    (ApiKey::PushTelemetry, 0, 0),
    (ApiKey::ListConfigResources, 0, 1),
];

pub fn supported_range(key: ApiKey) -> Option<(i16, i16)> {
    SUPPORTED
        .iter()
        .find(|(k, _, _)| *k == key)
        .map(|&(_, lo, hi)| (lo, hi))
}

/// Encodes a response frame: size, header (version per API), body.
pub fn encode_response<R: Encodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &R,
) -> Result<Bytes, DispatchError> {
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    header
        .encode(&mut buf, key.response_header_version(version))
        .and_then(|()| body.encode(&mut buf, version))
        .map_err(|e| DispatchError(format!("cannot encode {key:?} v{version} response: {e}")))?;
    let size = frame_size(buf.len() - 4, &format_args!("{key:?} v{version}"))?;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}

/// A response's size prefix: a frame over `i32::MAX` bytes cannot be sent (the connection is
/// closed instead of sending a wrapped size).
fn frame_size(len: usize, what: &dyn std::fmt::Display) -> Result<i32, DispatchError> {
    i32::try_from(len).map_err(|_| {
        DispatchError(format!(
            "{what} response of {len} bytes exceeds the protocol's frame size"
        ))
    })
}

fn decode<T: Decodable>(buf: &mut Bytes, key: ApiKey, version: i16) -> Result<T, DispatchError> {
    T::decode(buf, version)
        .map_err(|e| DispatchError(format!("malformed {key:?} v{version} request: {e}")))
}

/// The response to a frame still being worked out: a Produce whose appends are done and whose
/// answer waits for their replication (it owns what it needs, so the connection can read its
/// next request meanwhile).
pub type Waiting = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Option<Bytes>, DispatchError>> + Send>,
>;

/// What handling a frame gave.
pub enum Dispatched {
    /// The response (`None`: Produce with acks=0) and the client-quota throttle it earned.
    Done(Option<Bytes>, Option<crate::quota::Throttle>),
    /// A Produce, appended, whose response waits for its replication; it earned no throttle
    /// (only requests of clients without a quota get here).
    Waiting(Waiting),
}

/// Handles one frame. `Ok(None)`: no response (Produce with acks=0).
pub async fn dispatch(
    broker: &Arc<Broker>,
    frame: Bytes,
    identity: &ConnectionIdentity,
) -> Result<Option<Bytes>, DispatchError> {
    dispatch_throttled(broker, frame, identity)
        .await
        .map(|(response, _)| response)
}

/// [`dispatch`], with the client-quota throttle the request earned (the server mutes the
/// connection for it, `crate::quota`).
pub async fn dispatch_throttled(
    broker: &Arc<Broker>,
    frame: Bytes,
    identity: &ConnectionIdentity,
) -> Result<(Option<Bytes>, Option<crate::quota::Throttle>), DispatchError> {
    match route(broker, frame, identity, false).await? {
        Dispatched::Done(response, throttle) => Ok((response, throttle)),
        Dispatched::Waiting(waiting) => Ok((waiting.await?, None)),
    }
}

/// [`dispatch_throttled`], except that a Produce of a client without a quota comes back as
/// soon as its records are appended, its response still [`Dispatched::Waiting`] for their
/// replication (`crate::server::pipeline`).
pub async fn dispatch_pipelined(
    broker: &Arc<Broker>,
    frame: Bytes,
    identity: &ConnectionIdentity,
) -> Result<Dispatched, DispatchError> {
    route(broker, frame, identity, true).await
}

async fn route(
    broker: &Arc<Broker>,
    frame: Bytes,
    identity: &ConnectionIdentity,
    pipeline: bool,
) -> Result<Dispatched, DispatchError> {
    let mut throttle = None;
    let response = match route_call(broker, frame, identity, &mut throttle, pipeline).await? {
        Routed::Response(response) => response,
        Routed::Waiting(waiting) => return Ok(Dispatched::Waiting(waiting)),
    };
    Ok(Dispatched::Done(response, throttle))
}

/// A routed request: its response, or a Produce's that waits for replication.
enum Routed {
    Response(Option<Bytes>),
    Waiting(Waiting),
}

impl From<Option<Bytes>> for Routed {
    fn from(response: Option<Bytes>) -> Routed {
        Routed::Response(response)
    }
}

async fn route_call(
    broker: &Arc<Broker>,
    frame: Bytes,
    identity: &ConnectionIdentity,
    throttle: &mut Option<crate::quota::Throttle>,
    pipeline: bool,
) -> Result<Routed, DispatchError> {
    if frame.len() < 8 {
        return Err(DispatchError(format!(
            "frame of {} bytes is too short for a request header",
            frame.len()
        )));
    }
    let mut peek = &frame[..8];
    let raw_key = peek.get_i16();
    let version = peek.get_i16();
    let correlation_id = peek.get_i32();
    if raw_key == handlers::runnel_describe::API_KEY {
        return runnel_describe(broker, frame, correlation_id, identity)
            .await
            .map(|r| Some(r).into());
    }
    let key = ApiKey::try_from(raw_key)
        .map_err(|_| DispatchError(format!("unknown api key {raw_key}")))?;
    let Some((lo, hi)) = supported_range(key) else {
        return Err(DispatchError(format!("unsupported api {key:?}")));
    };
    if version < lo || version > hi {
        if key == ApiKey::ApiVersions {
            return handlers::api_versions::unsupported_version(correlation_id)
                .map(|r| Some(r).into());
        }
        return Err(DispatchError(format!(
            "unsupported {key:?} version {version} (supported {lo}..={hi})"
        )));
    }
    let mut buf = frame;
    let header: RequestHeader = decode(&mut buf, key, key.request_header_version(version))?;
    let client_id = header
        .client_id
        .as_ref()
        .map(|s| s.to_string())
        .unwrap_or_default();
    tracing::trace!(?key, version, correlation_id, %client_id, "request");
    let ctx = RequestContext {
        client_id,
        peer: identity.peer,
        listener: identity.listener.clone(),
        principal: identity.principal.clone(),
    };
    let call = Call {
        broker,
        key,
        raw_key,
        version,
        correlation_id,
        ctx,
        throttle,
    };
    if key == ApiKey::Produce {
        return produce(call, buf, pipeline).await;
    }
    call_api(call, buf).await.map(Routed::from)
}

/// A request whose header was read and whose version is supported.
struct Call<'a> {
    broker: &'a Arc<Broker>,
    key: ApiKey,
    raw_key: i16,
    version: i16,
    correlation_id: i32,
    ctx: RequestContext,
    /// Where the client-quota throttle the request earned goes (`crate::quota`).
    throttle: &'a mut Option<crate::quota::Throttle>,
}

impl Call<'_> {
    fn respond<T: Encodable>(&self, response: &T) -> Result<Option<Bytes>, DispatchError> {
        encode_response(self.key, self.version, self.correlation_id, response).map(Some)
    }
}

/// Produce: throttled by the larger of the byte-rate and the request-time throttle (Kafka);
/// acks=0 gets no response. With `pipeline`, and no client quota that could throttle it (a
/// throttle mutes the connection, which a waiting response cannot do: those go the whole way
/// here), the answer comes back [`Routed::Waiting`] once the records are appended.
async fn produce(call: Call<'_>, mut buf: Bytes, pipeline: bool) -> Result<Routed, DispatchError> {
    let (broker, version, ctx) = (call.broker, call.version, &call.ctx);
    let request_bytes = buf.len();
    let request: ProduceRequest = decode(&mut buf, call.key, version)?;
    let acks = request.acks;
    if pipeline && broker.image().client_quotas.is_empty() {
        let pending = handlers::produce::append_all(broker, request, version, ctx).await;
        let (key, correlation_id) = (call.key, call.correlation_id);
        return Ok(Routed::Waiting(Box::pin(async move {
            let response = pending.complete().await;
            if acks == 0 {
                return Ok(None);
            }
            encode_response(key, version, correlation_id, &response).map(Some)
        })));
    }
    let (mut response, busy) =
        crate::quota::timed(handlers::produce::handle(broker, request, version, ctx)).await;
    let throttle_ms = crate::quota::produce_throttle(broker, ctx, request_bytes)
        .max(crate::quota::request_throttle(broker, ctx, busy));
    // KIP-219: Produce v6+ clients throttle themselves.
    *call.throttle = crate::quota::throttle_for(throttle_ms, version >= 6);
    if acks == 0 {
        return Ok(Routed::Response(None));
    }
    response.throttle_time_ms = response.throttle_time_ms.max(throttle_ms);
    call.respond(&response).map(Routed::from)
}

/// Fetch: consumers are throttled by bytes and request time; followers are exempt from both
/// quotas (Kafka: ClusterAction).
async fn fetch(call: Call<'_>, mut buf: Bytes) -> Result<Option<Bytes>, DispatchError> {
    let (broker, version, ctx) = (call.broker, call.version, &call.ctx);
    let request: FetchRequest = decode(&mut buf, call.key, version)?;
    let follower = request.replica_id.0 >= 0 || request.replica_state.replica_id.0 >= 0;
    let (mut response, busy) =
        crate::quota::timed(handlers::fetch::handle(broker, request, version, ctx)).await;
    if !follower {
        let request_ms = crate::quota::request_throttle(broker, ctx, busy);
        let throttle_ms =
            crate::quota::fetch_throttle(broker, ctx, &mut response, version, request_ms);
        // KIP-219: Fetch v8+ clients throttle themselves.
        *call.throttle = crate::quota::throttle_for(throttle_ms, version >= 8);
    }
    call.respond(&response)
}

/// Runnel's JSON request (see `handlers::runnel_describe`): header v1, JSON body; the response
/// is the correlation id followed by JSON.
async fn runnel_describe(
    broker: &Arc<Broker>,
    frame: Bytes,
    correlation_id: i32,
    identity: &ConnectionIdentity,
) -> Result<Bytes, DispatchError> {
    let mut buf = frame;
    let header: RequestHeader = decode(&mut buf, ApiKey::Produce, 1)?;
    let ctx = RequestContext {
        client_id: header.client_id.map(|s| s.to_string()).unwrap_or_default(),
        peer: identity.peer,
        listener: identity.listener.clone(),
        principal: identity.principal.clone(),
    };
    let value = if handlers::cluster_authz::may_describe_runnel(broker, &ctx) {
        handlers::runnel_describe::handle(broker, &buf).await
    } else {
        serde_json::json!({"error": {"code": crate::errors::code::CLUSTER_AUTHORIZATION_FAILED, "message": "Cluster authorization failed."}})
    };
    let json = serde_json::to_vec(&value)
        .map_err(|e| DispatchError(format!("cannot encode JSON: {e}")))?;
    let mut out = BytesMut::with_capacity(8 + json.len());
    out.put_i32(frame_size(4 + json.len(), &"RunnelDescribeMetadata")?);
    out.put_i32(correlation_id);
    out.extend_from_slice(&json);
    Ok(out.freeze())
}

#[cfg(test)]
#[path = "dispatch_tests.rs"]
mod tests;
