//! Metadata logs written by earlier builds keep replaying (`tests/data/golden-metadata/`).
//!
//! Each `v<N>/` directory holds the metadata a real broker wrote when the record format was at
//! version N (`generate.sh` there made them): the single-node file log and a one-voter Raft
//! log, both after the same admin history. Replaying them with this build must give the image
//! that history describes. A change to how records are stored that loses the ability to read
//! an older log fails here, before a user's upgrade deletes their topics.

use std::path::{Path, PathBuf};

use runnel_broker::metadata_log::FileMetadataLog;
use runnel_metadata::image::MetadataImage;
use runnel_metadata::records::{ConfigResource, MetadataRecord};
use runnel_raft::openraft::EntryPayload;
use runnel_raft::storage::log::LogStore;

fn golden(version: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/golden-metadata")
        .join(version)
}

/// A scratch copy: opening a log may repair a torn tail, and the committed files stay as
/// they are.
fn scratch_copy(from: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    dir
}

/// The image of generate.sh's history: golden-a (3 partitions, compacted, retention 1 h),
/// golden-b (grown to 4 partitions, max.message.bytes 2000000), golden-gone deleted, the
/// brokers' dynamic default log.retention.ms 7200000, broker 1 registered, and
/// one producer-id block handed out.
fn assert_history(image: &MetadataImage) {
    let a = image.topic("golden-a").expect("golden-a");
    assert_eq!(a.partitions.len(), 3);
    // (Leaders differ: the cluster node fenced itself in its controlled shutdown.)
    assert!(a.partitions.values().all(|p| p.replicas == [1]));
    let b = image.topic("golden-b").expect("golden-b");
    assert_eq!(b.partitions.len(), 4);
    assert!(image.topic("golden-gone").is_none());

    let config = |resource: ConfigResource, key: &str| {
        image
            .configs
            .get(&resource)
            .and_then(|c| c.get(key))
            .cloned()
    };
    let topic = |name: &str| ConfigResource::Topic(name.into());
    assert_eq!(
        config(topic("golden-a"), "cleanup.policy").as_deref(),
        Some("compact")
    );
    assert_eq!(
        config(topic("golden-a"), "retention.ms").as_deref(),
        Some("3600000")
    );
    assert_eq!(
        config(topic("golden-b"), "max.message.bytes").as_deref(),
        Some("2000000")
    );
    assert_eq!(
        config(ConfigResource::Broker(String::new()), "log.retention.ms").as_deref(),
        Some("7200000")
    );
    assert!(image.brokers.contains_key(&1), "broker 1 registered");
    assert!(
        image.next_producer_id > 0,
        "a producer-id block was handed out"
    );
}

fn replay_file_log(version: &str) -> MetadataImage {
    let dir = scratch_copy(&golden(version).join("file-log"));
    let log = FileMetadataLog::open(dir.path()).expect("the golden file log opens");
    let records: Vec<_> = (0..).zip(log.into_records()).collect();
    MetadataImage::empty("golden".into())
        .apply(&records)
        .expect("the golden file log's records apply")
}

/// Applies the Raft log's committed batches the way the state machine does: offsets continue
/// across batches, membership and blank entries carry none.
fn replay_raft_log(version: &str) -> MetadataImage {
    let dir = scratch_copy(&golden(version).join("raft"));
    let store = LogStore::open(dir.path()).expect("the golden Raft log opens");
    let mut image = MetadataImage::empty("golden".into());
    let mut batches = 0;
    for entry in store.entries(..) {
        let EntryPayload::Normal(records) = entry.payload else {
            continue;
        };
        let numbered: Vec<(i64, MetadataRecord)> = records
            .into_iter()
            .enumerate()
            .map(|(i, r)| (image.offset + 1 + i64::try_from(i).unwrap(), r))
            .collect();
        image = image.apply(&numbered).expect("a golden Raft batch applies");
        batches += 1;
    }
    assert!(batches > 5, "only {batches} batches in the golden Raft log");
    image
}

#[test]
fn a_file_log_of_format_version_0_replays() {
    assert_history(&replay_file_log("v0"));
}

#[test]
fn a_raft_log_of_format_version_0_replays() {
    assert_history(&replay_raft_log("v0"));
}

#[test]
fn a_file_log_of_format_version_1_replays() {
    assert_history(&replay_file_log("v1"));
}

#[test]
fn a_raft_log_of_format_version_1_replays() {
    assert_history(&replay_raft_log("v1"));
}
