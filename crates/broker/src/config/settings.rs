//! The broker settings the request path and the background tasks read, resolved into typed
//! values from the one table (`defs`: name, Kafka's default, range; the KIP-569 type table for
//! the type), so no call site repeats a default or narrows an integer itself. Start-up
//! (`BrokerConfig::validate`) resolves them strictly: an invalid value is a startup error.

use std::time::Duration;

use super::defs::{def_of, default_of};
use super::BrokerConfig;
use crate::BrokerError;

/// Typed broker settings (Kafka's property names in the field docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerSettings {
    /// `socket.request.max.bytes`: the largest request the broker reads.
    pub socket_request_max_bytes: usize,
    /// `auto.create.topics.enable`.
    pub auto_create_topics_enable: bool,
    /// `fetch.max.bytes`: the cap of a consumer Fetch response (KIP-74).
    pub fetch_max_bytes: i32,
    /// `replica.fetch.response.max.bytes`: the cap of a follower's Fetch response.
    pub replica_fetch_response_max_bytes: i32,
    /// `max.request.partition.size.limit`: partitions per DescribeTopicPartitions answer.
    pub max_request_partition_size_limit: i32,
    /// `offsets.topic.num.partitions`: `__consumer_offsets` partitions before it exists.
    pub offsets_topic_num_partitions: i32,
    /// `quota.window.num` and `quota.window.size.seconds` (KIP-13's sampled rate).
    pub quota_window_num: i32,
    pub quota_window_size_seconds: i32,
    /// `producer.id.expiration.ms`.
    pub producer_id_expiration_ms: i64,
    /// `producer.id.expiration.check.interval.ms`.
    pub producer_id_expiration_check_interval: Duration,
    /// `group.coordinator.rebalance.protocols` holds `consumer`: KIP-848 groups are served.
    pub consumer_protocol_enabled: bool,
    /// `replica.alter.log.dirs.io.max.bytes.per.second`: a replica move's copy rate.
    pub replica_alter_log_dirs_io_max_bytes_per_second: i64,
}

impl BrokerSettings {
    /// The settings of `config`; the first invalid value is the error.
    pub fn resolve(config: &BrokerConfig) -> Result<Self, BrokerError> {
        let (settings, errors) = Self::resolve_all(config);
        match errors.into_iter().next() {
            Some(e) => Err(e),
            None => Ok(settings),
        }
    }

    /// Every setting, each invalid one at its Kafka default, with the errors found.
    fn resolve_all(config: &BrokerConfig) -> (Self, Vec<BrokerError>) {
        let mut r = Resolver {
            config,
            errors: Vec::new(),
        };
        let settings = BrokerSettings {
            socket_request_max_bytes: r.get("socket.request.max.bytes", size),
            auto_create_topics_enable: r.get("auto.create.topics.enable", boolean),
            fetch_max_bytes: r.get("fetch.max.bytes", int),
            replica_fetch_response_max_bytes: r.get("replica.fetch.response.max.bytes", int),
            max_request_partition_size_limit: r.get("max.request.partition.size.limit", int),
            offsets_topic_num_partitions: r.get("offsets.topic.num.partitions", int),
            quota_window_num: r.get("quota.window.num", int),
            quota_window_size_seconds: r.get("quota.window.size.seconds", int),
            producer_id_expiration_ms: r.get("producer.id.expiration.ms", long),
            producer_id_expiration_check_interval: r
                .get("producer.id.expiration.check.interval.ms", millis),
            consumer_protocol_enabled: r
                .get("group.coordinator.rebalance.protocols", rebalance_protocols),
            replica_alter_log_dirs_io_max_bytes_per_second: r
                .get("replica.alter.log.dirs.io.max.bytes.per.second", long),
        };
        (settings, r.errors)
    }
}

