//! LogManager: partition directories, checkpoints, clean shutdown, deletion.

mod common;

use std::fs;

use common::*;
use runnel_log::checkpoint::read_offsets;
use runnel_log::{
    LogConfig, LogError, LogManager, CLEAN_SHUTDOWN_FILE, HIGH_WATERMARK_CHECKPOINT,
    LOG_START_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
};
use uuid::Uuid;

fn cfg() -> LogConfig {
    small_config(1500)
}

#[test]
fn dirs_with_dashes_and_dots_round_trip_through_shutdown_and_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let id = Uuid::new_v4();
    let other = Uuid::new_v4();
    {
        let m = LogManager::open(dir.path().to_path_buf(), cfg()).unwrap();
        for p in 0..3 {
            let log = m.get_or_create("my-topic.v2", p, id, cfg()).unwrap();
            let mut l = log.lock();
            fill(&mut l, 10 + p as usize, 2, 100, 0);
            let leo = l.log_end_offset();
            l.set_high_watermark(leo - 1);
        }
        m.get_or_create("a", 0, other, cfg()).unwrap();
        m.get("my-topic.v2", 1)
            .unwrap()
            .lock()
            .delete_records_before(4)
            .unwrap();
        assert!(dir
            .path()
            .join("my-topic.v2-2")
            .join("partition.metadata")
            .exists());
        m.shutdown().unwrap();
        assert!(dir.path().join(CLEAN_SHUTDOWN_FILE).exists());
        // Closed logs refuse writes.
        let l = m.get("a", 0).unwrap();
        let b = batch(1, 1, 0);
        assert!(matches!(
            l.lock().append(&b, &headers(&b), 0),
            Err(LogError::Closed)
        ));
    }
    let hw = read_offsets(&dir.path().join(HIGH_WATERMARK_CHECKPOINT)).unwrap();
    assert_eq!(hw.get(&("my-topic.v2".to_string(), 2)), Some(&23));
    let ls = read_offsets(&dir.path().join(LOG_START_CHECKPOINT)).unwrap();
    assert_eq!(ls.get(&("my-topic.v2".to_string(), 1)), Some(&4));
    let rp = read_offsets(&dir.path().join(RECOVERY_POINT_CHECKPOINT)).unwrap();
    assert_eq!(rp.get(&("my-topic.v2".to_string(), 0)), Some(&20));

    let m = LogManager::open(dir.path().to_path_buf(), cfg()).unwrap();
    assert!(
        !dir.path().join(CLEAN_SHUTDOWN_FILE).exists(),
        "marker consumed on open"
    );
    let mut parts = m.partitions();
    parts.sort();
    assert_eq!(
        parts,
        vec![
            ("a".into(), 0),
            ("my-topic.v2".into(), 0),
            ("my-topic.v2".into(), 1),
            ("my-topic.v2".into(), 2)
        ]
    );
    let l = m.get("my-topic.v2", 1).unwrap();
    let l = l.lock();
    assert_eq!(
        (l.log_start_offset(), l.high_watermark(), l.log_end_offset()),
        (4, 21, 22)
    );
    assert_eq!(l.recovery_point(), 22);
    assert_eq!(m.topic_id("my-topic.v2", 1), Some(id));
    assert_eq!(m.topic_id("a", 0), Some(other));
    assert!(m.get("my-topic", 1).is_none());
}

#[test]
fn unclean_restart_recovers_and_keeps_flushed_data() {
    let dir = tempfile::tempdir().unwrap();
    let id = Uuid::new_v4();
    let path;
    {
        let m = LogManager::open(dir.path().to_path_buf(), cfg()).unwrap();
        let log = m.get_or_create("t", 0, id, cfg()).unwrap();
        let mut l = log.lock();
        fill(&mut l, 20, 2, 100, 0);
        l.flush().unwrap();
        l.set_high_watermark(40);
        path = l.dir().to_path_buf();
        drop(l);
        m.checkpoint().unwrap();
        // More data, never flushed nor checkpointed, then a torn write; then "kill -9".
        let mut l = log.lock();
        fill(&mut l, 3, 2, 100, 0);
        let active = *l.segment_base_offsets().last().unwrap();
        let seg = path.join(format!("{active:020}.log"));
        use std::io::Write;
        fs::OpenOptions::new()
            .append(true)
            .open(seg)
            .unwrap()
            .write_all(&batch(2, 100, 0)[..50])
            .unwrap();
    }
    let m = LogManager::open(dir.path().to_path_buf(), cfg()).unwrap();
    let log = m.get("t", 0).unwrap();
    let l = log.lock();
    assert_eq!(
        l.log_end_offset(),
        46,
        "flushed + later whole batches survive, the torn one does not"
    );
    assert_eq!(l.high_watermark(), 40);
    assert_eq!(l.recovery_point(), 40);
    for o in 0..46 {
        assert!(decode(&l.read(o, 1, i64::MAX, true).unwrap().records)
            .iter()
            .any(|r| r.0 == o));
    }
}

