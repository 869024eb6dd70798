//! The tasks that follow the image once this broker is in the cluster: the replica fetcher
//! (follower replication) and the group and transaction coordinators.

use std::sync::Arc;

use runnel_metadata::{BrokerDefaults, MetadataImage};
use tokio::sync::watch;

use super::settings::NodeSettings;
use crate::config::BrokerConfig;
use crate::group_manager::GroupHandle;
use crate::replica::manager::ReplicaManager;
use crate::txn_manager::TxnHandle;
use crate::BrokerError;

/// The coordinators' handles, for the request handlers.
pub(super) struct Coordinators {
    pub groups: GroupHandle,
    pub txns: TxnHandle,
}

/// Starts the replica fetcher, then the group and the transaction coordinator.
pub(super) fn spawn(
    config: &BrokerConfig,
    settings: &NodeSettings,
    defaults: &BrokerDefaults,
    replicas: &Arc<ReplicaManager>,
    image: &watch::Receiver<Arc<MetadataImage>>,
) -> Result<Coordinators, BrokerError> {
    let node_id = config.node_id;
    crate::replica::fetcher::spawn(
        node_id,
        // Validated to lie within 0..=i32::MAX.
        i32::try_from(config.get_i64("replica.fetch.response.max.bytes", 10_485_760))
            .unwrap_or(i32::MAX),
        replicas.clone(),
        image.clone(),
    );
    let groups = crate::group_manager::spawn(
        node_id,
        settings.group.clone(),
        // Validated with the rest of the config at load.
        crate::consumer_group_settings::consumer_group_config(config)?,
        defaults.clone(),
        replicas.clone(),
        image.clone(),
    );
    let txns = crate::txn_manager::spawn(
        node_id,
        settings.txn.clone(),
        replicas.clone(),
        image.clone(),
    );
    Ok(Coordinators { groups, txns })
}
