//! Rough leader-append throughput: 1 KiB records in 16-record batches, as a broker would append
//! them after `validate_batches`. Run with
//! `cargo run --release -p runnel-log --example append_throughput [dir] [MiB]`.

use std::time::Instant;

use runnel_log::batch::validate_batches;
use runnel_log::{LogConfig, PartitionLog, RecoveryHint};

/// A v2 batch with `n` opaque 1 KiB "records" (the log never decodes them).
fn raw_batch(n: i32, payload: usize) -> Vec<u8> {
    let mut b = Vec::with_capacity(61 + payload);
    b.extend_from_slice(&0i64.to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b.push(2);
    b.extend_from_slice(&0u32.to_be_bytes());
    b.extend_from_slice(&0i16.to_be_bytes());
    b.extend_from_slice(&(n - 1).to_be_bytes());
    b.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
    b.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
    b.extend_from_slice(&(-1i64).to_be_bytes());
    b.extend_from_slice(&(-1i16).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b.extend_from_slice(&n.to_be_bytes());
    b.resize(61 + payload, 0x5a);
    let len = (b.len() - 12) as i32;
    b[8..12].copy_from_slice(&len.to_be_bytes());
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("runnel-log-bench"));
    let mib: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1024);
    let _ = std::fs::remove_dir_all(&dir);
    let config = LogConfig {
        segment_bytes: 256 << 20,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir.clone(), config, RecoveryHint::new_log()).expect("open");
    let batch = raw_batch(16, 16 * 1024);
    let rounds = (mib << 20) / batch.len();
    let start = Instant::now();
    for _ in 0..rounds {
        let headers = validate_batches(&batch, 1 << 20).expect("valid");
        log.append(&batch, &headers, 0).expect("append");
    }
    let secs = start.elapsed().as_secs_f64();
    let bytes = (rounds * batch.len()) as f64;
    println!(
        "appended {} MiB in {secs:.2}s: {:.0} MiB/s ({} records, {} segments, incl. CRC validation)",
        bytes as usize >> 20,
        bytes / secs / 1048576.0,
        log.log_end_offset(),
        log.num_segments()
    );
    let start = Instant::now();
    let mut offset = 0;
    let mut read = 0usize;
    while offset < log.log_end_offset() {
        let r = log.read(offset, 1 << 20, i64::MAX, true).expect("read");
        read += r.records.len();
        let last =
            runnel_log::batch::BatchHeader::parse(&r.records[r.records.len() - batch.len()..])
                .expect("header");
        offset = last.last_offset() + 1;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "read back {} MiB in {secs:.2}s: {:.0} MiB/s",
        read >> 20,
        read as f64 / secs / 1048576.0
    );
    log.close().expect("close");
    let _ = std::fs::remove_dir_all(&dir);
}
