//! The broker's background tasks: retention and checkpoints, the log cleaner, and the
//! per-broker dynamic configs kept current from the image.

use std::sync::Arc;
use std::time::Duration;

use runnel_metadata::MetadataImage;
use tokio::sync::watch;

use super::settings::NodeSettings;
use crate::clock::now_ms;
use crate::context::Broker;
use crate::log_dir_failure::LogDirFailure;
use crate::replica::manager::ReplicaManager;

/// Starts the tasks that run until shutdown: the ISR shrinker, the log cleaner, producer-state
/// expiry, the log-directory failure watch (its receiver is returned) and housekeeping.
pub(super) fn spawn_all(
    broker: &Broker,
    settings: &NodeSettings,
    shutdown: &watch::Receiver<bool>,
) -> watch::Receiver<Option<LogDirFailure>> {
    let replicas = &broker.replicas;
    crate::replica::isr::spawn_shrinker(
        replicas.clone(),
        broker.controller.clone(),
        settings.replica_lag_time_max_ms,
        shutdown.clone(),
    );
    if let Some(every) = settings.cleaner_every {
        spawn_cleaner(replicas.clone(), every, shutdown.clone());
    }
    crate::producer_expiry::spawn(
        replicas.clone(),
        crate::producer_expiry::ProducerExpiry::from_config(&broker.config),
        shutdown.clone(),
    );
    let metadata_dir = crate::log_dir_failure::metadata_dir(&broker.config);
    let log_dir_failure =
        crate::log_dir_failure::spawn_watch(replicas.clone(), metadata_dir, shutdown.clone());
    spawn_housekeeping(
        replicas.clone(),
        settings.retention_every,
        settings.checkpoint_every,
        shutdown.clone(),
    );
    log_dir_failure
}

/// Keeps [`BrokerConfig::dynamic`](crate::config::BrokerConfig::dynamic) equal to this broker's per-broker dynamic configs in the
/// image (AlterConfigs on broker `<node_id>`), so a changed
/// `listener.name.<l>.ssl.keystore.location` is used by the next TLS connection either way.
pub(super) async fn follow_dynamic_configs(
    dynamic: crate::config::DynamicConfigs,
    node_id: i32,
    mut image: watch::Receiver<Arc<MetadataImage>>,
) {
    let resource = node_id.to_string();
    loop {
        let now = image.borrow_and_update().broker_configs(&resource);
        if *dynamic.read() != now {
            tracing::info!(keys = ?now.keys().collect::<Vec<_>>(), "dynamic broker configs of this broker changed");
            *dynamic.write() = now;
        }
        if image.changed().await.is_err() {
            return;
        }
    }
}

/// Retention and checkpoints on their own timers; blocking file work goes to the blocking pool.
fn spawn_housekeeping(
    replicas: Arc<ReplicaManager>,
    retention_every: Duration,
    checkpoint_every: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    tokio::spawn(async move {
        let mut retention = tokio::time::interval(retention_every);
        let mut checkpoint = tokio::time::interval(checkpoint_every);
        loop {
            tokio::select! {
                _ = retention.tick() => {
                    let r = replicas.clone();
                    let _ = tokio::task::spawn_blocking(move || {
                        let deleted = r.enforce_retention(now_ms());
                        if deleted > 0 {
                            tracing::info!(deleted, "retention deleted segments");
                        }
                    }).await;
                }
                _ = checkpoint.tick() => {
                    let r = replicas.clone();
                    let _ = tokio::task::spawn_blocking(move || {
                        // Flushing before the checkpoint moves the recovery point, so an
                        // unclean restart only re-validates the last interval's data.
                        if let Err(e) = r.logs().flush_all().and_then(|()| r.logs().checkpoint()) {
                            tracing::error!(error = %e, "writing checkpoints failed");
                        }
                    }).await;
                }
                _ = shutdown.changed() => return,
            }
        }
    });
}

/// The log cleaner: its own task, so a long compaction never delays retention or checkpoints.
fn spawn_cleaner(
    replicas: Arc<ReplicaManager>,
    every: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let r = replicas.clone();
                    let _ = tokio::task::spawn_blocking(move || r.compact_logs(now_ms())).await;
                }
                _ = shutdown.changed() => return,
            }
        }
    });
}
