//! `runnel dump-log` (kafka-dump-log.sh) on a segment a real broker wrote: golden output for
//! the batch headers, the records with `--print-data-log`, the offset and time indexes, and a
//! report (not a panic) for the same segment damaged.

mod support;

use std::process::Command;

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use support::*;

const T0: i64 = 1_700_000_000_000;

/// A batch with fixed timestamps and no producer id, so its bytes (and CRC) are the same on
/// every run.
fn fixed_batch(records: &[(Option<&str>, &str, &[&str])], t: i64) -> Bytes {
    producer_batch(records, t, -1, -1)
}

/// [`fixed_batch`] of an idempotent producer (`producer_id`, epoch 0, base sequence 0).
fn producer_batch(
    records: &[(Option<&str>, &str, &[&str])],
    t: i64,
    producer_id: i64,
    producer_epoch: i16,
) -> Bytes {
    let first_sequence = if producer_id >= 0 { 0 } else { -1 };
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, (k, v, headers))| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // Base sequence -1 without a producer: `offset - sequence` stays constant so the
            // encoder keeps the records in one batch.
            sequence: if producer_id >= 0 {
                first_sequence + i as i32
            } else {
                i as i32 - 1
            },
            timestamp: t + i as i64,
            key: k.map(|k| Bytes::copy_from_slice(k.as_bytes())),
            value: Some(Bytes::copy_from_slice(v.as_bytes())),
            headers: headers
                .iter()
                .map(|h| {
                    (
                        kafka_protocol::protocol::StrBytes::from_string(h.to_string()),
                        Some(Bytes::from_static(b"x")),
                    )
                })
                .collect(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}

fn dump(args: &[&str]) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_runnel"))
        .arg("dump-log")
        .args(args)
        .output()
        .unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn dumps_a_segment_written_by_a_broker() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    // An index entry for every batch but the first (Kafka indexes a batch once more than
    // index.interval.bytes were appended since the last entry).
    assert_eq!(
        wire.create_topic("dump", 1, 1, &[("index.interval.bytes", "1")])
            .0,
        0
    );
    wait_until("the partition led", || {
        support::cluster::leader_and_isr(&broker.addr, "dump").is_some_and(|(l, _)| l >= 0)
    });
    let first = fixed_batch(&[(Some("k1"), "v1", &[]), (None, "v2", &["h1", "h2"])], T0);
    let second = fixed_batch(&[(Some("k3"), "v3", &[])], T0 + 10);
    assert_eq!(wire.produce("dump", 0, first, -1), (0, 0));
    assert_eq!(wire.produce("dump", 0, second, -1), (0, 2));
    assert!(broker.stop(), "clean shutdown");

    let seg = dir.path().join("dump-0").join("00000000000000000000");
    let log = seg.with_extension("log");
    let index = seg.with_extension("index");
    let time_index = seg.with_extension("timeindex");
    let files = format!(
        "{},{},{}",
        log.display(),
        index.display(),
        time_index.display()
    );
    let (ok, out, err) = dump(&["--files", &files, "--print-data-log"]);
    assert!(ok, "{err}");
    assert_eq!(err, "");
    let expected = format!(
        "Dumping {log}
Log starting offset: 0
baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000001 size: 91 magic: 2 compresscodec: none crc: 2828593619 isvalid: true
| offset: 0 CreateTime: 1700000000000 keySize: 2 valueSize: 2 sequence: -1 headerKeys: [] key: k1 payload: v1
| offset: 1 CreateTime: 1700000000001 keySize: -1 valueSize: 2 sequence: -1 headerKeys: [h1,h2] payload: v2
baseOffset: 2 lastOffset: 2 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 91 CreateTime: 1700000000010 size: 72 magic: 2 compresscodec: none crc: 718620619 isvalid: true
| offset: 2 CreateTime: 1700000000010 keySize: 2 valueSize: 2 sequence: -1 headerKeys: [] key: k3 payload: v3
Dumping {index}
offset: 2 position: 91
Dumping {time_index}
timestamp: 1700000000010 offset: 2
",
        log = log.display(),
        index = index.display(),
        time_index = time_index.display(),
    );
    assert_eq!(out, expected);

    // Shallow: batch lines only.
    let (ok, out, _) = dump(&["--files", log.to_str().unwrap()]);
    assert!(ok);
    assert_eq!(
        out.lines()
            .filter(|l| l.starts_with("baseOffset: "))
            .count(),
        2
    );
    assert!(!out.contains("| offset"));

    // The same segment damaged: a flipped payload byte and a torn tail are reported.
    let mut bytes = std::fs::read(&log).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    bytes.extend_from_slice(&[0; 7]);
    std::fs::write(&log, &bytes).unwrap();
    let (ok, out, _) = dump(&["--files", log.to_str().unwrap(), "--deep-iteration"]);
    assert!(ok);
    assert!(out.contains("isvalid: false"), "{out}");
    assert!(out.ends_with("Found 7 invalid bytes at the end of 00000000000000000000.log\n"));

    // A missing file fails the command after dumping the others.
    let (ok, out, err) = dump(&[
        "--files",
        &format!(
            "{},{}",
            dir.path().join("nope.log").display(),
            index.display()
        ),
    ]);
    assert!(!ok);
    assert!(err.contains("nope.log"), "{err}");
    assert!(out.contains("offset: 2 position: 91"));
}

#[test]
fn dumps_the_producer_snapshot_a_broker_wrote() {
    use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
    let dir = tempfile::tempdir().unwrap();
    let mut broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("snap", 1, 1, &[]).0, 0);
    wait_until("the partition led", || {
        support::cluster::leader_and_isr(&broker.addr, "snap").is_some_and(|(l, _)| l >= 0)
    });
    let init: InitProducerIdResponse = wire.call(
        kafka_protocol::messages::ApiKey::InitProducerId,
        4,
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    );
    assert_eq!(init.error_code, 0);
    let (pid, epoch) = (init.producer_id.0, init.producer_epoch);
    let batch = producer_batch(&[(None, "a", &[]), (None, "b", &[])], T0, pid, epoch);
    assert_eq!(wire.produce("snap", 0, batch, -1), (0, 0));
    // A clean shutdown writes the producer snapshot at the log end (coordinatorEpoch -1: no
    // marker seen, as Kafka's entry).
    assert!(broker.stop(), "clean shutdown");
    let snapshot = dir
        .path()
        .join("snap-0")
        .join("00000000000000000002.snapshot");
    assert!(snapshot.exists(), "no snapshot at the log end");
    let (ok, out, err) = dump(&["--files", snapshot.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert_eq!(
        out,
        format!(
            "Dumping {}\nproducerId: {pid} producerEpoch: {epoch} coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty lastTimestamp: 1700000000001 firstSequence: 0 lastSequence: 1 lastOffset: 1 offsetDelta: 1 timestamp: 1700000000001\n",
            snapshot.display()
        )
    );
    // A damaged snapshot is reported, not dumped.
    let mut bytes = std::fs::read(&snapshot).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&snapshot, &bytes).unwrap();
    let (_, out, err) = dump(&["--files", snapshot.to_str().unwrap()]);
    assert!(!out.contains("producerId"), "{out}");
    assert!(err.contains("corrupt"), "{err}");
}
