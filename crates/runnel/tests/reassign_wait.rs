//! `runnel reassign-partitions --execute --wait-ms N --progress` on real processes: the tool
//! returns once the move finished, printing progress lines on stderr (asked for with
//! `--progress`, since stderr is not a terminal here) and keeping Kafka's stdout; without
//! `--progress` and without a terminal it prints none.

mod support;

use std::process::{Command, Output};

use support::cluster::*;
use support::*;

fn reassign(addr: &str, file: &std::path::Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runnel"))
        .args(["reassign-partitions", "--bootstrap-server", addr])
        .arg("--reassignment-json-file")
        .arg(file)
        .args(extra)
        .output()
        .expect("run reassign-partitions")
}

#[test]
fn execute_waits_for_the_move_and_reports_progress() {
    let cluster = Cluster::start(2, &[]);
    let addr = cluster.addr(0);
    wait_until("both brokers registered", || {
        live_broker_ids(&addr).is_some_and(|ids| ids == vec![1, 2])
    });
    assert_eq!(create(&addr, "moving", 2, 1), 0);
    let mut parts = Vec::new();
    wait_until("the topic's partitions led", || {
        parts = topic_partitions(&addr, "moving").unwrap_or_default();
        parts.len() == 2 && parts.iter().all(|(l, _)| *l >= 0)
    });
    // Every partition moves to the other broker.
    let entries: Vec<String> = parts
        .iter()
        .enumerate()
        .map(|(p, (_, replicas))| {
            let to = if replicas[0] == 1 { 2 } else { 1 };
            format!(r#"{{"topic":"moving","partition":{p},"replicas":[{to}],"log_dirs":["any"]}}"#)
        })
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("r.json");
    std::fs::write(
        &file,
        format!(r#"{{"version":1,"partitions":[{}]}}"#, entries.join(",")),
    )
    .unwrap();

    let o = reassign(
        &addr,
        &file,
        &["--execute", "--wait-ms", "30000", "--progress"],
    );
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{out}{err}");
    assert!(
        out.contains("Successfully started partition reassignments for moving-0,moving-1"),
        "{out}"
    );
    assert!(
        err.lines()
            .last()
            .is_some_and(|l| l.ends_with("reassignment: 2/2 partitions done, 0 still moving")),
        "{err}"
    );
    assert!(
        !out.contains("partitions done"),
        "progress stays off stdout"
    );
    // Done when the tool returned: --verify agrees at once.
    let o = reassign(&addr, &file, &["--verify", "--wait-ms", "1000"]);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains("Reassignment of partition moving-0 is completed."),
        "{out}"
    );
    assert!(
        out.contains("Reassignment of partition moving-1 is completed."),
        "{out}"
    );
    assert!(
        !err.contains("partitions done"),
        "no --progress, no terminal: no lines"
    );
}
