//! Brings a broker up in dependency order and takes it down cleanly.
//!
//! Order (`start`): the file-descriptor limit -> the metadata logs checked for damage, before any
//! partition directory is opened -> partition logs (recovery) and the replica manager -> the
//! client listeners bound -> `meta.properties` (the cluster id) -> metadata (`start_metadata`):
//! the Raft node (over the controller listener in a cluster; a one-voter quorum with no
//! listener on a single node, which first imports an old file metadata log once), the
//! metadata follower, the controller task on a voter, registration and heartbeats -> the
//! group and transaction coordinators -> the ISR shrinker, cleaner, producer-state expiry,
//! log-dir failure watch and housekeeping timers -> serving. The listener is bound before
//! registration because the address it gets is the one the broker registers.
//!
//! Shutdown stops accepting, then flushes every log, writes checkpoints and the clean-shutdown
//! marker.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use runnel_log::LogManager;
use runnel_metadata::{
    effective_topic_config, BrokerDefaults, ControllerConfig, MetadataImage, PlacementPolicy,
};
use runnel_raft::storage::log::LogStore;
use runnel_raft::{Committed, MetadataQuorum, QuorumConfig};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::clock::now_ms;
use crate::config::BrokerConfig;
use crate::context::{Broker, BrokerParts};
use crate::controller::client::ControllerClient;
use crate::controller::shell::{Backend, ControllerShell};
use crate::log_dir_failure::LogDirFailure;
use crate::partition::log_config;
use crate::publisher::{follow, Publisher};
use crate::replica_manager::ReplicaManager;
use crate::BrokerError;

/// A running broker.
pub struct RunningBroker {
    pub node_id: i32,
    pub listen_addr: SocketAddr,
    /// Every listener's name and bound address.
    pub listeners: Vec<(String, SocketAddr)>,
    pub broker: Arc<Broker>,
    shutdown: watch::Sender<bool>,
    server: JoinHandle<()>,
    quorum: Option<Arc<MetadataQuorum>>,
    /// The cluster broker's heartbeats (stopped before it tells the controller it is done).
    heartbeats: Option<JoinHandle<()>>,
    /// Turns `Some` once a hosted partition log failed (`crate::log_dir_failure`).
    log_dir_failure: watch::Receiver<Option<LogDirFailure>>,
}

/// Reads `meta.properties` (Kafka's format) or writes a new one (the rules are
/// `meta_properties::decide_cluster_id`'s). A formatted directory (`runnel storage format`)
/// keeps the cluster id it was formatted with; an unformatted one gets a fresh random id on a
/// single node, or one derived from the voter set in a cluster, so every node of one cluster
/// agrees without a separate format step.
fn cluster_id(
    data_dir: &Path,
    node_id: i32,
    voters: Option<&BTreeMap<i32, String>>,
) -> Result<String, BrokerError> {
    use crate::meta_properties as mp;
    let path = data_dir.join(mp::META_PROPERTIES);
    let startup = |e: mp::MetaPropertiesError| BrokerError::Startup(e.to_string());
    let stored = mp::read(data_dir).map_err(startup)?;
    let formatted = mp::read_bootstrap(data_dir).map_err(startup)?.is_some();
    let derived = voters.map(cluster_id_from_voters);
    let decision = mp::decide_cluster_id(
        &path,
        stored.as_ref(),
        formatted,
        node_id,
        derived.as_deref(),
        || base64_url(uuid::Uuid::new_v4().as_bytes()),
    )
    .map_err(startup)?;
    if decision.write {
        let props = mp::MetaProperties {
            cluster_id: decision.cluster_id.clone(),
            node_id,
            directory_id: Some(base64_url(uuid::Uuid::new_v4().as_bytes())),
        };
        mp::write(data_dir, &props).map_err(startup)?;
    }
    Ok(decision.cluster_id)
}