impl BrokerConfig {
    /// The typed settings. `from_args` validated them (an invalid value is a startup error),
    /// so this cannot fail for a started broker; a configuration built otherwise (a test's
    /// literal) gets Kafka's default for an invalid value, logged.
    pub fn settings(&self) -> BrokerSettings {
        let (settings, errors) = BrokerSettings::resolve_all(self);
        for e in errors {
            tracing::error!(%e, "invalid broker setting: Kafka's default is in force");
        }
        settings
    }

    /// An integer property in force, held to its range in the table (`defs`).
    pub(super) fn ranged_i64(&self, key: &str) -> Result<i64, BrokerError> {
        long(key, self.str(key))
    }
}

/// Reads each setting: the value in force, else (invalid: the error is recorded) the table's
/// default through the same parser, else the type's zero (the table's defaults parse, tested).
struct Resolver<'a> {
    config: &'a BrokerConfig,
    errors: Vec<BrokerError>,
}

impl Resolver<'_> {
    fn get<T: Default>(&mut self, key: &str, parse: fn(&str, &str) -> Result<T, BrokerError>) -> T {
        match parse(key, self.config.str(key)) {
            Ok(v) => v,
            Err(e) => {
                self.errors.push(e);
                default_of(key)
                    .and_then(|d| parse(key, d).ok())
                    .unwrap_or_default()
            }
        }
    }
}

/// A LONG property within its range.
fn long(key: &str, raw: &str) -> Result<i64, BrokerError> {
    let v = integer(key, raw)?;
    let Some(d) = def_of(key) else {
        return Ok(v);
    };
    match (d.min, d.max) {
        (Some(min), None) if v < min => Err(BrokerError::Config(format!(
            "{key} must be >= {min}, got {v}"
        ))),
        (min, Some(max)) if v < min.unwrap_or(i64::MIN) || v > max => {
            Err(BrokerError::Config(format!(
                "{key} must be between {} and {max}, got {v}",
                min.unwrap_or(i64::MIN)
            )))
        }
        _ => Ok(v),
    }
}

/// An INT property (32 bits) within its range.
fn int(key: &str, raw: &str) -> Result<i32, BrokerError> {
    let v = long(key, raw)?;
    i32::try_from(v).map_err(|_| {
        BrokerError::Config(format!(
            "Invalid value {raw} for configuration {key}: not a number of type INT"
        ))
    })
}

/// A byte size: a non-negative INT.
fn size(key: &str, raw: &str) -> Result<usize, BrokerError> {
    let v = int(key, raw)?;
    usize::try_from(v).map_err(|_| BrokerError::Config(format!("{key} must be >= 0, got {v}")))
}

/// A duration in milliseconds: a non-negative LONG.
fn millis(key: &str, raw: &str) -> Result<Duration, BrokerError> {
    let v = long(key, raw)?;
    u64::try_from(v)
        .map(Duration::from_millis)
        .map_err(|_| BrokerError::Config(format!("{key} must be >= 0, got {v}")))
}

/// A BOOLEAN property.
pub(super) fn boolean(key: &str, raw: &str) -> Result<bool, BrokerError> {
    match raw {
        "true" => Ok(true),
        "false" => Ok(false),
        other => Err(BrokerError::Config(format!(
            "{key} must be true or false, got '{other}'"
        ))),
    }
}

/// `group.coordinator.rebalance.protocols`, as Kafka reads it: a list of group types (its
/// `ValidList` of `Group.GroupType`), `classic` always among them (KafkaConfig refuses to
/// disable it); whether `consumer` is. `share` is accepted as Kafka accepts it, though Runnel
/// has no share groups (their APIs are not advertised).
fn rebalance_protocols(key: &str, raw: &str) -> Result<bool, BrokerError> {
    const TYPES: [&str; 4] = ["consumer", "classic", "share", "unknown"];
    let list: Vec<&str> = raw
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if let Some(bad) = list.iter().find(|p| !TYPES.contains(p)) {
        return Err(BrokerError::Config(format!(
            "Invalid value {bad} for configuration {key}: String must be one of: {}",
            TYPES.join(", ")
        )));
    }
    if !list.contains(&"classic") {
        return Err(BrokerError::Config(format!(
            "{key}: Disabling the 'classic' protocol is not supported."
        )));
    }
    Ok(list.contains(&"consumer"))
}

