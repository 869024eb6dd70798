//! runnel-group
