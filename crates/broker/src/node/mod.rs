//! A node: brought up in dependency order ([`start`]) and taken down cleanly
//! ([`RunningBroker::shutdown`]). One file per job: `storage` (data dir, metadata logs checked,
//! partition logs), `settings` (the start-up settings), `listeners` (bind, register, serve),
//! `cluster_id` (`meta.properties`), `metadata_boot` (quorum, import, controller task),
//! `follow` (the metadata follower), `registration` (registration, unfencing, heartbeats),
//! `coordinators` (replica fetcher, group and transaction coordinators), `background`
//! (housekeeping, cleaner, dynamic configs, ...) and `running` (the handle and shutdown).

mod background;
mod cluster_id;
mod coordinators;
mod follow;
mod listeners;
mod metadata_boot;
mod registration;
mod running;
mod settings;
mod storage;

use std::sync::Arc;

use runnel_metadata::BrokerDefaults;
use tokio::sync::watch;

use crate::config::BrokerConfig;
use crate::context::{Broker, BrokerParts};
use crate::BrokerError;
use metadata_boot::MetadataBoot;
use settings::NodeSettings;

pub use cluster_id::base64_url;
pub use running::{wait_for_shutdown_signal, RunningBroker};

/// Starts a node and returns once it serves clients.
///
/// The steps run in the order of Kafka's `BrokerServer.startup`, as far as Runnel has the
/// same parts:
/// 1. the file-descriptor limit and the settings (Kafka: its config and quota managers);
/// 2. `storage`: the metadata logs checked for damage before any partition directory is
///    opened, then the partition logs and the replica manager (Kafka creates its LogManager
///    here but delays recovery until the metadata caught up; Runnel recovers now, with the
///    static topic defaults);
/// 3. `listeners::bind`: every client listener bound, not serving yet (Kafka's SocketServer
///    acceptors), so the registration carries the bound ports;
/// 4. `metadata_boot`: `meta.properties`, the Raft node (a single node's old file log
///    imported once), the metadata follower, the controller task on a voter, then
///    registration and heartbeats (Kafka's BrokerLifecycleManager) and the wait until the
///    controller unfenced this broker (Kafka's "the broker to be unfenced"). Kafka reads
///    `meta.properties` and starts its Raft client earlier, before step 1 (`KafkaRaftServer`,
///    `SharedServer`), and creates its coordinators before it registers;
/// 5. what follows the image (Kafka's metadata publishers, whose first publish starts them):
///    the per-broker dynamic configs, the replica fetcher, the group and transaction
///    coordinators;
/// 6. the request context (`Broker`, Kafka's KafkaApis), the background tasks, and last the
///    listeners serve (Kafka's `enableRequestProcessing`).
pub async fn start(config: BrokerConfig) -> Result<RunningBroker, BrokerError> {
    // Sockets and segment files share one FD table: take the hard limit before opening either.
    let fd_limit = crate::server::fd_limit::raise_nofile_limit();
    let server_limits = config.server_limits()?.resolve(fd_limit);
    let defaults = BrokerDefaults::new(config.props.clone());
    let settings = NodeSettings::from_config(&config, &defaults);
    let storage = storage::open(&config, &defaults, settings.replica_lag_time_max_ms)?;
    let listeners = listeners::bind(&config).await?;
    let registration = listeners.registration(&config);
    let boot = MetadataBoot::new(storage.file_log, &storage.replicas, &settings, registration);
    let metadata = metadata_boot::start_metadata(&config, boot).await?;
    let (node_id, image) = (config.node_id, metadata.image);
    let dynamic =
        background::follow_dynamic_configs(config.dynamic.clone(), node_id, image.clone());
    tokio::spawn(dynamic);
    let replicas = storage.replicas;
    let coordinators = coordinators::spawn(&config, &settings, &defaults, &replicas, &image)?;
    let (listen_addr, addresses) = (listeners.listen_addr, listeners.addresses());
    let advertised_listeners = listeners.advertised.clone();
    let ready = listeners.with_runtimes(&config, &image)?;
    let quorum = Some(metadata.quorum);
    let broker = Arc::new(Broker::new(BrokerParts {
        config,
        advertised_listeners,
        cluster_id: metadata.cluster_id,
        image,
        controller: metadata.controller,
        replicas,
        groups: coordinators.groups,
        txns: coordinators.txns,
        defaults,
        quorum: quorum.clone(),
    }));
    let (shutdown, shutdown_rx) = watch::channel(false);
    let log_dir_failure = background::spawn_all(&broker, &settings, &shutdown_rx);
    // Replica moves a kill interrupted start again now that their partitions are hosted.
    crate::replica::log_dir_moves::resume(
        &broker.replicas,
        broker
            .settings
            .replica_alter_log_dirs_io_max_bytes_per_second,
    );
    let server = ready.serve(&broker, &server_limits, &shutdown_rx);
    Ok(RunningBroker {
        node_id,
        listen_addr,
        listeners: addresses,
        broker,
        shutdown,
        server,
        quorum,
        heartbeats: metadata.heartbeats,
        log_dir_failure,
    })
}
