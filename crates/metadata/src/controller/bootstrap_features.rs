//! The feature levels of a new cluster (`runnel storage format --release-version` /
//! `--feature`, kept in each formatted node's bootstrap file) recorded as `FeatureLevel`
//! records, once.
//!
//! Kafka writes its bootstrap metadata into the empty metadata log when the cluster first
//! starts. Here every formatted node asks at startup, and the controller records the levels
//! only while the cluster has recorded no feature level at all: the first node to ask decides,
//! and a restart, a node formatted with other levels, or a later start changes nothing
//! (UpdateFeatures is the only way to change a finalized level).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::op::{bad_field, ControllerOp, ControllerResult, OpContext};
use crate::errors::ApiError;
use crate::features;
use crate::image::MetadataImage;
use crate::records::MetadataRecord;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootstrapFeatures {
    /// Feature name -> level, each one Runnel supports.
    pub levels: BTreeMap<String, i16>,
}

impl ControllerOp for BootstrapFeatures {
    const NAME: &'static str = "BootstrapFeatures";
    /// Whether these levels were recorded (false: the cluster had feature levels already).
    type Response = bool;

    fn validate(&self) -> Result<(), ApiError> {
        features::check_supported_levels(&self.levels).map_err(|why| bad_field("levels", why))
    }

    fn decide(&self, ctx: &mut OpContext<'_>) -> Result<ControllerResult<bool>, ApiError> {
        Ok(bootstrap(ctx.image, &self.levels))
    }
}

/// The decision: the levels as records if the image has none recorded yet.
pub fn bootstrap(image: &MetadataImage, levels: &BTreeMap<String, i16>) -> ControllerResult<bool> {
    if !image.features.is_empty() {
        return ControllerResult::answer(false);
    }
    let records = levels
        .iter()
        .map(|(name, &level)| MetadataRecord::FeatureLevel {
            name: name.clone(),
            level,
        })
        .collect();
    ControllerResult::new(records, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_bootstrap_records_its_levels_and_later_ones_change_nothing() {
        let op = BootstrapFeatures {
            levels: [
                ("group.version".to_string(), 0),
                ("metadata.version".to_string(), 20),
            ]
            .into_iter()
            .collect(),
        };
        assert_eq!(op.validate(), Ok(()));
        let image = MetadataImage::empty("c".into());
        let first = bootstrap(&image, &op.levels);
        assert!(first.response);
        let numbered: Vec<(i64, MetadataRecord)> = first
            .records
            .into_iter()
            .enumerate()
            .map(|(i, r)| (i as i64, r))
            .collect();
        let image = image.apply(&numbered).unwrap();
        let finalized = features::finalized(&image.features);
        assert_eq!(finalized.get("metadata.version"), Some(&20));
        assert_eq!(finalized.get("group.version"), None);
        let again = bootstrap(&image, &op.levels);
        assert_eq!((again.response, again.records.len()), (false, 0));
    }

    #[test]
    fn levels_out_of_range_are_invalid_requests() {
        for (name, level) in [
            ("metadata.version", 26),
            ("no.such", 1),
            ("group.version", -1),
        ] {
            let op = BootstrapFeatures {
                levels: [(name.to_string(), level)].into_iter().collect(),
            };
            assert!(op.validate().is_err(), "{name}={level}");
        }
    }
}
