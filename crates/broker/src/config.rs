//! Broker configuration: Kafka property names and defaults, from a TOML file and `--override`.
//!
//! Properties are kept as Kafka spells them (`log.retention.ms`, ...) so a user coming from Kafka
//! can reuse their `server.properties` knowledge. Typed accessors read the few the broker itself
//! needs; the whole map also serves as the fallback for topic-level configs.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::server::limits::{ConfiguredLimits, PerIpLimits, DEFAULT_REQUEST_MEMORY};
use crate::{BrokerArgs, BrokerError};

/// Kafka broker properties this broker understands, with Kafka's defaults.
const DEFAULTS: &[(&str, &str)] = &[
    ("auto.create.topics.enable", "true"),
    ("authorizer.class.name", ""),
    ("super.users", ""),
    ("allow.everyone.if.no.acl.found", "false"),
    ("num.partitions", "1"),
    ("default.replication.factor", "1"),
    ("delete.topic.enable", "true"),
    ("message.max.bytes", "1048588"),
    ("socket.request.max.bytes", "104857600"),
    // The listener's limits (docs/network-limits.md): Kafka's names and defaults; what the
    // unbounded defaults mean here is decided in `server::limits`.
    ("max.connections", "2147483647"),
    ("max.connections.per.ip", "2147483647"),
    ("max.connections.per.ip.overrides", ""),
    ("connections.max.idle.ms", "600000"),
    ("connection.failed.authentication.delay.ms", "100"),
    // The largest frame read before a SASL listener's first authentication (Kafka's
    // `SaslServerAuthenticator`); listener-prefixable.
    ("sasl.server.max.receive.size", "524288"),
    ("queued.max.request.bytes", "-1"),
    ("fetch.max.bytes", "57671680"),
    ("max.request.partition.size.limit", "2000"),
    ("replica.fetch.response.max.bytes", "10485760"),
    // Client quotas (`crate::quota`): the samples a byte rate is measured over.
    ("quota.window.num", "11"),
    ("quota.window.size.seconds", "1"),
    ("log.segment.bytes", "1073741824"),
    ("log.roll.hours", "168"),
    ("log.retention.hours", "168"),
    ("log.retention.bytes", "-1"),
    ("log.retention.check.interval.ms", "300000"),
    ("log.index.interval.bytes", "4096"),
    ("log.index.size.max.bytes", "10485760"),
    ("log.segment.delete.delay.ms", "60000"),
    ("log.flush.interval.messages", "9223372036854775807"),
    ("log.flush.offset.checkpoint.interval.ms", "60000"),
    ("log.cleanup.policy", "delete"),
    ("log.cleaner.enable", "true"),
    ("log.cleaner.backoff.ms", "15000"),
    ("min.insync.replicas", "1"),
    ("replica.lag.time.max.ms", "30000"),
    ("auto.leader.rebalance.enable", "true"),
    ("leader.imbalance.check.interval.seconds", "300"),
    ("leader.imbalance.per.broker.percentage", "10"),
    ("unclean.leader.election.enable", "false"),
    ("compression.type", "producer"),
    ("log.message.timestamp.type", "CreateTime"),
    ("replica.placement.policy", "cluster-aware"),
    ("replica.selector.class", ""),
    ("group.initial.rebalance.delay.ms", "3000"),
    ("group.min.session.timeout.ms", "6000"),
    ("group.max.session.timeout.ms", "1800000"),
    ("group.max.size", "2147483647"),
    // KIP-848 groups (`consumer_group_settings`); a group's own configs override the first two.
    ("group.consumer.session.timeout.ms", "45000"),
    ("group.consumer.heartbeat.interval.ms", "5000"),
    ("group.consumer.min.session.timeout.ms", "45000"),
    ("group.consumer.max.session.timeout.ms", "60000"),
    ("group.consumer.min.heartbeat.interval.ms", "5000"),
    ("group.consumer.max.heartbeat.interval.ms", "15000"),
    (
        "group.consumer.assignors",
        "org.apache.kafka.coordinator.group.assignor.UniformAssignor,org.apache.kafka.coordinator.group.assignor.RangeAssignor",
    ),
    ("group.consumer.max.size", "2147483647"),
    ("offset.metadata.max.bytes", "4096"),
    ("offsets.retention.minutes", "10080"),
    ("offsets.retention.check.interval.ms", "600000"),
    ("offsets.topic.num.partitions", "50"),
    ("offsets.topic.replication.factor", "3"),
    ("transaction.state.log.replication.factor", "3"),
    ("transaction.state.log.num.partitions", "50"),
    ("transaction.state.log.min.isr", "2"),
    ("transaction.state.log.segment.bytes", "104857600"),
    ("transaction.max.timeout.ms", "900000"),
    ("transactional.id.expiration.ms", "604800000"),
    ("producer.id.expiration.ms", "86400000"),
    ("producer.id.expiration.check.interval.ms", "600000"),
    ("broker.rack", ""),
    ("broker.heartbeat.interval.ms", "2000"),
    ("broker.session.timeout.ms", "9000"),
];

