//! The broker-level values a topic config falls back to.
//!
//! Kafka resolves a topic key by looking at the topic's override, then at each broker synonym
//! in order (e.g. `log.retention.ms`, then `log.retention.minutes`, then
//! `log.retention.hours`), each in the broker's dynamic config, the cluster-wide dynamic
//! default and the static `server.properties`, and finally at Kafka's default. The synonym
//! order wins over the source order (a static `log.retention.ms` beats a dynamic
//! `log.retention.hours`), exactly as Kafka derives `LogConfig` from `KafkaConfig`.

use std::collections::BTreeMap;

use super::describe::ConfigSource;
use super::keys::{ConfigType, TopicConfigDef};
use crate::image::MetadataImage;

/// The broker properties (Kafka names) topics fall back to, by source.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrokerDefaults {
    /// The broker's static properties (`server.properties`, flags, overrides).
    pub props: BTreeMap<String, String>,
    /// Dynamic cluster-wide defaults (`ConfigResource::Broker("")`).
    pub dynamic_default: BTreeMap<String, String>,
    /// Dynamic configs of this broker (`ConfigResource::Broker("<id>")`).
    pub dynamic_broker: BTreeMap<String, String>,
}

impl From<BTreeMap<String, String>> for BrokerDefaults {
    fn from(props: BTreeMap<String, String>) -> Self {
        Self::new(props)
    }
}

impl BrokerDefaults {
    /// Defaults from the broker's static properties only.
    pub fn new(props: BTreeMap<String, String>) -> Self {
        Self {
            props,
            ..Self::default()
        }
    }

    /// The same static properties layered under the dynamic broker configs in `image`
    /// (cluster default, plus broker `broker_id`'s own if given).
    pub fn with_dynamic(&self, image: &MetadataImage, broker_id: Option<i32>) -> Self {
        Self {
            props: self.props.clone(),
            dynamic_default: image.broker_configs(""),
            dynamic_broker: broker_id
                .map(|id| image.broker_configs(&id.to_string()))
                .unwrap_or_default(),
        }
    }

    /// A broker property by precedence (dynamic broker, dynamic default, static).
    pub fn get(&self, property: &str) -> Option<(&str, ConfigSource)> {
        [
            (&self.dynamic_broker, ConfigSource::DynamicBroker),
            (&self.dynamic_default, ConfigSource::DynamicDefaultBroker),
            (&self.props, ConfigSource::StaticBroker),
        ]
        .into_iter()
        .find_map(|(map, source)| map.get(property).map(|v| (v.as_str(), source)))
    }

    /// The value a topic without an override gets for `def`, in the topic key's unit, and
    /// where it comes from; Kafka's default if no synonym is set (or parses).
    pub fn resolve(&self, def: &TopicConfigDef) -> (String, ConfigSource) {
        for synonym in def.synonyms {
            let Some((raw, source)) = self.get(synonym.name) else {
                continue;
            };
            if synonym.multiplier == 1 {
                return (raw.trim().to_string(), source);
            }
            // A unit-converted numeric synonym (minutes/hours -> ms). Kafka maps negative
            // retention to -1 ("unlimited") whatever the unit.
            debug_assert_eq!(def.ty, ConfigType::Long);
            if let Ok(n) = raw.trim().parse::<i64>() {
                let ms = if n < 0 {
                    -1
                } else {
                    n.saturating_mul(synonym.multiplier)
                };
                return (ms.to_string(), source);
            }
        }
        (def.default.to_string(), ConfigSource::Default)
    }
}
