//! `meta.properties` (Kafka's `MetaProperties` v1: `version`, `cluster.id`, `node.id`,
//! `directory.id`) and the bootstrap file `runnel storage format` writes beside it.
//!
//! Kafka requires `kafka-storage.sh format` before a first start; Runnel does not (the README's
//! one-command quick start), so a data directory is in one of three states:
//! * empty: the broker writes `meta.properties` itself on first start (a random cluster id on a
//!   single node, one derived from the voter set in a cluster);
//! * formatted (`runnel storage format`): `meta.properties` plus [`BOOTSTRAP_FILE`]; the stored
//!   cluster id is the truth, whatever the voters are;
//! * started before without a format: `meta.properties` without the bootstrap file; its id
//!   must still match the voters' derived id (reusing such a directory with other voters would
//!   otherwise join it to a cluster it never belonged to).
//!
//! The checks and their texts are those of Kafka's `MetaPropertiesEnsemble.verify`. Everything
//! here is pure except [`read`] / [`write`] and the bootstrap file's I/O.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file name, as Kafka's `MetaPropertiesEnsemble.META_PROPERTIES_NAME`.
pub const META_PROPERTIES: &str = "meta.properties";
/// What `runnel storage format` writes besides `meta.properties`: the bootstrap records
/// (Kafka's `bootstrap.checkpoint` holds them as a binary snapshot; Runnel's are JSON).
pub const BOOTSTRAP_FILE: &str = "bootstrap.json";

/// Why a `meta.properties` (or the bootstrap file) cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MetaPropertiesError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Mismatch(String),
    #[error("{path}: {error}")]
    Io { path: String, error: String },
}

/// One directory's `meta.properties`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaProperties {
    pub cluster_id: String,
    pub node_id: i32,
    /// KIP-858's directory id (base64url UUID); absent in files written before it.
    pub directory_id: Option<String>,
}

impl MetaProperties {
    /// Parses the Java properties text of `path` (only `key=value` lines matter; `#` and `!`
    /// comments and blank lines are skipped). Only version 1 (KRaft) is accepted.
    pub fn parse(text: &str, path: &Path) -> Result<MetaProperties, MetaPropertiesError> {
        let props: BTreeMap<&str, &str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
            .filter_map(|l| l.split_once(['=', ':']))
            .map(|(k, v)| (k.trim(), v.trim()))
            .collect();
        let invalid = |m: String| MetaPropertiesError::Invalid(m);
        match props.get("version").copied() {
            Some("1") => {}
            Some("0") | None => {
                return Err(invalid(format!(
                    "Found unexpected version in {}. Only version 1 (KRaft) is supported, not the ZK-based version 0.",
                    path.display()
                )))
            }
            Some(other) => {
                return Err(invalid(format!(
                    "Found unexpected version {other} in {}.",
                    path.display()
                )))
            }
        }
        let cluster_id = props
            .get("cluster.id")
            .filter(|v| !v.is_empty())
            .ok_or_else(|| {
                invalid(format!(
                    "cluster.id was not specified in the v1 file: {}",
                    path.display()
                ))
            })?
            .to_string();
        let node_id = props
            .get("node.id")
            .ok_or_else(|| invalid(format!("node.id was not specified in {}", path.display())))?;
        let node_id = node_id
            .parse::<i32>()
            .ok()
            .filter(|n| *n >= 0)
            .ok_or_else(|| {
                invalid(format!(
                    "node.id '{node_id}' in {} is not a non-negative integer",
                    path.display()
                ))
            })?;
        let directory_id = props
            .get("directory.id")
            .filter(|v| !v.is_empty())
            .map(|v| v.to_string());
        Ok(MetaProperties {
            cluster_id,
            node_id,
            directory_id,
        })
    }

    /// The file's text, keys sorted (Java's `Properties.store` order is unspecified; sorted is
    /// what Kafka's `storage info` prints).
    pub fn render(&self) -> String {
        let mut text = String::from("#\n#Written by Runnel\n");
        text.push_str(&format!("cluster.id={}\n", self.cluster_id));
        if let Some(dir) = &self.directory_id {
            text.push_str(&format!("directory.id={dir}\n"));
        }
        text.push_str(&format!("node.id={}\nversion=1\n", self.node_id));
        text
    }

