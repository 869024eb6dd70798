//! This broker's membership at the active controller: registration (retried while a previous
//! process of this node still holds the id), the wait for the controller to unfence it, and the
//! heartbeats that keep its session (re-registering when the controller forgot it) and name
//! its failed log dirs.

use std::sync::Arc;
use std::time::Duration;

use runnel_metadata::controller::RegisterBroker;
use runnel_metadata::MetadataImage;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::BrokerConfig;
use crate::controller::client::ControllerClient;
use crate::errors::code::{
    BROKER_ID_NOT_REGISTERED, DUPLICATE_BROKER_REGISTRATION, STALE_BROKER_EPOCH,
};
use crate::replica::manager::ReplicaManager;
use crate::BrokerError;

/// Registers, starts the heartbeats and waits until the controller unfenced this broker; the
/// heartbeats' task is returned so shutdown can stop it before ending the session.
pub(super) async fn join_cluster(
    config: &BrokerConfig,
    client: &ControllerClient,
    registration: RegisterBroker,
    session_timeout: Duration,
    image: &watch::Receiver<Arc<MetadataImage>>,
    offline: OfflineDirReport,
) -> Result<JoinHandle<()>, BrokerError> {
    let broker_epoch = register_in_cluster(client, &registration, session_timeout).await?;
    let heartbeat_every =
        Duration::from_millis(config.get_i64("broker.heartbeat.interval.ms", 2000).max(10) as u64);
    let heartbeats = tokio::spawn(heartbeat_loop(
        client.clone(),
        registration,
        broker_epoch,
        image.clone(),
        heartbeat_every,
        offline,
    ));
    wait_until_unfenced(image.clone(), config.node_id, broker_epoch).await;
    Ok(heartbeats)
}