/// Properties whose names we accept although they come from Kafka's time-unit families.
const ALSO_KNOWN: &[&str] = &[
    "log.retention.ms",
    "log.retention.minutes",
    "log.roll.ms",
    "log.flush.interval.ms",
    "log.cleaner.delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio",
    "log.message.timestamp.difference.max.ms",
    "log.preallocate",
    "node.id",
    "broker.id",
    "log.dirs",
    "log.dir",
    "listeners",
    "advertised.listeners",
    "process.roles",
    "controller.quorum.voters",
    "controller.quorum.bootstrap.servers",
    "listener.security.protocol.map",
    "inter.broker.listener.name",
    "security.inter.broker.protocol",
    "sasl.enabled.mechanisms",
    "sasl.jaas.config",
    "sasl.mechanism.inter.broker.protocol",
    "controller.listener.names",
    "sasl.mechanism.controller.protocol",
    "connections.max.reauth.ms",
];

/// Families of per-listener security properties (`listener.name.<name>.ssl.keystore.location`,
/// `ssl.client.auth`, ...): read by `listener_config`, so not warned about.
const KNOWN_PREFIXES: &[&str] = &["listener.name.", "ssl."];

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
    pub data_dir: PathBuf,
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
            let known = DEFAULTS.iter().any(|(k, _)| k == key)
                || ALSO_KNOWN.contains(&key.as_str())
                || KNOWN_PREFIXES.iter().any(|p| key.starts_with(p));
            if !known {
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
        let node_id = node_id(args.node_id, &props)?;
        let data_dir = data_dir(args.data_dir.as_deref(), &props)?;
        let cluster = cluster_config(args, node_id, &data_dir, &props)?;
        let config = BrokerConfig {
            node_id,
            listen,
            advertise: args.advertise.clone(),
            data_dir,
            cluster,
            props,
            dynamic: DynamicConfigs::default(),
        };
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), BrokerError> {
        if self.node_id < 0 {
            return Err(BrokerError::Config(format!(
                "--node-id must be >= 0, got {}",
                self.node_id
            )));
        }
        for key in [
            "num.partitions",
            "default.replication.factor",
            "message.max.bytes",
            "socket.request.max.bytes",
        ] {
            let v = self.i64(key)?;
            if v <= 0 {
                return Err(BrokerError::Config(format!("{key} must be > 0, got {v}")));
            }
        }
        for key in [
            "offsets.topic.replication.factor",
            "producer.id.expiration.ms",
            "producer.id.expiration.check.interval.ms",
        ] {
            let v = self.i64(key)?;
            if v < 1 {
                return Err(BrokerError::Config(format!("{key} must be >= 1, got {v}")));
            }
        }
        if self.i64("offsets.topic.replication.factor")? > i64::from(i16::MAX) {
            return Err(BrokerError::Config(
                "offsets.topic.replication.factor must fit a replication factor (<= 32767)".into(),
            ));
        }
        // Response caps (KIP-74): 0 still lets the first batch through; a Fetch response
        // size is an INT32.
        for key in ["fetch.max.bytes", "replica.fetch.response.max.bytes"] {
            let v = self.i64(key)?;
            if !(0..=i64::from(i32::MAX)).contains(&v) {
                return Err(BrokerError::Config(format!(
                    "{key} must be between 0 and {}, got {v}",
                    i32::MAX
                )));
            }
        }
        self.check_types()?;
        self.bool("auto.create.topics.enable")?;
        self.bool("delete.topic.enable")?;
        self.authorizer()?;
        self.server_limits()?;
        crate::consumer_group_settings::consumer_group_config(self)?;
        self.listener_plan()?;
        self.i64("log.flush.interval.messages")?;
        self.i64("log.retention.check.interval.ms")?;
        self.replica_selector()?;
        match self.str("replica.placement.policy") {
            "kafka" | "cluster-aware" => {}
            other => {
                return Err(BrokerError::Config(format!(
                    "replica.placement.policy must be 'kafka' or 'cluster-aware', got '{other}'"
                )))
            }
        }
        Ok(())
    }

    /// Kafka's `ConfigDef` type check at start-up: every property in force whose type is
    /// known (KIP-569 table) parses as that type and fits it (an INT fits 32 bits, a SHORT
    /// 16), so no value reaches a narrowing conversion; a property set to the empty string
    /// means "unset" for the few that default to nothing.
    fn check_types(&self) -> Result<(), BrokerError> {
        use runnel_metadata::topic_config::ConfigType;
        for (key, value, _) in self.all() {
            let Some((ty, _)) = runnel_metadata::topic_config::broker_config_info(&key) else {
                continue;
            };
            let range = match ty {
                ConfigType::Int => i64::from(i32::MIN)..=i64::from(i32::MAX),
                ConfigType::Short => i64::from(i16::MIN)..=i64::from(i16::MAX),
                ConfigType::Long => i64::MIN..=i64::MAX,
                ConfigType::Boolean => {
                    self.bool(&key)?;
                    continue;
                }
                _ => continue,
            };
            if value.is_empty() {
                continue;
            }
            let v = self.i64(&key)?;
            if !range.contains(&v) {
                return Err(BrokerError::Config(format!(
                    "Invalid value {value} for configuration {key}: not a number of type {}",
                    match ty {
                        ConfigType::Int => "INT",
                        ConfigType::Short => "SHORT",
                        _ => "LONG",
                    }
                )));
            }
        }
        Ok(())
    }

    /// An INT property (range-checked at start-up by `check_types`).
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
            .map(|(k, v)| (k.to_string(), (v.to_string(), false)))
            .collect();
        for (k, v) in &self.props {
            out.insert(k.clone(), (v.clone(), true));
        }
        out.into_iter()
            .map(|(k, (v, explicit))| (k, v, explicit))
            .collect()
    }

    pub fn i64(&self, key: &str) -> Result<i64, BrokerError> {
        let raw = self.str(key);
        raw.parse::<i64>()
            .map_err(|_| BrokerError::Config(format!("{key} must be an integer, got '{raw}'")))
    }

    pub fn bool(&self, key: &str) -> Result<bool, BrokerError> {
        match self.str(key) {
            "true" => Ok(true),
            "false" => Ok(false),
            other => Err(BrokerError::Config(format!(
                "{key} must be true or false, got '{other}'"
            ))),
        }
    }

    /// Typed value of a property validated in [`BrokerConfig::validate`].
    pub fn get_i64(&self, key: &str, fallback: i64) -> i64 {
        self.i64(key).unwrap_or(fallback)
    }

    pub fn get_bool(&self, key: &str, fallback: bool) -> bool {
        self.bool(key).unwrap_or(fallback)
    }

    /// The listener's limits as configured (validated: invalid values are startup errors).
    pub fn server_limits(&self) -> Result<ConfiguredLimits, BrokerError> {
        let non_negative = |key: &str| -> Result<u64, BrokerError> {
            let v = self.i64(key)?;
            u64::try_from(v)
                .map_err(|_| BrokerError::Config(format!("{key} must be >= 0, got {v}")))
        };
        let max_connections = non_negative("max.connections")?;
        let per_ip_default = non_negative("max.connections.per.ip")?;
        let overrides = parse_per_ip_overrides(self.str("max.connections.per.ip.overrides"))?;
        if per_ip_default == 0 && overrides.is_empty() {
            return Err(BrokerError::Config(
                "max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides is set"
                    .into(),
            ));
        }
        let idle_ms = self.i64("connections.max.idle.ms")?;
        if idle_ms == 0 {
            return Err(BrokerError::Config(
                "connections.max.idle.ms must not be 0 (it would close every connection at once; -1 disables the idle timeout)"
                    .into(),
            ));
        }
        let max_request_bytes = non_negative("socket.request.max.bytes")?;
        let queued = self.i64("queued.max.request.bytes")?;
        let request_memory = match u64::try_from(queued) {
            Ok(q) if q > 0 && q < max_request_bytes => {
                return Err(BrokerError::Config(format!(
                    "queued.max.request.bytes ({q}) must be at least socket.request.max.bytes ({max_request_bytes}), or -1"
                )))
            }
            Ok(q) if q > 0 => q,
            _ => DEFAULT_REQUEST_MEMORY.max(max_request_bytes),
        };
        Ok(ConfiguredLimits {
            max_connections: self
                .props
                .contains_key("max.connections")
                .then_some(max_connections),
            per_ip: PerIpLimits {
                default: per_ip_default,
                overrides,
            },
            idle_timeout: u64::try_from(idle_ms).ok().map(Duration::from_millis),
            max_request_bytes: usize::try_from(max_request_bytes).unwrap_or(usize::MAX),
            request_memory,
            failed_auth_delay: Duration::from_millis(non_negative(
                "connection.failed.authentication.delay.ms",
            )?),
        })
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

/// Parses `id@host:port,...` (Kafka's `controller.quorum.voters`).
pub fn parse_voters(raw: &str) -> Result<BTreeMap<i32, String>, BrokerError> {
    let mut voters = BTreeMap::new();
    for entry in raw.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (id, address) = entry.split_once('@').ok_or_else(|| {
            BrokerError::Config(format!(
                "--controller-quorum-voters entry '{entry}' is not id@host:port"
            ))
        })?;
        let id: i32 = id.parse().ok().filter(|i| *i >= 0).ok_or_else(|| {
            BrokerError::Config(format!(
                "--controller-quorum-voters entry '{entry}' has a bad node id"
            ))
        })?;
        if address
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse::<u16>().ok())
            .is_none()
        {
            return Err(BrokerError::Config(format!(
                "--controller-quorum-voters entry '{entry}' needs host:port"
            )));
        }
        if voters.insert(id, address.to_string()).is_some() {
            return Err(BrokerError::Config(format!(
                "--controller-quorum-voters lists node {id} twice"
            )));
        }
    }
    Ok(voters)
}

