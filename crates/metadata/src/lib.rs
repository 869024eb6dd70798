//! runnel-metadata
