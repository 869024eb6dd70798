//! Runs the unit tests of the processor's watchdog (`ck_watchdog.py`, known case 9 of
//! docs/faults.md: a librdkafka call that never returns must end the process, not stall the
//! run). They need only Python's standard library; without a `python3` the test says so and
//! passes, as the campaign's Python workloads are skipped without one.

use std::process::Command;

#[test]
fn the_watchdog_reports_a_call_that_never_returns() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let python = std::env::var("RUNNEL_FAULTS_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = match Command::new(&python)
        .arg("ck_watchdog_test.py")
        .current_dir(dir)
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            eprintln!("skipped: cannot run {python}: {e}");
            return;
        }
    };
    assert!(
        out.status.success(),
        "ck_watchdog_test.py failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
