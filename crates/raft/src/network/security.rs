//! How connections on the controller (quorum) listener are secured: the hook between the raft
//! network and whoever knows TLS and SASL (the broker, through `controller.listener.names`
//! and `listener.security.protocol.map`).
//!
//! The raft crate frames and serves quorum RPCs; it does not know certificates or SASL. A
//! [`ChannelSecurity`] is passed in when the quorum starts: the server runs
//! [`ChannelSecurity::accept`] on every accepted socket *before* reading any quorum frame, so a
//! peer that has not authenticated never has a frame decoded, let alone acted on (Kafka's
//! rule: before authentication only the handshake is served). Every dialing side (Raft
//! replication and votes, an observer's join, the leader's identity probe, the broker's
//! controller RPCs) opens its sockets with [`ChannelSecurity::connect`], i.e. with this node's
//! own credentials. [`Plaintext`] is the PLAINTEXT listener: nothing to check.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::network::client::BoxFuture;

/// Any byte stream a quorum connection runs over (TCP, or TLS over TCP).
pub trait QuorumStream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> QuorumStream for T {}

/// A quorum connection, secured as the listener says.
pub type BoxStream = Box<dyn QuorumStream>;

/// An accepted connection that passed the listener's handshake.
pub struct Accepted {
    pub stream: BoxStream,
    /// Who the peer authenticated as (`User:ANONYMOUS` on PLAINTEXT), for the logs.
    pub principal: String,
}

/// Why an accepted connection was refused. The connection is closed; nothing it sent was
/// processed.
#[derive(Debug, thiserror::Error)]
pub enum AcceptError {
    /// The TLS handshake failed (no or an untrusted client certificate with
    /// `ssl.client.auth=required`, a plaintext peer on a TLS listener, ...).
    #[error("TLS handshake failed: {0}")]
    Tls(String),
    /// SASL failed: `principal` is the name the peer claimed, if any (never a secret).
    #[error("{reason}")]
    Authentication {
        reason: String,
        principal: Option<String>,
    },
    /// The peer went away or sent something that is not a handshake.
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// Secures both ends of quorum connections.
pub trait ChannelSecurity: Send + Sync + 'static {
    /// Runs the listener's handshake (TLS, then SASL) on an accepted socket. The caller bounds
    /// it in time.
    fn accept(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
    ) -> BoxFuture<'static, Result<Accepted, AcceptError>>;

    /// Connects to a peer's controller listener and authenticates with this node's own
    /// credentials. The caller bounds it in time.
    fn connect<'a>(&'a self, address: &'a str) -> BoxFuture<'a, io::Result<BoxStream>>;

    /// The listener's security protocol, for log lines (`PLAINTEXT`, `SASL_SSL`, ...).
    fn protocol(&self) -> &str;
}

/// A PLAINTEXT controller listener: nothing is checked beyond the cluster id of each frame.
#[derive(Debug, Default, Clone, Copy)]
pub struct Plaintext;

impl ChannelSecurity for Plaintext {
    fn accept(
        &self,
        stream: TcpStream,
        _peer: SocketAddr,
    ) -> BoxFuture<'static, Result<Accepted, AcceptError>> {
        Box::pin(async move {
            Ok(Accepted {
                stream: Box::new(stream),
                principal: "User:ANONYMOUS".into(),
            })
        })
    }

    fn connect<'a>(&'a self, address: &'a str) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let stream = TcpStream::connect(address).await?;
            // Raft RPCs are small and latency-bound.
            let _ = stream.set_nodelay(true);
            Ok(Box::new(stream) as BoxStream)
        })
    }

    fn protocol(&self) -> &str {
        "PLAINTEXT"
    }
}

/// The security every node uses unless told otherwise.
pub fn plaintext() -> Arc<dyn ChannelSecurity> {
    Arc::new(Plaintext)
}
