//! ApiVersions (API 18): advertises exactly the versions in the dispatch table.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};

use crate::context::Broker;
use crate::dispatch::{encode_response, DispatchError, SUPPORTED};
use crate::errors::code;

fn api_keys() -> Vec<ApiVersion> {
    SUPPORTED
        .iter()
        .map(|&(key, lo, hi)| {
            ApiVersion::default()
                .with_api_key(key as i16)
                .with_min_version(lo)
                .with_max_version(hi)
        })
        .collect()
}

/// Kafka's rule for client software name/version (KIP-511).
fn valid_software_field(s: &str) -> bool {
    let bytes = s.as_bytes();
    let inner_ok = |b: &u8| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'.';
    !bytes.is_empty()
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes.iter().all(inner_ok)
}

pub async fn handle(
    broker: &Arc<Broker>,
    request: ApiVersionsRequest,
    version: i16,
) -> ApiVersionsResponse {
    let mut error_code = code::NONE;
    if version >= 3
        && !(valid_software_field(request.client_software_name.as_str())
            && valid_software_field(request.client_software_version.as_str()))
    {
        error_code = code::INVALID_REQUEST;
    }
    let response = ApiVersionsResponse::default()
        .with_error_code(error_code)
        .with_api_keys(api_keys());
    if version < 3 {
        return response;
    }
    with_features(response, &broker.image(), version)
}

/// v3+: the supported feature ranges and the finalized levels (KIP-584, `runnel_metadata::features`).
fn with_features(
    response: ApiVersionsResponse,
    image: &runnel_metadata::image::MetadataImage,
    version: i16,
) -> ApiVersionsResponse {
    use runnel_metadata::features;
    let supported = features::supported_for(version)
        .map(|f| {
            SupportedFeatureKey::default()
                .with_name(super::str_bytes(f.name))
                .with_min_version(f.min)
                .with_max_version(f.max)
        })
        .collect();
    let finalized = features::finalized(&image.features)
        .into_iter()
        .map(|(name, level)| {
            FinalizedFeatureKey::default()
                .with_name(super::str_bytes(&name))
                .with_min_version_level(level)
                .with_max_version_level(level)
        })
        .collect();
    response
        .with_supported_features(supported)
        .with_finalized_features_epoch(image.offset.max(0))
        .with_finalized_features(finalized)
}

/// The answer to an ApiVersions version we do not support: the v0 layout with
/// UNSUPPORTED_VERSION and our ranges, so the client can retry with one we do (spec K.2).
pub fn unsupported_version(correlation_id: i32) -> Result<Bytes, DispatchError> {
    let body = ApiVersionsResponse::default()
        .with_error_code(code::UNSUPPORTED_VERSION)
        .with_api_keys(api_keys());
    encode_response(ApiKey::ApiVersions, 0, correlation_id, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn software_fields_follow_kip_511() {
        assert!(valid_software_field("librdkafka"));
        assert!(valid_software_field("2.0.2"));
        assert!(valid_software_field("a-b.c"));
        assert!(!valid_software_field(""));
        assert!(!valid_software_field("-a"));
        assert!(!valid_software_field("a b"));
        assert!(!valid_software_field("a."));
    }
}
