//! `runnel features`: kafka-features.sh. `describe` prints one line per feature the broker
//! supports, sorted by name, from ApiVersions v3+ (supported ranges, finalized levels and
//! their epoch); `metadata.version` levels are shown as Kafka release versions. `upgrade`,
//! `downgrade` and `disable` are `features_update`; `version-mapping` and
//! `feature-dependencies` are `feature_mapping` (they read no broker, but Kafka's tool still
//! requires `--bootstrap-server`).

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest};
use kafka_protocol::protocol::StrBytes;

use super::feature_mapping::{self, FeatureDependenciesArgs, VersionMappingArgs};
use super::features_update::{
    self, plan_disable, plan_levels, DisableArgs, DowngradeArgs, LevelArgs, Op, UpgradeType,
};

#[derive(Debug, Args)]
pub struct FeaturesArgs {
    /// Broker to bootstrap from (host:port[,host:port...]).
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap_server: String,
    #[command(subcommand)]
    pub action: FeaturesAction,
}

#[derive(Debug, Subcommand)]
pub enum FeaturesAction {
    /// Describe the supported and finalized features.
    Describe,
    /// Upgrade one or more feature flags.
    Upgrade(LevelArgs),
    /// Downgrade one or more feature flags.
    Downgrade(DowngradeArgs),
    /// Disable one or more feature flags (downgrade them to 0).
    Disable(DisableArgs),
    /// The feature levels a release version brings.
    VersionMapping(VersionMappingArgs),
    /// The metadata.version each feature level needs.
    FeatureDependencies(FeatureDependenciesArgs),
}

fn downgrade_type(unsafe_downgrade: bool) -> UpgradeType {
    if unsafe_downgrade {
        UpgradeType::UnsafeDowngrade
    } else {
        UpgradeType::SafeDowngrade
    }
}

pub async fn run(args: FeaturesArgs) -> Result<()> {
    let bootstrap = &args.bootstrap_server;
    match args.action {
        FeaturesAction::Describe => describe(bootstrap).await,
        FeaturesAction::Upgrade(a) => {
            let plan = plan_levels(
                a.metadata.as_deref(),
                a.release_version.as_deref(),
                &a.features,
                UpgradeType::Upgrade,
            )?;
            features_update::run(bootstrap, Op::Upgrade, plan, a.dry_run).await
        }
        FeaturesAction::Downgrade(a) => {
            let l = &a.levels;
            let plan = plan_levels(
                l.metadata.as_deref(),
                l.release_version.as_deref(),
                &l.features,
                downgrade_type(a.unsafe_downgrade),
            )?;
            features_update::run(bootstrap, Op::Downgrade, plan, l.dry_run).await
        }
        FeaturesAction::Disable(a) => {
            let plan = plan_disable(&a.features, downgrade_type(a.unsafe_downgrade))?;
            features_update::run(bootstrap, Op::Disable, plan, a.dry_run).await
        }
        FeaturesAction::VersionMapping(a) => feature_mapping::run_version_mapping(&a),
        FeaturesAction::FeatureDependencies(a) => feature_mapping::run_feature_dependencies(&a),
    }
}

async fn describe(bootstrap: &str) -> Result<()> {
    let client = super::connect(bootstrap).await?;
    let conn = client.any_connection().await?;
    // v4 when the broker has it: before v4 a feature whose minimum is 0 is left out.
    let version = conn
        .broker_versions()
        .broker_range(ApiKey::ApiVersions)
        .map_or(0, |(_, hi)| hi.min(4));
    anyhow::ensure!(
        version >= 3,
        "the broker reports no features (ApiVersions v{version})"
    );
    let req = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("runnel-cli"))
        .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
    let resp = conn
        .send_at(&req, version, conn.request_timeout())
        .await
        .context("ApiVersions")?;
    let epoch = resp.finalized_features_epoch;
    let mut lines: Vec<(String, String)> = resp
        .supported_features
        .iter()
        .map(|f| {
            let name = f.name.to_string();
            let finalized = resp
                .finalized_features
                .iter()
                .find(|x| x.name == f.name)
                .map_or(0, |x| x.max_version_level);
            let line = describe_line(&name, f.min_version, f.max_version, finalized, epoch);
            (name, line)
        })
        .collect();
    lines.sort();
    for (_, line) in lines {
        println!("{line}");
    }
    Ok(())
}

/// kafka-features.sh's line for one feature.
pub fn describe_line(name: &str, min: i16, max: i16, finalized: i16, epoch: i64) -> String {
    let level = |l: i16| {
        if name == "metadata.version" {
            // Kafka's levelToString for a level it has no MetadataVersion for.
            metadata_version_name(l).map_or_else(|| format!("UNKNOWN {l}"), str::to_string)
        } else {
            l.to_string()
        }
    };
    let epoch = if epoch >= 0 {
        epoch.to_string()
    } else {
        "-".to_string()
    };
    format!(
        "Feature: {name}\tSupportedMinVersion: {}\tSupportedMaxVersion: {}\tFinalizedVersionLevel: {}\tEpoch: {epoch}",
        level(min),
        level(max),
        level(finalized)
    )
}

/// Kafka's `MetadataVersion` name of a level (`runnel_metadata::features`).
pub fn metadata_version_name(level: i16) -> Option<&'static str> {
    runnel_metadata::features::metadata_version_name(level)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_as_kafka_features_sh() {
        assert_eq!(
            describe_line("metadata.version", 7, 25, 25, 12),
            "Feature: metadata.version\tSupportedMinVersion: 3.3-IV3\tSupportedMaxVersion: 4.0-IV3\tFinalizedVersionLevel: 4.0-IV3\tEpoch: 12"
        );
        assert_eq!(
            describe_line("group.version", 0, 1, 1, -1),
            "Feature: group.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 1\tEpoch: -"
        );
        assert_eq!(metadata_version_name(21), Some("3.9-IV0"));
        assert!(describe_line("metadata.version", 7, 26, 26, 1)
            .contains("FinalizedVersionLevel: UNKNOWN 26"));
        assert_eq!(metadata_version_name(6), Some("3.3-IV2"));
        assert_eq!(metadata_version_name(26), None);
    }
}
