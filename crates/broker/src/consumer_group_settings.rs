//! The broker's `group.consumer.*` properties (KIP-848 groups), checked as Kafka's
//! `GroupCoordinatorConfig` checks them: every interval at least 1 ms, each default inside its
//! min/max bounds, the heartbeat interval below the session timeout, and assignors Kafka knows
//! (by short name or by Kafka's class name), and `group.consumer.migration.policy` one of
//! Kafka's four values (case-insensitive). An invalid value is a startup error.

use std::collections::BTreeMap;

use runnel_group::consumer_group::{
    ConsumerGroupConfig, GroupTimeouts, MigrationPolicy, KNOWN_ASSIGNORS,
};
use runnel_metadata::{effective_group_config, BrokerDefaults, ConfigResource, MetadataImage};

use crate::config::BrokerConfig;
use crate::BrokerError;

/// The validated settings every KIP-848 group starts from (a group's own configs, resource
/// type 32, override the session timeout and heartbeat interval).
pub fn consumer_group_config(config: &BrokerConfig) -> Result<ConsumerGroupConfig, BrokerError> {
    let ms = |key: &str| -> Result<i32, BrokerError> {
        let v = config.i64(key)?;
        i32::try_from(v)
            .ok()
            .filter(|v| *v >= 1)
            .ok_or_else(|| invalid(key, &v.to_string(), "must be between 1 and 2147483647"))
    };
    let session = ms("group.consumer.session.timeout.ms")?;
    let interval = ms("group.consumer.heartbeat.interval.ms")?;
    within(
        "group.consumer.session.timeout.ms",
        session,
        ms("group.consumer.min.session.timeout.ms")?,
        ms("group.consumer.max.session.timeout.ms")?,
    )?;
    within(
        "group.consumer.heartbeat.interval.ms",
        interval,
        ms("group.consumer.min.heartbeat.interval.ms")?,
        ms("group.consumer.max.heartbeat.interval.ms")?,
    )?;
    if interval >= session {
        return Err(BrokerError::Config(
            "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms"
                .into(),
        ));
    }
    let max_size = usize::try_from(ms("group.consumer.max.size")?).unwrap_or(usize::MAX);
    let policy = config.str("group.consumer.migration.policy");
    let migration_policy = MigrationPolicy::parse(policy).ok_or_else(|| {
        invalid(
            "group.consumer.migration.policy",
            policy,
            "must be one of bidirectional, upgrade, downgrade, disabled",
        )
    })?;
    Ok(ConsumerGroupConfig {
        session_timeout_ms: session,
        heartbeat_interval_ms: interval,
        assignors: assignors(config.str("group.consumer.assignors"))?,
        max_size,
        migration_policy,
        // `group.max.size`: the group task sets it from the classic groups' config.
        ..ConsumerGroupConfig::default()
    })
}

/// `group.consumer.assignors`: short names or Kafka's assignor classes, in order.
pub fn assignors(raw: &str) -> Result<Vec<String>, BrokerError> {
    let mut out = Vec::new();
    for name in raw.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let short = match name.rsplit('.').next().unwrap_or(name) {
            "UniformAssignor" => "uniform",
            "RangeAssignor" => "range",
            other => other,
        };
        if !KNOWN_ASSIGNORS.contains(&short) {
            return Err(invalid(
                "group.consumer.assignors",
                raw,
                &format!("unknown assignor {name} (known: uniform, range)"),
            ));
        }
        if !out.iter().any(|a| a == short) {
            out.push(short.to_string());
        }
    }
    if out.is_empty() {
        return Err(invalid(
            "group.consumer.assignors",
            raw,
            "must name at least one assignor",
        ));
    }
    Ok(out)
}

fn within(key: &str, value: i32, min: i32, max: i32) -> Result<(), BrokerError> {
    if min > max {
        return Err(BrokerError::Config(format!(
            "the minimum of {key} ({min}) is above its maximum ({max})"
        )));
    }
    if !(min..=max).contains(&value) {
        return Err(invalid(
            key,
            &value.to_string(),
            &format!("must be between {min} and {max}"),
        ));
    }
    Ok(())
}

fn invalid(key: &str, value: &str, why: &str) -> BrokerError {
    BrokerError::Config(format!(
        "Invalid value {value} for configuration {key}: {why}"
    ))
}

/// The timeouts of every group that has its own configs in `image` (Kafka's
/// `GroupConfigManager`): each override over the broker's `group.consumer.*` (`defaults`,
/// with the image's dynamic broker configs on top).
pub fn group_timeouts(
    image: &MetadataImage,
    defaults: &BrokerDefaults,
) -> BTreeMap<String, GroupTimeouts> {
    image
        .configs
        .iter()
        .filter_map(|(resource, overrides)| match resource {
            ConfigResource::Group(group) if !overrides.is_empty() => {
                let effective = effective_group_config(overrides, defaults);
                let timeouts = GroupTimeouts {
                    session_timeout_ms: effective.consumer_session_timeout_ms,
                    heartbeat_interval_ms: effective.consumer_heartbeat_interval_ms,
                };
                Some((group.clone(), timeouts))
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignor_names_and_classes() {
        let classes = "org.apache.kafka.coordinator.group.assignor.UniformAssignor, \
                       org.apache.kafka.coordinator.group.assignor.RangeAssignor";
        assert_eq!(assignors(classes).expect("valid"), vec!["uniform", "range"]);
        assert_eq!(
            assignors("range,uniform,range").expect("valid"),
            vec!["range", "uniform"]
        );
        assert!(assignors("sticky").is_err());
        assert!(assignors(" , ").is_err());
    }
}
