//! The server side of the quorum RPCs: accepts connections on the controller listener and
//! hands each request to the local Raft node.
//!
//! The broker owns the listener (`--controller-listen`) and passes it to
//! [`crate::MetadataQuorum::start`], which runs [`serve_rpc`]; [`handle_request`] is public so a
//! caller with its own accept loop (or an in-process test network) can dispatch requests too.
//! A connection that sends a malformed frame is closed; other connections are unaffected.
//! Every accepted connection first passes the listener's [`ChannelSecurity`] handshake (TLS,
//! SASL): only then is a frame read, so an unauthenticated peer cannot touch the quorum.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{ClientWriteError, RaftError};
use openraft::ChangeMembers;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::network::frame::{
    decode, encode, encode_request, inconsistent_cluster_id, read_frame, read_frame_within,
    write_frame, JoinResponse, RequestFrame, RpcRequest, RpcResponse, IDLE_TIMEOUT,
};
use crate::network::security::{plaintext, BoxStream, ChannelSecurity};
use crate::types::{Node, NodeId, Raft};

/// Accepts connections forever, one task per connection; dropping (aborting) the returned
/// future closes the listener and every connection it accepted.
/// Handles [`RpcRequest::App`] requests: set by the node's owner once it is ready.
pub type AppHandler = std::sync::Arc<
    dyn Fn(serde_json::Value) -> crate::BoxFuture<'static, serde_json::Value> + Send + Sync,
>;
/// Where the app handler is installed after the quorum has started.
pub type AppSlot = std::sync::Arc<std::sync::OnceLock<AppHandler>>;

pub async fn serve_rpc(listener: TcpListener, raft: Raft, cluster_id: String) {
    serve_rpc_with_app(listener, raft, AppSlot::default(), cluster_id).await
}

/// [`serve_rpc`] that also routes [`RpcRequest::App`] to the handler in `app`. Only frames
/// stamped with `cluster_id` are served.
pub async fn serve_rpc_with_app(
    listener: TcpListener,
    raft: Raft,
    app: AppSlot,
    cluster_id: String,
) {
    serve_rpc_secured(
        listener,
        raft,
        app,
        cluster_id,
        plaintext(),
        crate::config::DEFAULT_MAX_CONNECTIONS,
    )
    .await
}

/// How long an accepted connection may take to finish its TLS / SASL handshake before it is
/// closed (a peer that connects and says nothing must not hold a task forever).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// At most one warning per this long about connections refused at the cap (a flood of
/// connections must not become a flood of log lines).
const REFUSAL_WARN_EVERY: Duration = Duration::from_secs(10);

/// [`serve_rpc_with_app`] on a listener secured by `security`: each connection must pass
/// [`ChannelSecurity::accept`] before any frame of it is read. While `max_connections` are
/// open, a newly accepted one is closed at once.
pub async fn serve_rpc_secured(
    listener: TcpListener,
    raft: Raft,
    app: AppSlot,
    cluster_id: String,
    security: Arc<dyn ChannelSecurity>,
    max_connections: usize,
) {
    let cluster_id: Arc<str> = cluster_id.into();
    let mut connections = JoinSet::new();
    let mut refusals = RefusalLog::default();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) if connections.len() >= max_connections => {
                    drop(stream);
                    refusals.refused(peer, max_connections);
                }
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let raft = raft.clone();
                    let app = app.clone();
                    let cluster_id = cluster_id.clone();
                    let security = security.clone();
                    connections.spawn(async move {
                        let handshake = tokio::time::timeout(
                            HANDSHAKE_TIMEOUT,
                            security.accept(stream, peer),
                        );
                        let accepted = match handshake.await {
                            Ok(Ok(accepted)) => accepted,
                            // The security implementation logs and counts refusals itself.
                            Ok(Err(e)) => {
                                tracing::debug!(%peer, error = %e, "quorum connection refused");
                                return;
                            }
                            Err(_) => {
                                tracing::debug!(%peer, "quorum connection closed: no handshake within {HANDSHAKE_TIMEOUT:?}");
                                return;
                            }
                        };
                        let served = serve_connection(
                            accepted.stream,
                            &raft,
                            &app,
                            &cluster_id,
                            &*security,
                        );
                        if let Err(e) = served.await {
                            tracing::debug!(%peer, principal = %accepted.principal, error = %e, "quorum connection closed");
                        }
                    });
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accepting a quorum connection failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Counts the connections refused at the cap and warns about them now and then.
#[derive(Default)]
struct RefusalLog {
    since_warning: u64,
    last_warning: Option<std::time::Instant>,
}

impl RefusalLog {
    fn refused(&mut self, peer: std::net::SocketAddr, max_connections: usize) {
        self.since_warning += 1;
        let due = self
            .last_warning
            .is_none_or(|at| at.elapsed() >= REFUSAL_WARN_EVERY);
        if due {
            tracing::warn!(
                %peer,
                refused = self.since_warning,
                "closed new quorum connections: {max_connections} are open (the controller listener's max.connections)"
            );
            self.since_warning = 0;
            self.last_warning = Some(std::time::Instant::now());
        }
    }
}

