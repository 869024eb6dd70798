//! What every request handler can reach: configuration, the current metadata image, the
//! controller, the local replicas and the producer-id allocator.

use std::sync::Arc;

use parking_lot::Mutex;
use runnel_metadata::{BrokerDefaults, MetadataImage};
use tokio::sync::watch;

use crate::config::BrokerConfig;
use crate::controller::client::ControllerClient;
use crate::group_manager::GroupHandle;
use crate::principal::KafkaPrincipal;
use crate::replica::manager::ReplicaManager;

/// Producer ids are taken from the controller in blocks, so InitProducerId rarely needs it.
const PRODUCER_ID_BLOCK: i64 = runnel_metadata::PRODUCER_ID_BLOCK_SIZE;

/// Who sent a request: used for group member ids, DescribeGroups' client host and
/// authorization (the principal and the listener the connection came in on).
pub struct RequestContext {
    pub client_id: String,
    pub peer: std::net::SocketAddr,
    pub listener: String,
    pub principal: KafkaPrincipal,
}

impl RequestContext {
    /// Kafka shows the client host as `/ip`.
    pub fn client_host(&self) -> String {
        format!("/{}", self.peer.ip())
    }
}

/// Everything a [`Broker`] is built from (startup assembles these).
pub struct BrokerParts {
    /// Each listener's advertised (host, port), by listener name.
    pub advertised_listeners: std::collections::BTreeMap<String, (String, u16)>,
    pub config: BrokerConfig,
    pub cluster_id: String,
    pub image: watch::Receiver<Arc<MetadataImage>>,
    pub controller: ControllerClient,
    pub replicas: Arc<ReplicaManager>,
    pub groups: GroupHandle,
    pub txns: crate::txn_manager::TxnHandle,
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
    pub txns: crate::txn_manager::TxnHandle,
    /// The metadata quorum in cluster mode (None on a single node).
    pub quorum: Option<Arc<runnel_raft::MetadataQuorum>>,
    /// Each listener's advertised (host, port): Metadata answers the one the client used.
    pub advertised_listeners: std::collections::BTreeMap<String, (String, u16)>,
    producer_ids: Mutex<(i64, i64)>,
    /// The typed settings (`config::BrokerSettings`), resolved once.
    pub settings: crate::config::BrokerSettings,
    /// `authorizer.class.name`'s authorizer; `None`: every request is allowed.
    pub authorizer: Option<runnel_metadata::acl::Authorizer>,
    /// Client quota sensors (KIP-13): `quota.window.num` x `quota.window.size.seconds`.
    pub quotas: crate::quota::QuotaManager,
    defaults: BrokerDefaults,
}

impl Broker {
    pub fn new(parts: BrokerParts) -> Self {
        let BrokerParts {
            advertised_listeners,
            config,
            cluster_id,
            image,
            controller,
            replicas,
            groups,
            txns,
            defaults,
            quorum,
        } = parts;
        let settings = config.settings();
        // Validated at startup; should a config reach here unvalidated, fail closed (an
        // authorizer with no super users and no ACLs refuses everything).
        let authorizer = config.authorizer().unwrap_or_else(|e| {
            tracing::error!(%e, "invalid authorizer configuration: refusing every request");
            Some(runnel_metadata::acl::Authorizer::new(
                Default::default(),
                false,
            ))
        });
        let quotas = crate::quota::QuotaManager::new(
            i64::from(settings.quota_window_num),
            i64::from(settings.quota_window_size_seconds),
        );
        Broker {
            node_id: config.node_id,
            config,
            cluster_id,
            image,
            controller,
            replicas,
            groups,
            txns,
            quorum,
            advertised_listeners,
            producer_ids: Mutex::new((0, 0)),
            settings,
            authorizer,
            quotas,
            defaults,
        }
    }

    /// The broker's properties as the fallback for topic configs, with the dynamic broker
    /// configs of the current image (this broker's, then the cluster-wide default) on top.
    pub fn broker_defaults(&self) -> BrokerDefaults {
        self.defaults
            .with_dynamic(&self.image(), Some(self.node_id))
    }

