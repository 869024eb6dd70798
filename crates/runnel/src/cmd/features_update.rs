//! `runnel features upgrade / downgrade / disable`: kafka-features.sh's changes of finalized
//! feature levels, sent as one UpdateFeatures request (KIP-584; `--dry-run` is its
//! `validate_only`). The levels come from `--feature name=level` (repeatable), a
//! `--release-version` (metadata.version plus each feature's default level at it, as Kafka's
//! `FeatureCommand`) or the deprecated `--metadata`; `disable` sets each named feature to 0.
//! Each result is printed as Kafka's tool prints it, sorted by feature name, and a failure of
//! any fails the command with `N out of M operation(s) failed.`.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use clap::Args;
use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::{ApiKey, UpdateFeaturesRequest, UpdateFeaturesResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use runnel_metadata::features::{self, SUPPORTED};

use super::feature_mapping::parse_name_and_level;

/// upgrade's flags (downgrade adds `--unsafe`).
#[derive(Debug, Args)]
pub struct LevelArgs {
    /// DEPRECATED: the metadata.version to move to, as a release version (e.g. 3.3-IV3).
    #[arg(long, value_name = "VERSION")]
    pub metadata: Option<String>,
    /// The release version to move every feature to (see version-mapping).
    #[arg(long, value_name = "VERSION")]
    pub release_version: Option<String>,
    /// A feature level, as feature=level (e.g. metadata.version=21); repeatable.
    #[arg(long = "feature", value_name = "NAME=LEVEL")]
    pub features: Vec<String>,
    /// Validate the change, but do not perform it.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct DowngradeArgs {
    #[command(flatten)]
    pub levels: LevelArgs,
    /// Downgrade even if it may irreversibly destroy metadata.
    #[arg(long = "unsafe")]
    pub unsafe_downgrade: bool,
}

#[derive(Debug, Args)]
pub struct DisableArgs {
    /// A feature to disable (set to level 0); repeatable.
    #[arg(long = "feature", value_name = "NAME")]
    pub features: Vec<String>,
    /// Disable even if it may irreversibly destroy metadata.
    #[arg(long = "unsafe")]
    pub unsafe_downgrade: bool,
    /// Validate the change, but do not perform it.
    #[arg(long)]
    pub dry_run: bool,
}

/// Kafka's `FeatureUpdate.UpgradeType` (its wire code is the request's `upgrade_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpgradeType {
    Upgrade = 1,
    SafeDowngrade = 2,
    UnsafeDowngrade = 3,
}

/// The operation as the tool names it in its output ("upgrade", "downgrade", "disable").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Upgrade,
    Downgrade,
    Disable,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Upgrade => "upgrade",
            Op::Downgrade => "downgrade",
            Op::Disable => "disable",
        }
    }
}

/// What to ask for: feature -> level, the upgrade type, and printed notices.
#[derive(Debug, PartialEq, Eq)]
pub struct Plan {
    pub levels: BTreeMap<String, i16>,
    pub upgrade_type: UpgradeType,
    pub notices: Vec<String>,
}

fn supported_metadata_versions() -> String {
    let (min, max) = SUPPORTED
        .iter()
        .find(|f| f.name == "metadata.version")
        .map_or((1, 0), |f| (f.min, f.max));
    (min..=max)
        .filter_map(features::metadata_version_name)
        .collect::<Vec<_>>()
        .join(", ")
}

fn metadata_level(text: &str) -> Result<i16> {
    features::metadata_version_level(text).map_err(|_| {
        anyhow::anyhow!(
            "Unknown metadata.version {text}. Supported metadata.version are {}",
            supported_metadata_versions()
        )
    })
}

/// upgrade / downgrade's levels, as Kafka's `handleUpgradeOrDowngrade` computes them.
pub fn plan_levels(
    metadata: Option<&str>,
    release_version: Option<&str>,
    feature_args: &[String],
    upgrade_type: UpgradeType,
) -> Result<Plan> {
    if release_version.is_some() && (metadata.is_some() || !feature_args.is_empty()) {
        bail!("Can not specify `release-version` with other feature flags.");
    }
    let mut levels = BTreeMap::new();
    let mut notices = Vec::new();
    if let Some(release) = release_version {
        let mv = metadata_level(release)?;
        levels.insert("metadata.version".to_string(), mv);
        for f in SUPPORTED.iter().filter(|f| f.name != "metadata.version") {
            let level = features::default_level(f.name, mv);
            // As Kafka: an upgrade never asks for a feature to go to 0.
            if upgrade_type != UpgradeType::Upgrade || level > 0 {
                levels.insert(f.name.to_string(), level);
            }
        }
    } else {
        if let Some(text) = metadata {
            notices.push(
                " `metadata` flag is deprecated and may be removed in a future release.".into(),
            );
            levels.insert("metadata.version".to_string(), metadata_level(text)?);
        }
        for raw in feature_args {
            let (name, level) = parse_name_and_level(raw)?;
            if levels.insert(name.clone(), level).is_some() {
                bail!("Feature {name} was specified more than once.");
            }
        }
    }
    Ok(Plan {
        levels,
        upgrade_type,
        notices,
    })
}

