//! ISR maintenance on the leader (spec E.2): followers that catch up rejoin, followers that
//! lag for `replica.lag.time.max.ms` leave. Changes go to the controller (AlterPartition) and
//! only take effect when the committed image says so; one change per partition is in flight.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::clock::now_ms;
use crate::controller::client::ControllerClient;
use crate::replica::manager::ReplicaManager;
use crate::replica::partition::Partition;

/// Sends a pending ISR change to the controller in the background (a fetch must not wait for
/// it), and again after a pause while the answer says nothing about the change (no controller,
/// a timeout). The retries end when the answer settles it, or when it is no longer the pending
/// change (the image settled it, or leadership moved on).
pub fn propose(
    controller: ControllerClient,
    partition: Arc<Partition>,
    request: crate::controller::shell::AlterIsr,
) {
    tokio::spawn(async move {
        let mut pause = Duration::from_millis(100);
        loop {
            let answer = controller
                .run_within(request.clone(), Duration::from_secs(5))
                .await
                .map_err(|e| {
                    tracing::debug!(topic = %partition.topic, partition = partition.index, code = e.code, error = %e.message, "ISR change refused");
                    e.code
                });
            // The partition wakes its own waiters when the answer moves its HW.
            let outcome = partition.isr_change_answered(&request, answer);
            if !outcome.retry {
                return;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(2));
        }
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
                        if let Some(request) = p.isr_shrink(now) {
                            tracing::info!(topic = %p.topic, partition = p.index, isr = ?request.new_isr, "shrinking the ISR");
                            propose(controller.clone(), p, request);
                        }
                    }
                }
                _ = shutdown.changed() => return,
            }
        }
    });
}