    /// Where a client on `listener` reaches broker `b`: its registered endpoint of that
    /// listener (this broker answers its own advertised one, also before its registration is
    /// in the image), `None` when `b` has no such listener: Kafka leaves it out
    /// (`MetadataCache.getAliveBrokerNode(id, listenerName)`). The one implementation every
    /// handler that names brokers goes through.
    pub fn endpoint_of(
        &self,
        b: &runnel_metadata::BrokerRegistration,
        listener: &str,
    ) -> Option<(String, u16)> {
        if b.id == self.node_id {
            if let Some(own) = self.advertised_listeners.get(listener) {
                return Some(own.clone());
            }
        }
        b.endpoint(listener)
            .map(|(host, port)| (host.to_string(), port))
    }

    /// The image as of now (cheap: an `Arc` clone).
    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.borrow().clone()
    }

    /// The controller id clients see in Metadata and DescribeCluster. As KRaft brokers do
    /// (KIP-590), never the quorum leader but a live broker that forwards admin requests to
    /// the active controller, so clients never chase a dead leader. Kafka names a random live
    /// broker; Runnel names itself when it is live (registered and unfenced), since the
    /// client has just reached it: a dead broker stays unfenced in the image until its
    /// session expires, and librdkafka, once told a dead controller, waits for it to come
    /// back instead of asking again. A random live broker otherwise, -1 while none is live. A
    /// single node is always its own controller.
    pub fn controller_id(&self) -> i32 {
        if self.quorum.is_none() {
            return self.node_id;
        }
        let image = self.image();
        let live: Vec<i32> = image.live_brokers().map(|b| b.id).collect();
        pick_controller_id(&live, self.node_id, rand::random())
    }

    /// The active controller (the quorum leader) as this node knows it, -1 while none is
    /// known: for Runnel's own tools (the seed's `/controller` znode), never for clients.
    pub fn active_controller_id(&self) -> i32 {
        match &self.quorum {
            None => self.node_id,
            Some(quorum) => quorum.leader().unwrap_or(-1),
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
            .run(runnel_metadata::controller::AllocateProducerIds {
                broker_id: self.node_id,
                count: PRODUCER_ID_BLOCK,
            })
            .await?;
        let mut ids = self.producer_ids.lock();
        *ids = (first + 1, first + PRODUCER_ID_BLOCK);
        Ok(first)
    }
}

/// The broker named as controller: `own` when it is live, else `live[random % len]`, or -1
/// when no broker is live.
pub fn pick_controller_id(live: &[i32], own: i32, random: u64) -> i32 {
    if live.contains(&own) {
        return own;
    }
    let Ok(len) = u64::try_from(live.len()) else {
        return -1;
    };
    if len == 0 {
        return -1;
    }
    usize::try_from(random % len)
        .ok()
        .and_then(|i| live.get(i).copied())
        .unwrap_or(-1)
}

#[cfg(test)]
mod tests {
    use super::pick_controller_id;
    use proptest::prelude::*;

    #[test]
    fn itself_when_live_else_another_live_broker() {
        assert_eq!(pick_controller_id(&[1, 2, 3], 2, 0), 2);
        assert_eq!(pick_controller_id(&[1, 3], 2, 1), 3);
        assert_eq!(pick_controller_id(&[], 2, 7), -1);
    }

    proptest! {
        #[test]
        fn always_a_live_broker_itself_first(
            live in proptest::collection::btree_set(0i32..20, 0..8),
            own in 0i32..20,
            random in any::<u64>(),
        ) {
            let live: Vec<i32> = live.into_iter().collect();
            let named = pick_controller_id(&live, own, random);
            if live.is_empty() {
                prop_assert_eq!(named, -1);
            } else if live.contains(&own) {
                prop_assert_eq!(named, own);
            } else {
                prop_assert!(live.contains(&named));
                // Every other live broker can be named (the choice is spread).
                let all: std::collections::BTreeSet<i32> = (0..20u64)
                    .map(|r| pick_controller_id(&live, own, r))
                    .collect();
                prop_assert_eq!(all.len(), live.len());
            }
        }
    }
}
