//! Cluster features (KIP-584): the ranges this broker supports and the levels the cluster has
//! finalized, as ApiVersions (v3+), DescribeFeatures (`runnel features describe`) and
//! UpdateFeatures report them.
//!
//! Runnel implements no Kafka metadata record format, so `metadata.version` names the Kafka
//! release whose client-visible behaviour it follows (4.0-IV3, level 25). `group.version` 1 is
//! the KIP-848 consumer protocol (ConsumerGroupHeartbeat); `kraft.version` 0 is a static voter
//! set. `transaction.version` (Kafka's `TransactionVersion`) is 0-2: 1 writes the flexible
//! `__transaction_state` value (v1), 2 is KIP-890 part 2, which a Kafka 4 client reads from
//! ApiVersions (`TransactionManager.isTransactionV2Enabled`) to stop sending
//! AddPartitionsToTxn / AddOffsetsToTxn (Produce v12 and TxnOffsetCommit v5 add the partition
//! implicitly) and to send EndTxn v5, whose epoch bump fences a zombie's late writes. A new
//! cluster is finalized at 2 (Kafka 4.0's default for metadata.version 4.0-IV2 and later);
//! what the coordinator does for a request follows the request's version, as Kafka's, and the
//! level picks the log format and the version of the coordinator's own aborts.
//! `transaction.version` is the one level UpdateFeatures changes (`runnel features upgrade /
//! downgrade`, recorded by the controller: [`CHANGEABLE`]); the others are fixed, so only the
//! level already finalized is accepted for them. A new cluster's levels can be chosen at
//! format time (`runnel storage format --release-version / --feature`, [`bootstrap_levels`]);
//! an existing cluster keeps the levels it recorded. group.version is reported, but Runnel's
//! behaviour does not depend on it (a cluster finalized at 0 still serves
//! ConsumerGroupHeartbeat).

pub use crate::errors::codes::INVALID_UPDATE_VERSION;
use std::collections::BTreeMap;

use crate::errors::ApiError;

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
        max: 2,
    },
];

/// The levels a new cluster is finalized at (name -> level).
pub const DEFAULT_FINALIZED: &[(&str, i16)] = &[
    ("group.version", 1),
    ("metadata.version", DEFAULT_METADATA_VERSION),
    ("transaction.version", 2),
];

/// The features whose finalized level UpdateFeatures may change.
pub const CHANGEABLE: &[&str] = &[TRANSACTION_VERSION];

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

/// The finalized `transaction.version` (0 when not finalized): 2 is KIP-890 part 2, which a
/// Kafka 4 client uses when it reads it from ApiVersions.
pub fn transaction_version(recorded: &BTreeMap<String, i16>) -> i16 {
    finalized(recorded)
        .get(TRANSACTION_VERSION)
        .copied()
        .unwrap_or(0)
}

/// The feature of KIP-890 part 2.
pub const TRANSACTION_VERSION: &str = "transaction.version";

/// Kafka's `MetadataVersion` names of the levels 1..=25 (3.0-IV1 .. 4.0-IV3); Runnel supports
/// 7..=25 ([`SUPPORTED`]).
const METADATA_VERSION_NAMES: [&str; 25] = [
    "3.0-IV1", "3.1-IV0", "3.2-IV0", "3.3-IV0", "3.3-IV1", "3.3-IV2", "3.3-IV3", "3.4-IV0",
    "3.5-IV0", "3.5-IV1", "3.5-IV2", "3.6-IV0", "3.6-IV1", "3.6-IV2", "3.7-IV0", "3.7-IV1",
    "3.7-IV2", "3.7-IV3", "3.7-IV4", "3.8-IV0", "3.9-IV0", "4.0-IV0", "4.0-IV1", "4.0-IV2",
    "4.0-IV3",
];

/// The Kafka release name of a `metadata.version` level (`21` -> `3.9-IV0`).
pub fn metadata_version_name(level: i16) -> Option<&'static str> {
    let i = usize::try_from(level.checked_sub(1)?).ok()?;
    METADATA_VERSION_NAMES.get(i).copied()
}

