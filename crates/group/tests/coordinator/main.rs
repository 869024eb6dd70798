//! Black-box tests of the coordinator through its public API (one test binary).

mod common;
mod errors;
mod load;
mod properties;
mod scenarios;
