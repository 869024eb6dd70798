//! Integration tests of runnel-metadata, one module per concern (one test binary, so the
//! crate is linked once).

mod acl;
mod common;
mod configs;
mod controller;
mod group_configs;
mod image;
mod liveness;
mod ops;
mod placement;
mod reassign;
mod state_machine;
mod validation;