/// `--node-id`, else `node.id` (or its old name `broker.id`) of the configuration, else 1
/// (`runnel broker` and `runnel storage`).
pub fn node_id(flag: Option<i32>, props: &BTreeMap<String, String>) -> Result<i32, BrokerError> {
    if let Some(id) = flag {
        return Ok(id);
    }
    let Some((key, raw)) = ["node.id", "broker.id"]
        .into_iter()
        .find_map(|k| props.get(k).map(|v| (k, v)))
    else {
        return Ok(1);
    };
    raw.trim()
        .parse::<i32>()
        .map_err(|_| BrokerError::Config(format!("{key} must be an int, got '{raw}'")))
}

/// `--data-dir`, else `log.dirs` / `log.dir` of the configuration (one directory: Runnel's
/// data directory holds the partition logs and the metadata log), else `./runnel-data`
/// (`runnel broker` and `runnel storage`).
pub fn data_dir(
    flag: Option<&Path>,
    props: &BTreeMap<String, String>,
) -> Result<PathBuf, BrokerError> {
    if let Some(dir) = flag {
        return Ok(dir.to_path_buf());
    }
    let Some((key, raw)) = ["log.dirs", "log.dir"]
        .into_iter()
        .find_map(|k| props.get(k).map(|v| (k, v)))
    else {
        return Ok(PathBuf::from("./runnel-data"));
    };
    let dirs: Vec<&str> = raw
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .collect();
    match dirs.as_slice() {
        [one] => Ok(PathBuf::from(one)),
        _ => Err(BrokerError::Config(format!(
            "{key} must name exactly one directory (Runnel keeps one data directory per node), got '{raw}'"
        ))),
    }
}

