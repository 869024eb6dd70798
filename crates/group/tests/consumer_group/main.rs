//! Black-box tests of the KIP-848 coordinator (`runnel_group::consumer_group`) through its
//! public API (one test binary).

mod common;
mod durable;
mod errors;
mod properties;
mod scenarios;
