//! openraft's network traits on top of a [`Transport`]: one [`PeerClient`] per target, which
//! turns transport failures into the error kinds openraft reacts to (back off when a peer is
//! unreachable, retry on a broken connection) and remote errors into `RemoteError`.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{Backoff, RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};

use crate::network::client::{Transport, TransportError};
use crate::network::frame::{RpcRequest, RpcResponse};
use crate::types::{Node, NodeId, TypeConfig};

/// Creates a [`PeerClient`] per replication stream / vote target.
pub struct NetworkFactory {
    transport: Arc<dyn Transport>,
    backoff: Duration,
}

impl NetworkFactory {
    /// `backoff`: how long openraft waits before retrying an unreachable peer. Short (about a
    /// heartbeat) so that a restarted follower is caught up quickly.
    pub fn new(transport: Arc<dyn Transport>, backoff: Duration) -> Self {
        NetworkFactory { transport, backoff }
    }
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &Node) -> PeerClient {
        PeerClient {
            transport: self.transport.clone(),
            target,
            address: node.addr.clone(),
            backoff: self.backoff,
        }
    }
}

/// The RPC client for one peer.
pub struct PeerClient {
    transport: Arc<dyn Transport>,
    target: NodeId,
    address: String,
    backoff: Duration,
}

type RpcResult<T, E = openraft::error::Infallible> =
    Result<T, RPCError<NodeId, Node, RaftError<NodeId, E>>>;

impl PeerClient {
    async fn call<E: std::error::Error>(
        &self,
        request: RpcRequest,
        option: &RPCOption,
    ) -> Result<RpcResponse, RPCError<NodeId, Node, RaftError<NodeId, E>>> {
        self.transport
            .call(self.target, &self.address, request, option.hard_ttl())
            .await
            .map_err(|e| match e {
                TransportError::Unreachable(e) => RPCError::Unreachable(Unreachable::new(&e)),
                TransportError::Network(e) => RPCError::Network(NetworkError::new(&e)),
                TransportError::Timeout(d) => {
                    RPCError::Network(NetworkError::new(&io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("no response from node {} within {d:?}", self.target),
                    )))
                }
            })
    }

    fn unexpected<E: std::error::Error>(
        &self,
        resp: RpcResponse,
    ) -> RPCError<NodeId, Node, RaftError<NodeId, E>> {
        let msg = match resp {
            RpcResponse::Error(m) => m,
            other => format!("mismatched response {other:?}"),
        };
        RPCError::Network(NetworkError::new(&io::Error::new(
            io::ErrorKind::InvalidData,
            msg,
        )))
    }

    fn remote<E: std::error::Error>(
        &self,
        e: RaftError<NodeId, E>,
    ) -> RPCError<NodeId, Node, RaftError<NodeId, E>> {
        RPCError::RemoteError(RemoteError::new(self.target, e))
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>> {
        match self.call(RpcRequest::AppendEntries(rpc), &option).await? {
            RpcResponse::AppendEntries(r) => r.map_err(|e| self.remote(e)),
            other => Err(self.unexpected(other)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        match self.call(RpcRequest::InstallSnapshot(rpc), &option).await? {
            RpcResponse::InstallSnapshot(r) => r.map_err(|e| self.remote(e)),
            other => Err(self.unexpected(other)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>> {
        match self.call(RpcRequest::Vote(rpc), &option).await? {
            RpcResponse::Vote(r) => r.map_err(|e| self.remote(e)),
            other => Err(self.unexpected(other)),
        }
    }

    fn backoff(&self) -> Backoff {
        Backoff::new(std::iter::repeat(self.backoff))
    }
}