/// The controller listener named in `listeners` (Kafka's KRaft layout:
/// `listeners=PLAINTEXT://...,CONTROLLER://...` with `controller.listener.names=CONTROLLER`):
/// the address the quorum listener binds.
fn controller_listener_address(
    props: &BTreeMap<String, String>,
) -> Result<Option<String>, BrokerError> {
    let (Some(names), Some(text)) = (
        props.get("controller.listener.names"),
        props.get("listeners"),
    ) else {
        return Ok(None);
    };
    let map = crate::server::listeners::effective_protocol_map(
        props
            .get("listener.security.protocol.map")
            .map(String::as_str),
        Some(names),
        Some(text),
    )
    .map_err(BrokerError::Config)?;
    let listeners = crate::server::listeners::parse_listeners("listeners", text, &map)
        .map_err(BrokerError::Config)?;
    let names = crate::server::listeners::controller_listener_names(names);
    let mut found = listeners.iter().filter(|l| names.contains(&l.name));
    let Some(endpoint) = found.next() else {
        return Ok(None);
    };
    if let Some(other) = found.next() {
        return Err(BrokerError::Config(format!(
            "listeners has two controller listeners ({} and {}); Runnel binds one quorum listener",
            endpoint.name, other.name
        )));
    }
    let addr = endpoint.bind_addr().map_err(BrokerError::Config)?;
    Ok(Some(addr.to_string()))
}

