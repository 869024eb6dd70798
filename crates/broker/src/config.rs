//! Broker configuration: Kafka property names and defaults, from a TOML file and `--override`.
//!
//! Properties are kept as Kafka spells them (`log.retention.ms`, ...) so a user coming from Kafka
//! can reuse their `server.properties` knowledge. Typed accessors read the few the broker itself
//! needs; the whole map also serves as the fallback for topic-level configs.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::{BrokerArgs, BrokerError};

/// Kafka broker properties this broker understands, with Kafka's defaults.
const DEFAULTS: &[(&str, &str)] = &[
    ("auto.create.topics.enable", "true"),
    ("num.partitions", "1"),
    ("default.replication.factor", "1"),
    ("delete.topic.enable", "true"),
    ("message.max.bytes", "1048588"),
    ("socket.request.max.bytes", "104857600"),
    ("fetch.max.bytes", "57671680"),
    ("replica.fetch.response.max.bytes", "10485760"),
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
    ("group.initial.rebalance.delay.ms", "3000"),
    ("group.min.session.timeout.ms", "6000"),
    ("group.max.session.timeout.ms", "1800000"),
    ("group.max.size", "2147483647"),
    ("offset.metadata.max.bytes", "4096"),
    ("offsets.retention.minutes", "10080"),
    ("offsets.retention.check.interval.ms", "600000"),
    ("offsets.topic.num.partitions", "50"),
    ("offsets.topic.replication.factor", "3"),
    ("transaction.state.log.replication.factor", "3"),
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
];

/// Cluster mode: this node's roles and the controller quorum.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    pub broker: bool,
    pub controller: bool,
    pub voters: BTreeMap<i32, String>,
    /// Where the quorum listener binds (a controller's own voter address by default).
    pub controller_listen: SocketAddr,
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
}

impl BrokerConfig {
    /// Resolves flags, the optional TOML file and `--override`s (later wins), then validates.
    pub fn from_args(args: &BrokerArgs) -> Result<Self, BrokerError> {
        let mut props: BTreeMap<String, String> = BTreeMap::new();
        if let Some(file) = &args.config {
            for (k, v) in read_toml(file)? {
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
            let known =
                DEFAULTS.iter().any(|(k, _)| k == key) || ALSO_KNOWN.contains(&key.as_str());
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
        let cluster = cluster_config(args, &props)?;
        let config = BrokerConfig {
            node_id: args.node_id,
            listen,
            advertise: args.advertise.clone(),
            data_dir: args.data_dir.clone(),
            cluster,
            props,
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
        self.bool("auto.create.topics.enable")?;
        self.bool("delete.topic.enable")?;
        self.i64("log.flush.interval.messages")?;
        self.i64("log.retention.check.interval.ms")?;
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

fn cluster_config(
    args: &BrokerArgs,
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
        .or_else(|| props.get("controller.quorum.voters").cloned());
    let Some(voters_raw) = voters_raw else {
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
    let own = voters.get(&args.node_id);
    if controller && own.is_none() {
        return Err(BrokerError::Config(format!(
            "node {} has the controller role but is not in --controller-quorum-voters ({voters_raw})",
            args.node_id
        )));
    }
    if !controller && own.is_some() {
        return Err(BrokerError::Config(format!(
            "node {} is a voter in --controller-quorum-voters but has no controller role",
            args.node_id
        )));
    }
    let listen_raw = args
        .controller_listen
        .clone()
        .or_else(|| own.cloned())
        .unwrap_or_else(|| "127.0.0.1:0".into());
    let controller_listen: SocketAddr = listen_raw.parse().map_err(|_| {
        BrokerError::Config(format!(
            "--controller-listen expects IP:PORT, got '{listen_raw}'"
        ))
    })?;
    Ok(Some(ClusterConfig {
        broker,
        controller,
        voters,
        controller_listen,
    }))
}

fn default_of(key: &str) -> Option<&'static str> {
    DEFAULTS.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

/// Reads a flat TOML file (`"log.retention.ms" = 1000` or nested tables joined by dots).
fn read_toml(path: &Path) -> Result<Vec<(String, String)>, BrokerError> {
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
            node_id: 1,
            listen: "127.0.0.1:0".into(),
            advertise: None,
            data_dir: "./x".into(),
            config: None,
            overrides: overrides.iter().map(|s| s.to_string()).collect(),
            process_roles: None,
            controller_listen: None,
            controller_quorum_voters: None,
            rack: None,
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
        a.node_id = 3;
        let e = BrokerConfig::from_args(&a).unwrap_err().to_string();
        assert!(e.contains("not in --controller-quorum-voters"), "{e}");
        a.process_roles = Some("broker".into());
        assert!(
            BrokerConfig::from_args(&a).is_ok(),
            "a broker-only node need not be a voter"
        );
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

    #[test]
    fn defaults_are_kafkas() {
        let c = BrokerConfig::from_args(&args(&[])).unwrap();
        assert_eq!(c.str("auto.create.topics.enable"), "true");
        assert_eq!(c.get_i64("num.partitions", 0), 1);
        assert_eq!(c.get_i64("message.max.bytes", 0), 1048588);
        assert_eq!(c.get_i64("fetch.max.bytes", 0), 57671680);
        assert_eq!(c.get_i64("replica.fetch.response.max.bytes", 0), 10485760);
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
    fn overrides_win_and_are_validated() {
        let c = BrokerConfig::from_args(&args(&["num.partitions=3"])).unwrap();
        assert_eq!(c.get_i64("num.partitions", 0), 3);
        assert!(BrokerConfig::from_args(&args(&["num.partitions=x"])).is_err());
        assert!(BrokerConfig::from_args(&args(&["num.partitions"])).is_err());
        assert!(BrokerConfig::from_args(&args(&["auto.create.topics.enable=maybe"])).is_err());
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
