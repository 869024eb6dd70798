//! Tests of the controller's replication decisions (`runnel_metadata::replication`:
//! elections, AlterPartition validation, imbalance), one module per concern (one test binary,
//! so the crate is linked once). The partition's own rules and the simulation are tested with
//! their crate, in `crates/replication/tests/replication/`. Expected values come from the
//! spec's sections D.3, F and I.3, written out here independently of the implementation.

mod alter_partition;
mod election;
mod imbalance;

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
