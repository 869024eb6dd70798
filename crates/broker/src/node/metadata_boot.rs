//! The metadata side of start-up: the cluster id, the Raft node (a single node's old file log
//! imported once), the metadata follower, the controller task on a voter, and on a broker its
//! registration and heartbeats, until the controller unfenced it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use runnel_metadata::controller::RegisterBroker;
use runnel_metadata::{ControllerConfig, MetadataImage};
use runnel_raft::{MetadataQuorum, QuorumConfig};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::cluster_id::cluster_id;
use super::follow::{learn_leader_committed, spawn_follower};
use super::registration::{join_cluster, OfflineDirReport};
use super::settings::NodeSettings;
use crate::config::{BrokerConfig, ClusterConfig};
use crate::controller::client::ControllerClient;
use crate::controller::shell::{Backend, ControllerHandle, ControllerShell};
use crate::metadata_import::PendingImport;
use crate::replica::manager::ReplicaManager;
use crate::BrokerError;

/// What the metadata start needs besides the configuration.
pub(super) struct MetadataBoot {
    file_log: Option<PendingImport>,
    replicas: Arc<ReplicaManager>,
    controller_config: ControllerConfig,
    leader_rebalance: Option<(Duration, u32)>,
    session_timeout: Duration,
    registration: RegisterBroker,
}

impl MetadataBoot {
    pub fn new(
        file_log: Option<PendingImport>,
        replicas: &Arc<ReplicaManager>,
        settings: &NodeSettings,
        registration: RegisterBroker,
    ) -> Self {
        MetadataBoot {
            file_log,
            replicas: replicas.clone(),
            controller_config: settings.controller.clone(),
            leader_rebalance: settings.leader_rebalance,
            session_timeout: settings.session_timeout,
            registration,
        }
    }
}

/// What the rest of start-up gets from the metadata side.
pub(super) struct MetadataStarted {
    pub cluster_id: String,
    pub image: watch::Receiver<Arc<MetadataImage>>,
    pub controller: ControllerClient,
    pub quorum: Arc<MetadataQuorum>,
    /// A broker's heartbeats (none on a controller-only node).
    pub heartbeats: Option<JoinHandle<()>>,
}

/// The metadata side of start-up: the cluster id, the Raft node (importing a single node's
/// old file log once), the metadata follower, the controller task on a voter, registration
/// and heartbeats.
pub(super) async fn start_metadata(
    config: &BrokerConfig,
    boot: MetadataBoot,
) -> Result<MetadataStarted, BrokerError> {
    let cluster = quorum_membership(config);
    let voters_for_id = config.cluster.as_ref().map(|c| &c.voters);
    let cluster_id = cluster_id(&config.data_dir, config.node_id, voters_for_id)?;
    let dir_ids = super::cluster_id::log_dir_properties(
        &config.data_dir,
        &config.log_dirs,
        &cluster_id,
        config.node_id,
    )?;
    let quorum = Arc::new(start_quorum(config, &cluster, &cluster_id).await?);
    if let Some(file_log) = boot.file_log {
        file_log.import(&quorum).await?;
    }
    let image = Arc::new(MetadataImage::empty(cluster_id.clone()));
    let (image_rx, committed_tx) = spawn_follower(&quorum, &boot.replicas, &image);
    let local = cluster.controller.then(|| {
        let controller = LocalController {
            config: boot.controller_config,
            leader_rebalance: boot.leader_rebalance,
            session_timeout: boot.session_timeout,
        };
        controller.spawn(config, &quorum, &image_rx, image)
    });
    let client = ControllerClient::cluster(
        config.node_id,
        local,
        quorum.clone(),
        cluster.voters.clone(),
        &cluster_id,
    );
    tokio::spawn(learn_leader_committed(client.clone(), committed_tx));
    let heartbeats = if cluster.broker {
        let registration = boot.registration;
        Some(
            join_cluster(
                config,
                &client,
                registration,
                boot.session_timeout,
                &image_rx,
                OfflineDirReport {
                    replicas: boot.replicas.clone(),
                    dir_ids,
                    metadata_dir: crate::log_dir_failure::metadata_dir(config),
                },
            )
            .await?,
        )
    } else {
        None
    };
    Ok(MetadataStarted {
        cluster_id,
        image: image_rx,
        controller: client,
        quorum,
        heartbeats,
    })
}

/// How this voter's controller task runs.
struct LocalController {
    config: ControllerConfig,
    leader_rebalance: Option<(Duration, u32)>,
    session_timeout: Duration,
}

impl LocalController {
    /// Spawns the controller task over the quorum and serves the controller RPCs of other
    /// nodes (the quorum listener's App frames) through it.
    fn spawn(
        self,
        config: &BrokerConfig,
        quorum: &Arc<MetadataQuorum>,
        image_rx: &watch::Receiver<Arc<MetadataImage>>,
        image: Arc<MetadataImage>,
    ) -> ControllerHandle {
        let backend = Backend {
            quorum: quorum.clone(),
            image_rx: image_rx.clone(),
        };
        let shell = ControllerShell::new(self.config, backend, image, self.session_timeout);
        let shell = if config.cluster.is_none() {
            shell.single_node()
        } else {
            shell
        };
        let handle = match self.leader_rebalance {
            Some((every, percentage)) => shell.with_leader_rebalance(every, percentage),
            None => shell,
        }
        .spawn();
        quorum.set_app_handler(crate::controller::rpc::app_handler(
            handle.clone(),
            Arc::downgrade(quorum),
        ));
        handle
    }
}

/// The quorum this node belongs to: the configured cluster, or on a single node a one-voter
/// quorum of this node alone (KRaft's combined mode) with no controller listener (one voter
/// sends and serves no Raft RPC; its address in the membership is never dialled).
fn quorum_membership(config: &BrokerConfig) -> ClusterConfig {
    match &config.cluster {
        Some(cluster) => cluster.clone(),
        None => ClusterConfig {
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
    cluster: &ClusterConfig,
    cluster_id: &str,
) -> Result<MetadataQuorum, BrokerError> {
    let mut quorum_config = QuorumConfig::new(
        config.node_id,
        cluster.voters.clone(),
        config.data_dir.join("metadata-quorum"),
    );
    quorum_config.cluster_id = cluster_id.to_string();
    quorum_config.observer_address = cluster.controller_advertise.clone();
    quorum_config.max_connections = config.controller_max_connections()?;
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
