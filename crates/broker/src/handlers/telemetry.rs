//! Client telemetry (KIP-714): GetTelemetrySubscriptions (API 71) and PushTelemetry (API 72),
//! answered as a broker with no client metrics subscribed: the client gets an instance id (a
//! new one when it sent the zero id), subscription id 0 and no requested metrics, so a
//! KIP-714 client (Java 3.7+, librdkafka 2.5+) pushes nothing. A push anyway is accepted and
//! dropped: without an instance id it is INVALID_REQUEST, one over `telemetry.max.bytes`
//! (1 MiB) TELEMETRY_TOO_LARGE (118), as Kafka's `ClientMetricsManager`.

use std::sync::Arc;

use kafka_protocol::messages::{
    GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse, PushTelemetryRequest,
    PushTelemetryResponse,
};

use crate::context::{Broker, RequestContext};
use crate::errors::code;
use crate::errors::code::TELEMETRY_TOO_LARGE;

/// Kafka's `telemetry.max.bytes` default.
const TELEMETRY_MAX_BYTES: i32 = 1 << 20;
/// Kafka's default push interval (`interval.ms` of a client metrics resource), 5 minutes.
const PUSH_INTERVAL_MS: i32 = 300_000;
/// zstd, lz4, gzip, snappy: the codecs Kafka accepts for pushes, in its order of preference.
const ACCEPTED_COMPRESSION: [i8; 4] = [4, 3, 1, 2];

pub async fn get_subscriptions(
    _broker: &Arc<Broker>,
    request: GetTelemetrySubscriptionsRequest,
    _version: i16,
    _ctx: &RequestContext,
) -> GetTelemetrySubscriptionsResponse {
    let id = if request.client_instance_id.is_nil() {
        uuid::Uuid::new_v4()
    } else {
        request.client_instance_id
    };
    GetTelemetrySubscriptionsResponse::default()
        .with_client_instance_id(id)
        .with_subscription_id(0)
        .with_accepted_compression_types(ACCEPTED_COMPRESSION.to_vec())
        .with_push_interval_ms(PUSH_INTERVAL_MS)
        .with_telemetry_max_bytes(TELEMETRY_MAX_BYTES)
        .with_delta_temporality(true)
        .with_requested_metrics(Vec::new())
}

pub async fn push(
    _broker: &Arc<Broker>,
    request: PushTelemetryRequest,
    _version: i16,
    _ctx: &RequestContext,
) -> PushTelemetryResponse {
    let error = if request.client_instance_id.is_nil() {
        code::INVALID_REQUEST
    } else if request.metrics.len() > TELEMETRY_MAX_BYTES as usize {
        TELEMETRY_TOO_LARGE
    } else {
        code::NONE
    };
    PushTelemetryResponse::default().with_error_code(error)
}