/// The level of a release version as Kafka's `MetadataVersion.fromVersionString` reads it:
/// `3.7-IV2` exactly, `3.7` (or `3.7.1`) as that release's last level. Unknown: Kafka's
/// `Version <text> is not a valid version`.
pub fn metadata_version_level(text: &str) -> Result<i16, String> {
    let segments: Vec<&str> = text.split('.').collect();
    let key = if segments.len() > 2 {
        segments[..2].join(".")
    } else {
        text.to_string()
    };
    let exact = METADATA_VERSION_NAMES.iter().position(|n| *n == key);
    let release = METADATA_VERSION_NAMES
        .iter()
        .rposition(|n| n.split('-').next() == Some(key.as_str()));
    exact
        .or(release)
        .and_then(|i| i16::try_from(i + 1).ok())
        .ok_or_else(|| format!("Version {text} is not a valid version"))
}

/// The feature levels a new cluster starts at, from kafka-storage.sh format's
/// `--release-version` and `--feature name=level` (Kafka's `Formatter`
/// `calculateEffectiveFeatureLevels`): metadata.version from the release version (default the
/// newest, 4.0-IV3) or from `--feature metadata.version=N` (not both), every other supported
/// feature at the given level or at its default for that metadata.version, each checked
/// against what Runnel supports, with Kafka's messages. Returns every supported feature.
pub fn bootstrap_levels(
    release_version: Option<&str>,
    features: &[String],
) -> Result<BTreeMap<String, i16>, String> {
    let mut given = BTreeMap::new();
    for raw in features {
        let (name, level) = raw.split_once('=').ok_or_else(|| {
            format!("Can't parse feature=level string {raw}: equals sign not found.")
        })?;
        let level: i16 = level.trim().parse().map_err(|_| {
            format!(
                "Can't parse feature=level string {raw}: unable to parse {} as a short.",
                level.trim()
            )
        })?;
        given.insert(name.trim().to_string(), level);
    }
    let metadata_version =
        match (given.get(METADATA_VERSION), release_version) {
            (Some(_), Some(_)) => return Err(
                "Use --release-version instead of --feature metadata.version=X to avoid ambiguity."
                    .into(),
            ),
            (Some(&level), None) => {
                if metadata_version_name(level).is_none() {
                    return Err(format!("No MetadataVersion with feature level {level}"));
                }
                level
            }
            (None, Some(text)) => metadata_version_level(text)?,
            (None, None) => DEFAULT_METADATA_VERSION,
        };
    let mv = SUPPORTED
        .iter()
        .find(|f| f.name == METADATA_VERSION)
        .map_or((DEFAULT_METADATA_VERSION, DEFAULT_METADATA_VERSION), |f| {
            (f.min, f.max)
        });
    let mv_name = metadata_version_name(metadata_version).unwrap_or("UNKNOWN");
    if metadata_version < mv.0 {
        return Err(format!(
            "metadata.version {mv_name} is too old to be supported."
        ));
    }
    if metadata_version > mv.1 {
        return Err(format!("metadata.version {mv_name} is not yet stable."));
    }
    let others: Vec<&SupportedFeature> = SUPPORTED
        .iter()
        .filter(|f| f.name != METADATA_VERSION)
        .collect();
    for name in given.keys() {
        if name != METADATA_VERSION && !others.iter().any(|f| f.name == name) {
            let names: Vec<&str> = others.iter().map(|f| f.name).collect();
            return Err(format!(
                "Unsupported feature: {name}. Supported features are: {}",
                names.join(", ")
            ));
        }
    }
    let mut out = BTreeMap::new();
    out.insert(METADATA_VERSION.to_string(), metadata_version);
    for f in others {
        let level = given
            .get(f.name)
            .copied()
            .unwrap_or_else(|| default_level(f.name, metadata_version));
        if !(f.min..=f.max).contains(&level) {
            return Err(format!("No feature:{} with feature level {level}", f.name));
        }
        if let Some(needs) = required_metadata_version(f.name, level) {
            if metadata_version < needs {
                return Err(format!(
                    "{} could not be set to {level} because it depends on metadata.version level {needs}",
                    f.name
                ));
            }
        }
        out.insert(f.name.to_string(), level);
    }
    Ok(out)
}

const METADATA_VERSION: &str = "metadata.version";

/// The metadata.version a new cluster starts at (the finalized default).
pub const DEFAULT_METADATA_VERSION: i16 = 25;

