//! The controller's side of a failed log dir (KIP-858, Kafka's
//! `ReplicationControlManager.handleDirectoriesOffline`): a broker's heartbeat names its
//! offline dirs; the first heartbeat naming a dir records it, with the replicas it held
//! (`MetadataRecord::BrokerDirsOffline`). Once that commits, [`super::Controller::on_commit`]
//! treats those replicas as not live for their partitions (`MetadataImage::live_for_partition`):
//! they leave the ISR and a partition they led gets a new leader among the other in-sync
//! replicas, as Kafka's `generateLeaderAndIsrUpdates` with the broker as `brokerToRemove` and
//! its `LeaderAcceptor` checking the replica's dir. The broker's other dirs keep serving.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::op::bad_field;
use crate::errors::ApiError;
use crate::image::MetadataImage;
use crate::records::MetadataRecord;

/// One offline log dir as a heartbeat reports it: its `directory.id` and the replicas
/// (topic id, partition) it held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OfflineDir {
    pub id: Uuid,
    pub replicas: Vec<(Uuid, i32)>,
}

/// Most dirs one heartbeat may report, and most replicas in all of them: the request is
/// bounded before anything is stored.
pub const MAX_OFFLINE_DIRS: usize = 256;
pub const MAX_OFFLINE_REPLICAS: usize = 1 << 20;

/// A heartbeat's offline dirs are well formed: bounded, no nil id, partitions not negative.
pub fn validate(dirs: &[OfflineDir]) -> Result<(), ApiError> {
    if dirs.len() > MAX_OFFLINE_DIRS {
        return Err(bad_field(
            "offline_dirs",
            format!("{} dirs, at most {MAX_OFFLINE_DIRS}", dirs.len()),
        ));
    }
    let replicas: usize = dirs.iter().map(|d| d.replicas.len()).sum();
    if replicas > MAX_OFFLINE_REPLICAS {
        return Err(bad_field(
            "offline_dirs.replicas",
            format!("{replicas} replicas, at most {MAX_OFFLINE_REPLICAS}"),
        ));
    }
    if dirs.iter().any(|d| d.id.is_nil()) {
        return Err(bad_field("offline_dirs.id", "nil directory id"));
    }
    if dirs.iter().flat_map(|d| &d.replicas).any(|(_, p)| *p < 0) {
        return Err(bad_field("offline_dirs.replicas", "negative partition"));
    }
    Ok(())
}

/// The record a heartbeat of registration `broker_epoch` reporting `reported` leads to: none
/// when the registration is not the current one or every reported dir is known offline
/// already (Kafka's `directoryIntersection` is empty), else the newly offline dirs with the
/// replicas they held that the image assigns to the broker and does not yet know offline.
pub fn dirs_offline(
    image: &MetadataImage,
    broker_id: i32,
    broker_epoch: i64,
    reported: &[OfflineDir],
) -> Option<MetadataRecord> {
    let broker = image
        .brokers
        .get(&broker_id)
        .filter(|b| b.epoch == broker_epoch)?;
    let new: Vec<&OfflineDir> = reported
        .iter()
        .filter(|d| !broker.offline_dirs.dirs.contains(&d.id))
        .collect();
    if new.is_empty() {
        return None;
    }
    let mut dirs: Vec<Uuid> = new.iter().map(|d| d.id).collect();
    dirs.sort();
    dirs.dedup();
    let assigned = |(topic_id, partition): &(Uuid, i32)| {
        image
            .topic_by_id(topic_id)
            .and_then(|t| t.partitions.get(partition))
            .is_some_and(|p| p.replicas.contains(&broker_id))
    };
    let mut replicas: Vec<(Uuid, i32)> = new
        .iter()
        .flat_map(|d| d.replicas.iter().copied())
        .filter(|r| assigned(r) && !broker.offline_dirs.holds(r.0, r.1))
        .collect();
    replicas.sort();
    replicas.dedup();
    Some(MetadataRecord::BrokerDirsOffline {
        broker_id,
        broker_epoch,
        dirs,
        replicas,
    })
}

#[cfg(test)]
#[path = "offline_dirs_tests.rs"]
mod tests;
