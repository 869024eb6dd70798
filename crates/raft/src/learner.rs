//! How observers (brokers that are not controllers) follow the metadata log.
//!
//! Design: an observer is an openraft *learner*. It asks to be added by sending a `Join`
//! request to the voters (following `NotLeader` hints to the leader); the leader commits a
//! membership change that adds it as a learner, and from then on replicates to it exactly like
//! to a follower (AppendEntries, InstallSnapshot when it is behind the purged log). Learners
//! never vote and never become candidates, so adding brokers does not change the quorum size
//! or election behaviour. The alternative, KRaft's observers that *fetch*, would need a second
//! replication path next to openraft's; pushing through openraft reuses its catch-up, snapshot
//! and backoff logic unchanged. The price: the observer needs an address the leader can reach
//! (its own controller-RPC listener), and a learner that is gone for good stays in the
//! membership (the leader keeps retrying it with backoff) until it is removed.
//!
//! The loop below keeps this true: whenever the node is not in the membership with its current
//! address (first start, restart on another port, membership rolled back), it asks again.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::network::client::Transport;
use crate::network::frame::{JoinResponse, RpcRequest, RpcResponse};
use crate::types::{NodeId, Raft};

/// Runs until aborted: joins the quorum as a learner and re-joins if ever dropped.
pub(crate) async fn join_loop(
    raft: Raft,
    transport: Arc<dyn Transport>,
    node_id: NodeId,
    address: String,
    voters: BTreeMap<NodeId, String>,
    retry: Duration,
) {
    loop {
        let joined = raft
            .metrics()
            .borrow()
            .membership_config
            .membership()
            .get_node(&node_id)
            .is_some_and(|n| n.addr == address);
        if !joined && try_join(&*transport, node_id, &address, &voters, retry).await {
            tracing::info!(node_id, %address, "joined the metadata quorum as an observer");
        }
        tokio::time::sleep(retry).await;
    }
}

/// One round: ask the voters in turn, following leader hints; true once some leader said yes.
async fn try_join(
    transport: &dyn Transport,
    node_id: NodeId,
    address: &str,
    voters: &BTreeMap<NodeId, String>,
    timeout: Duration,
) -> bool {
    let mut targets: Vec<(NodeId, String)> =
        voters.iter().rev().map(|(i, a)| (*i, a.clone())).collect();
    // Bounded so that stale hints cannot bounce us around forever.
    for _ in 0..voters.len() * 2 + 2 {
        let Some((target, target_addr)) = targets.pop() else {
            return false;
        };
        let request = RpcRequest::Join {
            node_id,
            address: address.to_string(),
        };
        match transport.call(target, &target_addr, request, timeout).await {
            Ok(RpcResponse::Join(JoinResponse::Joined)) => return true,
            Ok(RpcResponse::Join(JoinResponse::NotLeader {
                leader,
                address: hint,
            })) => {
                if let (Some(l), Some(a)) = (leader, hint) {
                    if l != target {
                        targets.push((l, a));
                    }
                }
            }
            Ok(other) => tracing::debug!(target, response = ?other, "join refused"),
            Err(e) => tracing::debug!(target, error = %e, "join request failed"),
        }
    }
    false
}
