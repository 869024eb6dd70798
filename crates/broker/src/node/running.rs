//! The running broker's handle: what `start` returns, the wait for a log-directory failure, and
//! the way down (controlled shutdown, the end of the controller session, stop serving, flush,
//! checkpoints, the clean-shutdown marker, the quorum's shutdown).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use runnel_raft::MetadataQuorum;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::context::Broker;
use crate::log_dir_failure::LogDirFailure;
use crate::BrokerError;

/// A running broker.
pub struct RunningBroker {
    pub node_id: i32,
    pub listen_addr: SocketAddr,
    /// Every listener's name and bound address.
    pub listeners: Vec<(String, SocketAddr)>,
    pub broker: Arc<Broker>,
    pub(super) shutdown: watch::Sender<bool>,
    pub(super) server: JoinHandle<()>,
    pub(super) quorum: Option<Arc<MetadataQuorum>>,
    /// The cluster broker's heartbeats (stopped before it tells the controller it is done).
    pub(super) heartbeats: Option<JoinHandle<()>>,
    /// Turns `Some` once a hosted partition log failed (`crate::log_dir_failure`).
    pub(super) log_dir_failure: watch::Receiver<Option<LogDirFailure>>,
}

impl RunningBroker {
    /// Resolves once a hosted partition log has failed (a failed fsync, or a write that could
    /// not be undone); never resolves while the logs are healthy.
    pub async fn log_dir_failed(&self) -> LogDirFailure {
        let mut rx = self.log_dir_failure.clone();
        loop {
            if let Some(failure) = rx.borrow_and_update().clone() {
                return failure;
            }
            if rx.changed().await.is_err() {
                // The watch task stopped (shutdown) without a failure.
                std::future::pending::<()>().await;
            }
        }
    }

    /// Cluster brokers hand their leaderships to in-sync replicas before stopping (spec D.2),
    /// waiting (bounded) until this node's image shows it leads only what cannot move.
    async fn controlled_shutdown(&self) {
        let is_cluster_broker = self
            .broker
            .config
            .cluster
            .as_ref()
            .is_some_and(|c| c.broker);
        if !is_cluster_broker {
            return;
        }
        let node_id = self.node_id;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        match self
            .broker
            .controller
            .run_within(
                runnel_metadata::controller::ControlledShutdown { broker_id: node_id },
                Duration::from_secs(10),
            )
            .await
        {
            Ok(remaining) => {
                let mut image = self.broker.image.clone();
                let moved = tokio::time::timeout_at(
                    deadline,
                    image.wait_for(|i| {
                        let led = i
                            .topics
                            .values()
                            .flat_map(|t| t.partitions.values())
                            .filter(|p| p.leader == node_id)
                            .count();
                        led <= remaining
                    }),
                )
                .await;
                match moved {
                    Ok(Ok(_)) => {
                        tracing::info!(remaining, "controlled shutdown: leaderships moved")
                    }
                    _ => tracing::warn!("controlled shutdown: leaderships did not move in time"),
                }
            }
            Err(e) => {
                tracing::warn!(error = %e.message, "controlled shutdown refused; stopping anyway")
            }
        }
    }

    /// Ends the session with the controller right away (heartbeats stopped first, or the next
    /// one would unfence the broker again), so the next process of this node registers at once
    /// instead of waiting out `broker.session.timeout.ms`.
    async fn end_session(&self) {
        let Some(heartbeats) = &self.heartbeats else {
            return;
        };
        heartbeats.abort();
        if let Err(e) = self
            .broker
            .controller
            .run_within(
                runnel_metadata::controller::ShutdownComplete {
                    broker_id: self.node_id,
                },
                Duration::from_secs(3),
            )
            .await
        {
            tracing::debug!(error = %e.message, "could not end the session; it will expire");
        }
    }

    /// Stops serving, flushes every log and writes the clean-shutdown marker.
    pub async fn shutdown(self) -> Result<(), BrokerError> {
        self.controlled_shutdown().await;
        self.end_session().await;
        let _ = self.shutdown.send(true);
        let _ = self.server.await;
        let replicas = self.broker.replicas.clone();
        tokio::task::spawn_blocking(move || {
            replicas.snapshot_producers();
            replicas.logs().shutdown()
        })
        .await
        .map_err(|e| BrokerError::Startup(format!("shutdown task failed: {e}")))??;
        if let Some(quorum) = self.quorum {
            // Other holders (the controller task, the metadata follower) end with the runtime.
            if let Ok(quorum) = Arc::try_unwrap(quorum) {
                quorum.shutdown().await;
            }
        }
        tracing::info!("clean shutdown complete");
        Ok(())
    }
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn wait_for_shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
