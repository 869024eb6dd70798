//! The wire format of the quorum RPCs on the controller listener.
//!
//! Each message is a frame: a 4-byte big-endian length, then a JSON body. JSON because the
//! metadata log is small and low-rate and openraft's types already derive serde; the length
//! prefix lets a reader reject an oversized or truncated frame before decoding anything. One
//! request gets one response on the same connection, in order.

use std::io;

use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::types::{NodeId, TypeConfig};

/// Frames larger than this are refused (snapshot chunks are 256 KiB before JSON encoding).
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// A request from one quorum member to another.
#[derive(Debug, Serialize, Deserialize)]
pub enum RpcRequest {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    /// An observer asks to be added as a learner (see `learner.rs`).
    Join {
        node_id: NodeId,
        address: String,
    },
    /// "Who are you?": the leader asks the address an observer is registered at before it
    /// lets another process take over that node id (see `server::handle_join`).
    Identify,
    /// An application request for the node's owner (the broker's controller RPCs), carried on
    /// the same listener so a cluster needs one controller port per node.
    App(serde_json::Value),
}

/// A request as it travels: stamped with the sender's cluster id, so a node never acts on a
/// frame from another cluster (Kafka's INCONSISTENT_CLUSTER_ID), e.g. a node whose
/// `controller.quorum.voters` points at the wrong machines.
#[derive(Debug, Serialize, Deserialize)]
pub struct RequestFrame {
    pub cluster_id: String,
    pub request: RpcRequest,
}

#[derive(Serialize)]
struct RequestFrameRef<'a> {
    cluster_id: &'a str,
    request: &'a RpcRequest,
}

/// Encodes `request` as one frame stamped with `cluster_id`.
pub fn encode_request(cluster_id: &str, request: &RpcRequest) -> io::Result<Vec<u8>> {
    encode(&RequestFrameRef {
        cluster_id,
        request,
    })
}

/// The answer to a frame from another cluster (the connection is closed after it).
pub fn inconsistent_cluster_id(theirs: &str, ours: &str) -> RpcResponse {
    RpcResponse::Error(format!(
        "INCONSISTENT_CLUSTER_ID: the frame is from cluster '{theirs}', this node belongs to cluster '{ours}'"
    ))
}

/// The answer to an [`RpcRequest`], variant for variant.
#[derive(Debug, Serialize, Deserialize)]
pub enum RpcResponse {
    AppendEntries(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    InstallSnapshot(
        Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>,
    ),
    Join(JoinResponse),
    /// The answer to [`RpcRequest::Identify`]: the node id this process runs as.
    Identity {
        node_id: NodeId,
    },
    App(serde_json::Value),
    /// The request could not be decoded or handled at all.
    Error(String),
}

/// The answer to a join request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum JoinResponse {
    /// The node is (now) a learner in the membership.
    Joined,
    /// Ask the leader instead.
    NotLeader {
        leader: Option<NodeId>,
        address: Option<String>,
    },
    Failed(String),
}

fn invalid(msg: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

/// Encodes `msg` as one frame (length prefix included).
pub fn encode<T: Serialize>(msg: &T) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; 4];
    serde_json::to_writer(&mut buf, msg).map_err(invalid)?;
    let len = buf.len() - 4;
    if len > MAX_FRAME_BYTES {
        return Err(invalid(format!(
            "frame of {len} bytes exceeds {MAX_FRAME_BYTES}"
        )));
    }
    buf[..4].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(buf)
}

/// Decodes a frame body.
pub fn decode<T: for<'de> Deserialize<'de>>(body: &[u8]) -> io::Result<T> {
    serde_json::from_slice(body).map_err(invalid)
}

