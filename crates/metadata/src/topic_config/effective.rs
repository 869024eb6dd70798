//! The typed config a partition log runs with: overrides, then broker synonyms, then Kafka's
//! defaults, parsed once so the log never handles strings.

use std::collections::BTreeMap;

use super::defaults::BrokerDefaults;
use super::keys::topic_config_def;
use super::validate::{parse_value, ConfigValue};

/// The effective topic configuration used by the log and the produce path.
#[derive(Debug, Clone, PartialEq)]
pub struct EffectiveTopicConfig {
    pub cleanup_policy: String,
    pub retention_ms: i64,
    pub retention_bytes: i64,
    pub segment_bytes: u64,
    pub segment_ms: i64,
    pub segment_jitter_ms: i64,
    pub segment_index_bytes: u32,
    pub index_interval_bytes: u32,
    pub max_message_bytes: i32,
    pub min_insync_replicas: i32,
    pub flush_messages: i64,
    pub flush_ms: i64,
    pub file_delete_delay_ms: i64,
    pub message_timestamp_type: String,
    pub message_timestamp_before_max_ms: i64,
    pub message_timestamp_after_max_ms: i64,
    pub unclean_leader_election_enable: bool,
    pub compression_type: String,
    pub delete_retention_ms: i64,
    pub min_compaction_lag_ms: i64,
    pub max_compaction_lag_ms: i64,
    pub min_cleanable_dirty_ratio: f64,
    pub preallocate: bool,
}

impl EffectiveTopicConfig {
    /// Whether old segments are deleted by time/size (`delete` in the policy list).
    pub fn deletes(&self) -> bool {
        self.cleanup_policy.split(',').any(|p| p.trim() == "delete")
    }

    /// Whether the log is compacted (`compact` in the policy list).
    pub fn compacts(&self) -> bool {
        self.cleanup_policy
            .split(',')
            .any(|p| p.trim() == "compact")
    }
}

/// Resolves one key to a typed value: override, broker synonym, Kafka default. A stored
/// value that does not parse (it was validated before being committed, so this means a
/// hand-edited log or a broker property typo) falls through to the next source.
fn lookup(
    name: &str,
    overrides: &BTreeMap<String, String>,
    defaults: &BrokerDefaults,
) -> ConfigValue {
    let Some(def) = topic_config_def(name) else {
        debug_assert!(false, "effective config asks for unknown key {name}");
        return ConfigValue::String(String::new());
    };
    let candidates = [
        overrides.get(name).cloned(),
        Some(defaults.resolve(def).0),
        Some(def.default.to_string()),
    ];
    for candidate in candidates.into_iter().flatten() {
        match parse_value(def, &candidate) {
            Ok(v) => return v,
            Err(e) => {
                tracing::warn!(config = name, value = %candidate, error = %e, "ignoring invalid config value")
            }
        }
    }
    debug_assert!(false, "Kafka default of {name} does not validate");
    ConfigValue::String(def.default.to_string())
}

fn long(name: &str, o: &BTreeMap<String, String>, d: &BrokerDefaults) -> i64 {
    match lookup(name, o, d) {
        ConfigValue::Long(v) => v,
        ConfigValue::Int(v) => i64::from(v),
        _ => 0,
    }
}

fn int(name: &str, o: &BTreeMap<String, String>, d: &BrokerDefaults) -> i32 {
    match lookup(name, o, d) {
        ConfigValue::Int(v) => v,
        ConfigValue::Long(v) => i32::try_from(v).unwrap_or(i32::MAX),
        _ => 0,
    }
}

fn string(name: &str, o: &BTreeMap<String, String>, d: &BrokerDefaults) -> String {
    match lookup(name, o, d) {
        ConfigValue::String(s) => s,
        ConfigValue::List(items) => items.join(","),
        _ => String::new(),
    }
}

fn boolean(name: &str, o: &BTreeMap<String, String>, d: &BrokerDefaults) -> bool {
    matches!(lookup(name, o, d), ConfigValue::Boolean(true))
}

fn double(name: &str, o: &BTreeMap<String, String>, d: &BrokerDefaults) -> f64 {
    match lookup(name, o, d) {
        ConfigValue::Double(v) => v,
        _ => 0.0,
    }
}

/// The effective config of a topic with `overrides` on a broker with `defaults`.
pub fn effective_topic_config(
    overrides: &BTreeMap<String, String>,
    defaults: &BrokerDefaults,
) -> EffectiveTopicConfig {
    let o = overrides;
    let d = defaults;
    // The validators guarantee these are non-negative (segment.bytes >= 14, index sizes >= 0).
    let non_negative_u32 = |v: i32| u32::try_from(v).unwrap_or(0);
    EffectiveTopicConfig {
        cleanup_policy: string("cleanup.policy", o, d),
        retention_ms: long("retention.ms", o, d),
        retention_bytes: long("retention.bytes", o, d),
        segment_bytes: u64::from(non_negative_u32(int("segment.bytes", o, d))),
        segment_ms: long("segment.ms", o, d),
        segment_jitter_ms: long("segment.jitter.ms", o, d),
        segment_index_bytes: non_negative_u32(int("segment.index.bytes", o, d)),
        index_interval_bytes: non_negative_u32(int("index.interval.bytes", o, d)),
        max_message_bytes: int("max.message.bytes", o, d),
        min_insync_replicas: int("min.insync.replicas", o, d),
        flush_messages: long("flush.messages", o, d),
        flush_ms: long("flush.ms", o, d),
        file_delete_delay_ms: long("file.delete.delay.ms", o, d),
        message_timestamp_type: string("message.timestamp.type", o, d),
        message_timestamp_before_max_ms: long("message.timestamp.before.max.ms", o, d),
        message_timestamp_after_max_ms: long("message.timestamp.after.max.ms", o, d),
        unclean_leader_election_enable: boolean("unclean.leader.election.enable", o, d),
        compression_type: string("compression.type", o, d),
        delete_retention_ms: long("delete.retention.ms", o, d),
        min_compaction_lag_ms: long("min.compaction.lag.ms", o, d),
        max_compaction_lag_ms: long("max.compaction.lag.ms", o, d),
        min_cleanable_dirty_ratio: double("min.cleanable.dirty.ratio", o, d),
        preallocate: boolean("preallocate", o, d),
    }
}
