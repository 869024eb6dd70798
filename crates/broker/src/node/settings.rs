//! The start-up settings read once from the configuration: the controller's, the timers of
//! the background tasks and the coordinators'. Each keeps Kafka's property name and default,
//! and the floor start-up has always applied to it.

use std::time::Duration;

use runnel_metadata::{BrokerDefaults, ControllerConfig, PlacementPolicy};

use crate::config::BrokerConfig;

/// What `start` hands the controller task, the background tasks and the coordinators.
pub(super) struct NodeSettings {
    pub controller: ControllerConfig,
    /// `auto.leader.rebalance.enable`: how often, and the imbalance percentage that triggers it.
    pub leader_rebalance: Option<(Duration, u32)>,
    pub session_timeout: Duration,
    /// `log.cleaner.backoff.ms`, when `log.cleaner.enable`.
    pub cleaner_every: Option<Duration>,
    pub retention_every: Duration,
    pub checkpoint_every: Duration,
    pub replica_lag_time_max_ms: i64,
    pub group: runnel_group::GroupConfig,
    pub txn: runnel_txn::TxnConfig,
}

impl NodeSettings {
    pub fn from_config(config: &BrokerConfig, defaults: &BrokerDefaults) -> Self {
        let cleaner_every = config
            .get_bool("log.cleaner.enable", true)
            .then(|| millis(config, "log.cleaner.backoff.ms", 15_000));
        NodeSettings {
            controller: controller_config(config, defaults),
            leader_rebalance: leader_rebalance(config),
            session_timeout: millis(config, "broker.session.timeout.ms", 9000),
            cleaner_every,
            retention_every: millis(config, "log.retention.check.interval.ms", 300_000),
            checkpoint_every: millis(config, "log.flush.offset.checkpoint.interval.ms", 60_000),
            replica_lag_time_max_ms: config.get_i64("replica.lag.time.max.ms", 30_000).max(1),
            group: group_config(config),
            txn: txn_config(config),
        }
    }
}

/// A duration property in milliseconds, at least 1 ms.
fn millis(config: &BrokerConfig, key: &str, default: i64) -> Duration {
    Duration::from_millis(config.get_i64(key, default).max(1).unsigned_abs())
}

fn controller_config(config: &BrokerConfig, defaults: &BrokerDefaults) -> ControllerConfig {
    let placement = match config.str("replica.placement.policy") {
        "kafka" => PlacementPolicy::Kafka,
        _ => PlacementPolicy::ClusterAware,
    };
    ControllerConfig {
        num_partitions: config.get_i32("num.partitions", 1),
        default_replication_factor: config.get_i16("default.replication.factor", 1),
        delete_topic_enable: config.get_bool("delete.topic.enable", true),
        placement,
        defaults: defaults.clone(),
        max_events: 10_000,
    }
}

/// Preferred-leader rebalance only matters with several brokers (spec F).
fn leader_rebalance(config: &BrokerConfig) -> Option<(Duration, u32)> {
    config
        .get_bool("auto.leader.rebalance.enable", true)
        .then(|| {
            let every = config
                .get_i64("leader.imbalance.check.interval.seconds", 300)
                .max(1);
            let percentage = config
                .get_i64("leader.imbalance.per.broker.percentage", 10)
                .clamp(0, 100);
            (
                Duration::from_secs(every.unsigned_abs()),
                // Clamped to 0..=100 above.
                u32::try_from(percentage).unwrap_or(100),
            )
        })
}

fn group_config(config: &BrokerConfig) -> runnel_group::GroupConfig {
    runnel_group::GroupConfig {
        min_session_timeout_ms: config.get_i32("group.min.session.timeout.ms", 6000),
        max_session_timeout_ms: config.get_i32("group.max.session.timeout.ms", 1_800_000),
        initial_rebalance_delay_ms: config.get_i32("group.initial.rebalance.delay.ms", 3000),
        max_size: config.get_i64("group.max.size", i32::MAX as i64).max(1) as usize,
        offset_metadata_max_bytes: config.get_i64("offset.metadata.max.bytes", 4096).max(0)
            as usize,
        offsets_retention_ms: config
            .get_i64("offsets.retention.minutes", 10080)
            .saturating_mul(60_000),
        offsets_retention_check_interval_ms: config
            .get_i64("offsets.retention.check.interval.ms", 600_000),
    }
}

fn txn_config(config: &BrokerConfig) -> runnel_txn::TxnConfig {
    runnel_txn::TxnConfig {
        max_timeout_ms: i32::try_from(config.get_i64("transaction.max.timeout.ms", 900_000))
            .unwrap_or(i32::MAX),
        id_expiration_ms: config.get_i64("transactional.id.expiration.ms", 604_800_000),
    }
}
