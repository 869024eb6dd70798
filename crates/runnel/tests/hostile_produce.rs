//! Hostile Produce requests against the real broker over TCP (issue 9 items 1 and 2, and the
//! internal-topic rule): each gets Kafka's error code, the broker stays up with bounded memory,
//! and every acknowledged record survives a clean restart and a kill -9.

mod support;

use std::io::Write;

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use support::*;

use runnel_codes::{INVALID_RECORD, INVALID_TOPIC_EXCEPTION};

/// The forged batch: a bare 61-byte v2 header, valid CRC, claiming 2^31-1 records (last
/// offset delta 2^31-2) with no record bytes at all.
fn forged_header_batch() -> Vec<u8> {
    let mut b = vec![0u8; 61];
    b[8..12].copy_from_slice(&49i32.to_be_bytes()); // batchLength: header only
    b[12..16].copy_from_slice(&(-1i32).to_be_bytes());
    b[16] = 2; // magic
    b[23..27].copy_from_slice(&(i32::MAX - 1).to_be_bytes());
    b[43..51].copy_from_slice(&(-1i64).to_be_bytes()); // no producer id
    b[51..53].copy_from_slice(&(-1i16).to_be_bytes());
    b[53..57].copy_from_slice(&(-1i32).to_be_bytes());
    b[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

fn zigzag(out: &mut Vec<u8>, v: i64) {
    let mut raw = ((v << 1) ^ (v >> 63)) as u64;
    while raw >= 0x80 {
        out.push((raw as u8 & 0x7f) | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
}

/// A zstd bomb: one well-formed record (key "k") whose value is `value_len` zero bytes,
/// compressed by streaming so the test never holds the value. 256 MiB give ~8 KiB.
fn zstd_bomb(value_len: usize) -> Bytes {
    let mut body = vec![0u8]; // attributes
    zigzag(&mut body, 0); // timestamp delta
    zigzag(&mut body, 0); // offset delta
    zigzag(&mut body, 1);
    body.push(b'k');
    zigzag(&mut body, value_len as i64);
    let body_len = body.len() + value_len + 1; // + header count
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    let mut head = Vec::new();
    zigzag(&mut head, body_len as i64);
    enc.write_all(&head).unwrap();
    enc.write_all(&body).unwrap();
    let zeros = vec![0u8; 1 << 20];
    let mut left = value_len;
    while left > 0 {
        let n = left.min(zeros.len());
        enc.write_all(&zeros[..n]).unwrap();
        left -= n;
    }
    enc.write_all(&[0]).unwrap(); // no headers
    let compressed = enc.finish().unwrap();

    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let mut b = vec![0u8; 61];
    b[12..16].copy_from_slice(&(-1i32).to_be_bytes());
    b[16] = 2;
    b[21..23].copy_from_slice(&4i16.to_be_bytes()); // zstd
    b[27..35].copy_from_slice(&now.to_be_bytes());
    b[35..43].copy_from_slice(&now.to_be_bytes());
    b[43..51].copy_from_slice(&(-1i64).to_be_bytes());
    b[51..53].copy_from_slice(&(-1i16).to_be_bytes());
    b[53..57].copy_from_slice(&(-1i32).to_be_bytes());
    b[57..61].copy_from_slice(&1i32.to_be_bytes());
    b.extend_from_slice(&compressed);
    let len = (b.len() - 12) as i32;
    b[8..12].copy_from_slice(&len.to_be_bytes());
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(b)
}

/// `VmRSS` and `VmHWM` (peak RSS) of a process, in KiB.
fn memory_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn produce_values(wire: &mut Wire, topic: &str, from: usize, n: usize) -> Vec<String> {
    let mut acked = Vec::new();
    for chunk in (from..from + n).collect::<Vec<_>>().chunks(10) {
        let vals: Vec<String> = chunk.iter().map(|i| format!("v{i}")).collect();
        let pairs: Vec<(Option<&str>, &str)> =
            vals.iter().map(|v| (Some("k"), v.as_str())).collect();
        let (code, _) = wire.produce(topic, 0, batch(&pairs, Compression::None), -1);
        assert_eq!(code, 0);
        acked.extend(vals);
    }
    acked
}

/// Caught (issue 9 item 1): two header-only batches claiming 2^31-1 records each were
/// accepted (error 0); the append spanned 2^32 offsets in one segment, the 32-bit relative
/// index offsets wrapped and the next restart cut the segment at the forged batch, losing
/// every record written after it. Fails on the code before the record walk (the forged
/// produce is acknowledged, and the 1000 records are gone after the restart).
#[test]
fn forged_record_counts_are_refused_and_later_records_survive_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    assert_eq!(wire.create_topic("forged", 1, 1, &[]).0, 0);
    let mut two = forged_header_batch();
    two.extend_from_slice(&forged_header_batch());
    let (code, _) = wire.produce("forged", 0, Bytes::from(two), -1);
    assert_eq!(code, INVALID_RECORD, "forged record counts must be refused");
    let (code, _) = wire.produce("forged", 0, Bytes::from(forged_header_batch()), -1);
    assert_eq!(code, INVALID_RECORD);

    let acked = produce_values(&mut wire, "forged", 0, 1000);
    assert_eq!(values(&wire.fetch_all("forged", 0, 0)), acked);

    assert!(broker.stop(), "clean shutdown");
    broker.restart();
    let mut wire = broker.connect();
    wait_until("the partition is served after a clean restart", || {
        wire.fetch("forged", 0, 0, 0).0 == 0
    });
    assert_eq!(
        values(&wire.fetch_all("forged", 0, 0)),
        acked,
        "after a clean restart"
    );

    broker.kill9();
    broker.restart();
    let mut wire = broker.connect();
    wait_until("the partition is served after kill -9", || {
        wire.fetch("forged", 0, 0, 0).0 == 0
    });
    assert_eq!(
        values(&wire.fetch_all("forged", 0, 0)),
        acked,
        "after kill -9"
    );
}

/// Caught (issue 9 item 2): the compacted-topic key check decompressed whole batches into
/// memory; ~8 KiB of zstd took the broker to 285 MB RSS. Now the records are walked through
/// a bounded streaming decoder: the bomb is refused and the broker's peak RSS stays small.
/// Fails on the code before (the peak RSS passes 200 MB, and the bomb is stored).
#[test]
fn a_zstd_bomb_to_a_compacted_topic_is_refused_with_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    assert_eq!(
        wire.create_topic("bombed", 1, 1, &[("cleanup.policy", "compact")])
            .0,
        0
    );
    let bomb = zstd_bomb(256 << 20);
    eprintln!("bomb: {} bytes of zstd, 256 MiB inflated", bomb.len());
    let (rss_before, _) = memory_kib(broker.pid());
    let (code, _) = wire.produce("bombed", 0, bomb, -1);
    let (rss_after, peak) = memory_kib(broker.pid());
    eprintln!("broker RSS before {rss_before} KiB, after {rss_after} KiB, peak {peak} KiB");
    assert_ne!(code, 0, "the bomb must not be stored");
    assert_eq!(code, INVALID_RECORD);
    assert!(peak < 200 * 1024, "peak RSS {peak} KiB");

    // Still serving: a normal keyed batch is stored and read back.
    let (code, offset) = wire.produce(
        "bombed",
        0,
        batch(&[(Some("k"), "fine")], Compression::Zstd),
        -1,
    );
    assert_eq!((code, offset), (0, 0));
    assert_eq!(
        values(&wire.fetch_all("bombed", 0, 0)),
        vec!["fine".to_string()]
    );
}

/// Caught: any client could append to `__consumer_offsets` (and so feed the group loader
/// whatever it liked). Kafka answers INVALID_TOPIC_EXCEPTION for internal topics. Fails on the
/// code before (the produce is acknowledged once the topic exists).
#[test]
fn clients_cannot_produce_to_internal_topics() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]);
    let mut wire = broker.connect();
    // FindCoordinator creates __consumer_offsets.
    let req = FindCoordinatorRequest::default().with_key(StrBytes::from_string("g".into()));
    let _: FindCoordinatorResponse = wire.call(ApiKey::FindCoordinator, 3, &req);
    let mut code = -1;
    wait_until("__consumer_offsets exists", || {
        code = wire
            .produce(
                "__consumer_offsets",
                0,
                batch(&[(Some("k"), "v")], Compression::None),
                1,
            )
            .0;
        code != 3 && code != 5 && code != 6
    });
    assert_eq!(code, INVALID_TOPIC_EXCEPTION);
}
