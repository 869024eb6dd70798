//! `LogDirs` against real directories: placement, moves with appends running, and start-up
//! after moves interrupted at each step.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::*;
use crate::partition_log::fault_tests::{append, batch};

fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 8 * 1024,
        ..LogConfig::default()
    }
}

fn two_dirs(root: &Path) -> Vec<PathBuf> {
    vec![root.join("a"), root.join("b")]
}

/// Every record's offset, in order, reading the whole log.
fn offsets(log: &SharedLog) -> Vec<i64> {
    let l = log.lock();
    let mut out = Vec::new();
    let mut at = l.log_start_offset();
    while at < l.log_end_offset() {
        let r = l.read(at, 1 << 20, l.log_end_offset(), true).unwrap();
        let mut bytes = r.records.clone();
        let batches = kafka_protocol::records::RecordBatchDecoder::decode(&mut bytes).unwrap();
        for rec in batches.records {
            out.push(rec.offset);
            at = rec.offset + 1;
        }
    }
    out
}

#[test]
fn new_replicas_spread_over_the_dirs() {
    let root = tempfile::tempdir().unwrap();
    let dirs = LogDirs::open(two_dirs(root.path()), LogConfig::default()).unwrap();
    for p in 0..5 {
        dirs.get_or_create("t", p, uuid::Uuid::nil(), LogConfig::default())
            .unwrap();
    }
    let counts: Vec<usize> = dirs.dirs().iter().map(LogManager::len).collect();
    assert_eq!(counts, vec![3, 2]);
    assert!(root.path().join("a/t-0").is_dir() && root.path().join("b/t-1").is_dir());
    // A preferred dir wins over the count.
    dirs.prefer("u", 0, 1);
    dirs.get_or_create("u", 0, uuid::Uuid::nil(), LogConfig::default())
        .unwrap();
    assert_eq!(dirs.dir_of("u", 0), Some(1));
}

#[test]
fn a_move_copies_while_appends_continue_and_survives_a_restart() {
    let root = tempfile::tempdir().unwrap();
    let dirs = Arc::new(LogDirs::open(two_dirs(root.path()), small_segments()).unwrap());
    let log = dirs
        .get_or_create("t", 0, uuid::Uuid::nil(), small_segments())
        .unwrap();
    assert_eq!(dirs.dir_of("t", 0), Some(0));
    for i in 0..200u32 {
        append(&mut log.lock(), &batch(3, (i % 250) as u8)).unwrap();
    }
    let Some(MoveStart::Started(mv)) = dirs.start_move("t", 0, 1).unwrap() else {
        panic!("move not started")
    };
    assert!(matches!(
        dirs.start_move("t", 0, 1).unwrap(),
        Some(MoveStart::InProgress)
    ));
    assert_eq!(dirs.futures().len(), 1);
    let writer = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || {
            for i in 0..300u32 {
                append(&mut log.lock(), &batch(2, (i % 250) as u8)).unwrap();
            }
        })
    };
    // A slow copy, so appends land between passes.
    let mut throttle = |_| std::thread::sleep(std::time::Duration::from_micros(200));
    assert!(dirs.run_move("t", 0, &mv, &mut throttle).unwrap());
    writer.join().unwrap();
    assert_eq!(dirs.dir_of("t", 0), Some(1));
    assert!(dirs.futures().is_empty());
    assert!(!root.path().join("a/t-0").exists());
    let expected: Vec<i64> = (0..1200).collect();
    assert_eq!(offsets(&log), expected);
    // The same Arc keeps serving, now from the new dir.
    append(&mut log.lock(), &batch(1, 9)).unwrap();
    assert!(log.lock().dir().starts_with(root.path().join("b")));
    dirs.shutdown().unwrap();
    drop(log);
    let again = LogDirs::open(two_dirs(root.path()), small_segments()).unwrap();
    assert_eq!(again.dir_of("t", 0), Some(1));
    let log = again.get("t", 0).unwrap();
    assert_eq!(offsets(&log), (0..1201).collect::<Vec<i64>>());
}

