//! A secured socket without the [`crate::Connection`] machinery, for callers that frame their
//! own requests (the broker's replica fetcher and inter-broker calls): TCP, then TLS when the
//! protocol says so, then SaslHandshake v1 + SaslAuthenticate v1 with the
//! [`crate::sasl::ClientExchange`] state machine.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::{Request, StrBytes};
use rand::Rng;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::error::{ClientError, Result};
use crate::frame;
use crate::sasl::{ClientExchange, SaslCredentials};
use crate::security::Security;
// SASL_AUTHENTICATION_FAILED is what a failed client-side step is reported as.
use runnel_codes::SASL_AUTHENTICATION_FAILED;

/// Any byte stream a broker connection runs over.
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// A plain or TLS socket, authenticated when the protocol is SASL_*.
pub type BoxStream = Box<dyn Stream>;

/// SASL frames are tiny; anything larger is not a SASL answer.
const MAX_SASL_FRAME: usize = 1 << 20;

fn io_err(addr: &str, what: impl std::fmt::Display) -> ClientError {
    ClientError::Io(std::io::Error::other(format!("{addr}: {what}")))
}

fn sasl_err(addr: &str, what: impl std::fmt::Display) -> ClientError {
    ClientError::kafka(SASL_AUTHENTICATION_FAILED, Some(format!("{addr}: {what}")))
}

/// Opens `addr` secured as `security` says, within `timeout`. A broker's refusal is its error
/// code (UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED).
pub async fn open(
    addr: &str,
    security: &Security,
    client_id: &str,
    timeout: Duration,
) -> Result<BoxStream> {
    tokio::time::timeout(timeout, open_inner(addr, security, client_id))
        .await
        .map_err(|_| ClientError::Timeout(timeout, format!("connection to {addr}")))?
}

async fn open_inner(addr: &str, security: &Security, client_id: &str) -> Result<BoxStream> {
    let tcp = TcpStream::connect(addr)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("{addr}: {e}")))?;
    let _ = tcp.set_nodelay(true);
    let mut stream: BoxStream = match &security.tls {
        None => Box::new(tcp),
        Some(tls) => {
            let name = crate::tls::server_name(addr).map_err(|e| io_err(addr, e))?;
            let connector = tokio_rustls::TlsConnector::from(tls.config.clone());
            Box::new(
                connector
                    .connect(name, tcp)
                    .await
                    .map_err(|e| io_err(addr, format!("TLS handshake failed: {e}")))?,
            )
        }
    };
    if let Some(creds) = &security.sasl {
        authenticate(&mut stream, addr, creds, client_id).await?;
    }
    Ok(stream)
}

async fn round_trip<R: Request>(
    stream: &mut BoxStream,
    addr: &str,
    req: &R,
    version: i16,
    correlation: i32,
    client_id: &str,
) -> Result<R::Response> {
    let mut buf = BytesMut::new();
    frame::encode_request(req, version, correlation, client_id, &mut buf)
        .map_err(|e| io_err(addr, e))?;
    let io = |e: std::io::Error| io_err(addr, e);
    stream.write_all(&buf).await.map_err(io)?;
    let size = stream.read_i32().await.map_err(io)?;
    let size = usize::try_from(size)
        .ok()
        .filter(|s| *s <= MAX_SASL_FRAME)
        .ok_or_else(|| io_err(addr, "SASL response size out of bounds"))?;
    let mut body = vec![0u8; size];
    stream.read_exact(&mut body).await.map_err(io)?;
    let (_, resp) =
        frame::decode_response::<R>(Bytes::from(body), version).map_err(|e| io_err(addr, e))?;
    Ok(resp)
}

async fn authenticate(
    stream: &mut BoxStream,
    addr: &str,
    creds: &SaslCredentials,
    client_id: &str,
) -> Result<()> {
    let mut hs = SaslHandshakeRequest::default();
    hs.mechanism = StrBytes::from_string(creds.mechanism.clone());
    let resp = round_trip(stream, addr, &hs, 1, 1, client_id).await?;
    if resp.error_code != 0 {
        return Err(io_err(
            addr,
            format!(
                "SaslHandshake for {} answered error {}",
                creds.mechanism, resp.error_code
            ),
        ));
    }
    let nonce: String = rand::thread_rng()
        .sample_iter(&rand::distributions::Alphanumeric)
        .take(24)
        .map(char::from)
        .collect();
    let (mut exchange, mut token) =
        ClientExchange::start(creds, &nonce).map_err(|e| sasl_err(addr, e))?;
    let mut correlation = 2;
    loop {
        let mut req = SaslAuthenticateRequest::default();
        req.auth_bytes = Bytes::from(token);
        let resp = round_trip(stream, addr, &req, 1, correlation, client_id).await?;
        if resp.error_code != 0 {
            let message = resp.error_message.as_ref().map(|m| m.to_string());
            return Err(ClientError::kafka(resp.error_code, message));
        }
        match exchange
            .next(creds, &resp.auth_bytes)
            .map_err(|e| sasl_err(addr, e))?
        {
            Some(next) => token = next,
            None => return Ok(()),
        }
        correlation += 1;
    }
}
