//! `runnel storage`: kafka-storage.sh `format`, `info` and `random-uuid`, offline.
//!
//! `format` writes `meta.properties` (version 1, `cluster.id`, `node.id`, `directory.id`) and
//! the bootstrap records (`bootstrap.json`: initial controllers, SCRAM credentials, salted
//! here so no password reaches the disk, and the feature levels of `--release-version` /
//! `--feature`, checked by `runnel_metadata::features::bootstrap_levels`) into the data
//! directory, which is Runnel's log directory and metadata directory in one. The broker then takes its cluster id from there
//! (`runnel_broker::meta_properties`). A format step stays optional: an unformatted directory
//! is initialised by the broker on its first start, as before.
//!
//! Kafka reads `node.id`, `process.roles` and `controller.quorum.voters` from `--config`;
//! Runnel's broker takes those as flags too (`--node-id`, `--data-dir`), so they are accepted
//! here with the same names and defaults as `runnel broker`'s.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use runnel_broker::meta_properties::{
    self as mp, Bootstrap, BootstrapScram, InitialController, MetaProperties,
};

#[derive(Debug, Args)]
pub struct StorageArgs {
    #[command(subcommand)]
    pub action: StorageAction,
}

/// Where the node's storage is and who the node is (the broker's own flags and config file).
#[derive(Debug, Clone, Args)]
pub struct NodeArgs {
    /// The broker's configuration file (TOML as `runnel broker --config`, or Java properties):
    /// `node.id`, `process.roles` and `controller.quorum.voters` are read from it.
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The broker's data directory (its log and metadata directory); as `runnel broker`
    /// (default: `log.dirs` or `log.dir` of --config, else ./runnel-data).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// The node id (default: `node.id` of --config, else 1 as `runnel broker`).
    #[arg(long)]
    pub node_id: Option<i32>,
    /// The node's roles, as `runnel broker --process-roles` (default: `process.roles` of
    /// --config, else broker,controller).
    #[arg(long, value_name = "ROLES")]
    pub process_roles: Option<String>,
    /// The static quorum, as `runnel broker --controller-quorum-voters` (or
    /// `controller.quorum.voters` in --config).
    #[arg(long, value_name = "VOTERS")]
    pub controller_quorum_voters: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum StorageAction {
    /// Format the node's data directory (kafka-storage.sh format).
    Format(FormatArgs),
    /// Show the meta.properties of the node's data directory (kafka-storage.sh info).
    Info(NodeArgs),
    /// Print a random UUID, e.g. for --cluster-id (kafka-storage.sh random-uuid).
    RandomUuid,
    /// The feature levels a release version brings (kafka-storage.sh version-mapping).
    VersionMapping(super::feature_mapping::VersionMappingArgs),
    /// The metadata.version each feature level needs (kafka-storage.sh feature-dependencies).
    FeatureDependencies(super::feature_mapping::FeatureDependenciesArgs),
}

#[derive(Debug, Args)]
pub struct FormatArgs {
    #[command(flatten)]
    pub node: NodeArgs,
    /// The cluster ID to use (e.g. from `runnel storage random-uuid`).
    #[arg(long, short = 't', value_name = "ID")]
    pub cluster_id: String,
    /// A SCRAM credential to add, e.g. 'SCRAM-SHA-256=[name=alice,password=alice-secret]'.
    #[arg(long = "add-scram", short = 'S', value_name = "CREDENTIAL")]
    pub add_scram: Vec<String>,
    /// Skip an already formatted directory instead of failing.
    #[arg(long, short = 'g')]
    pub ignore_formatted: bool,
    /// Initialize a controller as a single-node quorum.
    #[arg(long, short = 's', group = "quorum")]
    pub standalone: bool,
    /// Initialize a server without an initial quorum topology.
    #[arg(long, short = 'N', group = "quorum")]
    pub no_initial_controllers: bool,
    /// The initial quorum: a comma-separated list of id@hostname:port:directory; the same value
    /// must be used to format every node.
    #[arg(long, short = 'I', group = "quorum", value_name = "VOTERS")]
    pub initial_controllers: Option<String>,
    /// The release version for the initial feature levels (e.g. 3.9 or 3.9-IV0). The minimum
    /// is 3.3-IV3; the default is 4.0-IV3.
    #[arg(long, short = 'r', value_name = "VERSION")]
    pub release_version: Option<String>,
    /// The level of one feature, in feature=level format, e.g. group.version=0 (repeatable).
    #[arg(long = "feature", short = 'f', value_name = "FEATURE=LEVEL")]
    pub feature: Vec<String>,
}

pub fn run(args: StorageArgs) -> Result<()> {
    match args.action {
        StorageAction::RandomUuid => {
            println!("{}", random_uuid());
            Ok(())
        }
        StorageAction::Info(node) => {
            let (text, ok) = info(&node_data_dir(&node)?)?;
            print!("{text}");
            if ok {
                Ok(())
            } else {
                std::process::exit(1)
            }
        }
        StorageAction::Format(args) => {
            let out = format(&args)?;
            print!("{out}");
            Ok(())
        }
        StorageAction::VersionMapping(a) => super::feature_mapping::run_version_mapping(&a),
        StorageAction::FeatureDependencies(a) => {
            super::feature_mapping::run_feature_dependencies(&a)
        }
    }
}

/// A Kafka `Uuid.randomUuid()`: 16 random bytes, base64url, never one of the reserved ids and
/// never starting with '-' (Kafka's rule, so it cannot look like a flag).
pub fn random_uuid() -> String {
    loop {
        let bytes: [u8; 16] = rand::random();
        let text = runnel_broker::node::base64_url(&bytes);
        if !text.starts_with('-') && bytes.iter().any(|b| *b != 0) {
            return text;
        }
    }
}

/// The node settings of `--config`: TOML as the broker reads it, else Java properties.
fn config_props(path: Option<&Path>) -> Result<BTreeMap<String, String>> {
    let Some(path) = path else {
        return Ok(BTreeMap::new());
    };
    let pairs = runnel_broker::config::read_config_file(path)
        .with_context(|| format!("--config {}", path.display()))?;
    Ok(pairs.into_iter().collect())
}

/// The node's data directory: `--data-dir`, else `log.dirs` of --config (as `runnel broker`).
fn node_data_dir(node: &NodeArgs) -> Result<PathBuf> {
    let props = config_props(node.config.as_deref())?;
    Ok(runnel_broker::config::data_dir(
        node.data_dir.as_deref(),
        &props,
    )?)
}

/// One `--initial-controllers` entry, as Kafka's `DynamicVoter.parse`.
pub fn parse_initial_controllers(raw: &str) -> Result<Vec<InitialController>, String> {
    let mut out: Vec<InitialController> = Vec::new();
    for entry in raw.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (id, rest) = entry
            .split_once('@')
            .ok_or_else(|| format!("No '@' found in voter entry '{entry}'"))?;
        let id: i32 = id
            .parse()
            .ok()
            .filter(|i| *i >= 0)
            .ok_or_else(|| format!("Failed to parse node id in voter entry '{entry}'"))?;
        let (host_port, dir) = rest
            .rsplit_once(':')
            .ok_or_else(|| format!("No directory id found in voter entry '{entry}'"))?;
        let (host, port) = host_port
            .rsplit_once(':')
            .ok_or_else(|| format!("No port found in voter entry '{entry}'"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(format!("No hostname found in voter entry '{entry}'"));
        }
        let port: u16 = port
            .parse()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("Failed to parse port in voter entry '{entry}'"))?;
        if !mp::is_valid_uuid_text(dir) {
            return Err(format!(
                "Failed to parse directory id '{dir}' in voter entry '{entry}'"
            ));
        }
        if out.iter().any(|c| c.id == id) {
            return Err(format!("Node id {id} was specified more than once."));
        }
        out.push(InitialController {
            id,
            host: host.to_string(),
            port,
            directory_id: dir.to_string(),
        });
    }
    if out.is_empty() {
        return Err("No voters given.".into());
    }
    Ok(out)
}

