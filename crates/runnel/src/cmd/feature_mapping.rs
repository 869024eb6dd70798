//! `version-mapping` and `feature-dependencies` of `runnel features` and `runnel storage`
//! (kafka-features.sh and kafka-storage.sh have both, with the same output): which feature
//! levels a release version brings, and which metadata.version a feature level needs. Pure:
//! they read Runnel's feature definitions (`runnel_metadata::features`), never a broker, and
//! return the lines Kafka's `FeatureCommand` / `StorageTool` print.

use anyhow::{bail, Result};
use clap::Args;
use runnel_metadata::features::{self, SUPPORTED};

const METADATA_VERSION: &str = "metadata.version";

#[derive(Debug, Args)]
pub struct VersionMappingArgs {
    /// The release version to map (e.g. 3.9-IV0, or 3.9 for that release's last level); the
    /// default is the newest production one.
    #[arg(long, value_name = "VERSION")]
    pub release_version: Option<String>,
}

#[derive(Debug, Args)]
pub struct FeatureDependenciesArgs {
    /// A feature level to look up, as feature=level (e.g. group.version=1); repeatable.
    #[arg(long = "feature", value_name = "NAME=LEVEL", required = true)]
    pub features: Vec<String>,
}

/// The features besides metadata.version in the order of Kafka's `Features` enum (its
/// production features that Runnel supports).
const FEATURE_ORDER: [&str; 3] = ["kraft.version", "transaction.version", "group.version"];

fn metadata_version_range() -> (i16, i16) {
    SUPPORTED
        .iter()
        .find(|f| f.name == METADATA_VERSION)
        .map_or(
            (
                features::DEFAULT_METADATA_VERSION,
                features::DEFAULT_METADATA_VERSION,
            ),
            |f| (f.min, f.max),
        )
}

fn name_of(level: i16) -> &'static str {
    features::metadata_version_name(level).unwrap_or("UNKNOWN")
}

/// version-mapping's lines: `metadata.version=N (<as given>)`, then each feature's default
/// level at that metadata.version.
pub fn version_mapping(release_version: Option<&str>) -> Result<Vec<String>> {
    let (min, max) = metadata_version_range();
    let text = release_version.map_or_else(|| name_of(max).to_string(), str::to_string);
    let Ok(level) = features::metadata_version_level(&text) else {
        bail!(
            "Unknown release version '{text}'. Supported versions are: {} to {}",
            name_of(min),
            name_of(max)
        );
    };
    let mut lines = vec![format!("{METADATA_VERSION}={level} ({text})")];
    for name in FEATURE_ORDER {
        lines.push(format!("{name}={}", features::default_level(name, level)));
    }
    Ok(lines)
}

/// Kafka's `parseNameAndLevel`: `name=level`, both trimmed, the level a short.
pub fn parse_name_and_level(input: &str) -> Result<(String, i16)> {
    let Some((name, level)) = input.split_once('=') else {
        bail!("Can't parse feature=level string {input}: equals sign not found.");
    };
    let level = level.trim();
    match level.parse::<i16>() {
        Ok(l) => Ok((name.trim().to_string(), l)),
        Err(_) => {
            bail!("Can't parse feature=level string {input}: unable to parse {level} as a short.")
        }
    }
}

/// feature-dependencies' lines for each `name=level`, in the order given.
pub fn feature_dependencies(args: &[String]) -> Result<Vec<String>> {
    let mut lines = Vec::new();
    for raw in args {
        let (name, level) = parse_name_and_level(raw)?;
        if name == METADATA_VERSION {
            let Some(version) = features::metadata_version_name(level) else {
                bail!("Unknown metadata.version {level}");
            };
            lines.push(format!("{name}={level} ({version}) has no dependencies."));
            continue;
        }
        let Some(feature) = SUPPORTED.iter().find(|f| f.name == name) else {
            bail!("Unknown feature: {name}");
        };
        if !(feature.min..=feature.max).contains(&level) {
            bail!("No feature:{name} with feature level {level}");
        }
        match features::required_metadata_version(&name, level) {
            None => lines.push(format!("{name}={level} has no dependencies.")),
            Some(needs) => {
                lines.push(format!("{name}={level} requires:"));
                lines.push(format!(
                    "    {METADATA_VERSION}={needs} ({})",
                    name_of(needs)
                ));
            }
        }
    }
    Ok(lines)
}

/// Prints version-mapping.
pub fn run_version_mapping(args: &VersionMappingArgs) -> Result<()> {
    for line in version_mapping(args.release_version.as_deref())? {
        println!("{line}");
    }
    Ok(())
}

/// Prints feature-dependencies.
pub fn run_feature_dependencies(args: &FeatureDependenciesArgs) -> Result<()> {
    for line in feature_dependencies(&args.features)? {
        println!("{line}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_mapping_as_kafka_prints_it() {
        assert_eq!(
            version_mapping(None).unwrap(),
            vec![
                "metadata.version=25 (4.0-IV3)",
                "kraft.version=0",
                "transaction.version=2",
                "group.version=1"
            ]
        );
        assert_eq!(
            version_mapping(Some("4.0-IV1")).unwrap()[2],
            "transaction.version=0"
        );
        // The release version is echoed as given; 3.9 is 3.9-IV0.
        assert_eq!(
            version_mapping(Some("3.9")).unwrap()[..2],
            ["metadata.version=21 (3.9)", "kraft.version=0"]
        );
        assert_eq!(version_mapping(Some("3.9")).unwrap()[3], "group.version=0");
        assert_eq!(
            version_mapping(Some("9.9")).unwrap_err().to_string(),
            "Unknown release version '9.9'. Supported versions are: 3.3-IV3 to 4.0-IV3"
        );
    }

    #[test]
    fn feature_dependencies_as_kafka_prints_them() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            feature_dependencies(&args(&[
                "group.version=1",
                "metadata.version=21",
                "transaction.version=0",
                "transaction.version=2"
            ]))
            .unwrap(),
            vec![
                "group.version=1 requires:",
                "    metadata.version=22 (4.0-IV0)",
                "metadata.version=21 (3.9-IV0) has no dependencies.",
                "transaction.version=0 has no dependencies.",
                "transaction.version=2 has no dependencies.",
            ]
        );
        let err = |a: &str| feature_dependencies(&args(&[a])).unwrap_err().to_string();
        assert_eq!(err("nope.version=1"), "Unknown feature: nope.version");
        assert_eq!(err("metadata.version=99"), "Unknown metadata.version 99");
        assert_eq!(
            err("group.version=2"),
            "No feature:group.version with feature level 2"
        );
        assert_eq!(
            err("group.version"),
            "Can't parse feature=level string group.version: equals sign not found."
        );
        assert_eq!(
            err("group.version=x"),
            "Can't parse feature=level string group.version=x: unable to parse x as a short."
        );
    }
}