/// The unchecked parse of [`BrokerConfig::i64`] (no range).
pub(super) fn integer(key: &str, raw: &str) -> Result<i64, BrokerError> {
    raw.parse::<i64>()
        .map_err(|_| BrokerError::Config(format!("{key} must be an integer, got '{raw}'")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn config(props: &[(&str, &str)]) -> BrokerConfig {
        BrokerConfig {
            node_id: 1,
            listen: "127.0.0.1:0".parse().unwrap(),
            advertise: None,
            data_dir: "./x".into(),
            log_dirs: vec!["./x".into()],
            cluster: None,
            props: props
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            dynamic: Default::default(),
        }
    }

    #[test]
    fn kafkas_defaults_resolve() {
        let s = BrokerSettings::resolve(&config(&[])).unwrap();
        assert_eq!(s.socket_request_max_bytes, 104_857_600);
        assert!(s.auto_create_topics_enable);
        assert_eq!(s.fetch_max_bytes, 57_671_680);
        assert_eq!(s.replica_fetch_response_max_bytes, 10_485_760);
        assert_eq!(s.max_request_partition_size_limit, 2000);
        assert_eq!(s.offsets_topic_num_partitions, 50);
        assert_eq!((s.quota_window_num, s.quota_window_size_seconds), (11, 1));
        assert_eq!(s.producer_id_expiration_ms, 86_400_000);
        assert_eq!(
            s.producer_id_expiration_check_interval,
            Duration::from_millis(600_000)
        );
        assert!(s.consumer_protocol_enabled, "Kafka 4.x: classic,consumer");
    }

    #[test]
    fn rebalance_protocols_as_kafka_reads_them() {
        let key = "group.coordinator.rebalance.protocols";
        let enabled = |raw| rebalance_protocols(key, raw).map_err(|e| e.to_string());
        assert_eq!(enabled("classic"), Ok(false));
        assert_eq!(enabled("classic,consumer"), Ok(true));
        assert_eq!(enabled(" consumer , classic,share"), Ok(true));
        assert_eq!(
            enabled("classic,streams"),
            Err(
                "invalid configuration: Invalid value streams for configuration \
                 group.coordinator.rebalance.protocols: \
                 String must be one of: consumer, classic, share, unknown"
                    .into()
            )
        );
        let without_classic = enabled("consumer").unwrap_err();
        assert!(
            without_classic.ends_with("Disabling the 'classic' protocol is not supported."),
            "{without_classic}"
        );
        // Kafka's ValidString is case-sensitive.
        assert!(enabled("classic,CONSUMER").is_err());
    }

    #[test]
    fn every_table_default_is_within_its_range() {
        for d in super::super::defs::DEFAULTS {
            if d.min.is_some() || d.max.is_some() {
                long(d.name, d.default).unwrap();
            }
        }
    }

    #[test]
    fn an_invalid_value_is_an_error_or_kafkas_default() {
        for (key, bad) in [
            ("fetch.max.bytes", "2147483648"),
            ("fetch.max.bytes", "-1"),
            ("socket.request.max.bytes", "0"),
            ("quota.window.num", "x"),
            ("auto.create.topics.enable", "yes"),
            ("producer.id.expiration.check.interval.ms", "0"),
            ("group.coordinator.rebalance.protocols", "consumer"),
            ("group.coordinator.rebalance.protocols", "classic,Consumer"),
        ] {
            let c = config(&[(key, bad)]);
            let e = BrokerSettings::resolve(&c).unwrap_err().to_string();
            assert!(e.contains(key), "{key}={bad}: {e}");
            assert_eq!(
                c.settings(),
                BrokerSettings::resolve(&config(&[])).unwrap(),
                "{key}={bad}: the lenient read falls back to Kafka's default"
            );
        }
    }
}