/// disable's levels: each named feature at 0.
pub fn plan_disable(names: &[String], upgrade_type: UpgradeType) -> Result<Plan> {
    let mut levels = BTreeMap::new();
    for name in names {
        if levels.insert(name.clone(), 0).is_some() {
            bail!("Feature {name} was specified more than once.");
        }
    }
    Ok(Plan {
        levels,
        upgrade_type,
        notices: Vec::new(),
    })
}

/// Each feature's outcome as Kafka's Admin client derives it from the response: a top-level
/// error fails every feature with its message; otherwise each result's own error, and a
/// feature the response does not mention fails.
pub fn outcomes(
    levels: &BTreeMap<String, i16>,
    response: &UpdateFeaturesResponse,
) -> BTreeMap<String, Option<String>> {
    let message = |code: i16, text: &Option<StrBytes>| match text.as_ref() {
        Some(t) => t.to_string(),
        None => ResponseError::try_from_code(code)
            .map_or_else(|| format!("error code {code}"), |e| e.to_string()),
    };
    levels
        .keys()
        .map(|name| {
            let outcome = if response.error_code != 0 {
                Some(message(response.error_code, &response.error_message))
            } else if response.results.is_empty() {
                None
            } else {
                match response.results.iter().find(|r| r.feature.as_str() == name) {
                    Some(r) if r.error_code == 0 => None,
                    Some(r) => Some(message(r.error_code, &r.error_message)),
                    None => Some(format!(
                        "The controller response did not contain a result for feature {name}"
                    )),
                }
            };
            (name.clone(), outcome)
        })
        .collect()
}

/// The tool's line for one feature, and whether it failed.
pub fn outcome_line(op: Op, name: &str, level: i16, dry_run: bool, error: Option<&str>) -> String {
    let what = match op {
        Op::Disable => format!("disable {name}"),
        _ => format!("{} {name} to {level}", op.name()),
    };
    match error {
        Some(why) => {
            let helper = if dry_run { "Can not" } else { "Could not" };
            format!("{helper} {what}. {why}")
        }
        None => {
            let verb = if dry_run { "can be" } else { "was" };
            let obj = match op {
                Op::Disable => "disabled.".to_string(),
                _ => format!("{}d to {level}.", op.name()),
            };
            format!("{name} {verb} {obj}")
        }
    }
}

