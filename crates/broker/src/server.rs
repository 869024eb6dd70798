//! The TCP server: size-prefixed frames in, responses out in request order.
//!
//! Each connection is one task that handles its requests one at a time, as Kafka does, so
//! responses keep request order, except that a Produce waiting for its replication lets the
//! next Produce in (`pipeline`: appends and responses keep request order). Anything malformed
//! closes that connection only; the broker keeps serving everyone else.
//!
//! Limits (docs/network-limits.md, Kafka's `SocketServer` semantics): at `max.connections` the
//! acceptor stops accepting until a connection closes (new ones wait in the listen backlog);
//! a connection over `max.connections.per.ip` is accepted and closed at once; a connection that
//! has not delivered a complete request (or taken its response) within
//! `connections.max.idle.ms` is closed, half-received frame or not; request bytes come out of
//! one pool (`queued.max.request.bytes`) and an empty pool stops reading (backpressure).

pub mod auth_failures;
pub(crate) mod authenticate;
pub mod dn;
pub mod fd_limit;
pub mod frame;
pub mod limits;
pub mod listeners;
pub mod memory;
mod pipeline;
pub mod principal_mapping;
mod requests;
pub mod sasl;
pub mod tls;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use crate::context::Broker;
use crate::principal::{ConnectionIdentity, KafkaPrincipal};
use auth_failures::AUTH_STATS;
use limits::{ConnectionCounts, PerIpLimits, ServerLimits};
use memory::RequestMemory;
use requests::read_requests;

/// Read-ahead buffer per connection: small, since a large body bypasses it (memory for bodies
/// comes from the pool) and thousands of idle connections each keep one.
const READ_BUFFER: usize = 4 * 1024;

/// Backoff after a failed accept (EMFILE, ENFILE, ENOBUFS, ...): doubles up to the maximum.
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// One listener as the connection tasks see it: its name, and TLS and SASL when its security
/// protocol has them.
pub struct ListenerRuntime {
    pub name: String,
    /// Rebuilt when its PEM files change (`tls::ReloadingAcceptor`).
    pub tls: Option<Arc<tls::ReloadingAcceptor>>,
    pub sasl: Option<Arc<sasl::SaslConfig>>,
}

/// What every connection task shares.
struct Shared {
    broker: Arc<Broker>,
    listener: Arc<ListenerRuntime>,
    idle_timeout: Option<Duration>,
    max_request_bytes: usize,
    memory: RequestMemory,
    counts: Mutex<ConnectionCounts>,
    per_ip: PerIpLimits,
    failed_auth_delay: Duration,
}

/// A connection's place in the limits, given back when it is dropped.
struct Slot {
    shared: Arc<Shared>,
    ip: IpAddr,
    _total: OwnedSemaphorePermit,
}