/// Registers with the active controller. A previous process of this node (killed without a
/// clean shutdown) may still hold the id until its session expires: the registration is
/// retried past one session timeout, as Kafka's brokers do, and only then refused for good.
/// Returns the broker epoch of the registration.
async fn register_in_cluster(
    client: &ControllerClient,
    registration: &RegisterBroker,
    session_timeout: Duration,
) -> Result<i64, BrokerError> {
    let give_up = tokio::time::Instant::now() + session_timeout * 2 + Duration::from_secs(5);
    let mut warned = false;
    loop {
        let attempt = client
            .run_within(registration.clone(), Duration::from_secs(120))
            .await;
        match attempt {
            Ok(epoch) => return Ok(epoch),
            Err(e) if e.code == DUPLICATE_BROKER_REGISTRATION && tokio::time::Instant::now() < give_up => {
                if !warned {
                    tracing::warn!(
                        node_id = registration.broker_id,
                        "node id still registered by a previous process; waiting for its session to expire"
                    );
                    warned = true;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) if e.code == DUPLICATE_BROKER_REGISTRATION => {
                return Err(BrokerError::Startup(format!(
                    "node id {} is already in use by another live broker (DUPLICATE_BROKER_REGISTRATION)",
                    registration.broker_id
                )))
            }
            Err(e) => return Err(BrokerError::Startup(format!("broker registration failed: {}", e.message))),
        }
    }
}

/// Blocks until this node's image shows the registration `broker_epoch` unfenced, as Kafka's
/// `BrokerServer` waits for "the broker to be unfenced" before it enables request processing.
/// Until then the image lists no live broker, so a Metadata answer would name no controller
/// (-1), and librdkafka's admin client waits for a broker state change that never comes
/// (a CreateTopics right after startup timed out "waiting for controller" in CI).
async fn wait_until_unfenced(
    mut image: watch::Receiver<Arc<MetadataImage>>,
    node_id: i32,
    broker_epoch: i64,
) {
    let unfenced = |image: &MetadataImage| {
        image
            .brokers
            .get(&node_id)
            .is_some_and(|b| !b.fenced && b.epoch >= broker_epoch)
    };
    let started = tokio::time::Instant::now();
    let mut warned = false;
    while !unfenced(&image.borrow_and_update()) {
        let waited = tokio::time::timeout(Duration::from_secs(10), image.changed()).await;
        match waited {
            Ok(Ok(())) => {}
            // The publisher is gone: the node is shutting down, nothing left to wait for.
            Ok(Err(_)) => return,
            Err(_) if !warned => {
                tracing::warn!(
                    node_id,
                    broker_epoch,
                    "still waiting for the controller to unfence this broker"
                );
                warned = true;
            }
            Err(_) => {}
        }
    }
    tracing::info!(
        node_id,
        broker_epoch,
        waited_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "the controller unfenced this broker"
    );
}

/// While fenced, heartbeats go out this often (the controller unfences on the first heartbeat
/// whose metadata offset reached the registration), so a starting broker waits a fraction
/// of `broker.heartbeat.interval.ms` for it.
const FENCED_HEARTBEAT_EVERY: Duration = Duration::from_millis(100);

/// How often a heartbeat's pause looks for a newly failed log dir.
const DIR_CHECK_EVERY: Duration = Duration::from_millis(100);

/// Sleeps `pause`, or less once more log dirs failed than the last heartbeat named: Kafka's
/// broker sends a heartbeat at once when a dir fails (`propagateDirectoryFailure`), so its
/// leaderships move within a round trip rather than a heartbeat interval.
async fn pause_unless_a_dir_fails(offline: &OfflineDirReport, pause: Duration, reported: usize) {
    let until = tokio::time::Instant::now() + pause;
    loop {
        let now = tokio::time::Instant::now();
        if now >= until {
            return;
        }
        tokio::time::sleep(DIR_CHECK_EVERY.min(until - now)).await;
        if offline.current().len() > reported {
            return;
        }
    }
}

/// What a heartbeat needs to name this broker's failed log dirs (KIP-858's
/// `OfflineLogDirs`, `crate::log_dir_failure::offline_dirs`).
pub(super) struct OfflineDirReport {
    pub replicas: Arc<ReplicaManager>,
    /// Each log dir's id, in `log.dirs` order.
    pub dir_ids: Vec<uuid::Uuid>,
    /// Index of the dir holding the metadata log, when it is one of `log.dirs`.
    pub metadata_dir: Option<usize>,
}

impl OfflineDirReport {
    /// The failed dirs to name now (none while the broker is about to halt).
    fn current(&self) -> Vec<runnel_metadata::controller::OfflineDir> {
        crate::log_dir_failure::offline_dirs(&self.replicas, &self.dir_ids, self.metadata_dir)
    }
}

/// Keeps this broker's session alive at the active controller; re-registers if the controller
/// no longer knows it (e.g. after it was fenced and unregistered, or a controller restart).
async fn heartbeat_loop(
    client: ControllerClient,
    registration: RegisterBroker,
    mut broker_epoch: i64,
    image: watch::Receiver<Arc<MetadataImage>>,
    every: Duration,
    offline: OfflineDirReport,
) {
    // The first heartbeat goes out at once; the controller answers whether we are still fenced.
    let mut fenced = false;
    let mut first = true;
    // Failed dirs named in the last heartbeat: one more fails -> the next heartbeat goes now.
    let mut reported = 0;
    loop {
        if !first {
            let pause = if fenced {
                FENCED_HEARTBEAT_EVERY.min(every)
            } else {
                every
            };
            pause_unless_a_dir_fails(&offline, pause, reported).await;
        }
        first = false;
        let offset = image.borrow().offset;
        let heartbeat = runnel_metadata::controller::BrokerHeartbeat {
            broker_id: registration.broker_id,
            broker_epoch,
            metadata_offset: offset,
            offline_dirs: offline.current(),
        };
        reported = heartbeat.offline_dirs.len();
        match client.run_within(heartbeat, every).await {
            Ok(still_fenced) => fenced = still_fenced,
            // 102: the controller no longer knows us. 77 (STALE_BROKER_EPOCH): it holds a later
            // registration of this node id than the epoch we kept, which may be our own
            // incarnation's: register again. The controller decides whose the id is: another
            // incarnation with a live session is refused (101) and this process stays out, our
            // own gets the current epoch (the fault campaign saw a broker stuck for good on
            // "Expected broker epoch 7 for broker 2, got 0", docs/faults.md case 5).
            Err(e) if e.code == BROKER_ID_NOT_REGISTERED || e.code == STALE_BROKER_EPOCH => {
                match client.run_within(registration.clone(), every).await {
                    Ok(epoch) => {
                        broker_epoch = epoch;
                        fenced = true;
                    }
                    Err(e) => tracing::warn!(error = %e.message, "re-registration failed"),
                }
            }
            Err(e) => tracing::debug!(error = %e.message, "heartbeat not delivered"),
        }
    }
}