/// Sends the plan and prints every outcome; fails when any feature failed.
pub async fn run(bootstrap: &str, op: Op, plan: Plan, dry_run: bool) -> Result<()> {
    for notice in &plan.notices {
        println!("{notice}");
    }
    if plan.levels.is_empty() {
        bail!("You must specify at least one feature to {}", op.name());
    }
    let client = super::connect(bootstrap).await?;
    let conn = client.any_connection().await?;
    let version = conn
        .broker_versions()
        .broker_range(ApiKey::UpdateFeatures)
        .map(|(_, hi)| hi.min(2))
        .context("the broker does not support UpdateFeatures")?;
    let updates = plan
        .levels
        .iter()
        .map(|(name, &level)| {
            let key = FeatureUpdateKey::default()
                .with_feature(StrBytes::from_string(name.clone()))
                .with_max_version_level(level);
            // v0 has only `allow_downgrade`; v1 replaced it with `upgrade_type`.
            if version == 0 {
                key.with_allow_downgrade(plan.upgrade_type != UpgradeType::Upgrade)
            } else {
                key.with_upgrade_type(plan.upgrade_type as i8)
            }
        })
        .collect();
    let timeout = conn.request_timeout();
    let req = UpdateFeaturesRequest::default()
        .with_timeout_ms(i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX))
        .with_feature_updates(updates)
        .with_validate_only(dry_run);
    let response = conn
        .send_at(&req, version, timeout)
        .await
        .context("UpdateFeatures")?;
    let outcomes = outcomes(&plan.levels, &response);
    let failures = outcomes.values().filter(|o| o.is_some()).count();
    for (name, error) in &outcomes {
        let level = plan.levels.get(name).copied().unwrap_or(0);
        println!(
            "{}",
            outcome_line(op, name, level, dry_run, error.as_deref())
        );
    }
    if failures > 0 {
        bail!(
            "{failures} out of {} operation(s) failed.",
            plan.levels.len()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn release_version_sets_every_feature_at_its_default() {
        let up = plan_levels(None, Some("4.0-IV3"), &[], UpgradeType::Upgrade).unwrap();
        let levels: Vec<(&str, i16)> = up.levels.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        // An upgrade leaves out the features whose default is 0; 4.0's transaction.version is
        // 2 (Kafka's TransactionVersion.TV_2 bootstraps at 4.0-IV2).
        assert_eq!(
            levels,
            vec![
                ("group.version", 1),
                ("metadata.version", 25),
                ("transaction.version", 2)
            ]
        );
        let down = plan_levels(None, Some("3.9"), &[], UpgradeType::SafeDowngrade).unwrap();
        assert_eq!(down.levels.len(), 4);
        assert_eq!(down.levels["metadata.version"], 21);
        assert_eq!(down.levels["group.version"], 0);
    }

    #[test]
    fn argument_errors_are_kafkas() {
        let err = |r: Result<Plan>| r.unwrap_err().to_string();
        assert_eq!(
            err(plan_levels(
                None,
                Some("4.0"),
                &args(&["group.version=1"]),
                UpgradeType::Upgrade
            )),
            "Can not specify `release-version` with other feature flags."
        );
        assert!(
            err(plan_levels(None, Some("2.8"), &[], UpgradeType::Upgrade)).starts_with(
                "Unknown metadata.version 2.8. Supported metadata.version are 3.3-IV3, 3.4-IV0,"
            )
        );
        assert_eq!(
            err(plan_levels(
                None,
                None,
                &args(&["a=1", "a=2"]),
                UpgradeType::Upgrade
            )),
            "Feature a was specified more than once."
        );
        assert_eq!(
            err(plan_disable(&args(&["a", "a"]), UpgradeType::SafeDowngrade)),
            "Feature a was specified more than once."
        );
        let deprecated = plan_levels(Some("3.9-IV0"), None, &[], UpgradeType::Upgrade).unwrap();
        assert_eq!(deprecated.levels["metadata.version"], 21);
        assert_eq!(deprecated.notices.len(), 1);
    }

    #[test]
    fn outcomes_follow_kafkas_admin_client() {
        let levels: BTreeMap<String, i16> = [("a".to_string(), 1), ("b".to_string(), 2)]
            .into_iter()
            .collect();
        let ok = UpdatableFeatureResult::default().with_feature(StrBytes::from_static_str("a"));
        let bad = UpdatableFeatureResult::default()
            .with_feature(StrBytes::from_static_str("b"))
            .with_error_code(95)
            .with_error_message(Some(StrBytes::from_static_str("no")));
        let per_feature = UpdateFeaturesResponse::default().with_results(vec![ok.clone(), bad]);
        let o = outcomes(&levels, &per_feature);
        assert_eq!(o["a"], None);
        assert_eq!(o["b"].as_deref(), Some("no"));
        let top = UpdateFeaturesResponse::default()
            .with_error_code(95)
            .with_error_message(Some(StrBytes::from_static_str("top")))
            .with_results(vec![ok]);
        assert!(outcomes(&levels, &top)
            .values()
            .all(|o| o.as_deref() == Some("top")));
        // v2: success carries no results at all.
        assert!(outcomes(&levels, &UpdateFeaturesResponse::default())
            .values()
            .all(Option::is_none));
    }

    #[test]
    fn lines_as_kafka_features_sh() {
        assert_eq!(
            outcome_line(Op::Upgrade, "group.version", 1, false, None),
            "group.version was upgraded to 1."
        );
        assert_eq!(
            outcome_line(Op::Downgrade, "metadata.version", 21, true, None),
            "metadata.version can be downgraded to 21."
        );
        assert_eq!(
            outcome_line(Op::Disable, "group.version", 0, false, None),
            "group.version was disabled."
        );
        assert_eq!(
            outcome_line(Op::Upgrade, "group.version", 2, true, Some("why")),
            "Can not upgrade group.version to 2. why"
        );
        assert_eq!(
            outcome_line(Op::Disable, "group.version", 0, false, Some("why")),
            "Could not disable group.version. why"
        );
    }
}