/// Formats the directory and returns what to print (Kafka's lines).
pub fn format(args: &FormatArgs) -> Result<String> {
    let props = config_props(args.node.config.as_deref())?;
    let node_id = runnel_broker::config::node_id(args.node.node_id, &props).context("--config")?;
    if node_id < 0 {
        bail!("You must specify a valid non-negative node ID.");
    }
    if !mp::is_valid_uuid_text(&args.cluster_id) {
        bail!(
            "Invalid cluster id '{}': expected a base64url UUID of 22 characters (see `runnel storage random-uuid`)",
            args.cluster_id
        );
    }
    let roles = args
        .node
        .process_roles
        .clone()
        .or_else(|| props.get("process.roles").cloned())
        .unwrap_or_else(|| "broker,controller".into());
    let controller = roles.split(',').any(|r| r.trim() == "controller");
    let static_voters = args.node.controller_quorum_voters.is_some()
        || props.contains_key("controller.quorum.voters");
    let mut initial_controllers = Vec::new();
    if let Some(raw) = &args.initial_controllers {
        initial_controllers = parse_initial_controllers(raw).map_err(anyhow::Error::msg)?;
    }
    if args.standalone && !controller {
        bail!("You can only use --standalone on a controller.");
    }
    if (args.standalone || args.initial_controllers.is_some()) && static_voters {
        bail!("controller.quorum.voters is set in --config: the quorum is static, so --standalone and --initial-controllers do not apply");
    }
    if controller
        && !static_voters
        && !(args.standalone || args.no_initial_controllers || args.initial_controllers.is_some())
    {
        bail!("Because controller.quorum.voters is not set on this controller, you must specify one of the following: --standalone, --initial-controllers, or --no-initial-controllers.");
    }
    let features =
        runnel_metadata::features::bootstrap_levels(args.release_version.as_deref(), &args.feature)
            .map_err(anyhow::Error::msg)?;
    let metadata_version = features
        .get("metadata.version")
        .copied()
        .unwrap_or(runnel_metadata::features::DEFAULT_METADATA_VERSION);
    let mut scram = Vec::new();
    for raw in &args.add_scram {
        let user = runnel_broker::scram_bootstrap::parse(raw).map_err(anyhow::Error::msg)?;
        let u = user.upsertion();
        scram.push(BootstrapScram {
            name: u.name,
            mechanism: u.mechanism,
            iterations: u.iterations,
            salt: u.salt,
            stored_key: u.stored_key,
            server_key: u.server_key,
        });
    }
    let dir = &node_data_dir(&args.node)?;
    let meta_path = dir.join(mp::META_PROPERTIES);
    match mp::read(dir) {
        Ok(Some(existing)) => {
            // Kafka verifies the ensemble against the requested ids before anything else.
            existing
                .verify(&meta_path, Some(&args.cluster_id), node_id)
                .map_err(anyhow::Error::msg)?;
            if !args.ignore_formatted {
                bail!(
                    "Log directory {} is already formatted. Use --ignore-formatted to ignore this directory and format the others.",
                    dir.display()
                );
            }
            return Ok("All of the log directories are already formatted.\n".into());
        }
        Ok(None) => {}
        Err(e) => {
            if args.ignore_formatted {
                return Ok(format!(
                    "I/O error trying to read log directory {}. Ignoring...\nNo available log directories to format.\n",
                    dir.display()
                ));
            }
            return Err(anyhow::Error::msg(e.to_string()));
        }
    }
    // A voter among the initial controllers keeps the directory id the quorum knows it by.
    let directory_id = initial_controllers
        .iter()
        .find(|c| c.id == node_id)
        .map(|c| c.directory_id.clone())
        .unwrap_or_else(random_uuid);
    // `--standalone` (a single-node quorum) is Runnel's single-node mode: no voters are
    // recorded, so the broker runs its local metadata log.
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let bootstrap = Bootstrap {
        version: 1,
        cluster_id: args.cluster_id.clone(),
        initial_controllers,
        scram,
        features,
    };
    let kind = if controller { "metadata" } else { "data" };
    let out = format!(
        "Formatting {kind} directory {} with metadata.version {}.\n",
        dir.display(),
        runnel_metadata::features::metadata_version_name(metadata_version).unwrap_or("UNKNOWN")
    );
    // The bootstrap file first: a directory with meta.properties but no bootstrap file would
    // read as "started before without a format" (see meta_properties), one with the bootstrap
    // file but no meta.properties is refused as an unfinished format.
    mp::write_bootstrap(dir, &bootstrap).map_err(|e| {
        anyhow::anyhow!(
            "Error while writing meta.properties file {}: {e}",
            dir.display()
        )
    })?;
    let meta = MetaProperties {
        cluster_id: args.cluster_id.clone(),
        node_id,
        directory_id: Some(directory_id),
    };
    mp::write(dir, &meta).map_err(|e| {
        anyhow::anyhow!(
            "Error while writing meta.properties file {}: {e}",
            dir.display()
        )
    })?;
    Ok(out)
}

