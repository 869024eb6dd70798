//! What every request handler can reach: configuration, the current metadata image, the
//! controller, the local replicas and the producer-id allocator.

use std::sync::Arc;

use parking_lot::Mutex;
use runnel_metadata::{BrokerDefaults, MetadataImage};
use tokio::sync::watch;

use crate::config::BrokerConfig;
use crate::controller_client::ControllerClient;
use crate::group_manager::GroupHandle;
use crate::replica_manager::ReplicaManager;

/// Producer ids are taken from the controller in blocks, so InitProducerId rarely needs it.
const PRODUCER_ID_BLOCK: i64 = runnel_metadata::PRODUCER_ID_BLOCK_SIZE;

/// Who sent a request: used for group member ids and DescribeGroups' client host.
pub struct RequestContext {
    pub client_id: String,
    pub peer: std::net::SocketAddr,
}

impl RequestContext {
    /// Kafka shows the client host as `/ip`.
    pub fn client_host(&self) -> String {
        format!("/{}", self.peer.ip())
    }
}

/// Everything a [`Broker`] is built from (startup assembles these).
pub struct BrokerParts {
    pub config: BrokerConfig,
    pub cluster_id: String,
    pub image: watch::Receiver<Arc<MetadataImage>>,
    pub controller: ControllerClient,
    pub replicas: Arc<ReplicaManager>,
    pub groups: GroupHandle,
    pub defaults: BrokerDefaults,
    pub quorum: Option<Arc<runnel_raft::MetadataQuorum>>,
}

pub struct Broker {
    pub config: BrokerConfig,
    pub node_id: i32,
    pub cluster_id: String,
    pub image: watch::Receiver<Arc<MetadataImage>>,
    pub controller: ControllerClient,
    pub replicas: Arc<ReplicaManager>,
    pub groups: GroupHandle,
    /// The metadata quorum in cluster mode (None on a single node).
    pub quorum: Option<Arc<runnel_raft::MetadataQuorum>>,
    producer_ids: Mutex<(i64, i64)>,
    /// Cached typed properties read on hot paths.
    pub max_request_bytes: usize,
    pub auto_create_topics: bool,
    defaults: BrokerDefaults,
}

impl Broker {
    pub fn new(parts: BrokerParts) -> Self {
        let BrokerParts {
            config,
            cluster_id,
            image,
            controller,
            replicas,
            groups,
            defaults,
            quorum,
        } = parts;
        let max_request_bytes = config.get_i64("socket.request.max.bytes", 104857600) as usize;
        let auto_create_topics = config.get_bool("auto.create.topics.enable", true);
        Broker {
            node_id: config.node_id,
            config,
            cluster_id,
            image,
            controller,
            replicas,
            groups,
            quorum,
            producer_ids: Mutex::new((0, 0)),
            max_request_bytes,
            auto_create_topics,
            defaults,
        }
    }

    /// The broker's properties as the fallback for topic configs, with the dynamic broker
    /// configs of the current image (this broker's, then the cluster-wide default) on top.
    pub fn broker_defaults(&self) -> BrokerDefaults {
        self.defaults
            .with_dynamic(&self.image(), Some(self.node_id))
    }

    /// The image as of now (cheap: an `Arc` clone).
    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.borrow().clone()
    }

    /// The controller id clients see: the quorum leader when it is a live broker (clients can
    /// only talk to brokers), else any live broker, as KRaft does; this node when alone.
    pub fn controller_id(&self) -> i32 {
        let Some(quorum) = &self.quorum else {
            return self.node_id;
        };
        let image = self.image();
        let live = |id: i32| image.brokers.get(&id).is_some_and(|b| !b.fenced);
        match quorum.leader() {
            Some(leader) if live(leader) => leader,
            _ => image.live_brokers().map(|b| b.id).next().unwrap_or(-1),
        }
    }

    /// Hands out the next producer id, fetching a new block from the controller when needed.
    pub async fn next_producer_id(&self) -> Result<i64, runnel_metadata::ApiError> {
        {
            let mut ids = self.producer_ids.lock();
            if ids.0 < ids.1 {
                ids.0 += 1;
                return Ok(ids.0 - 1);
            }
        }
        let first = self
            .controller
            .allocate_producer_ids(self.node_id, PRODUCER_ID_BLOCK)
            .await?;
        let mut ids = self.producer_ids.lock();
        *ids = (first + 1, first + PRODUCER_ID_BLOCK);
        Ok(first)
    }
}
