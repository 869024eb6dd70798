//! The broker's side of the controller: `shell` (the task that owns the pure
//! `runnel_metadata::Controller` and pipelines its decisions into the quorum; its tests in
//! `shell_tests`), `quorum` (what the shell needs of the Raft quorum, and the appender task),
//! `client` (how handlers reach the active controller, local or over the network), `rpc`
//! (controller operations as `App` frames between nodes) and `security` (TLS / SASL of the
//! controller listener).

pub mod client;
pub mod quorum;
pub mod rpc;
pub mod security;
pub mod shell;