    /// `{cluster.id=..., directory.id=..., node.id=..., version=1}`, as Kafka's `storage info`.
    pub fn describe(&self) -> String {
        let mut parts = vec![format!("cluster.id={}", self.cluster_id)];
        if let Some(dir) = &self.directory_id {
            parts.push(format!("directory.id={dir}"));
        }
        parts.push(format!("node.id={}", self.node_id));
        parts.push("version=1".into());
        format!("{{{}}}", parts.join(", "))
    }

    /// Kafka's `MetaPropertiesEnsemble.verify`: the stored node id must be the configured one,
    /// and the cluster id the expected one when there is an expectation.
    pub fn verify(
        &self,
        path: &Path,
        expected_cluster_id: Option<&str>,
        node_id: i32,
    ) -> Result<(), MetaPropertiesError> {
        if let Some(expected) = expected_cluster_id {
            if expected != self.cluster_id {
                return Err(MetaPropertiesError::Mismatch(format!(
                    "Invalid cluster.id in: {}. Expected {expected}, but read {}",
                    path.display(),
                    self.cluster_id
                )));
            }
        }
        if self.node_id != node_id {
            return Err(MetaPropertiesError::Mismatch(format!(
                "Stored node id {} doesn't match previous node id {node_id} in {}. If you moved your data, make sure your configured node id matches. If you intend to create a new node, you should remove all data in your data directories.",
                self.node_id,
                path.display()
            )));
        }
        Ok(())
    }
}

fn io_error(path: &Path, e: std::io::Error) -> MetaPropertiesError {
    MetaPropertiesError::Io {
        path: path.display().to_string(),
        error: e.to_string(),
    }
}

/// The `meta.properties` of `dir`, `None` when the file does not exist.
pub fn read(dir: &Path) -> Result<Option<MetaProperties>, MetaPropertiesError> {
    let path = dir.join(META_PROPERTIES);
    match std::fs::read(&path) {
        Ok(bytes) => {
            // A meta.properties is a few lines; anything large is not one.
            if bytes.len() > 64 * 1024 {
                return Err(MetaPropertiesError::Invalid(format!(
                    "{} is {} bytes, too large to be a meta.properties",
                    path.display(),
                    bytes.len()
                )));
            }
            let text = String::from_utf8_lossy(&bytes);
            MetaProperties::parse(&text, &path).map(Some)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error(&path, e)),
    }
}

/// Writes `name` in `dir` atomically and durably (temporary file, fsync, rename, fsync of the
/// directory), so a crash leaves the old file or the new one, never a torn one.
fn write_atomic(dir: &Path, name: &str, text: &str) -> Result<(), MetaPropertiesError> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    result.map_err(|e| io_error(&path, e))
}

/// Writes `dir/meta.properties`.
/// A log dir's `meta.properties` at start-up (KIP-858: every log dir carries the node's
/// cluster and node ids and its own `directory.id`): what to write, if anything. A missing
/// file gets one with `fresh_id`; a file of another cluster or node is refused with Kafka's
/// texts; a file without a directory id (written before KIP-858) gets `fresh_id` added.
pub fn log_dir_properties(
    path: &Path,
    stored: Option<&MetaProperties>,
    cluster_id: &str,
    node_id: i32,
    fresh_id: String,
) -> Result<Option<MetaProperties>, MetaPropertiesError> {
    let Some(stored) = stored else {
        return Ok(Some(MetaProperties {
            cluster_id: cluster_id.to_string(),
            node_id,
            directory_id: Some(fresh_id),
        }));
    };
    stored.verify(path, Some(cluster_id), node_id)?;
    Ok(stored.directory_id.is_none().then(|| MetaProperties {
        directory_id: Some(fresh_id),
        ..stored.clone()
    }))
}