impl Shared {
    /// The listener's state; its limits are logged once.
    fn new(broker: Arc<Broker>, listener: Arc<ListenerRuntime>, limits: ServerLimits) -> Self {
        let memory = RequestMemory::new(limits.request_memory);
        tracing::info!(
            listener = %listener.name,
            max_connections = limits.max_connections,
            request_memory = memory.capacity_bytes(),
            idle_timeout_ms = limits.idle_timeout.map(|d| d.as_millis() as u64),
            "listener limits"
        );
        Shared {
            broker,
            listener,
            idle_timeout: limits.idle_timeout,
            max_request_bytes: limits.max_request_bytes,
            memory,
            counts: Mutex::new(ConnectionCounts::default()),
            per_ip: limits.per_ip,
            failed_auth_delay: limits.failed_auth_delay,
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.shared.counts.lock().close(self.ip);
    }
}

/// The delay before the next accept after `failures` consecutive failed ones.
pub fn accept_backoff(failures: u32) -> Duration {
    ACCEPT_BACKOFF_MIN
        .saturating_mul(1u32 << failures.saturating_sub(1).min(16))
        .min(ACCEPT_BACKOFF_MAX)
}

/// Accepts connections until `shutdown` flips to true.
pub async fn serve(
    listener: TcpListener,
    runtime: Arc<ListenerRuntime>,
    broker: Arc<Broker>,
    limits: ServerLimits,
    mut shutdown: watch::Receiver<bool>,
) {
    let total = Arc::new(Semaphore::new(
        limits.max_connections.min(Semaphore::MAX_PERMITS),
    ));
    let shared = Arc::new(Shared::new(broker, runtime, limits));
    let mut failures: u32 = 0;
    loop {
        // At max.connections, wait for a slot before accepting (Kafka's acceptor blocks too).
        let permit = tokio::select! {
            permit = total.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return,
            },
            _ = shutdown.changed() => return,
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => return,
        };
        match accepted {
            Ok((stream, peer)) => {
                failures = 0;
                let opened = shared.counts.lock().open(peer.ip(), &shared.per_ip);
                if let Err(refused) = opened {
                    tracing::debug!(%peer, "rejected connection: {refused}");
                    drop(stream);
                    continue;
                }
                let slot = Slot {
                    shared: shared.clone(),
                    ip: peer.ip(),
                    _total: permit,
                };
                let shutdown = shutdown.clone();
                tokio::spawn(async move {
                    connection(stream, peer, slot, shutdown).await;
                });
            }
            Err(e) => {
                failures = failures.saturating_add(1);
                let delay = accept_backoff(failures);
                if failures == 1 {
                    tracing::warn!(error = %e, "accept failed; backing off");
                }
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = shutdown.changed() => return,
                }
            }
        }
    }
}

/// Why a connection ended.
#[derive(Debug, thiserror::Error)]
enum Closed {
    #[error("idle for longer than connections.max.idle.ms")]
    Idle,
    #[error(transparent)]
    Frame(#[from] frame::FrameError),
    #[error("{0}")]
    BadRequest(String),
    #[error("client went away: {0}")]
    Write(std::io::Error),
    #[error("shutting down")]
    Shutdown,
    #[error("client closed the connection")]
    Eof,
    #[error("TLS handshake failed: {0}")]
    Tls(std::io::Error),
    #[error("{reason}")]
    Authentication {
        reason: String,
        user: Option<String>,
    },
    /// KIP-368: the SASL session expired and the client sent a request other than a
    /// re-authentication.
    #[error("the SASL session expired (connections.max.reauth.ms) without re-authentication")]
    Expired,
}

/// Runs `f`, or gives up with [`Closed::Idle`] after the idle timeout.
async fn within<T>(
    idle: Option<Duration>,
    f: impl std::future::Future<Output = Result<T, Closed>>,
) -> Result<T, Closed> {
    match idle {
        Some(limit) => tokio::time::timeout(limit, f)
            .await
            .unwrap_or(Err(Closed::Idle)),
        None => f.await,
    }
}

async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    slot: Slot,
    mut shutdown: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let shared = &slot.shared;
    let identity = ConnectionIdentity::anonymous(peer, shared.listener.name.clone());
    let work = async {
        match &shared.listener.tls {
            Some(acceptor) => serve_tls(stream, acceptor, identity, shared).await,
            None => serve_connection(stream, identity, shared).await,
        }
    };
    let ended = tokio::select! {
        ended = work => ended,
        _ = shutdown.changed() => Closed::Shutdown,
    };
    log_closed(&ended, peer, shared);
}

