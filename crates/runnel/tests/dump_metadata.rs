//! `runnel dump-log --cluster-metadata-decoder` (kafka-dump-log.sh's metadata decoder) on
//! committed metadata that real code wrote: the golden Raft logs and single-node log of
//! `tests/data/golden-metadata/` (written by real brokers) and a snapshot of the v1 Raft log's
//! image (`tests/data/dump-log/snapshot.checkpoint`, written by runnel-raft's `SnapshotStore`).
//! The output (Kafka's batch and record lines, Kafka's record JSON, metadata log offsets) is
//! compared with `tests/data/dump-log/metadata.golden`
//! (`RUNNEL_UPDATE_GOLDEN=1` rewrites it). Damaged copies are reported, never a panic.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs the tool in the repository root (so the `Dumping` lines name relative paths).
fn dump(args: &[&str]) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_runnel"))
        .current_dir(repo())
        .arg("dump-log")
        .arg("--cluster-metadata-decoder")
        .args(args)
        .output()
        .expect("run runnel dump-log");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

const FIXTURES: &str = "tests/data/golden-metadata/v0/raft/raft.log,\
tests/data/golden-metadata/v1/raft/raft.log,\
tests/data/golden-metadata/v1/file-log/metadata.log,\
tests/data/dump-log/snapshot.checkpoint";

#[test]
fn golden_output_of_the_committed_metadata() {
    let (ok, out, err) = dump(&["--files", FIXTURES]);
    assert!(ok, "{err}");
    assert_eq!(err, "");
    let golden = repo().join("tests/data/dump-log/metadata.golden");
    if std::env::var_os("RUNNEL_UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &out).unwrap();
    }
    let expected = std::fs::read_to_string(&golden).unwrap();
    assert_eq!(out, expected, "the dump differs from {}", golden.display());
    // The shapes Kafka's tool prints, spot-checked: Kafka's record JSON (schema version,
    // fields in schema order, base64url UUIDs) and batch lines.
    assert!(out.contains(
        r#"payload: {"type":"TOPIC_RECORD","version":0,"data":{"name":"golden-a","topicId":""#
    ));
    assert!(out.contains(
        r#"{"type":"PARTITION_CHANGE_RECORD","version":0,"data":{"partitionId":0,"topicId":""#
    ));
    assert!(!out.contains("\"topic_id\"") && !out.contains("incarnation_id"));
    assert!(out.contains("Snapshot end offset: "));
    assert!(out.contains("Log starting offset: 0\nbaseOffset: 0 lastOffset: "));
    assert!(!out.contains("Error at"));
    assert!(!out.contains("invalid bytes"));
    assert!(!out.contains("rejected"));
    // --skip-record-metadata keeps only the payloads, as Kafka prints them.
    let (ok, skipped, _) = dump(&[
        "--skip-record-metadata",
        "--files",
        "tests/data/golden-metadata/v1/file-log/metadata.log",
    ]);
    assert!(ok);
    assert!(
        skipped.contains("\n payload: {\"type\":\"REGISTER_BROKER_RECORD\",\"version\":0,"),
        "{skipped}"
    );
    assert!(!skipped.contains("| offset:"));
}

