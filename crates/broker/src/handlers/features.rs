//! UpdateFeatures (API 57), KIP-584: ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED);
//! each entry is checked by `runnel_metadata::features::check_update` (the finalized levels are
//! fixed, so only the current level is accepted, as a no-op). v1+ `validate_only` changes
//! nothing either way. From v2 on a failed entry is also the top-level error, as Kafka 4.x.

use std::sync::Arc;

use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};
use runnel_metadata::acl::{AclOperation, ResourceType, CLUSTER_NAME};
use runnel_metadata::features;

use super::str_bytes;
use crate::context::{Broker, RequestContext};
use crate::errors::{code, KafkaError};

pub async fn update_features(
    broker: &Arc<Broker>,
    request: UpdateFeaturesRequest,
    version: i16,
    ctx: &RequestContext,
) -> UpdateFeaturesResponse {
    if !broker.authorized(
        ctx,
        AclOperation::Alter,
        ResourceType::Cluster,
        CLUSTER_NAME,
    ) {
        return UpdateFeaturesResponse::default()
            .with_error_code(code::CLUSTER_AUTHORIZATION_FAILED)
            .with_error_message(Some(str_bytes("Cluster authorization failed.")));
    }
    let finalized = features::finalized(&broker.image().features);
    let mut first_error: Option<KafkaError> = None;
    let results = request
        .feature_updates
        .iter()
        .map(|u| {
            let r = UpdatableFeatureResult::default().with_feature(u.feature.clone());
            match features::check_update(&finalized, &u.feature, u.max_version_level) {
                Ok(()) => r,
                Err(e) => {
                    let r = r
                        .with_error_code(e.code)
                        .with_error_message(Some(str_bytes(&e.message)));
                    first_error.get_or_insert(e);
                    r
                }
            }
        })
        .collect();
    let mut response = UpdateFeaturesResponse::default().with_results(results);
    if version >= 2 {
        if let Some(e) = first_error {
            response.error_code = e.code;
            response.error_message = Some(str_bytes(&e.message));
        }
    }
    response
}