/// Kafka's check that no two log dirs share a `directory.id` (a copied directory).
pub fn check_distinct_directory_ids<'a>(
    dirs: impl IntoIterator<Item = (&'a Path, Option<&'a str>)>,
) -> Result<(), MetaPropertiesError> {
    let mut seen: BTreeMap<&str, &Path> = BTreeMap::new();
    for (path, id) in dirs {
        let Some(id) = id else { continue };
        if let Some(other) = seen.insert(id, path) {
            return Err(MetaPropertiesError::Mismatch(format!(
                "Duplicate directory ID {id} found. It was the ID of {}, but also of {}",
                other.display(),
                path.display()
            )));
        }
    }
    Ok(())
}

pub fn write(dir: &Path, props: &MetaProperties) -> Result<(), MetaPropertiesError> {
    write_atomic(dir, META_PROPERTIES, &props.render())
}

/// One SCRAM credential of the bootstrap records (already salted: the password is never
/// stored), as `kafka-storage.sh format --add-scram` writes a `UserScramCredentialRecord`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootstrapScram {
    pub name: String,
    /// 1 = SCRAM-SHA-256, 2 = SCRAM-SHA-512 (Kafka's `ScramMechanism` type).
    pub mechanism: i8,
    pub iterations: i32,
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

/// An `--initial-controllers` entry (`id@host:port:directoryId`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InitialController {
    pub id: i32,
    pub host: String,
    pub port: u16,
    pub directory_id: String,
}

/// The bootstrap records of a formatted directory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bootstrap {
    /// The format version of this file (1).
    pub version: u32,
    pub cluster_id: String,
    /// The voters of a cluster formatted with `--initial-controllers` (or `--standalone`);
    /// empty with `--no-initial-controllers`.
    #[serde(default)]
    pub initial_controllers: Vec<InitialController>,
    #[serde(default)]
    pub scram: Vec<BootstrapScram>,
    /// The feature levels of a new cluster (`--release-version`, `--feature`), every
    /// supported feature; empty in files written before format chose them (the cluster then
    /// keeps the default levels).
    #[serde(default)]
    pub features: BTreeMap<String, i16>,
}

impl Bootstrap {
    /// The voters in `--controller-quorum-voters` syntax, when initial controllers are set.
    pub fn voters(&self) -> Option<String> {
        if self.initial_controllers.is_empty() {
            return None;
        }
        Some(
            self.initial_controllers
                .iter()
                .map(|c| format!("{}@{}:{}", c.id, c.host, c.port))
                .collect::<Vec<_>>()
                .join(","),
        )
    }
}

/// Path of the bootstrap file of `dir`.
pub fn bootstrap_path(dir: &Path) -> PathBuf {
    dir.join(BOOTSTRAP_FILE)
}

/// The bootstrap file of `dir`, `None` if the directory was never formatted.
pub fn read_bootstrap(dir: &Path) -> Result<Option<Bootstrap>, MetaPropertiesError> {
    let path = bootstrap_path(dir);
    match std::fs::read(&path) {
        Ok(bytes) => {
            if bytes.len() > 16 << 20 {
                return Err(MetaPropertiesError::Invalid(format!(
                    "{} is {} bytes, larger than a bootstrap file can be",
                    path.display(),
                    bytes.len()
                )));
            }
            let b: Bootstrap = serde_json::from_slice(&bytes).map_err(|e| {
                MetaPropertiesError::Invalid(format!("{} is not readable: {e}", path.display()))
            })?;
            if b.version != 1 {
                return Err(MetaPropertiesError::Invalid(format!(
                    "{} has unknown version {}",
                    path.display(),
                    b.version
                )));
            }
            runnel_metadata::features::check_supported_levels(&b.features).map_err(|why| {
                MetaPropertiesError::Invalid(format!(
                    "{} has feature levels this node does not support: {why}",
                    path.display()
                ))
            })?;
            Ok(Some(b))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error(&path, e)),
    }
}

/// Writes the bootstrap file of `dir`.
pub fn write_bootstrap(dir: &Path, bootstrap: &Bootstrap) -> Result<(), MetaPropertiesError> {
    let text = serde_json::to_string_pretty(bootstrap).map_err(|e| MetaPropertiesError::Io {
        path: bootstrap_path(dir).display().to_string(),
        error: e.to_string(),
    })?;
    write_atomic(dir, BOOTSTRAP_FILE, &text)
}

