//! Quorum RPCs: the frame format, the client transport, openraft's network adapter, the server.

pub mod client;
pub mod frame;
pub mod raft_network;
pub mod security;
pub mod server;
