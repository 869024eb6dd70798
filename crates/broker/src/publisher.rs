//! Publishes each new metadata image: first to the local replica manager (so logs exist before
//! anyone can see the partition in Metadata), then to every reader through a watch channel.
//!
//! A committed batch is applied once on a node, by the Raft state machine: the image it built is
//! shared (`follow`) by this publisher, every reader and the active controller's committed
//! image, and only the delta is computed here.

use std::sync::Arc;

use runnel_metadata::{ImageError, MetadataDelta, MetadataImage, MetadataRecord};
use tokio::sync::watch;

use crate::replica::manager::ReplicaManager;

pub struct Publisher {
    replicas: Arc<ReplicaManager>,
    tx: watch::Sender<Arc<MetadataImage>>,
}

impl Publisher {
    pub fn new(replicas: Arc<ReplicaManager>, tx: watch::Sender<Arc<MetadataImage>>) -> Self {
        Publisher { replicas, tx }
    }

    /// A whole new image (boot, a snapshot): the replica manager walks all of it.
    pub fn publish(&self, image: Arc<MetadataImage>) {
        self.publish_change(image, None);
    }

    /// The image after a batch, with the batch's delta when there is one: the replica manager
    /// then examines only the partitions the delta may change (`None`: all of them).
    pub fn publish_change(&self, image: Arc<MetadataImage>, delta: Option<&MetadataDelta>) {
        match delta {
            Some(delta) => self.replicas.apply_delta(&image, delta),
            None => self.replicas.apply_image(&image),
        };
        self.tx.send_replace(image);
    }
}

/// The image after committed `records` and their delta, given `after`, the image the Raft state
/// machine built by applying them: shared as it is when the records follow `image` (the usual
/// case), applied to `image` only if they do not line up (then `after` is not the image after
/// `image` plus `records`).
pub fn follow(
    image: &Arc<MetadataImage>,
    records: &[(i64, MetadataRecord)],
    after: Arc<MetadataImage>,
) -> Result<(Arc<MetadataImage>, MetadataDelta), ImageError> {
    let follows = records.first().is_some_and(|(o, _)| *o == image.offset + 1)
        && records.last().is_some_and(|(o, _)| *o == after.offset)
        && after.cluster_id == image.cluster_id;
    if follows {
        let delta = MetadataDelta::of_batch(image, &after, records);
        return Ok((after, delta));
    }
    tracing::warn!(
        offset = image.offset,
        "committed records do not follow the published image: applying them"
    );
    let applied = image.apply_with_delta(records)?;
    Ok((Arc::new(applied.image), applied.delta))
}