/// What the broker decides about its cluster id from what it found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterIdDecision {
    pub cluster_id: String,
    /// The id is new: write `meta.properties` with it.
    pub write: bool,
}

/// The broker's cluster id from the directory's state (pure; see the module doc):
/// `stored` is its `meta.properties`, `formatted` whether a bootstrap file exists, `derived`
/// the voters' id in a cluster, `fresh` a new random id for a single node.
pub fn decide_cluster_id(
    path: &Path,
    stored: Option<&MetaProperties>,
    formatted: bool,
    node_id: i32,
    derived: Option<&str>,
    fresh: impl FnOnce() -> String,
) -> Result<ClusterIdDecision, MetaPropertiesError> {
    match stored {
        Some(stored) => {
            let expected = if formatted { None } else { derived };
            stored.verify(path, expected, node_id)?;
            Ok(ClusterIdDecision {
                cluster_id: stored.cluster_id.clone(),
                write: false,
            })
        }
        None if formatted => Err(MetaPropertiesError::Invalid(format!(
            "{} has a {BOOTSTRAP_FILE} but no {META_PROPERTIES}: the format did not finish; format it again",
            path.parent().unwrap_or(path).display()
        ))),
        None => Ok(ClusterIdDecision {
            cluster_id: derived.map(str::to_string).unwrap_or_else(fresh),
            write: true,
        }),
    }
}

