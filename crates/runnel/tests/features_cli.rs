//! `runnel features upgrade / downgrade / disable / version-mapping / feature-dependencies`
//! (kafka-features.sh) and `runnel storage version-mapping / feature-dependencies`
//! (kafka-storage.sh) against a real broker: Kafka's output lines, and a refused change fails
//! the command with Kafka's count of failed operations.

mod support;

use std::process::{Command, Output, Stdio};

use support::*;

fn runnel(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runnel"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("runnel runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn features(addr: &str, args: &[&str]) -> Output {
    let mut all = vec!["features", "--bootstrap-server", addr];
    all.extend_from_slice(args);
    runnel(&all)
}

#[test]
fn feature_changes_print_as_kafka_features_sh() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let addr = broker.addr.as_str();

    // The finalized level is accepted (a no-op; group.version and metadata.version are fixed).
    let o = features(addr, &["upgrade", "--feature", "group.version=1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "group.version was upgraded to 1.\n");
    let o = features(
        addr,
        &["upgrade", "--release-version", "4.0-IV3", "--dry-run"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "group.version can be upgraded to 1.\nmetadata.version can be upgraded to 25.\n\
         transaction.version can be upgraded to 2.\n"
    );

    // transaction.version is the one level that changes (KIP-890 part 2 off and on again):
    // recorded by the controller, then reported.
    let o = features(addr, &["downgrade", "--feature", "transaction.version=0"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "transaction.version was downgraded to 0.\n");
    let finalized = |level: &str| {
        let o = features(addr, &["describe"]);
        stdout(&o).lines().any(|l| {
            l.starts_with(
                "Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\t",
            ) && l.contains(&format!("FinalizedVersionLevel: {level}\t"))
        })
    };
    wait_until("transaction.version finalized at 0", || finalized("0"));
    // An upgrade request may not lower it.
    let o = features(addr, &["upgrade", "--feature", "transaction.version=2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "transaction.version was upgraded to 2.\n");
    wait_until("transaction.version finalized at 2", || finalized("2"));
    let o = features(addr, &["upgrade", "--feature", "transaction.version=3"]);
    assert!(!o.status.success());
    assert!(
        stdout(&o).contains("Broker supports versions 0-2."),
        "{}",
        stdout(&o)
    );

    // A change is refused per feature: Kafka's lines, then the count, and a failed exit.
    let o = features(
        addr,
        &["downgrade", "--feature", "group.version=0", "--unsafe"],
    );
    assert!(!o.status.success());
    assert_eq!(
        stdout(&o),
        "Could not downgrade group.version to 0. Invalid update version 0 for feature \
         group.version: its level is fixed at 1 on this cluster.\n",
        "{}",
        stderr(&o)
    );
    assert!(
        stderr(&o).contains("1 out of 1 operation(s) failed."),
        "{}",
        stderr(&o)
    );
    let o = features(
        addr,
        &["disable", "--feature", "group.version", "--dry-run"],
    );
    assert!(!o.status.success());
    assert!(
        stdout(&o).starts_with("Can not disable group.version. "),
        "{}",
        stdout(&o)
    );

    // Argument errors never reach the broker.
    let o = features(addr, &["upgrade"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("You must specify at least one feature to upgrade"));
    let o = features(
        addr,
        &["upgrade", "--release-version", "4.0", "--feature", "a=1"],
    );
    assert!(stderr(&o).contains("Can not specify `release-version` with other feature flags."));

    // The mappings, from both tools.
    for tool in [
        vec!["features", "--bootstrap-server", addr],
        vec!["storage"],
    ] {
        let mut args = tool.clone();
        args.extend(["version-mapping", "--release-version", "3.9-IV0"]);
        let o = runnel(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(
            stdout(&o),
            "metadata.version=21 (3.9-IV0)\nkraft.version=0\ntransaction.version=0\ngroup.version=0\n"
        );
        let mut args = tool;
        args.extend(["feature-dependencies", "--feature", "group.version=1"]);
        let o = runnel(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(
            stdout(&o),
            "group.version=1 requires:\n    metadata.version=22 (4.0-IV0)\n"
        );
    }
}
