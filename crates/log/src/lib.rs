//! runnel-log
