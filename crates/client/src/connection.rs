//! One TCP connection to one broker: framing, correlation ids, pipelining, timeouts, and the
//! ApiVersions handshake that fixes which version of each API we speak to that broker.
//!
//! The socket comes from [`crate::stream::open`]: TLS for SSL / SASL_SSL, then SaslHandshake +
//! SaslAuthenticate for SASL_*; ApiVersions follows on the authenticated connection.
//!
//! Requests may be pipelined: any number of tasks can call [`Connection::send`] concurrently;
//! a reader task matches responses to callers by correlation id. Kafka answers in request
//! order, but matching by id keeps us correct even if a broker did not.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::{Decodable, Request, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::oneshot;

use crate::error::{ClientError, Result};
use crate::frame;
use crate::security::Security;
use crate::versions::{api_versions_fallback, BrokerVersions};

/// Largest response frame we accept; protects against a garbage size prefix.
const MAX_RESPONSE_BYTES: usize = 1 << 30;

/// Settings shared by every connection of a client.
#[derive(Debug, Clone)]
pub struct ConnectionConfig {
    /// Sent as `client_id` in every request header.
    pub client_id: String,
    /// Time allowed to establish the TCP connection and finish the ApiVersions handshake.
    pub connect_timeout: Duration,
    /// Default time allowed for one request/response round trip.
    pub request_timeout: Duration,
    /// `security.protocol` and its TLS / SASL settings (PLAINTEXT by default).
    pub security: Security,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        Self {
            client_id: "runnel-client".into(),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            security: Security::default(),
        }
    }
}

type Waiter = oneshot::Sender<Bytes>;
type BoxRead = Box<dyn AsyncRead + Send + Unpin>;
type BoxWrite = Box<dyn AsyncWrite + Send + Unpin>;

#[derive(Default)]
struct Pending {
    waiters: HashMap<i32, Waiter>,
    closed: Option<String>,
}