#[test]
fn a_move_to_the_current_dir_is_a_no_op_and_delete_abandons_a_move() {
    let root = tempfile::tempdir().unwrap();
    let dirs = LogDirs::open(two_dirs(root.path()), LogConfig::default()).unwrap();
    dirs.get_or_create("t", 0, uuid::Uuid::nil(), LogConfig::default())
        .unwrap();
    assert!(matches!(
        dirs.start_move("t", 0, 0).unwrap(),
        Some(MoveStart::AlreadyThere)
    ));
    assert!(dirs.start_move("t", 9, 1).unwrap().is_none());
    let Some(MoveStart::Started(mv)) = dirs.start_move("t", 0, 1).unwrap() else {
        panic!("move not started")
    };
    dirs.delete("t", 0).unwrap();
    assert!(!dirs.run_move("t", 0, &mv, &mut |_| {}).unwrap());
    let left: Vec<_> = fs::read_dir(root.path().join("b")).unwrap().collect();
    assert!(left.is_empty(), "the future copy is gone: {left:?}");
}

/// Builds the on-disk state a kill leaves at each step of a move, then reopens.
fn killed_at(step: &str) -> (tempfile::TempDir, LogDirs) {
    let root = tempfile::tempdir().unwrap();
    let dirs = LogDirs::open(two_dirs(root.path()), LogConfig::default()).unwrap();
    let log = dirs
        .get_or_create("t", 0, uuid::Uuid::nil(), LogConfig::default())
        .unwrap();
    for i in 0..10 {
        append(&mut log.lock(), &batch(2, i)).unwrap();
    }
    log.lock().flush().unwrap();
    drop(log);
    drop(dirs);
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    let future = b.join("t-0.0123abcd-future");
    fs::create_dir(&future).unwrap();
    let mut state = copy::CopyState::default();
    copy::copy_pass(&a.join("t-0"), &future, &mut state, true, &mut |_| {}).unwrap();
    match step {
        "copying" => {}
        "between renames" => fs::rename(a.join("t-0"), a.join("t-0.4567cdef-moved")).unwrap(),
        "after renames" => {
            fs::rename(a.join("t-0"), a.join("t-0.4567cdef-moved")).unwrap();
            fs::rename(&future, b.join("t-0")).unwrap();
        }
        other => panic!("{other}"),
    }
    let reopened = LogDirs::open(two_dirs(root.path()), LogConfig::default()).unwrap();
    let resumed = reopened.take_resumable();
    let expected: Vec<(String, i32, usize)> = match step {
        "copying" => vec![("t".into(), 0, 1)],
        _ => vec![],
    };
    assert_eq!(resumed, expected, "{step}: moves to restart");
    (root, reopened)
}

#[test]
fn a_kill_at_any_step_of_a_move_keeps_one_whole_copy() {
    for (step, dir) in [("copying", 0), ("between renames", 1), ("after renames", 1)] {
        let (root, dirs) = killed_at(step);
        assert_eq!(dirs.dir_of("t", 0), Some(dir), "{step}");
        let log = dirs.get("t", 0).unwrap();
        assert_eq!(offsets(&log), (0..20).collect::<Vec<i64>>(), "{step}");
        let names: Vec<String> = ["a", "b"]
            .iter()
            .flat_map(|d| fs::read_dir(root.path().join(d)).unwrap())
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("t-0"))
            .collect();
        assert_eq!(names, vec!["t-0".to_string()], "{step}");
    }
}

#[test]
fn two_current_copies_refuse_to_open() {
    let root = tempfile::tempdir().unwrap();
    for d in ["a/t-0", "b/t-0"] {
        fs::create_dir_all(root.path().join(d)).unwrap();
    }
    let e = LogDirs::open(two_dirs(root.path()), LogConfig::default()).unwrap_err();
    assert!(e.to_string().contains("Duplicate log directories"), "{e}");
}

/// Kafka's abortAndPauseCleaning: a moving log is not handed to the cleaner (its sealed
/// segments must not change under the copy); once the move ends it is again.
#[test]
fn a_moving_log_is_not_compacted() {
    let root = tempfile::tempdir().unwrap();
    let dirs = LogDirs::open(two_dirs(root.path()), LogConfig::default()).unwrap();
    dirs.get_or_create("t", 0, uuid::Uuid::nil(), LogConfig::default())
        .unwrap();
    let Some(MoveStart::Started(mv)) = dirs.start_move("t", 0, 1).unwrap() else {
        panic!("move not started")
    };
    assert!(!dirs.begin_cleaning("t", 0));
    assert!(dirs.run_move("t", 0, &mv, &mut |_| {}).unwrap());
    assert!(dirs.begin_cleaning("t", 0));
    dirs.end_cleaning("t", 0);
}
