//! Black-box tests of the coordinator through its public API (one test binary).

mod common;
mod errors;
mod load;
mod pending_commits;
mod properties;
mod scenarios;
mod txn_offsets;