/// A Kafka cluster id / directory id: 16 bytes, base64url without padding (22 characters).
pub fn is_valid_uuid_text(text: &str) -> bool {
    text.len() == 22
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> &'static Path {
        Path::new("/d/meta.properties")
    }

    #[test]
    fn round_trips_and_reads_kafka_files() {
        let m = MetaProperties {
            cluster_id: "J8qXRwI-Qyi2G0guFTiuYw".into(),
            node_id: 3,
            directory_id: Some("2Q5bjOz8Q4iHhAWLo0zFWQ".into()),
        };
        assert_eq!(MetaProperties::parse(&m.render(), p()).unwrap(), m);
        // As Kafka's Properties.store writes it (date comment, any order).
        let kafka = "#\n#Wed Dec 02 17:00:00 UTC 2026\nnode.id=1\ndirectory.id=abc\nversion=1\ncluster.id=xyz\n";
        let k = MetaProperties::parse(kafka, p()).unwrap();
        assert_eq!((k.node_id, k.cluster_id.as_str()), (1, "xyz"));
        assert_eq!(
            m.describe(),
            "{cluster.id=J8qXRwI-Qyi2G0guFTiuYw, directory.id=2Q5bjOz8Q4iHhAWLo0zFWQ, node.id=3, version=1}"
        );
    }

    #[test]
    fn refuses_incomplete_files_with_kafkas_texts() {
        let e = MetaProperties::parse("version=1\nnode.id=1\n", p()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "cluster.id was not specified in the v1 file: /d/meta.properties"
        );
        let e = MetaProperties::parse("version=1\ncluster.id=x\n", p()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "node.id was not specified in /d/meta.properties"
        );
        assert!(MetaProperties::parse("broker.id=1\ncluster.id=x\n", p()).is_err());
        assert!(MetaProperties::parse("version=1\ncluster.id=x\nnode.id=-1\n", p()).is_err());
        assert!(
            MetaProperties::parse("version=1\ncluster.id=x\nnode.id=99999999999\n", p()).is_err()
        );
    }

    #[test]
    fn decides_like_the_module_doc_says() {
        let stored = MetaProperties {
            cluster_id: "A".into(),
            node_id: 1,
            directory_id: None,
        };
        let use_id = |id: &str, write| ClusterIdDecision {
            cluster_id: id.into(),
            write,
        };
        // Formatted: the stored id wins over the voters' id.
        assert_eq!(
            decide_cluster_id(p(), Some(&stored), true, 1, Some("B"), || "R".into()).unwrap(),
            use_id("A", false)
        );
        // Started before without a format: the voters must still make the same id.
        let e =
            decide_cluster_id(p(), Some(&stored), false, 1, Some("B"), || "R".into()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Invalid cluster.id in: /d/meta.properties. Expected B, but read A"
        );
        assert_eq!(
            decide_cluster_id(p(), Some(&stored), false, 1, None, || "R".into()).unwrap(),
            use_id("A", false)
        );
        // Node id mismatch, formatted or not.
        let e = decide_cluster_id(p(), Some(&stored), true, 2, None, || "R".into()).unwrap_err();
        assert!(e.to_string().starts_with(
            "Stored node id 1 doesn't match previous node id 2 in /d/meta.properties."
        ));
        // Empty directory: derived in a cluster, fresh on a single node, then written.
        assert_eq!(
            decide_cluster_id(p(), None, false, 1, Some("B"), || "R".into()).unwrap(),
            use_id("B", true)
        );
        assert_eq!(
            decide_cluster_id(p(), None, false, 1, None, || "R".into()).unwrap(),
            use_id("R", true)
        );
        assert!(decide_cluster_id(p(), None, true, 1, None, || "R".into()).is_err());
    }

    #[test]
    fn uuid_text() {
        assert!(is_valid_uuid_text("J8qXRwI-Qyi2G0guFTiuYw"));
        assert!(!is_valid_uuid_text("J8qXRwI-Qyi2G0guFTiuY"));
        assert!(!is_valid_uuid_text("J8qXRwI+Qyi2G0guFTiuYw"));
    }

    #[test]
    fn bootstrap_voters() {
        let mut b = Bootstrap {
            version: 1,
            cluster_id: "x".into(),
            ..Bootstrap::default()
        };
        assert_eq!(b.voters(), None);
        b.initial_controllers = vec![
            InitialController {
                id: 1,
                host: "127.0.0.1".into(),
                port: 9093,
                directory_id: "d".into(),
            },
            InitialController {
                id: 2,
                host: "h".into(),
                port: 9094,
                directory_id: "e".into(),
            },
        ];
        assert_eq!(b.voters().as_deref(), Some("1@127.0.0.1:9093,2@h:9094"));
    }

    /// KIP-858: every log dir's file names the node's cluster and node; a missing one or one
    /// without a directory id is (re)written, a foreign one refuses the start.
    #[test]
    fn a_log_dirs_properties_are_checked_and_completed() {
        let fresh = || "fresh-id".to_string();
        let written = log_dir_properties(p(), None, "c1", 3, fresh())
            .unwrap()
            .unwrap();
        assert_eq!(written.directory_id.as_deref(), Some("fresh-id"));
        assert_eq!((written.cluster_id.as_str(), written.node_id), ("c1", 3));
        let complete = MetaProperties {
            cluster_id: "c1".into(),
            node_id: 3,
            directory_id: Some("d".into()),
        };
        assert_eq!(
            log_dir_properties(p(), Some(&complete), "c1", 3, fresh()),
            Ok(None)
        );
        let old = MetaProperties {
            directory_id: None,
            ..complete.clone()
        };
        let added = log_dir_properties(p(), Some(&old), "c1", 3, fresh())
            .unwrap()
            .unwrap();
        assert_eq!(added.directory_id.as_deref(), Some("fresh-id"));
        let e = log_dir_properties(p(), Some(&complete), "other", 3, fresh()).unwrap_err();
        assert!(e.to_string().contains("Invalid cluster.id"), "{e}");
        assert!(log_dir_properties(p(), Some(&complete), "c1", 4, fresh()).is_err());
    }

    #[test]
    fn two_log_dirs_may_not_share_a_directory_id() {
        let (a, b) = (Path::new("/a"), Path::new("/b"));
        assert!(check_distinct_directory_ids([(a, Some("x")), (b, Some("y")), (b, None)]).is_ok());
        let e = check_distinct_directory_ids([(a, Some("x")), (b, Some("x"))]).unwrap_err();
        assert!(e.to_string().contains("Duplicate directory ID x"), "{e}");
    }
}
