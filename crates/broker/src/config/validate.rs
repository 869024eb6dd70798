//! Start-up validation: every property in force fits its type and range, and the settings
//! derived from several properties (limits, listeners, groups, authorizer) resolve.

use super::defs::DEFAULTS;
use super::{BrokerConfig, BrokerSettings};
use crate::BrokerError;

impl BrokerConfig {
    pub(super) fn validate(&self) -> Result<(), BrokerError> {
        if self.node_id < 0 {
            return Err(BrokerError::Config(format!(
                "--node-id must be >= 0, got {}",
                self.node_id
            )));
        }
        // The ranges of the table (`defs`), then every typed property's KIP-569 type.
        for d in DEFAULTS
            .iter()
            .filter(|d| d.min.is_some() || d.max.is_some())
        {
            self.ranged_i64(d.name)?;
        }
        self.check_types()?;
        BrokerSettings::resolve(self)?;
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
}