/// A connection to one broker. Cheap to share (`Arc`); closes when the last handle drops.
pub struct Connection {
    addr: String,
    config: ConnectionConfig,
    writer: tokio::sync::Mutex<BoxWrite>,
    pending: Arc<Mutex<Pending>>,
    dead: Arc<AtomicBool>,
    next_correlation: AtomicI32,
    versions: OnceLock<BrokerVersions>,
    reader: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Connection {
    /// Connects to `addr` (`host:port`) and negotiates API versions.
    pub async fn connect(addr: &str, config: ConnectionConfig) -> Result<Arc<Self>> {
        let timeout = config.connect_timeout;
        // TCP, TLS and SASL (runnel_client::stream, shared with the broker's own connections).
        let stream =
            crate::stream::open(addr, &config.security, &config.client_id, timeout).await?;
        let (read, write) = tokio::io::split(stream);
        let (read, write): (BoxRead, BoxWrite) = (Box::new(read), Box::new(write));
        let pending = Arc::new(Mutex::new(Pending::default()));
        let dead = Arc::new(AtomicBool::new(false));
        let reader = tokio::spawn(read_loop(read, pending.clone(), dead.clone()));
        let conn = Arc::new(Self {
            addr: addr.to_owned(),
            config,
            writer: tokio::sync::Mutex::new(write),
            pending,
            dead,
            next_correlation: AtomicI32::new(1),
            versions: OnceLock::new(),
            reader,
        });
        let versions = tokio::time::timeout(timeout, conn.handshake())
            .await
            .map_err(|_| ClientError::Timeout(timeout, format!("ApiVersions from {addr}")))??;
        let _ = conn.versions.set(versions);
        Ok(conn)
    }

    /// The `host:port` this connection was opened to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Whether the socket failed or was closed; a dead connection must be replaced.
    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Relaxed)
    }

    /// What the broker advertised in the handshake.
    pub fn broker_versions(&self) -> &BrokerVersions {
        static EMPTY: OnceLock<BrokerVersions> = OnceLock::new();
        self.versions
            .get()
            .unwrap_or_else(|| EMPTY.get_or_init(BrokerVersions::default))
    }

    /// The negotiated version of `key` for this broker.
    pub fn version(&self, key: ApiKey) -> Result<i16> {
        self.broker_versions().negotiate(key)
    }

    /// Sends ApiVersions at v3 and steps down as spec K.2 describes when the broker answers
    /// UNSUPPORTED_VERSION with its v0-layout response.
    async fn handshake(&self) -> Result<BrokerVersions> {
        let mut version = 3i16;
        loop {
            let mut req = ApiVersionsRequest::default();
            if version >= 3 {
                req.client_software_name = StrBytes::from_static_str("runnel-client");
                req.client_software_version = StrBytes::from_static_str(env!("CARGO_PKG_VERSION"));
            }
            let mut raw = self
                .round_trip(&req, version, self.config.connect_timeout)
                .await?;
            frame::skip_response_header::<ApiVersionsRequest>(&mut raw, version)?;
            let error_code = frame::peek_i16(&raw).unwrap_or(runnel_codes::UNKNOWN_SERVER_ERROR);
            if error_code == runnel_codes::UNSUPPORTED_VERSION {
                let v0 = ApiVersionsResponse::decode(&mut raw, 0)
                    .map_err(|e| ClientError::protocol("decoding ApiVersions v0 fallback", e))?;
                let broker_max = v0
                    .api_keys
                    .iter()
                    .find(|k| k.api_key == ApiKey::ApiVersions as i16)
                    .map(|k| k.max_version);
                match api_versions_fallback(version, broker_max) {
                    Some(next) => {
                        tracing::debug!(addr = %self.addr, from = version, to = next, "ApiVersions fallback");
                        version = next;
                        continue;
                    }
                    None => {
                        return Err(ClientError::kafka(
                            35,
                            Some("ApiVersions v0 rejected".into()),
                        ))
                    }
                }
            }
            let resp = ApiVersionsResponse::decode(&mut raw, version)
                .map_err(|e| ClientError::protocol("decoding ApiVersions response", e))?;
            ClientError::check(resp.error_code, None)?;
            return Ok(BrokerVersions::from_response(&resp));
        }
    }

    /// Sends `req` at the negotiated version and waits for the response.
    pub async fn send<R: Request>(&self, req: &R) -> Result<R::Response> {
        let version = self.negotiated::<R>()?;
        self.send_at(req, version, self.config.request_timeout)
            .await
    }

    /// The negotiated version for request type `R`.
    pub fn negotiated<R: Request>(&self) -> Result<i16> {
        let key = ApiKey::try_from(R::KEY)
            .map_err(|_| ClientError::Protocol(format!("unknown api key {}", R::KEY)))?;
        self.version(key)
    }

    /// Sends `req` at an explicit version with an explicit timeout.
    pub async fn send_at<R: Request>(
        &self,
        req: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response> {
        let raw = self.round_trip(req, version, timeout).await?;
        let (_, resp) = frame::decode_response::<R>(raw, version)?;
        Ok(resp)
    }

    /// Writes `req` now and returns the slot its response arrives in, without waiting for it.
    ///
    /// For callers that must put several requests on the wire in a fixed order and await
    /// their responses concurrently (the producer: one partition's batches must reach the
    /// broker in sequence order, as Kafka's single sender thread writes them). Pair it with
    /// [`Connection::await_response`].
    pub async fn write_request<R: Request>(&self, req: &R, version: i16) -> Result<ResponseSlot> {
        let correlation = self.next_correlation.fetch_add(1, Ordering::Relaxed);
        let mut buf = BytesMut::new();
        frame::encode_request(req, version, correlation, &self.config.client_id, &mut buf)?;
        let (tx, rx) = oneshot::channel();
        self.register(correlation, tx)?;
        if let Err(e) = self.write_frame(&buf).await {
            self.unregister(correlation);
            return Err(e);
        }
        Ok(ResponseSlot { correlation, rx })
    }

    /// The response of a request written with [`Connection::write_request`] at `version`.
    pub async fn await_response<R: Request>(
        &self,
        slot: ResponseSlot,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response> {
        let correlation = slot.correlation;
        let raw = match tokio::time::timeout(timeout, slot.rx).await {
            Ok(Ok(raw)) => raw,
            Ok(Err(_)) => return Err(self.closed_error()),
            Err(_) => {
                self.unregister(correlation);
                return Err(ClientError::Timeout(
                    timeout,
                    format!("api {} response from {}", R::KEY, self.addr),
                ));
            }
        };
        let (_, resp) = frame::decode_response::<R>(raw, version)?;
        Ok(resp)
    }

    /// Sends a request that gets no response (Produce with acks=0).
    pub async fn send_no_response<R: Request>(&self, req: &R, version: i16) -> Result<()> {
        let correlation = self.next_correlation.fetch_add(1, Ordering::Relaxed);
        let mut buf = BytesMut::new();
        frame::encode_request(req, version, correlation, &self.config.client_id, &mut buf)?;
        self.write_frame(&buf).await
    }

    async fn round_trip<R: Request>(
        &self,
        req: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<Bytes> {
        let correlation = self.next_correlation.fetch_add(1, Ordering::Relaxed);
        let mut buf = BytesMut::new();
        frame::encode_request(req, version, correlation, &self.config.client_id, &mut buf)?;
        self.exchange(correlation, &buf, timeout, &format!("api {}", R::KEY))
            .await
    }

    /// Sends a request kafka-protocol does not model (Runnel's own APIs, see
    /// [`frame::encode_raw_request`]) and returns the response body after the v0 response
    /// header. No version negotiation: such APIs are not advertised in ApiVersions.
    pub async fn send_raw(
        &self,
        api_key: i16,
        version: i16,
        body: &[u8],
        timeout: Duration,
    ) -> Result<Bytes> {
        let correlation = self.next_correlation.fetch_add(1, Ordering::Relaxed);
        let mut buf = BytesMut::new();
        frame::encode_raw_request(
            api_key,
            version,
            correlation,
            &self.config.client_id,
            body,
            &mut buf,
        )?;
        let raw = self
            .exchange(correlation, &buf, timeout, &format!("api {api_key}"))
            .await?;
        frame::strip_response_header_v0(raw)
    }

    /// The request timeout configured for this connection.
    pub fn request_timeout(&self) -> Duration {
        self.config.request_timeout
    }

    /// Writes one encoded frame and waits for the response with its correlation id.
    async fn exchange(
        &self,
        correlation: i32,
        buf: &[u8],
        timeout: Duration,
        what: &str,
    ) -> Result<Bytes> {
        let (tx, rx) = oneshot::channel();
        self.register(correlation, tx)?;
        let exchange = async {
            self.write_frame(buf).await?;
            rx.await.map_err(|_| self.closed_error())
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => {
                if result.is_err() {
                    self.unregister(correlation);
                }
                result
            }
            Err(_) => {
                self.unregister(correlation);
                Err(ClientError::Timeout(
                    timeout,
                    format!("{what} response from {}", self.addr),
                ))
            }
        }
    }

    fn register(&self, correlation: i32, tx: Waiter) -> Result<()> {
        let mut pending = self.lock_pending();
        if let Some(reason) = &pending.closed {
            return Err(closed_io_error(&self.addr, reason));
        }
        pending.waiters.insert(correlation, tx);
        Ok(())
    }

    fn unregister(&self, correlation: i32) {
        self.lock_pending().waiters.remove(&correlation);
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn closed_error(&self) -> ClientError {
        let reason = self
            .lock_pending()
            .closed
            .clone()
            .unwrap_or_else(|| "closed".into());
        closed_io_error(&self.addr, &reason)
    }

    async fn write_frame(&self, frame: &[u8]) -> Result<()> {
        let mut writer = self.writer.lock().await;
        if let Err(e) = writer.write_all(frame).await {
            self.dead.store(true, Ordering::Relaxed);
            return Err(std::io::Error::new(e.kind(), format!("{}: {e}", self.addr)).into());
        }
        Ok(())
    }
}

/// A request on the wire whose response is still to come (see [`Connection::write_request`]).
pub struct ResponseSlot {
    correlation: i32,
    rx: oneshot::Receiver<Bytes>,
}

fn closed_io_error(addr: &str, reason: &str) -> ClientError {
    ClientError::Io(std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        format!("connection to {addr} closed: {reason}"),
    ))
}

/// Reads response frames and hands each to the caller waiting on its correlation id. On any
/// error, fails every waiter (their receivers see the sender dropped) and marks the
/// connection dead.
async fn read_loop(read: BoxRead, pending: Arc<Mutex<Pending>>, dead: Arc<AtomicBool>) {
    let mut reader = BufReader::with_capacity(256 * 1024, read);
    let reason = loop {
        let size = match reader.read_i32().await {
            Ok(size) => size,
            Err(e) => break format!("{e}"),
        };
        let Ok(size) = usize::try_from(size) else {
            break format!("negative frame size {size}");
        };
        if size > MAX_RESPONSE_BYTES {
            break format!("frame of {size} bytes exceeds the {MAX_RESPONSE_BYTES}-byte limit");
        }
        let mut body = BytesMut::zeroed(size);
        if let Err(e) = reader.read_exact(&mut body).await {
            break format!("{e}");
        }
        let body = body.freeze();
        let Some(correlation) = frame::peek_correlation_id(&body) else {
            break "response shorter than its header".into();
        };
        let waiter = pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .waiters
            .remove(&correlation);
        match waiter {
            Some(tx) => {
                let _ = tx.send(body);
            }
            None => tracing::debug!(correlation, "response for a request nobody waits for"),
        }
    };
    dead.store(true, Ordering::Relaxed);
    let mut guard = pending.lock().unwrap_or_else(|p| p.into_inner());
    guard.closed = Some(reason);
    guard.waiters.clear();
}