async fn serve_connection(
    mut stream: BoxStream,
    raft: &Raft,
    app: &AppSlot,
    cluster_id: &str,
    security: &dyn ChannelSecurity,
) -> std::io::Result<()> {
    while let Some(body) = read_frame_within(&mut stream, IDLE_TIMEOUT).await? {
        let frame: RequestFrame = decode(&body)?;
        if frame.cluster_id != cluster_id {
            tracing::warn!(theirs = %frame.cluster_id, ours = %cluster_id, "refused a quorum frame from another cluster");
            let refusal = inconsistent_cluster_id(&frame.cluster_id, cluster_id);
            write_frame(&mut stream, &encode(&refusal)?).await?;
            return Ok(());
        }
        let response = match frame.request {
            RpcRequest::App(value) => match app.get() {
                Some(handler) => RpcResponse::App(handler(value).await),
                None => RpcResponse::Error("this node is not ready for controller requests".into()),
            },
            other => handle_request_with(raft, cluster_id, security, other).await,
        };
        write_frame(&mut stream, &encode(&response)?).await?;
    }
    Ok(())
}

/// Handles one decoded request with the local Raft node.
/// `cluster_id` stamps the frames this handling sends itself (the Join identity probe).
pub async fn handle_request(raft: &Raft, cluster_id: &str, request: RpcRequest) -> RpcResponse {
    handle_request_with(raft, cluster_id, &super::security::Plaintext, request).await
}

/// [`handle_request`] whose own outgoing connections (the Join identity probe) are opened by
/// `security`.
pub async fn handle_request_with(
    raft: &Raft,
    cluster_id: &str,
    security: &dyn ChannelSecurity,
    request: RpcRequest,
) -> RpcResponse {
    match request {
        RpcRequest::AppendEntries(rpc) => {
            RpcResponse::AppendEntries(raft.append_entries(rpc).await)
        }
        RpcRequest::Vote(rpc) => RpcResponse::Vote(raft.vote(rpc).await),
        RpcRequest::InstallSnapshot(rpc) => {
            RpcResponse::InstallSnapshot(raft.install_snapshot(rpc).await)
        }
        RpcRequest::Join { node_id, address } => {
            RpcResponse::Join(handle_join(raft, cluster_id, security, node_id, address).await)
        }
        RpcRequest::Identify => RpcResponse::Identity {
            node_id: raft.metrics().borrow().id,
        },
        RpcRequest::App(_) => RpcResponse::Error("no application handler on this path".into()),
    }
}

/// Decodes a frame body, handles it and encodes the response frame: the whole server side for
/// callers that run their own connection loop.
pub async fn handle_frame(raft: &Raft, cluster_id: &str, body: &[u8]) -> std::io::Result<Vec<u8>> {
    let response = match decode::<RequestFrame>(body) {
        Ok(frame) if frame.cluster_id != cluster_id => {
            inconsistent_cluster_id(&frame.cluster_id, cluster_id)
        }
        Ok(frame) => handle_request(raft, cluster_id, frame.request).await,
        Err(e) => RpcResponse::Error(format!("undecodable request: {e}")),
    };
    encode(&response)
}

/// How long the leader waits for an observer's old address to say who it is.
const IDENTIFY_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether a process answering as `node_id` listens at `address` (the observer registered
/// there is alive). Any failure (refused, timeout, garbage, another id) means no.
async fn identifies_as(
    cluster_id: &str,
    security: &dyn ChannelSecurity,
    address: &str,
    node_id: NodeId,
) -> bool {
    let probe = async {
        let mut stream = security.connect(address).await.ok()?;
        write_frame(
            &mut stream,
            &encode_request(cluster_id, &RpcRequest::Identify).ok()?,
        )
        .await
        .ok()?;
        let body = read_frame(&mut stream).await.ok()??;
        match decode::<RpcResponse>(&body).ok()? {
            RpcResponse::Identity { node_id: id } => Some(id == node_id),
            _ => Some(false),
        }
    };
    tokio::time::timeout(IDENTIFY_TIMEOUT, probe)
        .await
        .ok()
        .flatten()
        .unwrap_or(false)
}

/// Adds an observer as a learner (leader only). Idempotent: an observer that is already a
/// learner with the same address is simply told so. One whose address changed (restarted on
/// another port) is moved only if nothing answers as that node at the old address: a second
/// process cannot take over a live observer's node id (its log would be empty, and the
/// leader's replication progress for the old process would see the log "revert"). A moved
/// learner is removed and added again, so its replication starts from scratch.
async fn handle_join(
    raft: &Raft,
    cluster_id: &str,
    security: &dyn ChannelSecurity,
    node_id: NodeId,
    address: String,
) -> JoinResponse {
    let metrics = raft.metrics().borrow().clone();
    let membership = metrics.membership_config.membership().clone();
    if membership.voter_ids().any(|v| v == node_id) {
        return JoinResponse::Failed(format!(
            "node {node_id} is a voter; it cannot join as an observer"
        ));
    }
    if membership
        .get_node(&node_id)
        .is_some_and(|n| n.addr == address)
    {
        return JoinResponse::Joined;
    }
    if let Some(existing) = membership.get_node(&node_id) {
        if identifies_as(cluster_id, security, &existing.addr, node_id).await {
            return JoinResponse::Failed(format!(
                "node {node_id} is a live observer at {}; refusing to move it to {address}",
                existing.addr
            ));
        }
        let removed = raft
            .change_membership(ChangeMembers::RemoveNodes(BTreeSet::from([node_id])), true)
            .await;
        if let Err(e) = removed {
            return join_error(e);
        }
    }
    let node = Node { addr: address };
    match raft.add_learner(node_id, node, false).await {
        Ok(_) => JoinResponse::Joined,
        Err(e) => join_error(e),
    }
}

/// A membership change's error as a join answer (a follower points at the leader).
fn join_error(e: RaftError<NodeId, ClientWriteError<NodeId, Node>>) -> JoinResponse {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => JoinResponse::NotLeader {
            leader: f.leader_id,
            address: f.leader_node.map(|n| n.addr),
        },
        e => JoinResponse::Failed(e.to_string()),
    }
}