/// A stable 16-byte id from the voter set (CRC-32C of four salted copies), base64url like Kafka's.
fn cluster_id_from_voters(voters: &BTreeMap<i32, String>) -> String {
    let text: String = voters.iter().map(|(id, a)| format!("{id}@{a},")).collect();
    let mut bytes = [0u8; 16];
    for (i, chunk) in bytes.chunks_mut(4).enumerate() {
        let crc = crc32c::crc32c(format!("runnel-cluster-{i}:{text}").as_bytes());
        chunk.copy_from_slice(&crc.to_be_bytes());
    }
    base64_url(&bytes)
}

/// Keeps [`BrokerConfig::dynamic`] equal to this broker's per-broker dynamic configs in the
/// image (AlterConfigs on broker `<node_id>`), so a changed
/// `listener.name.<l>.ssl.keystore.location` is used by the next TLS connection either way.
async fn follow_dynamic_configs(
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

/// Applies every committed metadata batch (or snapshot) to the image and publishes it: the
/// same on controllers and plain brokers, so all of them converge on one image.
///
/// The node is caught up (and may set aside partition logs the image does not mention) once
/// its image reaches the leader's committed offset as the leader reported it after this node
/// started (`leader_committed`, see [`learn_leader_committed`]), never at its own: after a
/// restart or a wiped metadata directory the local log may hold much less than the quorum
/// committed, and a partial image would make real partitions look like strays.
async fn follow_quorum(
    quorum: Arc<MetadataQuorum>,
    publisher: Publisher,
    replicas: Arc<ReplicaManager>,
    mut image: Arc<MetadataImage>,
    mut leader_committed: tokio::sync::oneshot::Receiver<i64>,
) {
    let mut target: Option<i64> = None;
    let mut waiting_for_target = true;
    let mut caught_up = false;
    let mut reader = quorum.committed();
    let mut delta = None;
    loop {
        tokio::select! {
            committed = reader.next() => {
                let Some(committed) = committed else { return };
                match committed {
                    // The state machine's images carry the cluster id: shared as they are.
                    Committed::Image(snapshot) => image = snapshot,
                    Committed::Records(records, after) => match follow(&image, &records, after) {
                        Ok((next, change)) => (image, delta) = (next, Some(change)),
                        Err(e) => {
                            tracing::error!(error = %e, "committed metadata does not follow the image");
                            continue;
                        }
                    },
                }
            }
            learned = &mut leader_committed, if waiting_for_target => {
                waiting_for_target = false;
                target = learned.ok();
                if target.is_none() {
                    continue;
                }
            }
        }
        if !caught_up && target.is_some_and(|t| image.offset >= t) {
            tracing::info!(
                offset = image.offset,
                "metadata caught up with the leader's committed offset"
            );
            replicas.set_caught_up();
            caught_up = true;
        }
        publisher.publish_change(image.clone(), delta.take().as_ref());
    }
}

/// Asks the active controller (the quorum leader) for its committed metadata offset until it
/// gives one that covers everything committed before its term (see
/// `QuorumStatus::leader_applied_own_term`): the offset this node must reach to be caught up.
async fn learn_leader_committed(client: ControllerClient, tx: tokio::sync::oneshot::Sender<i64>) {
    loop {
        match client.quorum_status().await {
            Ok(Some(status)) if status.leader_applied_own_term => {
                tracing::debug!(
                    leader = ?status.leader_id,
                    offset = status.last_record_offset,
                    "learned the leader's committed metadata offset"
                );
                let _ = tx.send(status.last_record_offset);
                return;
            }
            Ok(Some(_)) => {}
            Ok(None) => return,
            Err(e) => {
                tracing::debug!(error = %e.message, "leader's committed offset not known yet")
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Registers with the active controller. A previous process of this node (killed without a
/// clean shutdown) may still hold the id until its session expires: the registration is
/// retried past one session timeout, as Kafka's brokers do, and only then refused for good.
/// Returns the broker epoch of the registration.
async fn register_in_cluster(
    client: &ControllerClient,
    registration: &runnel_metadata::controller::RegisterBroker,
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
            Err(e) if e.code == 101 && tokio::time::Instant::now() < give_up => {
                if !warned {
                    tracing::warn!(
                        node_id = registration.broker_id,
                        "node id still registered by a previous process; waiting for its session to expire"
                    );
                    warned = true;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) if e.code == 101 => {
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

/// Keeps this broker's session alive at the active controller; re-registers if the controller
/// no longer knows it (e.g. after it was fenced and unregistered, or a controller restart).
async fn heartbeat_loop(
    client: ControllerClient,
    registration: runnel_metadata::controller::RegisterBroker,
    mut broker_epoch: i64,
    image: watch::Receiver<Arc<MetadataImage>>,
    every: Duration,
) {
    // The first heartbeat goes out at once; the controller answers whether we are still fenced.
    let mut fenced = false;
    let mut first = true;
    loop {
        if !first {
            let pause = if fenced {
                FENCED_HEARTBEAT_EVERY.min(every)
            } else {
                every
            };
            tokio::time::sleep(pause).await;
        }
        first = false;
        let offset = image.borrow().offset;
        let heartbeat = runnel_metadata::controller::BrokerHeartbeat {
            broker_id: registration.broker_id,
            broker_epoch,
            metadata_offset: offset,
        };
        match client.run_within(heartbeat, every).await {
            Ok(still_fenced) => fenced = still_fenced,
            // 102: the controller no longer knows us. 77 (STALE_BROKER_EPOCH): it holds a later
            // registration of this node id than the epoch we kept, which may be our own
            // incarnation's: register again. The controller decides whose the id is: another
            // incarnation with a live session is refused (101) and this process stays out, our
            // own gets the current epoch (the fault campaign saw a broker stuck for good on
            // "Expected broker epoch 7 for broker 2, got 0", docs/faults.md case 5).
            Err(e) if e.code == 102 || e.code == 77 => {
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

/// Kafka prints ids (cluster, topic) as unpadded URL-safe base64 of the 16 bytes.
pub fn base64_url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// What the metadata start needs besides the configuration.
struct MetadataBoot {
    file_log: Option<crate::metadata_import::PendingImport>,
    replicas: Arc<ReplicaManager>,
    controller_config: ControllerConfig,
    leader_rebalance: Option<(Duration, u32)>,
    session_timeout: Duration,
    registration: runnel_metadata::controller::RegisterBroker,
}

type MetadataStarted = (
    String,
    watch::Receiver<Arc<MetadataImage>>,
    ControllerClient,
    Arc<MetadataQuorum>,
    Option<JoinHandle<()>>,
);

/// The quorum this node belongs to: the configured cluster, or on a single node a one-voter
/// quorum of this node alone (KRaft's combined mode) with no controller listener (one voter
/// sends and serves no Raft RPC; its address in the membership is never dialled).
fn quorum_membership(config: &BrokerConfig) -> crate::config::ClusterConfig {
    match &config.cluster {
        Some(cluster) => cluster.clone(),
        None => crate::config::ClusterConfig {
            broker: true,
            controller: true,
            voters: BTreeMap::from([(config.node_id, "127.0.0.1:0".to_string())]),
            controller_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            controller_advertise: None,
        },
    }
}

/// Starts the Raft node: over the controller listener in a cluster, without one on a single
/// node.
async fn start_quorum(
    config: &BrokerConfig,
    cluster: &crate::config::ClusterConfig,
    cluster_id: &str,
) -> Result<MetadataQuorum, BrokerError> {
    let mut quorum_config = QuorumConfig::new(
        config.node_id,
        cluster.voters.clone(),
        config.data_dir.join("metadata-quorum"),
    );
    quorum_config.cluster_id = cluster_id.to_string();
    quorum_config.observer_address = cluster.controller_advertise.clone();
    let started = if config.cluster.is_some() {
        let quorum_listener = TcpListener::bind(cluster.controller_listen)
            .await
            .map_err(|e| {
                BrokerError::Startup(format!(
                    "cannot listen on the controller address {}: {e}",
                    cluster.controller_listen
                ))
            })?;
        if let Ok(local) = quorum_listener.local_addr() {
            tracing::info!(address = %local, "controller (quorum) listener bound");
        }
        // controller.listener.names: TLS / SASL on the quorum listener, both directions.
        let security = config.controller_security()?;
        MetadataQuorum::start_secured(quorum_config, quorum_listener, security).await
    } else {
        let transport = Arc::new(runnel_raft::TcpTransport::with_security(
            cluster_id,
            runnel_raft::network::security::plaintext(),
        ));
        MetadataQuorum::start_with_transport(quorum_config, transport, None).await
    };
    started.map_err(|e| BrokerError::Startup(format!("metadata quorum did not start: {e}")))
}

/// The metadata side of start-up: the cluster id, the Raft node (importing a single node's
/// old file log once), the metadata follower, the controller task on a voter, registration
/// and heartbeats.
async fn start_metadata(
    config: &BrokerConfig,
    boot: MetadataBoot,
) -> Result<MetadataStarted, BrokerError> {
    let cluster = quorum_membership(config);
    let voters_for_id = config.cluster.as_ref().map(|c| &c.voters);
    let cluster_id = cluster_id(&config.data_dir, config.node_id, voters_for_id)?;
    let quorum = Arc::new(start_quorum(config, &cluster, &cluster_id).await?);
    if let Some(file_log) = boot.file_log {
        file_log.import(&quorum).await?;
    }
    let image = Arc::new(MetadataImage::empty(cluster_id.clone()));
    let (image_tx, image_rx) = watch::channel(image.clone());
    let publisher = Publisher::new(boot.replicas.clone(), image_tx);
    publisher.publish(image.clone());
    let (committed_tx, committed_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(follow_quorum(
        quorum.clone(),
        publisher,
        boot.replicas.clone(),
        image.clone(),
        committed_rx,
    ));
    let local = cluster.controller.then(|| {
        let backend = Backend {
            quorum: quorum.clone(),
            image_rx: image_rx.clone(),
        };
        let shell =
            ControllerShell::new(boot.controller_config, backend, image, boot.session_timeout);
        let shell = if config.cluster.is_none() {
            shell.single_node()
        } else {
            shell
        };
        let handle = match boot.leader_rebalance {
            Some((every, percentage)) => shell.with_leader_rebalance(every, percentage),
            None => shell,
        }
        .spawn();
        quorum.set_app_handler(crate::controller::rpc::app_handler(
            handle.clone(),
            Arc::downgrade(&quorum),
        ));
        handle
    });
    let client = ControllerClient::cluster(
        config.node_id,
        local,
        quorum.clone(),
        cluster.voters.clone(),
        &cluster_id,
    );
    tokio::spawn(learn_leader_committed(client.clone(), committed_tx));
    let mut heartbeats = None;
    if cluster.broker {
        let broker_epoch =
            register_in_cluster(&client, &boot.registration, boot.session_timeout).await?;
        let heartbeat_every = Duration::from_millis(
            config.get_i64("broker.heartbeat.interval.ms", 2000).max(10) as u64,
        );
        heartbeats = Some(tokio::spawn(heartbeat_loop(
            client.clone(),
            boot.registration,
            broker_epoch,
            image_rx.clone(),
            heartbeat_every,
        )));
        wait_until_unfenced(image_rx.clone(), config.node_id, broker_epoch).await;
    }
    Ok((cluster_id, image_rx, client, quorum, heartbeats))
}

pub async fn start(config: BrokerConfig) -> Result<RunningBroker, BrokerError> {
    // Sockets and segment files share one FD table: take the hard limit before opening either.
    let fd_limit = crate::server::fd_limit::raise_nofile_limit();
    let server_limits = config.server_limits()?.resolve(fd_limit);
    let data_dir = config.data_dir.clone();
    std::fs::create_dir_all(&data_dir).map_err(|e| {
        BrokerError::Startup(format!(
            "cannot create data dir {}: {e}",
            data_dir.display()
        ))
    })?;
    // The metadata logs are checked before any partition directory is opened: a damaged one
    // refuses to start with nothing in the log dir touched (not even recovery).
    // A single node's file log of an earlier build is imported once (metadata_import).
    let file_log = match &config.cluster {
        None => crate::metadata_import::open(&data_dir)?,
        Some(_) => None,
    };
    LogStore::verify(&data_dir.join("metadata-quorum"))
        .map_err(|e| BrokerError::Startup(format!("metadata quorum did not start: {e}")))?;
    let defaults = BrokerDefaults::new(config.props.clone());
    let default_log_config = log_config(&effective_topic_config(&BTreeMap::new(), &defaults));
    let logs = LogManager::open(data_dir.clone(), default_log_config)?;
    let replicas = Arc::new(ReplicaManager::new(
        config.node_id,
        logs,
        defaults.clone(),
        config.get_i64("replica.lag.time.max.ms", 30_000).max(1),
    ));

    let placement = match config.str("replica.placement.policy") {
        "kafka" => PlacementPolicy::Kafka,
        _ => PlacementPolicy::ClusterAware,
    };
    let controller_config = ControllerConfig {
        num_partitions: config.get_i32("num.partitions", 1),
        default_replication_factor: config.get_i16("default.replication.factor", 1),
        delete_topic_enable: config.get_bool("delete.topic.enable", true),
        placement,
        defaults: defaults.clone(),
        max_events: 10_000,
    };
    // Preferred-leader rebalance only matters with several brokers (spec F).
    let leader_rebalance = config
        .get_bool("auto.leader.rebalance.enable", true)
        .then(|| {
            (
                Duration::from_secs(
                    config
                        .get_i64("leader.imbalance.check.interval.seconds", 300)
                        .max(1) as u64,
                ),
                config
                    .get_i64("leader.imbalance.per.broker.percentage", 10)
                    .clamp(0, 100) as u32,
            )
        });
    let session_timeout =
        Duration::from_millis(config.get_i64("broker.session.timeout.ms", 9000).max(1) as u64);

    let plan = config.listener_plan()?;
    crate::inter_broker::set_security(config.inter_broker_security(&plan)?);
    let mut bound = Vec::new();
    let mut advertised_listeners = BTreeMap::new();
    for endpoint in &plan.listeners {
        let addr = endpoint.bind_addr().map_err(BrokerError::Config)?;
        let listener = TcpListener::bind(addr).await.map_err(|e| {
            BrokerError::Startup(format!("cannot listen on {addr} ({}): {e}", endpoint.name))
        })?;
        let local = listener.local_addr()?;
        advertised_listeners.insert(
            endpoint.name.clone(),
            crate::listener_config::advertised_endpoint(&plan, &endpoint.name, local),
        );
        bound.push((endpoint.clone(), listener, local));
    }
    // The inter-broker listener's address is the one registered (what other brokers dial).
    let listen_addr = bound
        .iter()
        .find(|(e, _, _)| e.name == plan.inter_broker)
        .map(|(_, _, local)| *local)
        .ok_or_else(|| BrokerError::Config("no inter-broker listener".into()))?;
    let (host, port) = advertised_listeners
        .get(&plan.inter_broker)
        .cloned()
        .unwrap_or((listen_addr.ip().to_string(), listen_addr.port()));
    // Every listener is registered, so a client of any listener is told every broker's
    // endpoint on that listener (Kafka's BrokerRegistrationRecord.EndPoints).
    let registration = runnel_metadata::controller::RegisterBroker {
        broker_id: config.node_id,
        incarnation_id: Uuid::new_v4(),
        host: host.clone(),
        port,
        rack: config.rack(),
        endpoints: bound
            .iter()
            .filter_map(|(e, _, _)| {
                let (host, port) = advertised_listeners.get(&e.name)?.clone();
                Some(runnel_metadata::BrokerEndpoint {
                    name: e.name.clone(),
                    host,
                    port,
                    security_protocol: e.protocol.id(),
                })
            })
            .collect(),
    };

    let (cluster_id, image_rx, controller, quorum, heartbeats) = start_metadata(
        &config,
        MetadataBoot {
            file_log,
            replicas: replicas.clone(),
            controller_config,
            leader_rebalance,
            session_timeout,
            registration,
        },
    )
    .await?;
    let quorum = Some(quorum);

    let node_id = config.node_id;
    tokio::spawn(follow_dynamic_configs(
        config.dynamic.clone(),
        node_id,
        image_rx.clone(),
    ));
    let cleaner_enabled = config.get_bool("log.cleaner.enable", true);
    let cleaner_every =
        Duration::from_millis(config.get_i64("log.cleaner.backoff.ms", 15_000).max(1) as u64);
    let retention_every = Duration::from_millis(
        config
            .get_i64("log.retention.check.interval.ms", 300_000)
            .max(1) as u64,
    );
    let checkpoint_every = Duration::from_millis(
        config
            .get_i64("log.flush.offset.checkpoint.interval.ms", 60_000)
            .max(1) as u64,
    );
    let group_config = runnel_group::GroupConfig {
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
    };
    crate::replica_fetcher::spawn(
        node_id,
        // Validated to lie within 0..=i32::MAX.
        i32::try_from(config.get_i64("replica.fetch.response.max.bytes", 10_485_760))
            .unwrap_or(i32::MAX),
        replicas.clone(),
        image_rx.clone(),
    );
    let groups = crate::group_manager::spawn(
        node_id,
        group_config,
        // Validated with the rest of the config at load.
        crate::consumer_group_settings::consumer_group_config(&config)?,
        defaults.clone(),
        replicas.clone(),
        image_rx.clone(),
    );
    let txn_config = runnel_txn::TxnConfig {
        max_timeout_ms: i32::try_from(config.get_i64("transaction.max.timeout.ms", 900_000))
            .unwrap_or(i32::MAX),
        id_expiration_ms: config.get_i64("transactional.id.expiration.ms", 604_800_000),
    };
    let txns = crate::txn_manager::spawn(node_id, txn_config, replicas.clone(), image_rx.clone());
    let listeners = bound
        .iter()
        .map(|(e, _, local)| (e.name.clone(), *local))
        .collect();
    let mut runtimes = Vec::new();
    for (endpoint, listener, _) in bound {
        let runtime = config.listener_runtime(&endpoint, &image_rx)?;
        runtimes.push((listener, Arc::new(runtime)));
    }
    let broker = Arc::new(Broker::new(BrokerParts {
        config,
        advertised_listeners,
        cluster_id,
        image: image_rx,
        controller,
        replicas: replicas.clone(),
        groups,
        txns,
        defaults,
        quorum: quorum.clone(),
    }));
    let (shutdown, shutdown_rx) = watch::channel(false);
    crate::isr::spawn_shrinker(
        replicas.clone(),
        broker.controller.clone(),
        broker
            .config
            .get_i64("replica.lag.time.max.ms", 30_000)
            .max(1),
        shutdown_rx.clone(),
    );
    if cleaner_enabled {
        spawn_cleaner(replicas.clone(), cleaner_every, shutdown_rx.clone());
    }
    crate::producer_expiry::spawn(
        replicas.clone(),
        crate::producer_expiry::ProducerExpiry::from_config(&broker.config),
        shutdown_rx.clone(),
    );
    let log_dir_failure =
        crate::log_dir_failure::spawn_watch(replicas.clone(), shutdown_rx.clone());
    spawn_housekeeping(
        replicas,
        retention_every,
        checkpoint_every,
        shutdown_rx.clone(),
    );
    let servers: Vec<_> = runtimes
        .into_iter()
        .map(|(listener, runtime)| {
            tokio::spawn(crate::server::serve(
                listener,
                runtime,
                broker.clone(),
                server_limits.clone(),
                shutdown_rx.clone(),
            ))
        })
        .collect();
    let server = tokio::spawn(async move {
        for s in servers {
            let _ = s.await;
        }
    });
    Ok(RunningBroker {
        node_id,
        listen_addr,
        listeners,
        broker,
        shutdown,
        server,
        quorum,
        heartbeats,
        log_dir_failure,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_kafka_encoding() {
        // Kafka's Uuid.toString of all-zero is "AAAAAAAAAAAAAAAAAAAAAA".
        assert_eq!(base64_url(&[0u8; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(base64_url(&[0xff; 3]), "____");
        assert_eq!(base64_url(b"M"), "TQ");
    }
}
