//! Publishes each new metadata image: first to the local replica manager (so logs exist before
//! anyone can see the partition in Metadata), then to every reader through a watch channel.

use std::sync::Arc;

use runnel_metadata::MetadataImage;
use tokio::sync::watch;

use crate::replica_manager::ReplicaManager;

pub struct Publisher {
    replicas: Arc<ReplicaManager>,
    tx: watch::Sender<Arc<MetadataImage>>,
}

impl Publisher {
    pub fn new(replicas: Arc<ReplicaManager>, tx: watch::Sender<Arc<MetadataImage>>) -> Self {
        Publisher { replicas, tx }
    }

    pub fn publish(&self, image: Arc<MetadataImage>) {
        self.replicas.apply_image(&image);
        self.tx.send_replace(image);
    }
}
