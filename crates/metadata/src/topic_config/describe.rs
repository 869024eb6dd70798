//! DescribeConfigs for topics: every key with its value and where the value comes from.

use std::collections::BTreeMap;

use super::defaults::BrokerDefaults;
use super::keys::TOPIC_CONFIGS;

/// Where a config value comes from (DescribeConfigs `config_source`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum ConfigSource {
    TopicOverride,
    DynamicBroker,
    DynamicDefaultBroker,
    StaticBroker,
    Default,
    /// A group config resource's own override (KIP-848 group configs).
    Group,
}

impl ConfigSource {
    /// Kafka's id: 1 topic, 2 dynamic broker, 3 dynamic default broker, 4 static broker,
    /// 5 default, 8 group.
    pub fn id(self) -> i8 {
        match self {
            ConfigSource::TopicOverride => 1,
            ConfigSource::DynamicBroker => 2,
            ConfigSource::DynamicDefaultBroker => 3,
            ConfigSource::StaticBroker => 4,
            ConfigSource::Default => 5,
            ConfigSource::Group => 8,
        }
    }
}

/// One described config.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ConfigEntry {
    pub name: String,
    pub value: Option<String>,
    pub source: ConfigSource,
    pub read_only: bool,
    pub sensitive: bool,
    pub is_default: bool,
}

/// All topic configs (sorted by name) as a topic with `overrides` sees them on a broker with
/// `defaults`. Overrides of keys Kafka does not know (never written by our controller, but a
/// log could hold them) are listed too, so nothing stored is hidden.
pub fn describe_topic_configs(
    overrides: &BTreeMap<String, String>,
    defaults: &BrokerDefaults,
) -> Vec<ConfigEntry> {
    let mut entries: BTreeMap<&str, ConfigEntry> = BTreeMap::new();
    for def in TOPIC_CONFIGS {
        let (value, source) = match overrides.get(def.name) {
            Some(v) => (v.clone(), ConfigSource::TopicOverride),
            None => defaults.resolve(def),
        };
        entries.insert(def.name, entry(def.name, value, source));
    }
    for (name, value) in overrides {
        entries
            .entry(name.as_str())
            .or_insert_with(|| entry(name, value.clone(), ConfigSource::TopicOverride));
    }
    entries.into_values().collect()
}

fn entry(name: &str, value: String, source: ConfigSource) -> ConfigEntry {
    ConfigEntry {
        name: name.to_string(),
        value: Some(value),
        source,
        read_only: false,
        sensitive: false,
        is_default: source == ConfigSource::Default,
    }
}