#[test]
fn delete_renames_then_removes_and_leftovers_are_cleaned_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let m = LogManager::open(dir.path().to_path_buf(), cfg()).unwrap();
    let log = m
        .get_or_create("gone-topic", 3, Uuid::new_v4(), cfg())
        .unwrap();
    fill(&mut log.lock(), 5, 1, 10, 0);
    m.delete("gone-topic", 3).unwrap();
    assert!(m.get("gone-topic", 3).is_none());
    assert!(!dir.path().join("gone-topic-3").exists());
    assert!(fs::read_dir(dir.path()).unwrap().all(|e| !e
        .unwrap()
        .file_name()
        .to_str()
        .unwrap()
        .ends_with("-delete")));
    let b = batch(1, 1, 0);
    assert!(matches!(
        log.lock().append(&b, &headers(&b), 0),
        Err(LogError::Closed)
    ));
    m.delete("never-existed", 0).unwrap();
    // A crash between rename and removal: open finishes the job.
    fs::create_dir_all(
        dir.path()
            .join("x-0.0123456789abcdef0123456789abcdef-delete"),
    )
    .unwrap();
    fs::write(
        dir.path()
            .join("x-0.0123456789abcdef0123456789abcdef-delete/00000000000000000000.log"),
        b"",
    )
    .unwrap();
    fs::create_dir_all(dir.path().join("not a partition")).unwrap();
    drop(m);
    let m = LogManager::open(dir.path().to_path_buf(), cfg()).unwrap();
    assert!(!dir
        .path()
        .join("x-0.0123456789abcdef0123456789abcdef-delete")
        .exists());
    assert!(m.partitions().is_empty());
}

#[test]
fn topic_ids_are_checked_and_names_sanitised() {
    let dir = tempfile::tempdir().unwrap();
    let m = LogManager::open(dir.path().to_path_buf(), cfg()).unwrap();
    let id = Uuid::new_v4();
    let a = m.get_or_create("t", 0, id, cfg()).unwrap();
    let b = m.get_or_create("t", 0, id, cfg()).unwrap();
    assert!(std::sync::Arc::ptr_eq(&a, &b));
    assert!(matches!(
        m.get_or_create("t", 0, Uuid::new_v4(), cfg()),
        Err(LogError::InconsistentTopicId { .. })
    ));
    for bad in ["..", "a/b", ""] {
        assert!(matches!(
            m.get_or_create(bad, 0, id, cfg()),
            Err(LogError::InvalidDirName(_))
        ));
    }
    assert!(m.get_or_create("t", -1, id, cfg()).is_err());
    // Config updates apply to existing logs.
    let mut c = cfg();
    c.retention_bytes = 123;
    m.get_or_create("t", 0, id, c).unwrap();
    assert_eq!(a.lock().config().retention_bytes, 123);
}

#[test]
fn flush_all_and_retention_across_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let m = LogManager::open(dir.path().to_path_buf(), cfg()).unwrap();
    let mut c = cfg();
    c.retention_ms = 10;
    for p in 0..2 {
        let log = m.get_or_create("r", p, Uuid::nil(), c.clone()).unwrap();
        let mut l = log.lock();
        fill(&mut l, 20, 2, 100, 0);
        l.set_high_watermark(i64::MAX);
    }
    m.flush_all().unwrap();
    for p in 0..2 {
        assert_eq!(m.get("r", p).unwrap().lock().unflushed_messages(), 0);
    }
    let deleted = m.enforce_retention(1_000_000).unwrap();
    assert!(deleted >= 4);
    assert_eq!(m.get("r", 0).unwrap().lock().log_start_offset(), 40);
}