fn cluster_config(
    args: &BrokerArgs,
    node_id: i32,
    data_dir: &Path,
    props: &BTreeMap<String, String>,
) -> Result<Option<ClusterConfig>, BrokerError> {
    let roles = args
        .process_roles
        .clone()
        .or_else(|| props.get("process.roles").cloned())
        .unwrap_or_else(|| "broker,controller".into());
    let mut broker = false;
    let mut controller = false;
    for role in roles.split(',').map(str::trim) {
        match role {
            "broker" => broker = true,
            "controller" => controller = true,
            other => {
                return Err(BrokerError::Config(format!(
                    "--process-roles takes broker, controller or both; got '{other}'"
                )))
            }
        }
    }
    let voters_raw = args
        .controller_quorum_voters
        .clone()
        .or_else(|| props.get("controller.quorum.voters").cloned())
        // The voters `runnel storage format --initial-controllers` recorded.
        .or_else(|| {
            crate::meta_properties::read_bootstrap(data_dir)
                .ok()
                .flatten()
                .and_then(|b| b.voters())
        });
    let Some(voters_raw) = voters_raw else {
        // KIP-853's dynamic quorum: the voters are what `storage format --initial-controllers`
        // recorded. One bootstrap server (this node, formatted `--standalone` or not) is a
        // single-node quorum, which Runnel runs on its local metadata log; several need the
        // format, or the nodes would each start a cluster of their own.
        if let Some(servers) = props.get("controller.quorum.bootstrap.servers") {
            let count = servers.split(',').filter(|s| !s.trim().is_empty()).count();
            if count > 1 {
                return Err(BrokerError::Config(format!(
                    "controller.quorum.bootstrap.servers lists {count} controllers but {} has no initial quorum: format it with `runnel storage format --initial-controllers ...` (as kafka-storage.sh) or set controller.quorum.voters",
                    data_dir.display()
                )));
            }
        }
        if !(broker && controller) {
            return Err(BrokerError::Config(
                "--process-roles other than broker,controller needs --controller-quorum-voters"
                    .into(),
            ));
        }
        return Ok(None);
    };
    let voters = parse_voters(&voters_raw)?;
    if voters.is_empty() {
        return Err(BrokerError::Config(
            "--controller-quorum-voters is empty".into(),
        ));
    }
    let own = voters.get(&node_id);
    if controller && own.is_none() {
        return Err(BrokerError::Config(format!(
            "node {} has the controller role but is not in --controller-quorum-voters ({voters_raw})",
            node_id
        )));
    }
    if !controller && own.is_some() {
        return Err(BrokerError::Config(format!(
            "node {} is a voter in --controller-quorum-voters but has no controller role",
            node_id
        )));
    }
    let listen_raw = args
        .controller_listen
        .clone()
        .or(controller_listener_address(props)?)
        .or_else(|| own.cloned())
        .unwrap_or_else(|| "127.0.0.1:0".into());
    let controller_listen: SocketAddr = listen_raw.parse().map_err(|_| {
        BrokerError::Config(format!(
            "--controller-listen expects IP:PORT, got '{listen_raw}'"
        ))
    })?;
    let controller_advertise = args.controller_advertise.clone();
    if let Some(adv) = &controller_advertise {
        if controller {
            return Err(BrokerError::Config(format!(
                "--controller-advertise is for broker-only nodes; a voter is dialled at its \
                 --controller-quorum-voters entry (node {} got '{adv}')",
                node_id
            )));
        }
        if adv
            .rsplit_once(':')
            .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
        {
            return Err(BrokerError::Config(format!(
                "--controller-advertise expects HOST:PORT, got '{adv}'"
            )));
        }
    }
    Ok(Some(ClusterConfig {
        broker,
        controller,
        voters,
        controller_listen,
        controller_advertise,
    }))
}

