//! Tests of the pure replication decisions (`runnel_metadata::replication`), one module per
//! concern (one test binary, so the crate is linked once). Expected values come from the
//! spec's sections D.3, E and F, written out here independently of the implementation.

mod alter_partition;
mod election;
mod epoch_cache;
mod imbalance;
mod leader_state;
mod leader_state_props;
mod sim;
mod truncation;

/// Proptest settings: `cases` cases, failing seeds saved in `regressions` (a path relative to
/// the crate, under `tests/replication/regressions/`) instead of proptest's default location.
fn config(cases: u32, regressions: &'static str) -> proptest::test_runner::Config {
    use proptest::test_runner::{Config, FileFailurePersistence};
    Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(regressions))),
        ..Config::default()
    }
}
