//! The TCP server: size-prefixed frames in, responses out in request order.
//!
//! Each connection is one task that handles its requests one at a time, as Kafka does, so
//! responses keep request order without bookkeeping. Anything malformed closes that connection
//! only; the broker keeps serving everyone else.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::context::Broker;
use crate::dispatch::{dispatch, DispatchError};

/// Accepts connections until `shutdown` flips to true.
pub async fn serve(
    listener: TcpListener,
    broker: Arc<Broker>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let broker = broker.clone();
                    let shutdown = shutdown.clone();
                    tokio::spawn(async move {
                        connection(stream, peer, broker, shutdown).await;
                    });
                }
                Err(e) => {
                    // EMFILE and friends: back off briefly instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
            _ = shutdown.changed() => return,
        }
    }
}

async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    broker: Arc<Broker>,
    mut shutdown: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let (reader, mut writer) = stream.into_split();
    let mut reader = BufReader::with_capacity(256 * 1024, reader);
    loop {
        let frame = tokio::select! {
            frame = read_frame(&mut reader, broker.max_request_bytes) => frame,
            _ = shutdown.changed() => return,
        };
        let frame = match frame {
            Ok(Some(frame)) => frame,
            Ok(None) => return,
            Err(reason) => {
                tracing::warn!(%peer, %reason, "closing connection");
                return;
            }
        };
        match dispatch(&broker, frame, peer).await {
            Ok(Some(response)) => {
                if let Err(e) = writer.write_all(&response).await {
                    tracing::debug!(%peer, error = %e, "client went away");
                    return;
                }
            }
            Ok(None) => {}
            Err(DispatchError(reason)) => {
                tracing::warn!(%peer, %reason, "closing connection after a bad request");
                return;
            }
        }
    }
}

/// Reads one frame. `Ok(None)` = clean EOF between frames.
async fn read_frame(
    reader: &mut BufReader<tokio::net::tcp::OwnedReadHalf>,
    max_bytes: usize,
) -> Result<Option<Bytes>, String> {
    let mut size = [0u8; 4];
    match reader.read_exact(&mut size).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(format!("read error: {e}")),
    }
    let size = i32::from_be_bytes(size);
    if size < 0 || size as usize > max_bytes {
        return Err(format!(
            "frame size {size} outside 0..={max_bytes} (socket.request.max.bytes)"
        ));
    }
    let mut buf = BytesMut::zeroed(size as usize);
    reader
        .read_exact(&mut buf)
        .await
        .map_err(|e| format!("truncated frame: {e}"))?;
    Ok(Some(buf.freeze()))
}
