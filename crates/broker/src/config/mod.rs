//! Broker configuration: Kafka property names and defaults, from a TOML file and `--override`.
//!
//! Properties are kept as Kafka spells them (`log.retention.ms`, ...) so a user coming from Kafka
//! can reuse their `server.properties` knowledge. Typed accessors read the few the broker itself
//! needs; the whole map also serves as the fallback for topic-level configs.

//!
//! Split by concern: `defs` (the table: names, Kafka's defaults, ranges), `validate` (start-up
//! checks), `settings` (the typed [`BrokerSettings`] resolved from the table), `limits` (the
//! listener's limits), `cluster` (roles and the quorum), `toml_file` (the `--config` file).
//! Dynamic broker configs are metadata (`runnel_metadata::dynamic_broker_config`,
//! `BrokerDefaults::with_dynamic`), not part of this module.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use crate::{BrokerArgs, BrokerError};

mod cluster;
mod defs;
mod limits;
mod settings;
mod toml_file;
mod validate;

pub use cluster::{data_dir, log_dirs, node_id, parse_voters};
pub use settings::BrokerSettings;
pub use toml_file::{read_config_file, read_toml};

use cluster::cluster_config;
use defs::{default_of, DEFAULTS};

/// Cluster mode: this node's roles and the controller quorum.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    pub broker: bool,
    pub controller: bool,
    pub voters: BTreeMap<i32, String>,
    /// Where the quorum listener binds (a controller's own voter address by default).
    pub controller_listen: SocketAddr,
    /// What the metadata leader dials to replicate to this observer (`--controller-advertise`;
    /// the bound `controller_listen` when `None`). Voters are dialled at their voter entry.
    pub controller_advertise: Option<String>,
}

/// The resolved configuration of one broker process.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub node_id: i32,
    pub listen: SocketAddr,
    pub advertise: Option<String>,
    /// `meta.properties`, the bootstrap file and the metadata log (see `cluster::data_dir`).
    pub data_dir: PathBuf,
    /// The partition log dirs, in `log.dirs` order (`[data_dir]` unless `log.dirs` names
    /// several).
    pub log_dirs: Vec<PathBuf>,
    /// Present when `--controller-quorum-voters` (or `controller.quorum.voters`) is given.
    pub cluster: Option<ClusterConfig>,
    /// The Kafka properties set explicitly (TOML file, then overrides); defaults are not in
    /// here, so DescribeConfigs can tell a static setting from a default.
    pub props: BTreeMap<String, String>,
    /// This broker's dynamic per-broker configs (AlterConfigs on broker `<node.id>`), kept
    /// current from the metadata image by `startup`; shared by every clone. Only the
    /// reconfigurable key and trust stores of a listener are read from here
    /// (`listener_config`), as Kafka reconfigures its `SslFactory`.
    pub dynamic: DynamicConfigs,
}

/// See [`BrokerConfig::dynamic`].
pub type DynamicConfigs = std::sync::Arc<parking_lot::RwLock<BTreeMap<String, String>>>;

impl BrokerConfig {
    /// Resolves flags, the optional TOML file and `--override`s (later wins), then validates.
    pub fn from_args(args: &BrokerArgs) -> Result<Self, BrokerError> {
        let mut props: BTreeMap<String, String> = BTreeMap::new();
        if let Some(file) = &args.config {
            for (k, v) in read_config_file(file)? {
                props.insert(k, v);
            }
        }
        for raw in &args.overrides {
            let (k, v) = raw.split_once('=').ok_or_else(|| {
                BrokerError::Config(format!("--override expects key=value, got '{raw}'"))
            })?;
            props.insert(k.trim().to_string(), v.trim().to_string());
        }
        for key in props.keys() {
            if !defs::is_known(key) {
                tracing::warn!(property = %key, "unknown broker property (kept, but not used)");
            }
        }
        let listen: SocketAddr = args.listen.parse().map_err(|_| {
            BrokerError::Config(format!(
                "--listen expects HOST:PORT with a numeric IP, got '{}'",
                args.listen
            ))
        })?;
        if let Some(rack) = &args.rack {
            props.insert("broker.rack".into(), rack.clone());
        }
        let node_id = cluster::node_id(args.node_id, &props)?;
        let data_dir = cluster::data_dir(args.data_dir.as_deref(), &props)?;
        let cluster = cluster_config(args, node_id, &data_dir, &props)?;
        let log_dirs = cluster::log_dirs(&data_dir, &props)?;
        let config = BrokerConfig {
            node_id,
            listen,
            advertise: args.advertise.clone(),
            data_dir,
            log_dirs,
            cluster,
            props,
            dynamic: DynamicConfigs::default(),
        };
        config.validate()?;
        Ok(config)
    }

