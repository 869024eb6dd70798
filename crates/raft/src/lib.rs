//! # runnel-raft
//!
//! The Raft-replicated metadata log (KRaft's `__cluster_metadata`, spec I), built on
//! [openraft](https://docs.rs/openraft) 0.9, on every node (a single node is a one-voter
//! quorum; it replaced the single-node `FileMetadataLog`, which is now only imported once): the
//! controller proposes batches of [`MetadataRecord`](runnel_metadata::MetadataRecord)s on the
//! leader, and every node (voter or observer) reads the same committed records in the same
//! order and builds the same image.
//!
//! ## Design
//!
//! * **Entries** ([`types`]): one Raft entry = one batch of records, committed atomically.
//!   Record offsets are assigned when a batch is applied (Raft also logs blank and membership
//!   entries, which get no offsets), deterministically on every node.
//! * **Storage** ([`storage`]): a data directory holds the log (`raft.log`, one segment of
//!   checksummed entries, fsynced per append, cut on truncation, rewritten on purge), the vote
//!   (fsynced, atomically replaced), a commit hint, and the latest snapshot.
//! * **State machine** ([`state_machine`]): applies batches to a
//!   [`MetadataImage`](runnel_metadata::MetadataImage) and keeps the records since the last
//!   snapshot for readers. A snapshot is the image written as the records that rebuild it
//!   ([`image_records`]); openraft takes one every `snapshot_every` entries and purges the log
//!   before it, and sends it to nodes that are behind the purged log.
//! * **Readers** ([`committed`]): a cursor over committed offsets that yields records, or the
//!   whole image when it fell behind a snapshot.
//! * **Network** ([`network`]): openraft's AppendEntries / Vote / InstallSnapshot (plus an
//!   observer's Join) as length-prefixed JSON frames over TCP to each peer's controller
//!   listener, every call bounded by openraft's RPC deadline, broken connections dropped and
//!   re-established on the next call. The server side runs on a listener the broker owns.
//!   A [`ChannelSecurity`] passed in by the broker secures both ends (TLS / SASL of
//!   `controller.listener.names`): a connection is authenticated before any frame is read.
//! * **Observers** ([`learner`]): brokers that are not voters join as Raft learners via the
//!   leader and are replicated to like followers, without voting.
//! * **Membership** is initialized once by the lowest voter id on its first start.
//!
//! The leader is the active controller and its term is the controller epoch.

pub mod committed;
pub mod config;
pub mod error;
pub mod image_records;
pub mod learner;
pub mod network;
pub mod quorum;
pub mod state_machine;
pub mod status;
pub mod storage;
pub mod types;

pub use committed::{Committed, CommittedReader};
pub use config::QuorumConfig;
pub use error::QuorumError;
pub use network::client::{BoxFuture, TcpTransport, Transport, TransportError};
pub use network::frame::{JoinResponse, RpcRequest, RpcResponse};
pub use network::security::{
    AcceptError, Accepted, BoxStream, ChannelSecurity, Plaintext, QuorumStream,
};
pub use network::server::{
    handle_frame, handle_request, handle_request_with, serve_rpc, serve_rpc_secured,
    serve_rpc_with_app, AppHandler, AppSlot,
};
pub use quorum::{Committing, MetadataQuorum};
pub use status::{QuorumStatus, ReplicaStatus};
pub use types::{ApplyResult, NodeId, Raft, TypeConfig};

/// The openraft version this crate is built on, re-exported for transports and tests.
pub use openraft;