/// A feature's default level at a metadata.version (Kafka's `Features.defaultValue`): the
/// newest level whose bootstrap metadata.version it reaches.
pub fn default_level(feature: &str, metadata_version: i16) -> i16 {
    match feature {
        // GV_1's bootstrap metadata.version is 4.0-IV0 (22).
        "group.version" if metadata_version >= 22 => 1,
        // TV_1's and TV_2's is 4.0-IV2 (24).
        "transaction.version" if metadata_version >= 24 => 2,
        _ => 0,
    }
}

/// The metadata.version a feature level needs (Kafka's `validateVersion`: every level above 0
/// needs 3.3-IV0 (4) to be recorded at all, and GV_1 needs 4.0-IV0). `TransactionVersion`
/// declares no dependency, so feature-dependencies prints none for it (and every
/// metadata.version Runnel supports is past 3.3-IV0).
pub fn required_metadata_version(feature: &str, level: i16) -> Option<i16> {
    match (feature, level) {
        (_, l) if l < 1 => None,
        ("group.version", _) => Some(22),
        ("transaction.version", _) => None,
        _ => Some(4),
    }
}

/// Whether every level names a supported feature within its range (the check of levels read
/// from a bootstrap file or a controller frame; level 0 disables a feature whose minimum is 0).
pub fn check_supported_levels(levels: &BTreeMap<String, i16>) -> Result<(), String> {
    for (name, &level) in levels {
        let Some(f) = SUPPORTED.iter().find(|f| f.name == name) else {
            return Err(format!("unsupported feature {name}"));
        };
        if !(f.min..=f.max).contains(&level) {
            return Err(format!(
                "{name} level {level} is outside the supported {}-{}",
                f.min, f.max
            ));
        }
    }
    Ok(())
}