/// Parses `max.connections.per.ip.overrides`: `host:count,host:count` (Kafka's format). Host
/// names are resolved once, here; every address of a name gets its count.
fn parse_per_ip_overrides(raw: &str) -> Result<HashMap<IpAddr, u64>, BrokerError> {
    let mut out = HashMap::new();
    for entry in raw.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let bad = |why: &str| {
            BrokerError::Config(format!(
                "max.connections.per.ip.overrides entry '{entry}' {why}"
            ))
        };
        let (host, count) = entry
            .rsplit_once(':')
            .ok_or_else(|| bad("is not host:count"))?;
        let count: u64 = count
            .trim()
            .parse()
            .map_err(|_| bad("needs a count >= 0"))?;
        let host = host.trim().trim_start_matches('[').trim_end_matches(']');
        let ips: Vec<IpAddr> = match host.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => (host, 0)
                .to_socket_addrs()
                .map_err(|e| bad(&format!("names a host that does not resolve: {e}")))?
                .map(|a| a.ip())
                .collect(),
        };
        for ip in ips {
            out.insert(ip, count);
        }
    }
    Ok(out)
}

fn default_of(key: &str) -> Option<&'static str> {
    DEFAULTS.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

/// Reads `runnel broker --config`: TOML ([`read_toml`]), else Kafka's `server.properties`
/// (Java properties syntax); also read by `runnel storage`.
/// A `.toml` file must be valid TOML (its errors are reported, not re-read as properties).
pub fn read_config_file(path: &Path) -> Result<Vec<(String, String)>, BrokerError> {
    match read_toml(path) {
        Ok(pairs) => Ok(pairs),
        Err(toml_error) if path.extension().is_some_and(|e| e == "toml") => Err(toml_error),
        Err(_) => runnel_client::security::read_properties_file(path).map_err(BrokerError::Config),
    }
}

/// Reads a flat TOML file (`"log.retention.ms" = 1000` or nested tables joined by dots); also
/// read by `runnel storage`.
pub fn read_toml(path: &Path) -> Result<Vec<(String, String)>, BrokerError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| BrokerError::Config(format!("cannot read {}: {e}", path.display())))?;
    let value: toml::Table = text
        .parse()
        .map_err(|e| BrokerError::Config(format!("{} is not valid TOML: {e}", path.display())))?;
    let mut out = Vec::new();
    flatten("", &value, &mut out);
    Ok(out)
}

