//! UpdateFeatures at the controller (Kafka's `FeatureControlManager.updateFeatures`): the new
//! finalized levels as `FeatureLevel` records. The broker that received the request checks
//! each entry first (`features::check_update`, with Kafka's messages); the decision checks
//! again against the image it decides on, so two racing updates cannot record a level the
//! rules refuse.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::op::{bad_field, ControllerOp, ControllerResult, OpContext};
use crate::errors::ApiError;
use crate::features;
use crate::image::MetadataImage;
use crate::records::MetadataRecord;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateFeatureLevels {
    /// Feature name -> new level.
    pub levels: BTreeMap<String, i16>,
    /// The request allows downgrades (upgrade type SAFE/UNSAFE_DOWNGRADE).
    pub downgrade: bool,
}

impl ControllerOp for UpdateFeatureLevels {
    const NAME: &'static str = "UpdateFeatureLevels";
    type Response = ();

    fn validate(&self) -> Result<(), ApiError> {
        if self.levels.len() > features::SUPPORTED.len() {
            return Err(bad_field("levels", "more features than exist"));
        }
        Ok(())
    }

    fn decide(&self, ctx: &mut OpContext<'_>) -> Result<ControllerResult<()>, ApiError> {
        update(ctx.image, self)
    }
}

/// The decision: a record per level that changes, or the first entry's refusal.
pub fn update(
    image: &MetadataImage,
    op: &UpdateFeatureLevels,
) -> Result<ControllerResult<()>, ApiError> {
    let finalized = features::finalized(&image.features);
    let mut records = Vec::new();
    for (name, &level) in &op.levels {
        if features::check_update(&finalized, name, level, op.downgrade)? {
            records.push(MetadataRecord::FeatureLevel {
                name: name.clone(),
                level,
            });
        }
    }
    Ok(ControllerResult::new(records, ()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(level: i16, downgrade: bool) -> UpdateFeatureLevels {
        UpdateFeatureLevels {
            levels: [("transaction.version".to_string(), level)]
                .into_iter()
                .collect(),
            downgrade,
        }
    }

    #[test]
    fn a_change_is_recorded_and_a_refused_one_records_nothing() {
        let image = MetadataImage::empty("c".into());
        let down = update(&image, &op(0, true)).unwrap();
        assert_eq!(
            down.records,
            vec![MetadataRecord::FeatureLevel {
                name: "transaction.version".into(),
                level: 0
            }]
        );
        let image = image.apply(&[(0, down.records[0].clone())]).unwrap();
        assert_eq!(features::transaction_version(&image.features), 0);
        assert_eq!(update(&image, &op(0, false)).unwrap().records, vec![]);
        assert_eq!(update(&image, &op(2, false)).unwrap().records.len(), 1);
        let refused = update(&image, &op(3, false)).unwrap_err();
        assert_eq!(refused.code, features::INVALID_UPDATE_VERSION);
        let mut fixed = op(20, true);
        fixed.levels = [("metadata.version".to_string(), 20)].into_iter().collect();
        assert!(update(&image, &fixed).is_err());
    }
}
