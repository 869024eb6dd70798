//! UpdateFeatures (API 57), KIP-584: ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED);
//! each entry is checked by `runnel_metadata::features::check_update` (`transaction.version`
//! may change, a downgrade only with upgrade type SAFE/UNSAFE_DOWNGRADE or v0's
//! `allowDowngrade`; the other levels are fixed, so only the current level is accepted, as a
//! no-op). When every entry passes, the changes go to the controller as one
//! `UpdateFeatureLevels` (all or nothing, as Kafka's `FeatureControlManager`); v1+
//! `validate_only` changes nothing. From v2 on a failed entry is also the top-level error, as
//! Kafka 4.x.

use std::sync::Arc;

use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};
use runnel_metadata::acl::{AclOperation, ResourceType, CLUSTER_NAME};
use runnel_metadata::controller::UpdateFeatureLevels;
use runnel_metadata::features;

use super::str_bytes;
use crate::context::{Broker, RequestContext};
use crate::errors::{code, KafkaError};

/// Kafka's `FeatureUpdate.UpgradeType` codes that allow a lower level.
const SAFE_DOWNGRADE: i8 = 2;
const UNSAFE_DOWNGRADE: i8 = 3;

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
    let mut changes = std::collections::BTreeMap::new();
    let downgrade = |u: &FeatureUpdateKey| {
        if version == 0 {
            u.allow_downgrade
        } else {
            u.upgrade_type == SAFE_DOWNGRADE || u.upgrade_type == UNSAFE_DOWNGRADE
        }
    };
    let any_downgrade = request.feature_updates.iter().any(downgrade);
    let mut results: Vec<UpdatableFeatureResult> = request
        .feature_updates
        .iter()
        .map(|u| {
            let r = UpdatableFeatureResult::default().with_feature(u.feature.clone());
            let level = u.max_version_level;
            match features::check_update(&finalized, &u.feature, level, downgrade(u)) {
                Ok(changes_level) => {
                    if changes_level {
                        changes.insert(u.feature.to_string(), level);
                    }
                    r
                }
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
    if first_error.is_none() && !changes.is_empty() && !request.validate_only {
        let op = UpdateFeatureLevels {
            levels: changes,
            downgrade: any_downgrade,
        };
        first_error = record(broker, op, &mut results).await;
    }
    let mut response = UpdateFeaturesResponse::default().with_results(results);
    if version >= 2 {
        if let Some(e) = first_error {
            response.error_code = e.code;
            response.error_message = Some(str_bytes(&e.message));
        }
    }
    response
}

/// Has the controller record the changes; on failure every entry carries its error.
async fn record(
    broker: &Arc<Broker>,
    op: UpdateFeatureLevels,
    results: &mut [UpdatableFeatureResult],
) -> Option<KafkaError> {
    let e = broker.controller.run(op).await.err()?;
    for r in results.iter_mut() {
        r.error_code = e.code;
        r.error_message = Some(str_bytes(&e.message));
    }
    Some(e)
}
