//! runnel-raft
