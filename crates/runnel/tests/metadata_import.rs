//! Upgrade from the single-node file metadata log (issue 10 §5): a data dir written by an
//! earlier build (`metadata/metadata.log`, the committed golden fixture a real broker wrote)
//! is imported once into the one-voter Raft log; the topics and the records written after the
//! upgrade survive restarts, and the old directory is retired so it is never read again.

mod support;

use std::path::Path;

use kafka_protocol::records::Compression;
use support::*;

/// Copies the golden v1 file log (node 1; golden-a with 3 partitions, compacted, golden-b with
/// 4, golden-gone deleted) into `data/metadata/`, as an earlier build left it, with one record
/// in partition golden-b-1's log (a segment is the batches as the wire carries them; the
/// indexes are rebuilt).
fn old_data_dir(data: &Path) {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/golden-metadata/v1/file-log/metadata.log");
    std::fs::create_dir_all(data.join("metadata")).unwrap();
    std::fs::copy(golden, data.join("metadata/metadata.log")).unwrap();
    let partition = data.join("golden-b-1");
    std::fs::create_dir_all(&partition).unwrap();
    let old = batch(&[(Some("k"), "before the upgrade")], Compression::None);
    std::fs::write(partition.join("00000000000000000000.log"), old).unwrap();
}

#[test]
fn a_file_metadata_log_is_imported_once_and_its_topics_survive() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    old_data_dir(&data);
    let mut broker = TestBroker::start(&data, &[]);
    let mut wire = broker.connect();
    assert_eq!(
        values(&wire.fetch_all("golden-b", 1, 0)),
        ["before the upgrade"],
        "a partition log of the old build is kept"
    );
    for (topic, partition) in [("golden-a", 2), ("golden-b", 3)] {
        let value = format!("{topic}-{partition}");
        let (code, _) = wire.produce(
            topic,
            partition,
            batch(&[(Some("k"), &value)], Compression::None),
            -1,
        );
        assert_eq!(code, 0, "{topic}-{partition} is served after the import");
    }
    let (code, _) = wire.produce(
        "golden-gone",
        0,
        batch(&[(None, "x")], Compression::None),
        -1,
    );
    assert_eq!(
        code, 3,
        "the deleted topic stays deleted (UNKNOWN_TOPIC_OR_PARTITION)"
    );
    assert!(!data.join("metadata").exists(), "the file log is retired");
    assert!(data.join("metadata.imported/metadata.log").is_file());
    assert!(data.join("metadata-quorum").is_dir());
    assert!(broker.stop());

    // A file log showing up again is not re-imported over the quorum's metadata: the rename
    // is all that happens (what a crash between the import's commit and its rename leaves).
    std::fs::rename(data.join("metadata.imported"), data.join("metadata")).unwrap();
    broker.restart();
    let mut wire = broker.connect();
    assert_eq!(
        values(&wire.fetch_all("golden-b", 1, 0)),
        ["before the upgrade"]
    );
    for (topic, partition) in [("golden-a", 2), ("golden-b", 3)] {
        let value = format!("{topic}-{partition}");
        assert_eq!(
            values(&wire.fetch_all(topic, partition, 0)),
            [value],
            "{topic}-{partition} kept its record"
        );
    }
    assert!(!data.join("metadata").exists());
}
