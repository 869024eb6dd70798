//! ISR maintenance on the leader (spec E.2): followers that catch up rejoin, followers that
//! lag for `replica.lag.time.max.ms` leave. Changes go to the controller (AlterPartition) and
//! only take effect when the committed image says so; one change per partition is in flight.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::clock::now_ms;
use crate::controller_client::ControllerClient;
use crate::partition::Partition;
use crate::replica_manager::ReplicaManager;

/// Sends `isr` for `partition` in the background (a fetch must not wait for the controller).
pub fn propose(controller: ControllerClient, partition: Arc<Partition>, isr: Vec<i32>) {
    let Some(request) = partition.begin_isr_change(isr) else {
        return;
    };
    tokio::spawn(async move {
        let accepted = match controller.alter_partition(request).await {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!(topic = %partition.topic, partition = partition.index, error = %e.message, "ISR change refused");
                false
            }
        };
        partition
            .end_isr_change(accepted, Duration::from_secs(5))
            .await;
    });
}

/// Checks every led partition for lagging followers every `lag_max / 2` (as Kafka does).
pub fn spawn_shrinker(
    replicas: Arc<ReplicaManager>,
    controller: ControllerClient,
    lag_max_ms: i64,
    mut shutdown: watch::Receiver<bool>,
) {
    let every = Duration::from_millis((lag_max_ms / 2).clamp(100, 15_000) as u64);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let now = now_ms();
                    for p in replicas.all() {
                        if let Some(isr) = p.isr_shrink(now, lag_max_ms) {
                            tracing::info!(topic = %p.topic, partition = p.index, ?isr, "shrinking the ISR");
                            propose(controller.clone(), p, isr);
                        }
                    }
                }
                _ = shutdown.changed() => return,
            }
        }
    });
}
