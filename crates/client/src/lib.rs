//! runnel-client