/// Reads one frame body; `Ok(None)` on a clean end of stream before a frame starts.
pub async fn read_frame<R: AsyncReadExt + Unpin>(r: &mut R) -> io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME_BYTES {
        return Err(invalid(format!(
            "frame of {len} bytes exceeds {MAX_FRAME_BYTES}"
        )));
    }
    // The buffer grows with the bytes that actually arrive: a peer that sends a large size
    // prefix and then trickles (or nothing) pins only what it sent, not 16 MiB.
    let mut body = Vec::with_capacity(len.min(INITIAL_BODY_CAPACITY));
    let mut rest = r.take(len as u64);
    rest.read_to_end(&mut body).await?;
    if body.len() < len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("frame truncated: {} of {len} bytes", body.len()),
        ));
    }
    Ok(Some(body))
}

/// How long a quorum connection may go without completing a frame before the server closes
/// it. Peers talk at least every heartbeat, and a pooled connection the server closed is
/// retried by the caller, so only a peer that connects and says nothing, or trickles a frame,
/// meets it: without it such a connection held its task and file descriptor forever, and many
/// of them starve the broker's logs of descriptors (Kafka's controller listener closes idle
/// connections after `connections.max.idle.ms`; this bound is shorter, as quorum traffic is
/// never idle for long).
pub const IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// [`read_frame`] that must finish within `idle` (the whole frame, not each byte: a trickled
/// frame does not keep the connection alive); a timeout is `TimedOut`.
pub async fn read_frame_within<R: AsyncReadExt + Unpin>(
    r: &mut R,
    idle: std::time::Duration,
) -> io::Result<Option<Vec<u8>>> {
    match tokio::time::timeout(idle, read_frame(r)).await {
        Ok(read) => read,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no complete frame within {idle:?}"),
        )),
    }
}

/// What a frame's buffer starts with before its bytes arrive.
const INITIAL_BODY_CAPACITY: usize = 64 * 1024;

/// Writes an encoded frame and flushes it.
pub async fn write_frame<W: AsyncWriteExt + Unpin>(w: &mut W, frame: &[u8]) -> io::Result<()> {
    w.write_all(frame).await?;
    w.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_round_trip_and_bad_frames_are_errors() {
        let req = RpcRequest::Join {
            node_id: 4,
            address: "h:1".into(),
        };
        let frame = encode(&req).unwrap();
        let mut r = &frame[..];
        let body = read_frame(&mut r).await.unwrap().unwrap();
        match decode::<RpcRequest>(&body).unwrap() {
            RpcRequest::Join { node_id, address } => {
                assert_eq!((node_id, address.as_str()), (4, "h:1"))
            }
            other => panic!("unexpected {other:?}"),
        }
        // Clean EOF, truncated body, oversized length, garbage body.
        assert!(read_frame(&mut &b""[..]).await.unwrap().is_none());
        assert!(read_frame(&mut &frame[..frame.len() - 1]).await.is_err());
        assert!(read_frame(&mut &[0xff, 0xff, 0xff, 0xff][..])
            .await
            .is_err());
        assert!(decode::<RpcRequest>(b"{\"Nope\":1}").is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_or_trickling_peer_times_out() {
        use tokio::io::AsyncWriteExt;
        let idle = std::time::Duration::from_secs(60);
        // Connected, says nothing.
        let (mut client, mut server) = tokio::io::duplex(1024);
        let read = read_frame_within(&mut server, idle).await;
        assert_eq!(read.unwrap_err().kind(), io::ErrorKind::TimedOut);
        // Announces a frame and sends a byte every 10 s: the frame must still finish in time.
        let trickle = tokio::spawn(async move {
            client.write_all(&100u32.to_be_bytes()).await.unwrap();
            for _ in 0..100 {
                tokio::time::sleep(std::time::Duration::from_secs(10)).await;
                if client.write_all(b" ").await.is_err() {
                    return;
                }
            }
        });
        let read = read_frame_within(&mut server, idle).await;
        assert_eq!(read.unwrap_err().kind(), io::ErrorKind::TimedOut);
        drop(server);
        trickle.await.unwrap();
        // A whole frame in time is read as usual.
        let frame = encode(&RpcRequest::Identify).unwrap();
        let body = read_frame_within(&mut &frame[..], idle)
            .await
            .unwrap()
            .unwrap();
        assert!(matches!(
            decode::<RpcRequest>(&body).unwrap(),
            RpcRequest::Identify
        ));
    }
}
