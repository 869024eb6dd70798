//! The client side of the quorum RPCs: a [`Transport`] that carries one request to one peer and
//! brings back its response, and the TCP implementation of it.
//!
//! The transport is a trait so that the same openraft adapter (`raft_network.rs`) and observer
//! join loop run over real TCP in production and over an in-process, fault-injecting network in
//! the simulation tests.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::network::frame::{
    decode, encode_request, read_frame, write_frame, RpcRequest, RpcResponse,
};
use crate::network::security::{plaintext, BoxStream, ChannelSecurity};
use crate::types::NodeId;

/// Why a call produced no response.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// The peer could not be reached at all (connection refused, no route): back off.
    #[error("peer unreachable: {0}")]
    Unreachable(io::Error),
    /// The connection broke or the response was garbage: retry.
    #[error("network error: {0}")]
    Network(io::Error),
    /// No response within the deadline.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
}

/// A boxed, sendable future (the transport is used behind `dyn`).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Carries quorum RPCs to peers.
pub trait Transport: Send + Sync + 'static {
    /// Sends `request` to node `target` at `address` and waits at most `timeout` for its
    /// response.
    fn call<'a>(
        &'a self,
        target: NodeId,
        address: &'a str,
        request: RpcRequest,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<RpcResponse, TransportError>>;
}

/// Idle connections kept per peer; more concurrent calls open more connections.
const MAX_IDLE_PER_PEER: usize = 4;

/// Quorum RPCs over TCP (secured by the controller listener's [`ChannelSecurity`]) with a small
/// pool of reusable, already authenticated connections per peer address.
///
/// A call takes an idle connection (or connects), writes one frame, reads one frame and gives
/// the connection back only if all of that succeeded, so a broken connection is never reused.
/// A pooled connection may have died while idle (the peer restarted): the call is then retried
/// once on a fresh connection, which is safe because Raft RPCs are idempotent.
pub struct TcpTransport {
    idle: Mutex<HashMap<String, Vec<BoxStream>>>,
    /// Stamped on every request ([`crate::network::frame::RequestFrame`]).
    cluster_id: String,
    /// How each new connection is opened and authenticated.
    security: Arc<dyn ChannelSecurity>,
}

impl Default for TcpTransport {
    fn default() -> Self {
        TcpTransport::new(String::new())
    }
}

impl TcpTransport {
    /// A PLAINTEXT transport for the cluster `cluster_id` (its peers refuse frames of another
    /// cluster).
    pub fn new(cluster_id: impl Into<String>) -> Self {
        TcpTransport::with_security(cluster_id, plaintext())
    }

    /// A transport whose connections are opened by `security` (TLS and/or SASL with this
    /// node's own credentials), as the controller listener requires.
    pub fn with_security(
        cluster_id: impl Into<String>,
        security: Arc<dyn ChannelSecurity>,
    ) -> Self {
        TcpTransport {
            idle: Mutex::default(),
            cluster_id: cluster_id.into(),
            security,
        }
    }

    fn take_idle(&self, address: &str) -> Option<BoxStream> {
        self.idle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(address)?
            .pop()
    }

    fn put_idle(&self, address: &str, stream: BoxStream) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let list = idle.entry(address.to_string()).or_default();
        if list.len() < MAX_IDLE_PER_PEER {
            list.push(stream);
        }
    }

    async fn exchange(stream: &mut BoxStream, frame: &[u8]) -> io::Result<RpcResponse> {
        write_frame(stream, frame).await?;
        match read_frame(stream).await? {
            Some(body) => decode(&body),
            None => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "peer closed the connection",
            )),
        }
    }

    async fn call_inner(
        &self,
        address: &str,
        request: RpcRequest,
    ) -> Result<RpcResponse, TransportError> {
        let frame = encode_request(&self.cluster_id, &request).map_err(TransportError::Network)?;
        if let Some(mut stream) = self.take_idle(address) {
            if let Ok(resp) = Self::exchange(&mut stream, &frame).await {
                self.put_idle(address, stream);
                return Ok(resp);
            }
        }
        // A refused connection and a failed handshake both mean "not reachable as a peer":
        // openraft backs off either way.
        let mut stream = self
            .security
            .connect(address)
            .await
            .map_err(TransportError::Unreachable)?;
        let resp = Self::exchange(&mut stream, &frame)
            .await
            .map_err(TransportError::Network)?;
        self.put_idle(address, stream);
        Ok(resp)
    }
}

impl Transport for TcpTransport {
    fn call<'a>(
        &'a self,
        _target: NodeId,
        address: &'a str,
        request: RpcRequest,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<RpcResponse, TransportError>> {
        Box::pin(async move {
            tokio::time::timeout(timeout, self.call_inner(address, request))
                .await
                .unwrap_or(Err(TransportError::Timeout(timeout)))
        })
    }
}