/// The record offsets of a Raft log are the metadata log's, as a node assigns them when it
/// applies the batches (not Raft indexes): the snapshot of the v1 log's image at its last
/// entry ends where the log's records end.
#[test]
fn raft_log_records_carry_metadata_offsets() {
    let (ok, out, err) = dump(&["--files", "tests/data/golden-metadata/v1/raft/raft.log"]);
    assert!(ok, "{err}");
    let offsets: Vec<i64> = out
        .lines()
        .filter_map(|l| l.strip_prefix("| offset: "))
        .map(|l| l.split(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(offsets, (0..offsets.len() as i64).collect::<Vec<_>>());
    let (_, snap, _) = dump(&["--files", "tests/data/dump-log/snapshot.checkpoint"]);
    let end: i64 = snap
        .lines()
        .find_map(|l| l.strip_prefix("Snapshot end offset: "))
        .and_then(|l| l.split(',').next())
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(offsets.len() as i64, end, "{out}");
    // Entries without records are control batches that take no offset.
    assert!(
        out.contains("| controlType: LEADER_CHANGE(2) leaderId: 1\n"),
        "{out}"
    );
    assert!(out.contains("\n| RunnelMembership {"), "{out}");
    assert!(out
        .lines()
        .any(|l| l.starts_with("baseOffset: -1 lastOffset: -1 count: 0 ")
            && l.contains(" isControl: true ")
            && l.ends_with(" raftIndex: 1")));
}

/// A log purged up to the snapshot beside it continues from the snapshot's end offset; the
/// same log alone cannot be numbered.
#[test]
fn a_purged_log_continues_from_the_snapshot_beside_it() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = frame(br#"{"Purged":{"leader_id":{"term":1,"node_id":1},"index":18}}"#);
    log.extend(frame(
        br#"{"Entry":{"log_id":{"leader_id":{"term":2,"node_id":1},"index":19},"payload":{"Normal":[{"v":1,"r":"NoOp"},{"v":1,"r":"NoOp"}]}}}"#,
    ));
    let file = tmp.path().join("raft.log");
    std::fs::write(&file, &log).unwrap();
    let (ok, alone, err) = dump(&["--files", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(alone.contains("Log starting offset: -1\n"), "{alone}");
    assert!(alone.contains("\n| offset: -1 "), "{alone}");
    std::fs::copy(
        repo().join("tests/data/dump-log/snapshot.checkpoint"),
        tmp.path().join("snapshot.checkpoint"),
    )
    .unwrap();
    let (ok, out, err) = dump(&["--files", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("Log starting offset: 38\n"), "{out}");
    assert!(
        out.contains(r#"| RunnelPurgedUpTo {"raftIndex":18,"term":1,"leaderId":1}"#),
        "{out}"
    );
    assert!(
        out.contains("\nbaseOffset: 38 lastOffset: 39 count: 2 "),
        "{out}"
    );
    assert!(out.contains("\n| offset: 39 "), "{out}");
}

/// A node's data directory dumps its quorum's log and snapshot.
#[test]
fn a_data_directory_dumps_every_metadata_file_in_it() {
    let tmp = tempfile::tempdir().unwrap();
    let quorum = tmp.path().join("metadata-quorum");
    std::fs::create_dir_all(&quorum).unwrap();
    for (from, to) in [
        ("tests/data/golden-metadata/v1/raft/raft.log", "raft.log"),
        (
            "tests/data/dump-log/snapshot.checkpoint",
            "snapshot.checkpoint",
        ),
    ] {
        std::fs::copy(repo().join(from), quorum.join(to)).unwrap();
    }
    let (ok, out, err) = dump(&["--files", tmp.path().to_str().unwrap()]);
    assert!(ok, "{err}");
    let dumping: Vec<&str> = out.lines().filter(|l| l.starts_with("Dumping ")).collect();
    assert_eq!(
        dumping,
        vec![
            format!("Dumping {}", quorum.join("snapshot.checkpoint").display()),
            format!("Dumping {}", quorum.join("raft.log").display()),
        ]
    );
    // A directory without metadata is an error, not an empty dump.
    let empty = tempfile::tempdir().unwrap();
    let (ok, _, err) = dump(&["--files", empty.path().to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("no metadata log or snapshot in it"), "{err}");
    let (_, single, _) = dump(&["--files", "tests/data/golden-metadata/v1/raft/raft.log"]);
    assert!(
        out.ends_with(single.split_once('\n').unwrap().1),
        "same lines as the file alone"
    );
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&crc32c::crc32c(body).to_be_bytes());
    out.extend_from_slice(body);
    out
}

#[test]
fn damaged_metadata_is_reported_not_a_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(repo().join("tests/data/golden-metadata/v1/raft/raft.log")).unwrap();
    let file = tmp.path().join("raft.log");
    let run = |bytes: &[u8]| {
        std::fs::write(&file, bytes).unwrap();
        dump(&["--files", file.to_str().unwrap()])
    };
    // A torn tail: the frames before it, then Kafka's line for the rest.
    let (ok, out, err) = run(&bytes[..bytes.len() - 5]);
    assert!(ok, "{err}");
    assert_eq!(err, "");
    let last = out.lines().last().unwrap();
    assert!(
        last.starts_with("Found ") && last.ends_with(" invalid bytes at the end of raft.log"),
        "{last}"
    );
    // A flipped bit in the second frame: only the first is dumped, and stderr says that the
    // node would refuse this log (valid frames follow).
    let mut flipped = bytes.clone();
    let second = 8 + u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
    flipped[second + 20] ^= 0x01;
    let (ok, out, err) = run(&flipped);
    assert!(ok, "{err}");
    assert_eq!(
        out.lines()
            .filter(|l| l.starts_with("baseOffset: "))
            .count(),
        1,
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "Found {} invalid bytes at the end of raft.log",
            bytes.len() - second
        )),
        "{out}"
    );
    assert!(
        err.contains(&format!(
            "the record at byte offset {second} (record 2) is corrupt but valid records follow it"
        )),
        "{err}"
    );
    // A record of a newer format inside a valid frame is skipped alone, as Kafka's
    // "Error at <offset>, skipping."; the entry's other records still decode.
    let entry = br#"{"Entry":{"log_id":{"leader_id":{"term":4,"node_id":1},"index":99},"payload":{"Normal":[{"v":9,"r":{"ShareGroupRecord":{}}},{"v":1,"r":"NoOp"}]}}}"#;
    let (ok, out, err) = run(&frame(entry));
    assert!(ok, "{err}");
    assert!(
        out.contains(" payload: Error at 0, skipping. a metadata record has format version 9"),
        "{out}"
    );
    assert!(
        out.contains(
            r#"| offset: 1 CreateTime: -1 keySize: -1 valueSize: 18 sequence: -1 headerKeys: [] payload: {"type":"NO_OP_RECORD","version":0,"data":{}}"#
        ),
        "{out}"
    );
    // Garbage of every kind: a report, never a panic.
    for garbage in [
        &b""[..],
        b"\xff\xff\xff\xff\xff\xff\xff\xff",
        b"\0\0\0\x02\0\0\0\0{}",
        &frame(b"[1,2,3]"),
        &frame(br#"{"Entry":{"log_id":17}}"#),
    ] {
        let (ok, _, err) = run(garbage);
        assert!(ok, "{garbage:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    // A damaged snapshot or single-node log line.
    let snap = std::fs::read(repo().join("tests/data/dump-log/snapshot.checkpoint")).unwrap();
    let file = tmp.path().join("snapshot.checkpoint");
    std::fs::write(&file, &snap[..snap.len() - 1]).unwrap();
    let (_, _, err) = dump(&["--files", file.to_str().unwrap()]);
    assert!(err.contains("the snapshot is corrupt"), "{err}");
    let log =
        std::fs::read(repo().join("tests/data/golden-metadata/v1/file-log/metadata.log")).unwrap();
    let file = tmp.path().join("metadata.log");
    let mut bad = log.clone();
    bad[3] ^= 0x01;
    std::fs::write(&file, &bad).unwrap();
    let (ok, out, err) = dump(&["--files", file.to_str().unwrap()]);
    assert!(ok);
    assert!(
        out.contains(&format!(
            "Found {} invalid bytes at the end of metadata.log",
            log.len()
        )),
        "{out}"
    );
    assert!(
        err.contains("(line 1) is corrupt but valid records follow it"),
        "{err}"
    );
}
