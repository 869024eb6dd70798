//! The metadata follower: every committed batch (or snapshot) of the quorum applied to the
//! image and published, and the moment this node counts as caught up.

use std::sync::Arc;
use std::time::Duration;

use runnel_metadata::MetadataImage;
use runnel_raft::{Committed, MetadataQuorum};
use tokio::sync::{oneshot, watch};

use crate::controller::client::ControllerClient;
use crate::publisher::{follow, Publisher};
use crate::replica::manager::ReplicaManager;

/// Publishes `image` (the empty image a start begins with) and spawns the follower over
/// `quorum`. Returns the image's receiver and where to send the leader's committed offset
/// once it is learned.
pub(super) fn spawn_follower(
    quorum: &Arc<MetadataQuorum>,
    replicas: &Arc<ReplicaManager>,
    image: &Arc<MetadataImage>,
) -> (watch::Receiver<Arc<MetadataImage>>, oneshot::Sender<i64>) {
    let (image_tx, image_rx) = watch::channel(image.clone());
    let publisher = Publisher::new(replicas.clone(), image_tx);
    publisher.publish(image.clone());
    let (committed_tx, committed_rx) = oneshot::channel();
    tokio::spawn(follow_quorum(
        quorum.clone(),
        publisher,
        replicas.clone(),
        image.clone(),
        committed_rx,
    ));
    (image_rx, committed_tx)
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
    mut leader_committed: oneshot::Receiver<i64>,
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
pub(super) async fn learn_leader_committed(client: ControllerClient, tx: oneshot::Sender<i64>) {
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
