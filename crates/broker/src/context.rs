//! What every request handler can reach: configuration, the current metadata image, the
//! controller, the local replicas and the producer-id allocator.

use std::sync::Arc;

use parking_lot::Mutex;
use runnel_metadata::{BrokerDefaults, MetadataImage};
use tokio::sync::watch;

use crate::config::BrokerConfig;
use crate::controller_shell::ControllerHandle;
use crate::group_manager::GroupHandle;
use crate::replica_manager::ReplicaManager;

/// Producer ids are taken from the controller in blocks, so InitProducerId rarely needs it.
const PRODUCER_ID_BLOCK: i64 = 1000;

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

pub struct Broker {
    pub config: BrokerConfig,
    pub node_id: i32,
    pub cluster_id: String,
    pub image: watch::Receiver<Arc<MetadataImage>>,
    pub controller: ControllerHandle,
    pub replicas: Arc<ReplicaManager>,
    pub groups: GroupHandle,
    producer_ids: Mutex<(i64, i64)>,
    /// Cached typed properties read on hot paths.
    pub max_request_bytes: usize,
    pub auto_create_topics: bool,
    defaults: BrokerDefaults,
}

impl Broker {
    pub fn new(
        config: BrokerConfig,
        cluster_id: String,
        image: watch::Receiver<Arc<MetadataImage>>,
        controller: ControllerHandle,
        replicas: Arc<ReplicaManager>,
        groups: GroupHandle,
        defaults: BrokerDefaults,
    ) -> Self {
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
            producer_ids: Mutex::new((0, 0)),
            max_request_bytes,
            auto_create_topics,
            defaults,
        }
    }

    /// The broker's properties as the fallback for topic configs.
    pub fn broker_defaults(&self) -> BrokerDefaults {
        self.defaults.clone()
    }

    /// The image as of now (cheap: an `Arc` clone).
    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.borrow().clone()
    }

    /// The active controller's id. Single node: this node (the Raft leader comes next).
    pub fn controller_id(&self) -> i32 {
        self.node_id
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
