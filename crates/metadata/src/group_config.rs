//! Group configuration resources (DescribeConfigs / IncrementalAlterConfigs resource type 32,
//! KIP-848 / KIP-932): per-group overrides of the group coordinator's settings, stored as
//! Config records of resource `Group(<group id>)` like Kafka's `ConfigRecord` with resource
//! type GROUP. The keys and checks are Kafka 4.0's `GroupConfig`: each key is typed and has a
//! floor; a value must also lie within the broker's `group.consumer.min/max.*` and
//! `group.share.min/max.*` settings, and a session timeout must exceed its heartbeat interval.
//! A key that is not overridden takes the broker's `group.*` property (its synonym), else
//! Kafka's default.

use std::collections::BTreeMap;

use crate::errors::ApiError;
use crate::topic_config::{
    parse_value, BrokerDefaults, ConfigEntry, ConfigSource, ConfigType, ConfigValue, Synonym,
    TopicConfigDef, Validator,
};

/// The allowed `share.auto.offset.reset` values.
pub const SHARE_AUTO_OFFSET_RESETS: &[&str] = &["latest", "earliest"];

const fn group_key(
    name: &'static str,
    ty: ConfigType,
    default: &'static str,
    synonyms: &'static [Synonym],
    validator: Validator,
) -> TopicConfigDef {
    TopicConfigDef {
        name,
        ty,
        default,
        synonyms,
        validator,
    }
}

const fn syn(name: &'static str) -> Synonym {
    Synonym {
        name,
        multiplier: 1,
    }
}

/// Every group config key (Kafka 4.0's `GroupConfig`), sorted by name.
pub static GROUP_CONFIGS: &[TopicConfigDef] = &[
    group_key(
        "consumer.heartbeat.interval.ms",
        ConfigType::Int,
        "5000",
        &[syn("group.consumer.heartbeat.interval.ms")],
        Validator::AtLeast(1),
    ),
    group_key(
        "consumer.session.timeout.ms",
        ConfigType::Int,
        "45000",
        &[syn("group.consumer.session.timeout.ms")],
        Validator::AtLeast(1),
    ),
    group_key(
        "share.auto.offset.reset",
        ConfigType::String,
        "latest",
        &[],
        Validator::OneOf(SHARE_AUTO_OFFSET_RESETS),
    ),
    group_key(
        "share.heartbeat.interval.ms",
        ConfigType::Int,
        "5000",
        &[syn("group.share.heartbeat.interval.ms")],
        Validator::AtLeast(1),
    ),
    group_key(
        "share.record.lock.duration.ms",
        ConfigType::Int,
        "30000",
        &[syn("group.share.record.lock.duration.ms")],
        Validator::AtLeast(1000),
    ),
    group_key(
        "share.session.timeout.ms",
        ConfigType::Int,
        "45000",
        &[syn("group.share.session.timeout.ms")],
        Validator::AtLeast(1),
    ),
];

/// The definition of a group config key, if Kafka knows it.
pub fn group_config_def(name: &str) -> Option<&'static TopicConfigDef> {
    GROUP_CONFIGS
        .binary_search_by(|d| d.name.cmp(name))
        .ok()
        .map(|i| &GROUP_CONFIGS[i])
}

/// The documentation DescribeConfigs returns for a group config key.
pub fn group_config_doc(name: &str) -> Option<&'static str> {
    Some(match name {
        "consumer.heartbeat.interval.ms" => "The heartbeat interval the coordinator gives the members of this consumer group (KIP-848 protocol).",
        "consumer.session.timeout.ms" => "How long the coordinator waits for a heartbeat from a member of this consumer group (KIP-848 protocol) before it removes the member.",
        "share.auto.offset.reset" => "Where a share partition starts when the share group has no start offset for it: latest or earliest.",
        "share.heartbeat.interval.ms" => "The heartbeat interval the coordinator gives the members of this share group.",
        "share.record.lock.duration.ms" => "How long a record a share-group member acquired stays locked before it becomes available again.",
        "share.session.timeout.ms" => "How long the coordinator waits for a heartbeat from a member of this share group before it removes the member.",
        _ => return None,
    })
}

/// A broker-side `[min, max]` range a group config must lie within: (key, min property, its
/// Kafka default, max property, its Kafka default).
const BOUNDS: &[(&str, &str, i64, &str, i64)] = &[
    (
        "consumer.heartbeat.interval.ms",
        "group.consumer.min.heartbeat.interval.ms",
        5_000,
        "group.consumer.max.heartbeat.interval.ms",
        15_000,
    ),
    (
        "consumer.session.timeout.ms",
        "group.consumer.min.session.timeout.ms",
        45_000,
        "group.consumer.max.session.timeout.ms",
        60_000,
    ),
    (
        "share.heartbeat.interval.ms",
        "group.share.min.heartbeat.interval.ms",
        5_000,
        "group.share.max.heartbeat.interval.ms",
        15_000,
    ),
    (
        "share.session.timeout.ms",
        "group.share.min.session.timeout.ms",
        45_000,
        "group.share.max.session.timeout.ms",
        60_000,
    ),
    (
        "share.record.lock.duration.ms",
        "group.share.min.record.lock.duration.ms",
        15_000,
        "group.share.max.record.lock.duration.ms",
        60_000,
    ),
];