/// Checks one UpdateFeatures entry against the finalized levels: the level already finalized
/// (or 0 for one that is not) is accepted as a no-op; a [`CHANGEABLE`] feature may move within
/// its range (a downgrade only when `downgrade` says so, Kafka's `FeatureControlManager`:
/// upgrade type SAFE_DOWNGRADE or UNSAFE_DOWNGRADE, v0's `allowDowngrade`); any other change is
/// refused with INVALID_UPDATE_VERSION and Kafka's reason (unknown feature, out of range, or
/// not changeable on Runnel). `Ok(true)`: the level changes.
pub fn check_update(
    finalized: &BTreeMap<String, i16>,
    feature: &str,
    level: i16,
    downgrade: bool,
) -> Result<bool, ApiError> {
    let Some(supported) = SUPPORTED.iter().find(|f| f.name == feature) else {
        return Err(ApiError::new(
            INVALID_UPDATE_VERSION,
            format!("Invalid update version {level} for feature {feature}. The broker does not support this feature."),
        ));
    };
    let current = finalized.get(feature).copied().unwrap_or(0);
    if level == current {
        return Ok(false);
    }
    let in_range =
        level == 0 && supported.min == 0 || (supported.min..=supported.max).contains(&level);
    let changeable = CHANGEABLE.contains(&feature);
    if in_range && changeable && (level > current || downgrade) {
        return Ok(true);
    }
    let why = if in_range && changeable {
        format!(
            "Invalid update version {level} for feature {feature}. Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade."
        )
    } else if !in_range {
        format!(
            "Invalid update version {level} for feature {feature}. Broker supports versions {}-{}.",
            supported.min, supported.max
        )
    } else {
        format!(
            "Invalid update version {level} for feature {feature}: its level is fixed at {current} on this cluster."
        )
    };
    Err(ApiError::new(INVALID_UPDATE_VERSION, why))
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
        assert_eq!(check_update(&f, "metadata.version", 25, false), Ok(false));
        assert_eq!(check_update(&f, "transaction.version", 2, false), Ok(false));
        let e = check_update(&f, "transaction.version", 3, false).unwrap_err();
        assert_eq!(e.code, INVALID_UPDATE_VERSION);
        assert!(e.message.contains("supports versions 0-2"), "{e}");
        let e = check_update(&f, "metadata.version", 20, true).unwrap_err();
        assert!(e.message.contains("fixed at 25"), "{e}");
        let e = check_update(&f, "group.version", 0, true).unwrap_err();
        assert!(e.message.contains("fixed at 1"), "{e}");
        let e = check_update(&f, "no.such.feature", 1, false).unwrap_err();
        assert!(e.message.contains("does not support"), "{e}");
    }

    #[test]
    fn transaction_version_moves_within_its_range_and_downgrades_only_when_asked() {
        let mut recorded = BTreeMap::new();
        assert_eq!(transaction_version(&recorded), 2);
        let e = check_update(&finalized(&recorded), "transaction.version", 1, false).unwrap_err();
        assert!(e.message.contains("Can't downgrade"), "{e}");
        assert_eq!(
            check_update(&finalized(&recorded), "transaction.version", 0, true),
            Ok(true)
        );
        recorded.insert("transaction.version".to_string(), 0);
        assert_eq!(transaction_version(&recorded), 0);
        assert_eq!(
            check_update(&finalized(&recorded), "transaction.version", 2, false),
            Ok(true)
        );
    }

    #[test]
    fn release_versions_read_as_kafka() {
        assert_eq!(metadata_version_level("3.7-IV2"), Ok(17));
        assert_eq!(metadata_version_level("3.7"), Ok(19));
        assert_eq!(metadata_version_level("3.8.1"), Ok(20));
        assert_eq!(metadata_version_level("4.0"), Ok(25));
        assert_eq!(
            metadata_version_level("9.9"),
            Err("Version 9.9 is not a valid version".into())
        );
        assert_eq!(metadata_version_name(21), Some("3.9-IV0"));
        assert_eq!(metadata_version_name(26), None);
        assert_eq!(metadata_version_name(0), None);
    }

    #[test]
    fn bootstrap_levels_follow_kafkas_formatter() {
        let levels = |r: Option<&str>, f: &[&str]| {
            bootstrap_levels(r, &f.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        };
        let all = levels(None, &[]).unwrap();
        assert_eq!(all.get("metadata.version"), Some(&25));
        assert_eq!(all.get("group.version"), Some(&1));
        assert_eq!(all.get("transaction.version"), Some(&2));
        assert_eq!(all.len(), SUPPORTED.len());
        // A 3.x release defaults group.version to 0 (GV_1 needs 4.0-IV0).
        let old = levels(Some("3.8"), &[]).unwrap();
        assert_eq!((old["metadata.version"], old["group.version"]), (20, 0));
        assert_eq!(old["transaction.version"], 0);
        // TV_2 needs 4.0-IV2 only as its default: it may be set on an older release.
        assert_eq!(
            levels(Some("4.0-IV1"), &[]).unwrap()["transaction.version"],
            0
        );
        let set = levels(Some("3.9"), &["transaction.version=2"]).unwrap();
        assert_eq!(set["transaction.version"], 2);
        let set = levels(Some("4.0-IV1"), &["group.version=0"]).unwrap();
        assert_eq!((set["metadata.version"], set["group.version"]), (23, 0));
        assert_eq!(
            levels(None, &["metadata.version=21"]).unwrap()["metadata.version"],
            21
        );
        for (r, f, why) in [
            (Some("3.2"), vec![], "metadata.version 3.2-IV0 is too old to be supported."),
            (Some("5.0"), vec![], "Version 5.0 is not a valid version"),
            (Some("4.0"), vec!["metadata.version=25"], "Use --release-version instead of --feature metadata.version=X to avoid ambiguity."),
            (None, vec!["metadata.version=99"], "No MetadataVersion with feature level 99"),
            (None, vec!["share.version=1"], "Unsupported feature: share.version. Supported features are: group.version, kraft.version, transaction.version"),
            (None, vec!["group.version=2"], "No feature:group.version with feature level 2"),
            (None, vec!["transaction.version=3"], "No feature:transaction.version with feature level 3"),
            (Some("3.9"), vec!["group.version=1"], "group.version could not be set to 1 because it depends on metadata.version level 22"),
            (None, vec!["group.version"], "Can't parse feature=level string group.version: equals sign not found."),
            (None, vec!["group.version=x"], "Can't parse feature=level string group.version=x: unable to parse x as a short."),
        ] {
            assert_eq!(levels(r, &f), Err(why.to_string()), "{r:?} {f:?}");
        }
    }
}
