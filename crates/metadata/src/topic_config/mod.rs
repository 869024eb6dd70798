//! Topic-level configuration: the keys Kafka knows, their defaults (derived from the broker's
//! `log.*` properties), validation (40 INVALID_CONFIG), DescribeConfigs entries and the typed
//! effective config used by the log.

mod broker_keys;
mod defaults;
mod describe;
mod docs;
mod effective;
mod keys;
mod validate;

pub use broker_keys::broker_config_info;
pub use defaults::BrokerDefaults;
pub use describe::{describe_topic_configs, ConfigEntry, ConfigSource};
pub use docs::topic_config_doc;
pub use effective::{effective_topic_config, EffectiveTopicConfig};
pub use keys::{
    topic_config_def, topic_config_for_broker_property, ConfigType, Synonym, TopicConfigDef,
    Validator, CLEANUP_POLICIES, COMPRESSION_TYPES, TIMESTAMP_TYPES, TOPIC_CONFIGS,
};
pub use validate::{parse_value, split_list, validate_topic_config, ConfigValue};
