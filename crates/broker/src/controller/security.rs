//! The controller (quorum) listener's TLS and SASL, as Kafka configures it:
//! `controller.listener.names` (the first name is the listener this node binds and dials),
//! its protocol in `listener.security.protocol.map`, its `listener.name.<name>.` TLS and SASL
//! properties, and `sasl.mechanism.controller.protocol` with the username/password of the
//! listener's `<mechanism>.sasl.jaas.config` for the connections this node opens.
//!
//! This is the [`runnel_raft::ChannelSecurity`] the quorum is started with. Accepting: TLS
//! (with `ssl.client.auth=required`, mutual), then for SASL_* the Kafka SaslHandshake /
//! SaslAuthenticate exchange with the same pure state machine as the Kafka listeners
//! (`server/sasl`, `server/authenticate`), before the raft server reads a single quorum frame.
//! A quorum frame sent without authenticating is not a SASL request: the connection is
//! closed and the frame is never decoded. Dialing: `runnel_client::stream::open`, as the
//! inter-broker connections do.
//!
//! Only PLAIN is accepted on a SASL controller listener: SCRAM credentials live in the
//! metadata log the quorum replicates, so a controller could not check them before it has
//! the log (Kafka refuses SCRAM on the controller listener for the same reason).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use runnel_raft::{AcceptError, Accepted, BoxFuture, BoxStream, ChannelSecurity};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::server::auth_failures::AUTH_STATS;
use crate::server::authenticate::{pre_auth, PreAuth, Then};
use crate::server::sasl::{SaslConfig, SaslSession};

/// How long dialing a peer (connect, TLS, SASL) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A secured controller listener (SSL, SASL_PLAINTEXT or SASL_SSL).
pub struct ControllerSecurity {
    pub listener: String,
    pub protocol: &'static str,
    pub tls: Option<Arc<crate::server::tls::ReloadingAcceptor>>,
    pub sasl: Option<Arc<SaslConfig>>,
    /// How this node dials other controller listeners (its own credentials; PEM files
    /// re-read on the next dial when they change).
    pub client: crate::server::tls::ReloadingSecurity,
}

impl ControllerSecurity {
    async fn handshake(
        tls: Option<Arc<crate::server::tls::ReloadingAcceptor>>,
        sasl: Option<Arc<SaslConfig>>,
        stream: TcpStream,
    ) -> Result<Accepted, (AcceptError, Option<String>)> {
        let Some(acceptor) = tls else {
            return sasl_handshake(Box::new(stream), sasl).await;
        };
        let listener_tls = acceptor.current();
        let tls = listener_tls
            .acceptor
            .accept(stream)
            .await
            .map_err(|e| (AcceptError::Tls(e.to_string()), None))?;
        if sasl.is_some() {
            return sasl_handshake(Box::new(tls), sasl).await;
        }
        let name = listener_tls
            .certificate_principal(&tls)
            .map_err(|reason| (AcceptError::Tls(reason), None))?;
        Ok(Accepted {
            stream: Box::new(tls),
            principal: format!("User:{}", name.unwrap_or_else(|| "ANONYMOUS".into())),
        })
    }
}

impl ChannelSecurity for ControllerSecurity {
    fn accept(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
    ) -> BoxFuture<'static, Result<Accepted, AcceptError>> {
        let tls = self.tls.clone();
        let sasl = self.sasl.clone();
        let listener = self.listener.clone();
        Box::pin(async move {
            match Self::handshake(tls, sasl, stream).await {
                Ok(accepted) => {
                    AUTH_STATS.succeeded();
                    Ok(accepted)
                }
                Err((e, principal)) => {
                    AUTH_STATS.failed(&listener, peer, principal.as_deref(), &e.to_string());
                    Err(e)
                }
            }
        })
    }

    fn connect<'a>(&'a self, address: &'a str) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let security = self.client.current();
            let stream = runnel_client::stream::open(
                address,
                &security,
                "runnel-controller",
                CONNECT_TIMEOUT,
            )
            .await
            .map_err(|e| io::Error::other(e.to_string()))?;
            Ok(Box::new(stream) as BoxStream)
        })
    }

    fn protocol(&self) -> &str {
        self.protocol
    }
}

/// Runs the SASL exchange (if the listener has SASL) on `stream`: only SaslHandshake and
/// SaslAuthenticate are answered; anything else, or a failed exchange, is an error and the
/// caller drops the connection.
async fn sasl_handshake(
    mut stream: BoxStream,
    sasl: Option<Arc<SaslConfig>>,
) -> Result<Accepted, (AcceptError, Option<String>)> {
    let Some(config) = sasl else {
        return Ok(Accepted {
            stream,
            principal: "User:ANONYMOUS".into(),
        });
    };
    let max_frame = config.max_receive_size;
    let mut session = SaslSession::new(config);
    loop {
        let frame = read_handshake_frame(&mut stream, max_frame)
            .await
            .map_err(|e| (AcceptError::Io(e), None))?;
        match pre_auth(&mut session, &frame, &crate::server::server_nonce()) {
            // ApiVersions: the quorum's own clients never send it; nothing but the SASL
            // exchange is served here before authentication.
            PreAuth::Dispatch => {
                return Err((
                    auth_error(
                        "ApiVersions before SASL authentication on the controller listener".into(),
                        None,
                    ),
                    None,
                ))
            }
            PreAuth::Refuse(reason, user) => return Err((auth_error(reason, user.clone()), user)),
            PreAuth::Reply(reply, then) => {
                stream
                    .write_all(&reply)
                    .await
                    .map_err(|e| (AcceptError::Io(e), None))?;
                stream
                    .flush()
                    .await
                    .map_err(|e| (AcceptError::Io(e), None))?;
                match then {
                    Then::Continue => {}
                    Then::Authenticated(user) => {
                        return Ok(Accepted {
                            stream,
                            principal: format!("User:{user}"),
                        })
                    }
                    Then::Close { reason, user } => {
                        return Err((auth_error(reason, user.clone()), user))
                    }
                }
            }
        }
    }
}

fn auth_error(reason: String, principal: Option<String>) -> AcceptError {
    AcceptError::Authentication { reason, principal }
}

/// One size-prefixed request frame of the SASL exchange, at most `max_frame` bytes
/// (`sasl.server.max.receive.size`, as on the broker listeners).
async fn read_handshake_frame<S: AsyncRead + AsyncWrite + Unpin + ?Sized>(
    stream: &mut S,
    max_frame: usize,
) -> io::Result<Bytes> {
    let size = stream.read_i32().await?;
    let size = usize::try_from(size)
        .ok()
        .filter(|s| *s <= max_frame)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a {size}-byte frame before authentication is over sasl.server.max.receive.size ({max_frame})"),
            )
        })?;
    // Grown with the bytes received, not allocated from the client's size prefix.
    let mut body = Vec::new();
    (&mut *stream)
        .take(u64::try_from(size).map_err(io::Error::other)?)
        .read_to_end(&mut body)
        .await?;
    if body.len() < size {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(Bytes::from(body))
}