/// kafka-storage.sh info's report of one directory and whether it found no problem.
pub fn info(dir: &Path) -> Result<(String, bool)> {
    let mut problems = Vec::new();
    let mut found = None;
    let mut out = String::new();
    if !dir.is_dir() {
        if dir.exists() {
            problems.push(format!("{} is not a directory", dir.display()));
        } else {
            problems.push(format!("{} does not exist", dir.display()));
        }
    } else {
        out.push_str(&format!("Found log directory:\n  {}\n\n", dir.display()));
        match mp::read(dir) {
            Ok(Some(m)) => found = Some(m),
            Ok(None) => problems.push(format!("{} is not formatted.", dir.display())),
            Err(e) => problems.push(format!(
                "Error loading {}: {e}",
                dir.join(mp::META_PROPERTIES).display()
            )),
        }
    }
    if let Some(m) = &found {
        out.push_str(&format!("Found metadata: {}\n\n", m.describe()));
    }
    if !problems.is_empty() {
        out.push_str(if problems.len() == 1 {
            "Found problem:\n"
        } else {
            "Found problems:\n"
        });
        for p in &problems {
            out.push_str(&format!("  {p}\n"));
        }
        out.push('\n');
    }
    Ok((out, problems.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_uuids_are_kafka_uuids() {
        for _ in 0..200 {
            let u = random_uuid();
            assert!(mp::is_valid_uuid_text(&u), "{u}");
            assert!(!u.starts_with('-'));
        }
    }

    #[test]
    fn parses_initial_controllers_like_kafka() {
        let v = parse_initial_controllers(
            "0@example.com:8082:JEXY6aqzQY-32P5TStzaFg,1@[::1]:8083:MvDxzVmcRsaTz33bUuRU6A",
        )
        .unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(
            (v[0].id, v[0].host.as_str(), v[0].port),
            (0, "example.com", 8082)
        );
        assert_eq!((v[1].host.as_str(), v[1].port), ("::1", 8083));
        for bad in [
            "",
            "example.com:8082:JEXY6aqzQY-32P5TStzaFg",
            "x@example.com:8082:JEXY6aqzQY-32P5TStzaFg",
            "0@example.com:JEXY6aqzQY-32P5TStzaFg",
            "0@example.com:0:JEXY6aqzQY-32P5TStzaFg",
            "0@example.com:8082:short",
            "0@:8082:JEXY6aqzQY-32P5TStzaFg",
            "0@a:1:JEXY6aqzQY-32P5TStzaFg,0@b:2:MvDxzVmcRsaTz33bUuRU6A",
        ] {
            assert!(parse_initial_controllers(bad).is_err(), "{bad}");
        }
    }

    fn format_args(dir: &Path) -> FormatArgs {
        FormatArgs {
            node: NodeArgs {
                config: None,
                data_dir: Some(dir.to_path_buf()),
                node_id: Some(1),
                process_roles: None,
                controller_quorum_voters: None,
            },
            cluster_id: "J8qXRwI-Qyi2G0guFTiuYw".into(),
            add_scram: vec![],
            ignore_formatted: false,
            standalone: true,
            no_initial_controllers: false,
            initial_controllers: None,
            release_version: None,
            feature: vec![],
        }
    }

    #[test]
    fn format_twice_needs_ignore_formatted() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("d");
        let args = format_args(&dir);
        let out = format(&args).unwrap();
        assert_eq!(
            out,
            format!(
                "Formatting metadata directory {} with metadata.version 4.0-IV3.\n",
                dir.display()
            )
        );
        let m = mp::read(&dir).unwrap().unwrap();
        assert_eq!(
            (m.cluster_id.as_str(), m.node_id),
            ("J8qXRwI-Qyi2G0guFTiuYw", 1)
        );
        assert!(m.directory_id.is_some());
        let e = format(&args).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "Log directory {} is already formatted. Use --ignore-formatted to ignore this directory and format the others.",
                dir.display()
            )
        );
        let mut again = format_args(&dir);
        again.ignore_formatted = true;
        assert_eq!(
            format(&again).unwrap(),
            "All of the log directories are already formatted.\n"
        );
        // Another cluster id is refused even with --ignore-formatted (Kafka's verify).
        again.cluster_id = "MvDxzVmcRsaTz33bUuRU6A".into();
        assert!(format(&again)
            .unwrap_err()
            .to_string()
            .starts_with("Invalid cluster.id in: "));
        let (text, ok) = info(&dir).unwrap();
        assert!(ok, "{text}");
        assert!(text.contains("Found metadata: {cluster.id=J8qXRwI-Qyi2G0guFTiuYw, directory.id="));
    }

    #[test]
    fn format_checks_its_arguments() {
        let tmp = tempfile::tempdir().unwrap();
        let mut args = format_args(tmp.path());
        args.standalone = false;
        assert!(format(&args)
            .unwrap_err()
            .to_string()
            .starts_with("Because controller.quorum.voters is not set on this controller"));
        args.cluster_id = "not-a-uuid".into();
        args.no_initial_controllers = true;
        assert!(format(&args).is_err());
        args.cluster_id = "J8qXRwI-Qyi2G0guFTiuYw".into();
        args.add_scram = vec!["SCRAM-SHA-256=[name=alice]".into()];
        assert!(format(&args).is_err());
        args.add_scram = vec!["SCRAM-SHA-256=[name=alice,password=secret]".into()];
        format(&args).unwrap();
        let b = mp::read_bootstrap(tmp.path()).unwrap().unwrap();
        assert_eq!((b.scram.len(), b.scram[0].name.as_str()), (1, "alice"));
        let raw = std::fs::read_to_string(mp::bootstrap_path(tmp.path())).unwrap();
        assert!(!raw.contains("secret"), "the password is never stored");
    }

    #[test]
    fn initial_controllers_give_this_node_its_directory_id() {
        let tmp = tempfile::tempdir().unwrap();
        let mut args = format_args(tmp.path());
        args.standalone = false;
        args.initial_controllers = Some(
            "1@127.0.0.1:9093:JEXY6aqzQY-32P5TStzaFg,2@127.0.0.1:9094:MvDxzVmcRsaTz33bUuRU6A"
                .into(),
        );
        format(&args).unwrap();
        let m = mp::read(tmp.path()).unwrap().unwrap();
        assert_eq!(m.directory_id.as_deref(), Some("JEXY6aqzQY-32P5TStzaFg"));
        let b = mp::read_bootstrap(tmp.path()).unwrap().unwrap();
        assert_eq!(
            b.voters().as_deref(),
            Some("1@127.0.0.1:9093,2@127.0.0.1:9094")
        );
    }

    #[test]
    fn info_reports_problems() {
        let tmp = tempfile::tempdir().unwrap();
        let (text, ok) = info(&tmp.path().join("missing")).unwrap();
        assert!(!ok);
        assert!(text.contains("Found problem:\n  ") && text.contains("does not exist"));
        let (text, ok) = info(tmp.path()).unwrap();
        assert!(!ok);
        assert!(text.ends_with("is not formatted.\n\n"), "{text}");
    }
}
