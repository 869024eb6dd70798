//! Cluster features (KIP-584): the ranges this broker supports and the levels the cluster has
//! finalized, as ApiVersions (v3+), DescribeFeatures (`runnel features describe`) and
//! UpdateFeatures report them.
//!
//! Runnel implements no Kafka metadata record format, so `metadata.version` names the Kafka
//! release whose client-visible behaviour it follows (4.0-IV3, level 25). `group.version` 1 is
//! the KIP-848 consumer protocol (ConsumerGroupHeartbeat); `kraft.version` 0 is a static voter
//! set; `transaction.version` 0 means clients must not use KIP-890 part 2 (Produce v12 with an
//! implicit AddPartitionsToTxn, EndTxn v5's epoch bump), which Runnel does not implement.
//! Finalized levels are fixed: UpdateFeatures accepts only the level already finalized.

use std::collections::BTreeMap;

/// A feature this broker supports: name, lowest and highest level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SupportedFeature {
    pub name: &'static str,
    pub min: i16,
    pub max: i16,
}

/// Sorted by name.
pub const SUPPORTED: &[SupportedFeature] = &[
    SupportedFeature {
        name: "group.version",
        min: 0,
        max: 1,
    },
    SupportedFeature {
        name: "kraft.version",
        min: 0,
        max: 0,
    },
    SupportedFeature {
        name: "metadata.version",
        min: 7,
        max: 25,
    },
    SupportedFeature {
        name: "transaction.version",
        min: 0,
        max: 0,
    },
];

/// The levels a new cluster is finalized at (name -> level).
pub const DEFAULT_FINALIZED: &[(&str, i16)] = &[("group.version", 1), ("metadata.version", 25)];

/// The features to advertise in an ApiVersions response of `api_version`: before v4 a feature
/// whose minimum is 0 is left out (older clients cannot parse it, KAFKA-17492).
pub fn supported_for(api_version: i16) -> impl Iterator<Item = &'static SupportedFeature> {
    SUPPORTED
        .iter()
        .filter(move |f| api_version >= 4 || f.min != 0)
}

/// The finalized levels: the defaults, overridden by FeatureLevel records (`recorded`). Level
/// 0 means disabled and is not listed, as Kafka omits it.
pub fn finalized(recorded: &BTreeMap<String, i16>) -> BTreeMap<String, i16> {
    let mut out: BTreeMap<String, i16> = DEFAULT_FINALIZED
        .iter()
        .map(|&(n, l)| (n.to_string(), l))
        .collect();
    for (n, &l) in recorded {
        out.insert(n.clone(), l);
    }
    out.retain(|_, l| *l != 0);
    out
}

/// Kafka's INVALID_UPDATE_VERSION.
pub const INVALID_UPDATE_VERSION: i16 = 95;

/// Checks one UpdateFeatures entry against the finalized levels: the level already finalized
/// (or 0 for one that is not) is accepted as a no-op; any other change is refused with
/// INVALID_UPDATE_VERSION and Kafka's reason (unknown feature, out of range, or not changeable
/// on Runnel).
pub fn check_update(
    finalized: &BTreeMap<String, i16>,
    feature: &str,
    level: i16,
) -> Result<(), (i16, String)> {
    let Some(supported) = SUPPORTED.iter().find(|f| f.name == feature) else {
        return Err((
            INVALID_UPDATE_VERSION,
            format!("Invalid update version {level} for feature {feature}. The broker does not support this feature."),
        ));
    };
    let current = finalized.get(feature).copied().unwrap_or(0);
    if level == current {
        return Ok(());
    }
    let in_range =
        level == 0 && supported.min == 0 || (supported.min..=supported.max).contains(&level);
    let why = if !in_range {
        format!(
            "Invalid update version {level} for feature {feature}. Broker supports versions {}-{}.",
            supported.min, supported.max
        )
    } else {
        format!(
            "Invalid update version {level} for feature {feature}: its level is fixed at {current} on this cluster."
        )
    };
    Err((INVALID_UPDATE_VERSION, why))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supported_is_sorted_and_defaults_are_in_range() {
        assert!(SUPPORTED.windows(2).all(|w| w[0].name < w[1].name));
        for (n, l) in DEFAULT_FINALIZED {
            let f = SUPPORTED.iter().find(|f| f.name == *n).unwrap();
            assert!((f.min..=f.max).contains(l), "{n}");
        }
    }

    #[test]
    fn features_with_minimum_zero_are_hidden_before_api_versions_v4() {
        let v3: Vec<&str> = supported_for(3).map(|f| f.name).collect();
        assert_eq!(v3, vec!["metadata.version"]);
        assert_eq!(supported_for(4).count(), SUPPORTED.len());
    }

    #[test]
    fn finalized_levels_drop_zero_and_take_records() {
        let mut recorded = BTreeMap::new();
        assert_eq!(finalized(&recorded).get("group.version"), Some(&1));
        recorded.insert("group.version".to_string(), 0);
        assert_eq!(finalized(&recorded).get("group.version"), None);
        assert_eq!(finalized(&recorded).get("metadata.version"), Some(&25));
    }

    #[test]
    fn updates_other_than_the_current_level_are_invalid() {
        let f = finalized(&BTreeMap::new());
        assert_eq!(check_update(&f, "metadata.version", 25), Ok(()));
        assert_eq!(check_update(&f, "transaction.version", 0), Ok(()));
        let (code, why) = check_update(&f, "transaction.version", 2).unwrap_err();
        assert_eq!(code, INVALID_UPDATE_VERSION);
        assert!(why.contains("supports versions 0-0"), "{why}");
        let (_, why) = check_update(&f, "metadata.version", 20).unwrap_err();
        assert!(why.contains("fixed at 25"), "{why}");
        let (_, why) = check_update(&f, "no.such.feature", 1).unwrap_err();
        assert!(why.contains("does not support"), "{why}");
    }
}
