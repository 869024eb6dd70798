//! One request/response exchange with another broker's client listener (a fresh connection,
//! bounded in time and response size): for the rare inter-broker calls of the data path, such
//! as a partition leader's AddPartitionsToTxn verification (KIP-890).

use std::sync::OnceLock;
use std::time::Duration;

use bytes::{Buf, BufMut, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use runnel_client::stream::BoxStream;

use crate::server::tls::ReloadingSecurity;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// How this broker secures its connections to other brokers (set once at startup from the
/// inter-broker listener; PLAINTEXT until then). Its PEM files are re-read on the next dial
/// when they change (`tls::ReloadingSecurity`).
static SECURITY: OnceLock<ReloadingSecurity> = OnceLock::new();

/// Records the inter-broker security of this process's broker (the first call wins).
pub fn set_security(security: ReloadingSecurity) {
    let _ = SECURITY.set(security);
}

/// Opens a connection to another broker's inter-broker listener: TLS and SASL with this
/// broker's own credentials when that listener's protocol asks for them.
pub async fn open(addr: &str, client_id: &str, timeout: Duration) -> std::io::Result<BoxStream> {
    let security = SECURITY
        .get()
        .map(ReloadingSecurity::current)
        .unwrap_or_default();
    runnel_client::stream::open(addr, &security, client_id, timeout)
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))
}

/// Sends `request` as `key` v`version` to `addr` and decodes the answer, within `timeout`.
pub async fn exchange<Req: Encodable, Resp: Decodable>(
    addr: &str,
    key: ApiKey,
    version: i16,
    request: &Req,
    timeout: Duration,
) -> Result<Resp, String> {
    const CORRELATION: i32 = 1;
    let mut body = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(CORRELATION)
        .with_client_id(Some(StrBytes::from_static_str("runnel-broker")))
        .encode(&mut body, key.request_header_version(version))
        .and_then(|()| request.encode(&mut body, version))
        .map_err(|e| e.to_string())?;
    let len = i32::try_from(body.len()).map_err(|_| "request too large".to_string())?;
    let io = async {
        let mut stream = open(addr, "runnel-broker", timeout).await?;
        let mut frame = BytesMut::with_capacity(body.len() + 4);
        frame.put_i32(len);
        frame.extend_from_slice(&body);
        stream.write_all(&frame).await?;
        let size = stream.read_i32().await?;
        let size = usize::try_from(size)
            .ok()
            .filter(|s| *s <= MAX_RESPONSE_BYTES)
            .ok_or_else(|| std::io::Error::other("response size out of bounds"))?;
        let mut buf = vec![0u8; size];
        stream.read_exact(&mut buf).await?;
        Ok::<_, std::io::Error>(bytes::Bytes::from(buf))
    };
    let mut bytes = tokio::time::timeout(timeout, io)
        .await
        .map_err(|_| format!("{key:?} to {addr} timed out"))?
        .map_err(|e| e.to_string())?;
    let header = ResponseHeader::decode(&mut bytes, key.response_header_version(version))
        .map_err(|e| e.to_string())?;
    if header.correlation_id != CORRELATION {
        return Err("response to another request".into());
    }
    let response = Resp::decode(&mut bytes, version).map_err(|e| e.to_string())?;
    if bytes.has_remaining() {
        return Err("trailing bytes after the response".into());
    }
    Ok(response)
}