/// The TLS handshake, then the connection. The handshake counts as idle time: a client that
/// never finishes it is closed too.
async fn serve_tls(
    stream: TcpStream,
    acceptor: &tls::ReloadingAcceptor,
    mut identity: ConnectionIdentity,
    shared: &Shared,
) -> Closed {
    let peer = identity.peer;
    let listener_tls = acceptor.current();
    let accepted = within(shared.idle_timeout, async {
        listener_tls
            .acceptor
            .accept(stream)
            .await
            .map_err(Closed::Tls)
    })
    .await;
    let tls = match accepted {
        Ok(tls) => tls,
        Err(closed) => return closed,
    };
    // SSL: the certificate names the principal; SASL_SSL: SASL will.
    if shared.listener.sasl.is_none() {
        match listener_tls.certificate_principal(&tls) {
            Ok(name) => {
                AUTH_STATS.succeeded();
                if let Some(name) = name {
                    identity.principal = KafkaPrincipal::user(name);
                }
            }
            Err(reason) => {
                AUTH_STATS.failed(&shared.listener.name, peer, None, &reason);
                return Closed::Authentication { reason, user: None };
            }
        }
    }
    serve_connection(tls, identity, shared).await
}

/// Logs (or counts) why a connection ended, at the level its cause deserves.
fn log_closed(ended: &Closed, peer: SocketAddr, shared: &Shared) {
    match ended {
        Closed::Eof | Closed::Shutdown => {}
        Closed::Idle | Closed::Write(_) | Closed::Frame(frame::FrameError::Truncated { .. }) => {
            tracing::debug!(%peer, "closing connection: {ended}")
        }
        // A failed TLS handshake is a failed authentication, as Kafka counts it.
        Closed::Tls(_) => AUTH_STATS.failed(&shared.listener.name, peer, None, &ended.to_string()),
        // Counted and logged where it failed (`count_failed_authentication`).
        Closed::Authentication { .. } => {}
        Closed::Expired => {
            AUTH_STATS.expired_killed();
            tracing::info!(%peer, listener = %shared.listener.name, "closing connection: {ended}")
        }
        Closed::Frame(_) | Closed::BadRequest(_) => {
            tracing::warn!(%peer, reason = %ended, "closing connection")
        }
    }
}

/// The verified client certificate's subject DN (what `ssl.principal.mapping.rules` maps).
pub(crate) fn client_certificate_dn(
    tls: &tokio_rustls::server::TlsStream<TcpStream>,
) -> Option<String> {
    let (_, session) = tls.get_ref();
    let cert = session.peer_certificates()?.first()?;
    dn::subject_dn(cert)
}

/// A random SCRAM server nonce (printable, no commas: RFC 5802's `printable`).
pub(crate) fn server_nonce() -> String {
    use rand::distributions::{Alphanumeric, DistString};
    Alphanumeric.sample_string(&mut rand::thread_rng(), 32)
}

/// Reads, handles and answers requests until something ends the connection: the reading
/// side hands the responses to the connection's writer (`pipeline`), which writes them in
/// request order.
async fn serve_connection<S: AsyncRead + AsyncWrite + Send>(
    stream: S,
    identity: ConnectionIdentity,
    shared: &Shared,
) -> Closed {
    let (reader, writer) = tokio::io::split(stream);
    let (responses, queue) = pipeline::responses();
    let writing = queue.run(writer, shared.idle_timeout);
    let reading = read_requests(reader, responses, identity, shared);
    tokio::pin!(writing, reading);
    tokio::select! {
        biased;
        // The writer ends first only when writing failed: that is why the connection closes.
        closed = &mut writing => closed.unwrap_or(Closed::Eof),
        closed = &mut reading => match closed {
            // The client sent all it will: what it is owed still goes out (the reading side
            // dropped its handle, so the writer ends once the queue is written).
            Closed::Eof => writing.await.unwrap_or(Closed::Eof),
            closed => closed,
        },
    }
}

/// The api key of a request frame (its first two bytes), if it has one.
fn api_key(frame: &[u8]) -> Option<i16> {
    Some(i16::from_be_bytes([*frame.first()?, *frame.get(1)?]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_backoff_doubles_to_a_second() {
        assert_eq!(accept_backoff(1), Duration::from_millis(10));
        assert_eq!(accept_backoff(2), Duration::from_millis(20));
        assert_eq!(accept_backoff(5), Duration::from_millis(160));
        assert_eq!(accept_backoff(8), Duration::from_secs(1));
        assert_eq!(accept_backoff(u32::MAX), Duration::from_secs(1));
    }
}