    /// An INT property (range-checked at start-up by `check_types`). New code reads the
    /// typed [`BrokerConfig::settings`] instead of a key with a fallback.
    pub fn get_i32(&self, key: &str, fallback: i32) -> i32 {
        self.i64(key)
            .ok()
            .and_then(|v| i32::try_from(v).ok())
            .unwrap_or(fallback)
    }

    /// A SHORT property, or an INT one that must fit 16 bits (a replication factor).
    pub fn get_i16(&self, key: &str, fallback: i16) -> i16 {
        self.i64(key)
            .ok()
            .and_then(|v| i16::try_from(v).ok())
            .unwrap_or(fallback)
    }

    /// The authorizer `authorizer.class.name` enables (`None`: no authorization), with
    /// `super.users` and `allow.everyone.if.no.acl.found`.
    pub fn authorizer(&self) -> Result<Option<runnel_metadata::acl::Authorizer>, BrokerError> {
        runnel_metadata::acl::AuthorizerConfig {
            class_name: self.str("authorizer.class.name").to_string(),
            super_users: self.str("super.users").to_string(),
            allow_everyone_if_no_acl_found: self.bool("allow.everyone.if.no.acl.found")?,
        }
        .build()
        .map_err(BrokerError::Config)
    }

    /// The value in force: explicit, else Kafka's default, else "".
    pub fn str(&self, key: &str) -> &str {
        self.props
            .get(key)
            .map(String::as_str)
            .or_else(|| default_of(key))
            .unwrap_or("")
    }

    /// Every property in force with whether it was set explicitly.
    pub fn all(&self) -> Vec<(String, String, bool)> {
        let mut out: BTreeMap<String, (String, bool)> = DEFAULTS
            .iter()
            .map(|d| (d.name.to_string(), (d.default.to_string(), false)))
            .collect();
        for (k, v) in &self.props {
            out.insert(k.clone(), (v.clone(), true));
        }
        out.into_iter()
            .map(|(k, (v, explicit))| (k, v, explicit))
            .collect()
    }

    pub fn i64(&self, key: &str) -> Result<i64, BrokerError> {
        settings::integer(key, self.str(key))
    }

    pub fn bool(&self, key: &str) -> Result<bool, BrokerError> {
        settings::boolean(key, self.str(key))
    }

    /// Typed value of a property validated in [`BrokerConfig::validate`].
    pub fn get_i64(&self, key: &str, fallback: i64) -> i64 {
        self.i64(key).unwrap_or(fallback)
    }

    pub fn get_bool(&self, key: &str, fallback: bool) -> bool {
        self.bool(key).unwrap_or(fallback)
    }

    /// `offsets.topic.replication.factor` in force. Kafka's default is 3; a single node (no
    /// quorum, or a quorum of one voter) embeds a default of 1, so the quick start works with
    /// no configuration (Kafka itself needs the property set to 1 there). An explicit value is
    /// always honoured, and `__consumer_offsets` waits for that many live brokers.
    pub fn offsets_topic_replication_factor(&self) -> i16 {
        self.internal_topic_replication_factor("offsets.topic.replication.factor")
    }

    /// The same rule for any internal topic's replication-factor property
    /// (`offsets.topic.replication.factor`, `transaction.state.log.replication.factor`).
    pub fn internal_topic_replication_factor(&self, key: &str) -> i16 {
        let single_node = self.cluster.as_ref().is_none_or(|c| c.voters.len() == 1);
        let configured = if single_node && !self.props.contains_key(key) {
            1
        } else {
            self.get_i64(key, 3)
        };
        i16::try_from(configured.max(1)).unwrap_or(i16::MAX)
    }

    /// `replica.selector.class` (KIP-392): who consumers with a rack read from.
    pub fn replica_selector(&self) -> Result<runnel_replication::ReplicaSelector, BrokerError> {
        runnel_replication::ReplicaSelector::from_class_name(self.str("replica.selector.class"))
            .map_err(BrokerError::Config)
    }

    pub fn rack(&self) -> Option<String> {
        let rack = self.str("broker.rack");
        (!rack.is_empty()).then(|| rack.to_string())
    }
}

#[cfg(test)]
mod tests;
