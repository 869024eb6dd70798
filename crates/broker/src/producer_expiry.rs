//! The timer of idempotent-producer expiry (Kafka's `producer.id.expiration.check.interval.ms`
//! task): every interval, each local partition forgets the producers whose last batch is
//! `producer.id.expiration.ms` old. Leaders and followers expire alike, from the timestamps in
//! the batches, so a follower that becomes leader holds the same producers as its old leader.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::clock::now_ms;
use crate::config::BrokerConfig;
use crate::replica::manager::ReplicaManager;

/// `producer.id.expiration.ms` and its check interval, from the broker configuration.
#[derive(Debug, Clone, Copy)]
pub struct ProducerExpiry {
    pub expiration_ms: i64,
    pub check_every: Duration,
}

impl ProducerExpiry {
    pub fn from_config(config: &BrokerConfig) -> Self {
        let settings = config.settings();
        ProducerExpiry {
            expiration_ms: settings.producer_id_expiration_ms,
            check_every: settings.producer_id_expiration_check_interval,
        }
    }
}

/// Runs the expiry pass every `check_every` until shutdown.
pub fn spawn(
    replicas: Arc<ReplicaManager>,
    expiry: ProducerExpiry,
    mut shutdown: watch::Receiver<bool>,
) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(expiry.check_every);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = every.tick() => {
                    let now = now_ms();
                    let removed: usize = replicas
                        .all()
                        .iter()
                        .map(|p| p.expire_producers(now, expiry.expiration_ms))
                        .sum();
                    if removed > 0 {
                        tracing::info!(removed, "expired idempotent producer ids");
                    }
                }
                _ = shutdown.changed() => return,
            }
        }
    });
}