/// (session timeout key, heartbeat interval key): the first must exceed the second.
const SESSION_OVER_HEARTBEAT: &[(&str, &str)] = &[
    (
        "consumer.session.timeout.ms",
        "consumer.heartbeat.interval.ms",
    ),
    ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
];

fn broker_i64(defaults: &BrokerDefaults, property: &str, fallback: i64) -> i64 {
    defaults
        .get(property)
        .and_then(|(v, _)| v.trim().parse().ok())
        .unwrap_or(fallback)
}

/// Every key's value in force: the override, else the broker's synonym, else Kafka's default.
fn values(
    overrides: &BTreeMap<String, String>,
    defaults: &BrokerDefaults,
) -> Vec<(&'static TopicConfigDef, String, ConfigSource)> {
    GROUP_CONFIGS
        .iter()
        .map(|def| match overrides.get(def.name) {
            Some(v) => (def, v.clone(), ConfigSource::Group),
            None => {
                let (v, _) = defaults.resolve(def);
                (def, v, ConfigSource::Default)
            }
        })
        .collect()
}

/// Validates a group's complete override set as Kafka's `GroupConfig.validate` does (every
/// failure is 40 INVALID_CONFIG): known names, typed values above each key's floor, within the
/// broker's min/max settings, session timeouts above heartbeat intervals.
pub fn validate_group_configs(
    overrides: &BTreeMap<String, String>,
    defaults: &BrokerDefaults,
) -> Result<(), ApiError> {
    if let Some(unknown) = overrides.keys().find(|k| group_config_def(k).is_none()) {
        return Err(ApiError::invalid_config(format!(
            "Unknown group config name: {unknown}"
        )));
    }
    let mut ints = BTreeMap::new();
    for (def, value, _) in values(overrides, defaults) {
        if let ConfigValue::Int(n) = parse_value(def, &value)? {
            ints.insert(def.name, i64::from(n));
        }
    }
    for &(key, min_key, min_default, max_key, max_default) in BOUNDS {
        let Some(&v) = ints.get(key) else { continue };
        if v < broker_i64(defaults, min_key, min_default) {
            return Err(ApiError::invalid_config(format!(
                "{key} must be greater than or equal to {min_key}"
            )));
        }
        if v > broker_i64(defaults, max_key, max_default) {
            return Err(ApiError::invalid_config(format!(
                "{key} must be less than or equal to {max_key}"
            )));
        }
    }
    for &(session, heartbeat) in SESSION_OVER_HEARTBEAT {
        if let (Some(s), Some(h)) = (ints.get(session), ints.get(heartbeat)) {
            if s <= h {
                return Err(ApiError::invalid_config(format!(
                    "{session} must be greater than {heartbeat}"
                )));
            }
        }
    }
    Ok(())
}

/// DescribeConfigs for a group: every key, GROUP_CONFIG (8) when overridden, else
/// DEFAULT_CONFIG (5) with the broker's value (as Kafka reports it).
pub fn describe_group_configs(
    overrides: &BTreeMap<String, String>,
    defaults: &BrokerDefaults,
) -> Vec<ConfigEntry> {
    values(overrides, defaults)
        .into_iter()
        .map(|(def, value, source)| ConfigEntry {
            name: def.name.to_string(),
            value: Some(value),
            source,
            read_only: false,
            sensitive: false,
            is_default: source == ConfigSource::Default,
        })
        .collect()
}

/// The settings the group coordinator applies to one group: its overrides, else the broker's
/// `group.*` properties, else Kafka's defaults. (Stored overrides were validated when written;
/// one that does not parse falls back to the default.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectiveGroupConfig {
    pub consumer_session_timeout_ms: i32,
    pub consumer_heartbeat_interval_ms: i32,
    pub share_session_timeout_ms: i32,
    pub share_heartbeat_interval_ms: i32,
    pub share_record_lock_duration_ms: i32,
    pub share_auto_offset_reset: String,
}

/// The effective config of a group with `overrides` (`MetadataImage::group_configs`).
pub fn effective_group_config(
    overrides: &BTreeMap<String, String>,
    defaults: &BrokerDefaults,
) -> EffectiveGroupConfig {
    // The override, else the broker's value, else Kafka's default: the first that parses.
    let get = |name: &str| -> Option<ConfigValue> {
        let def = group_config_def(name)?;
        let candidates = [
            overrides.get(name).cloned(),
            Some(defaults.resolve(def).0),
            Some(def.default.to_string()),
        ];
        candidates
            .into_iter()
            .flatten()
            .find_map(|raw| parse_value(def, &raw).ok())
    };
    let int = |name: &str| match get(name) {
        Some(ConfigValue::Int(n)) => n,
        _ => 0,
    };
    let string = |name: &str| match get(name) {
        Some(ConfigValue::String(s)) => s,
        _ => String::new(),
    };
    EffectiveGroupConfig {
        consumer_session_timeout_ms: int("consumer.session.timeout.ms"),
        consumer_heartbeat_interval_ms: int("consumer.heartbeat.interval.ms"),
        share_session_timeout_ms: int("share.session.timeout.ms"),
        share_heartbeat_interval_ms: int("share.heartbeat.interval.ms"),
        share_record_lock_duration_ms: int("share.record.lock.duration.ms"),
        share_auto_offset_reset: string("share.auto.offset.reset"),
    }
}