fn flatten(prefix: &str, table: &toml::Table, out: &mut Vec<(String, String)>) {
    for (k, v) in table {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            toml::Value::Table(t) => flatten(&key, t, out),
            toml::Value::String(s) => out.push((key, s.clone())),
            other => out.push((key, other.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(overrides: &[&str]) -> BrokerArgs {
        BrokerArgs {
            node_id: Some(1),
            listen: "127.0.0.1:0".into(),
            advertise: None,
            data_dir: Some("./x".into()),
            config: None,
            overrides: overrides.iter().map(|s| s.to_string()).collect(),
            process_roles: None,
            controller_listen: None,
            controller_advertise: None,
            controller_quorum_voters: None,
            rack: None,
            add_scram: Vec::new(),
        }
    }

    #[test]
    fn cluster_settings_are_validated() {
        let mut a = args(&[]);
        a.controller_quorum_voters = Some("1@127.0.0.1:19093,2@127.0.0.1:19094".into());
        let c = BrokerConfig::from_args(&a).unwrap();
        let cluster = c.cluster.as_ref().unwrap();
        assert!(cluster.broker && cluster.controller);
        assert_eq!(cluster.voters.len(), 2);
        assert_eq!(cluster.controller_listen.to_string(), "127.0.0.1:19093");
        a.node_id = Some(3);
        let e = BrokerConfig::from_args(&a).unwrap_err().to_string();
        assert!(e.contains("not in --controller-quorum-voters"), "{e}");
        a.process_roles = Some("broker".into());
        assert!(
            BrokerConfig::from_args(&a).is_ok(),
            "a broker-only node need not be a voter"
        );
        a.controller_advertise = Some("127.0.0.1:29093".into());
        let c = BrokerConfig::from_args(&a).unwrap();
        assert_eq!(
            c.cluster.as_ref().unwrap().controller_advertise.as_deref(),
            Some("127.0.0.1:29093")
        );
        a.controller_advertise = Some("no-port".into());
        assert!(BrokerConfig::from_args(&a)
            .unwrap_err()
            .to_string()
            .contains("HOST:PORT"));
        a.controller_advertise = Some("127.0.0.1:29093".into());
        a.node_id = Some(1);
        a.process_roles = None;
        assert!(BrokerConfig::from_args(&a)
            .unwrap_err()
            .to_string()
            .contains("for broker-only nodes"));
        a.controller_advertise = None;
        a.controller_quorum_voters = Some("1@127.0.0.1:1,1@127.0.0.1:2".into());
        assert!(BrokerConfig::from_args(&a)
            .unwrap_err()
            .to_string()
            .contains("twice"));
        a.controller_quorum_voters = Some("x@127.0.0.1:1".into());
        assert!(BrokerConfig::from_args(&a).is_err());
        a.controller_quorum_voters = None;
        a.process_roles = Some("broker".into());
        assert!(
            BrokerConfig::from_args(&a).is_err(),
            "broker-only needs voters"
        );
        a.process_roles = Some("nonsense".into());
        assert!(BrokerConfig::from_args(&a).is_err());
    }

    /// Kafka's KRaft combined-mode server.properties: `node.id`, `log.dirs` and the CONTROLLER
    /// entry of `listeners` (the quorum listener) come from the file when no flag is given.
    #[test]
    fn kafka_server_properties_name_the_node_and_its_controller_listener() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("server.properties");
        std::fs::write(
            &file,
            "process.roles=broker,controller\nnode.id=2\n\
             controller.quorum.voters=1@127.0.0.1:19093,2@127.0.0.1:19094\n\
             listeners=PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19094\n\
             advertised.listeners=PLAINTEXT://localhost:19092,CONTROLLER://localhost:19094\n\
             controller.listener.names=CONTROLLER\nlog.dirs=/tmp/kraft-combined-logs\n",
        )
        .unwrap();
        let mut a = args(&[]);
        a.node_id = None;
        a.data_dir = None;
        a.config = Some(file.clone());
        let c = BrokerConfig::from_args(&a).unwrap();
        assert_eq!(c.node_id, 2);
        assert_eq!(c.data_dir, PathBuf::from("/tmp/kraft-combined-logs"));
        let cluster = c.cluster.as_ref().unwrap();
        assert_eq!(cluster.controller_listen.to_string(), "127.0.0.1:19094");
        // The CONTROLLER entry is not a Kafka listener, nor advertised as one.
        let plan = c.listener_plan().unwrap();
        let names: Vec<&str> = plan.listeners.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["PLAINTEXT"]);
        assert!(!plan.advertised.contains_key("CONTROLLER"));
        // Flags win over the file.
        a.node_id = Some(1);
        a.data_dir = Some("./x".into());
        let c = BrokerConfig::from_args(&a).unwrap();
        assert_eq!((c.node_id, c.data_dir), (1, PathBuf::from("./x")));
        // Several log.dirs are refused (one data directory per node).
        a.overrides = vec!["log.dirs=/a,/b".into()];
        a.data_dir = None;
        let e = BrokerConfig::from_args(&a).unwrap_err().to_string();
        assert!(e.contains("exactly one directory"), "{e}");
    }

    #[test]
    fn bootstrap_servers_of_several_controllers_need_a_formatted_quorum() {
        let mut a = args(&["controller.quorum.bootstrap.servers=127.0.0.1:1,127.0.0.1:2"]);
        a.data_dir = Some(tempfile::tempdir().unwrap().path().to_path_buf());
        let e = BrokerConfig::from_args(&a).unwrap_err().to_string();
        assert!(e.contains("--initial-controllers"), "{e}");
        // One bootstrap server: this node alone (single-node mode).
        let a = args(&["controller.quorum.bootstrap.servers=127.0.0.1:1"]);
        assert!(BrokerConfig::from_args(&a).unwrap().cluster.is_none());
    }

    #[test]
    fn defaults_are_kafkas() {
        let c = BrokerConfig::from_args(&args(&[])).unwrap();
        assert_eq!(c.str("auto.create.topics.enable"), "true");
        assert_eq!(c.get_i64("num.partitions", 0), 1);
        assert_eq!(c.get_i64("message.max.bytes", 0), 1048588);
        assert_eq!(c.get_i64("fetch.max.bytes", 0), 57671680);
        assert_eq!(c.get_i64("replica.fetch.response.max.bytes", 0), 10485760);
    }

    /// Caught: typed properties were read as i64 and narrowed with `as`, so
    /// `num.partitions=4294967297` started a broker creating 1-partition topics and
    /// `group.max.session.timeout.ms=4294967296` one whose groups refused every member.
    /// Now every property of a known type is checked at start-up, as Kafka's ConfigDef does.
    #[test]
    fn typed_properties_must_fit_their_type() {
        for bad in [
            "num.partitions=4294967297",
            "group.max.session.timeout.ms=4294967296",
            "group.initial.rebalance.delay.ms=x",
            "broker.session.timeout.ms=2147483648",
            "auto.leader.rebalance.enable=yes",
        ] {
            let e = BrokerConfig::from_args(&args(&[bad])).unwrap_err();
            let key = bad.split('=').next().unwrap();
            assert!(e.to_string().contains(key), "{bad}: {e}");
        }
        let c =
            BrokerConfig::from_args(&args(&["group.max.session.timeout.ms=2147483647"])).unwrap();
        assert_eq!(c.get_i32("group.max.session.timeout.ms", 0), i32::MAX);
    }

    #[test]
    fn fetch_caps_are_validated() {
        for bad in [
            "fetch.max.bytes=-1",
            "fetch.max.bytes=2147483648",
            "replica.fetch.response.max.bytes=-5",
            "replica.fetch.response.max.bytes=x",
        ] {
            assert!(BrokerConfig::from_args(&args(&[bad])).is_err(), "{bad}");
        }
        assert!(BrokerConfig::from_args(&args(&["fetch.max.bytes=0"])).is_ok());
    }

    #[test]
    fn replica_selector_class_is_kafkas_or_refused() {
        use runnel_replication::ReplicaSelector;
        let c = BrokerConfig::from_args(&args(&[])).unwrap();
        assert_eq!(c.replica_selector().unwrap(), ReplicaSelector::LeaderOnly);
        let rack_aware =
            "replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector";
        let c = BrokerConfig::from_args(&args(&[rack_aware])).unwrap();
        assert_eq!(c.replica_selector().unwrap(), ReplicaSelector::RackAware);
        let e = BrokerConfig::from_args(&args(&["replica.selector.class=com.example.Mine"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("replica.selector.class"), "{e}");
    }

    #[test]
    fn overrides_win_and_are_validated() {
        let c = BrokerConfig::from_args(&args(&["num.partitions=3"])).unwrap();
        assert_eq!(c.get_i64("num.partitions", 0), 3);
        assert!(BrokerConfig::from_args(&args(&["num.partitions=x"])).is_err());
        assert!(BrokerConfig::from_args(&args(&["num.partitions"])).is_err());
        assert!(BrokerConfig::from_args(&args(&["auto.create.topics.enable=maybe"])).is_err());
    }

    #[test]
    fn listener_limits_are_validated() {
        let c = BrokerConfig::from_args(&args(&[])).unwrap();
        let l = c.server_limits().unwrap();
        assert_eq!(
            l.max_connections, None,
            "Kafka's default: derived from the FD limit"
        );
        assert_eq!(l.per_ip.default, i32::MAX as u64);
        assert_eq!(l.idle_timeout, Some(Duration::from_millis(600_000)));
        assert_eq!(l.request_memory, DEFAULT_REQUEST_MEMORY);
        let c = BrokerConfig::from_args(&args(&[
            "max.connections=10",
            "max.connections.per.ip=0",
            "max.connections.per.ip.overrides=127.0.0.1:3, [::1]:4 ,localhost:5",
            "connections.max.idle.ms=-1",
            "socket.request.max.bytes=1000",
            "queued.max.request.bytes=5000",
        ]))
        .unwrap();
        let l = c.server_limits().unwrap();
        assert_eq!(l.max_connections, Some(10));
        assert_eq!(
            l.per_ip.limit_for("127.0.0.1".parse().unwrap()),
            5,
            "localhost came last"
        );
        assert_eq!(l.per_ip.limit_for("10.1.1.1".parse().unwrap()), 0);
        assert_eq!(l.idle_timeout, None);
        assert_eq!(l.request_memory, 5000);
        for bad in [
            "max.connections=-1",
            "max.connections.per.ip=0",
            "max.connections.per.ip=x",
            "max.connections.per.ip.overrides=127.0.0.1",
            "max.connections.per.ip.overrides=127.0.0.1:-3",
            "connections.max.idle.ms=0",
            "queued.max.request.bytes=1000",
        ] {
            assert!(BrokerConfig::from_args(&args(&[bad])).is_err(), "{bad}");
        }
    }

    #[test]
    fn toml_file_is_flattened() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.toml");
        std::fs::write(
            &path,
            "\"num.partitions\" = 4\n[log.retention]\nms = 1000\n",
        )
        .unwrap();
        let mut a = args(&[]);
        a.config = Some(path);
        let c = BrokerConfig::from_args(&a).unwrap();
        assert_eq!(c.str("num.partitions"), "4");
        assert_eq!(c.str("log.retention.ms"), "1000");
    }
}
