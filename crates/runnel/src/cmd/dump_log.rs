//! `runnel dump-log --files F[,F...]`: kafka-dump-log.sh, offline, with its output lines.
//!
//! `.log` segments print one line per batch header (and with `--deep-iteration` /
//! `--print-data-log` one `| offset: ...` line per record), `.index` / `.timeindex` their
//! entries, `.snapshot` the producer-state snapshot and `.txnindex` the aborted transactions.
//! Files are read with runnel-log's parsers (`batch::frame`, `compression::decode_batch_bounded`,
//! `producer_snapshot::decode`, `txn::decode_txn_index`); a segment is read one batch at a
//! time, so memory is bounded by the largest batch, and a damaged file is reported (stderr, as
//! Kafka's tool does for its checks) and never panics the tool. `--cluster-metadata-decoder`
//! reads a node's metadata log and snapshot instead (`dump_metadata`).

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use anyhow::Result;
use clap::Args;
use runnel_broker::producer_state::{seq_after, seq_before};
use runnel_log::batch::{self, BatchHeader, LOG_OVERHEAD, MIN_BATCH_LENGTH};

#[derive(Debug, Clone, Args)]
pub struct DumpLogArgs {
    /// The comma separated list of data and index log files to be dumped.
    #[arg(
        long,
        value_name = "FILE1,FILE2,...",
        required = true,
        value_delimiter = ','
    )]
    pub files: Vec<std::path::PathBuf>,
    /// Print the records' content (implies --deep-iteration).
    #[arg(long = "print-data-log")]
    pub print_data_log: bool,
    /// Print every record, not only the batch headers.
    #[arg(long = "deep-iteration")]
    pub deep_iteration: bool,
    /// Only verify the index against the log, printing nothing but the mismatches.
    #[arg(long = "verify-index-only")]
    pub verify_index_only: bool,
    /// Do not print each record's metadata (offset, timestamps, sizes).
    #[arg(long = "skip-record-metadata")]
    pub skip_record_metadata: bool,
    /// Stop reading a .log after this many bytes of batches.
    #[arg(long = "max-bytes", default_value_t = i32::MAX)]
    pub max_bytes: i32,
    /// Accepted for kafka-dump-log.sh's command lines; the index check reads only the batch
    /// header at each indexed position, whatever the batch size.
    #[arg(long = "max-message-size", default_value_t = 5 * 1024 * 1024)]
    pub max_message_size: i32,
    /// Decode the files as the cluster metadata log: a node's `metadata-quorum/raft.log` and
    /// `snapshot.checkpoint`, or `metadata/metadata.log` (a directory: every one found in it).
    #[arg(long = "cluster-metadata-decoder")]
    pub cluster_metadata_decoder: bool,
}

/// What dumping wrote: stdout text and stderr lines (kept apart so tests can compare both).
/// With `stream`, [`Dump::flush`] prints and clears them after every batch, so a large
/// segment's dump is never held in memory.
#[derive(Debug, Default)]
pub struct Dump {
    pub out: String,
    pub err: String,
    pub stream: bool,
}

impl Dump {
    fn flush(&mut self) {
        if self.stream {
            print!("{}", self.out);
            eprint!("{}", self.err);
            self.out.clear();
            self.err.clear();
        }
    }
}

pub fn run(args: DumpLogArgs) -> Result<()> {
    let mut failed = false;
    let mut files: Vec<std::path::PathBuf> = Vec::new();
    for f in &args.files {
        if !args.cluster_metadata_decoder {
            files.push(f.clone());
            continue;
        }
        let found = super::dump_metadata::files_of(f);
        if found.is_empty() {
            eprintln!(
                "Cannot dump {}: no metadata log or snapshot in it",
                f.display()
            );
            failed = true;
        }
        files.extend(found);
    }
    for file in &files {
        let mut dump = Dump {
            stream: true,
            ..Dump::default()
        };
        let dumped = if args.cluster_metadata_decoder {
            super::dump_metadata::dump_file(file, &args, &mut dump)
        } else {
            dump_file(file, &args, &mut dump)
        };
        if let Err(e) = dumped {
            let _ = writeln!(dump.err, "Cannot dump {}: {e}", file.display());
            failed = true;
        }
        dump.flush();
    }
    anyhow::ensure!(!failed, "some files could not be dumped");
    Ok(())
}

/// The base offset in a segment file's name (`00000000000000000042.log` -> 42).
fn base_offset(path: &Path) -> Option<i64> {
    path.file_name()?
        .to_str()?
        .split('.')
        .next()?
        .parse::<i64>()
        .ok()
}

/// Dumps one file by its suffix, as Kafka's `DumpLogSegments.main`.
pub fn dump_file(path: &Path, args: &DumpLogArgs, dump: &mut Dump) -> std::io::Result<()> {
    let _ = writeln!(dump.out, "Dumping {}", path.display());
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let suffix = name.rfind('.').map_or("", |i| &name[i..]);
    match suffix {
        ".log" => dump_log(path, args, dump),
        ".index" => dump_index(path, args, dump),
        ".timeindex" => dump_time_index(path, dump),
        ".snapshot" => {
            dump_snapshot(&read_small(path)?, dump);
            Ok(())
        }
        ".txnindex" => {
            dump_txn_index(&read_small(path)?, dump);
            Ok(())
        }
        _ => {
            let _ = writeln!(dump.err, "Ignoring unknown file {}", path.display());
            Ok(())
        }
    }
}

/// Index and snapshot files are small (Kafka caps an index at `segment.index.bytes`, 10 MiB by
/// default); anything beyond 1 GiB is refused rather than read into memory.
pub(crate) fn read_small(path: &Path) -> std::io::Result<Vec<u8>> {
    let len = std::fs::metadata(path)?.len();
    if len > 1 << 30 {
        return Err(std::io::Error::other(format!(
            "{len} bytes is too large for this kind of file"
        )));
    }
    std::fs::read(path)
}

/// Kafka's `DefaultRecordBatch.lastSequence`: the base sequence advanced by the offset delta,
/// wrapping past `i32::MAX` to 0; -1 without sequences.
fn last_sequence(h: &BatchHeader) -> i32 {
    if h.base_sequence < 0 {
        return -1;
    }
    seq_after(h.base_sequence, i64::from(h.last_offset_delta))
}

/// A record's sequence (Kafka's `DefaultRecord.sequence`): -1 without sequences, else the
/// base sequence advanced by its offset delta, wrapping as [`last_sequence`].
fn record_sequence(h: &BatchHeader, offset: i64) -> i64 {
    if h.base_sequence < 0 {
        return -1;
    }
    i64::from(seq_after(
        h.base_sequence,
        offset.saturating_sub(h.base_offset),
    ))
}

fn codec_name(codec: u8) -> &'static str {
    match codec {
        0 => "none",
        1 => "gzip",
        2 => "snappy",
        3 => "lz4",
        4 => "zstd",
        _ => "unknown",
    }
}

fn timestamp_type(h: &BatchHeader) -> &'static str {
    if h.timestamp_type_is_log_append() {
        "LogAppendTime"
    } else {
        "CreateTime"
    }
}

/// Attributes bit 6: the batch's base timestamp is the delete horizon (KIP-534).
const DELETE_HORIZON_BIT: i16 = 0x40;

/// Kafka's `printBatchLevel` line for a v2 batch.
pub fn batch_line(h: &BatchHeader, batch: &[u8], position: u64) -> String {
    let horizon = if h.attributes & DELETE_HORIZON_BIT != 0 {
        format!("OptionalLong[{}]", h.base_timestamp)
    } else {
        "OptionalLong.empty".to_string()
    };
    let valid = batch::verify_crc(h, batch).is_ok();
    format!(
        "baseOffset: {} lastOffset: {} count: {} baseSequence: {} lastSequence: {} producerId: {} producerEpoch: {} partitionLeaderEpoch: {} isTransactional: {} isControl: {} deleteHorizonMs: {horizon} position: {position} {}: {} size: {} magic: {} compresscodec: {} crc: {} isvalid: {valid}",
        h.base_offset,
        h.last_offset(),
        h.record_count,
        h.base_sequence,
        last_sequence(h),
        h.producer_id,
        h.producer_epoch,
        h.partition_leader_epoch,
        h.is_transactional(),
        h.is_control(),
        timestamp_type(h),
        h.max_timestamp,
        batch.len(),
        h.magic,
        codec_name(h.compression()),
        h.crc,
    )
}

/// The `| offset: ...` lines of one batch's records.
fn record_lines(
    h: &BatchHeader,
    batch: &[u8],
    args: &DumpLogArgs,
    last_offset: &mut Option<i64>,
    gaps: &mut Vec<(i64, i64)>,
    dump: &mut Dump,
) {
    let mut buf = bytes::Bytes::copy_from_slice(batch);
    let set = match runnel_log::compression::decode_batch_bounded(&mut buf) {
        Ok(set) => set,
        Err(e) => {
            let _ = writeln!(
                dump.err,
                "The records of the batch at offset {} cannot be read: {e}",
                h.base_offset
            );
            return;
        }
    };
    let print_data = args.print_data_log;
    for r in &set.records {
        if let Some(prev) = *last_offset {
            if r.offset != prev + 1 {
                gaps.push((prev, r.offset));
            }
        }
        *last_offset = Some(r.offset);
        // Kafka's prefix: "| " before the first item, " " after it; the payload always
        // follows a space, so with --skip-record-metadata and no key the line is
        // " payload: ...".
        let mut line = String::new();
        let mut prefix = "| ";
        if !args.skip_record_metadata {
            let len = |b: &Option<bytes::Bytes>| b.as_ref().map_or(-1, |b| b.len() as i64);
            let headers: Vec<String> = r.headers.keys().map(|k| k.to_string()).collect();
            prefix = " ";
            let _ = write!(
                line,
                "| offset: {} {}: {} keySize: {} valueSize: {} sequence: {} headerKeys: [{}]",
                r.offset,
                timestamp_type(h),
                r.timestamp,
                len(&r.key),
                len(&r.value),
                record_sequence(h, r.offset),
                headers.join(",")
            );
            if h.is_control() {
                line.push_str(&control_text(r.key.as_deref(), r.value.as_deref()));
            }
        }
        if print_data && !h.is_control() {
            if let Some(key) = &r.key {
                let _ = write!(line, "{prefix}key: {}", String::from_utf8_lossy(key));
            }
            if let Some(value) = &r.value {
                let _ = write!(line, " payload: {}", String::from_utf8_lossy(value));
            }
        }
        let _ = writeln!(dump.out, "{line}");
    }
}

/// A control record's part of its line (Kafka's `ControlRecordType` cases it knows here).
fn control_text(key: Option<&[u8]>, value: Option<&[u8]>) -> String {
    let Some(key) = key.filter(|k| k.len() >= 4) else {
        return " controlType: UNKNOWN(-1)".into();
    };
    let kind = i16::from_be_bytes([key[2], key[3]]);
    match kind {
        0 | 1 => {
            let epoch = value
                .filter(|v| v.len() >= 6)
                .map_or(-1, |v| i32::from_be_bytes([v[2], v[3], v[4], v[5]]));
            let name = if kind == 0 { "ABORT" } else { "COMMIT" };
            format!(" endTxnMarker: {name} coordinatorEpoch: {epoch}")
        }
        other => format!(" controlType: UNKNOWN({other})"),
    }
}

/// Kafka's `dumpLog` for a `.log` segment, reading one batch at a time.
fn dump_log(path: &Path, args: &DumpLogArgs, dump: &mut Dump) -> std::io::Result<()> {
    if let Some(base) = base_offset(path) {
        let _ = writeln!(dump.out, "Log starting offset: {base}");
    }
    let file = File::open(path)?;
    let file_len = file.metadata()?.len();
    let max_bytes = u64::try_from(args.max_bytes.max(0)).unwrap_or(0);
    let limit = file_len.min(max_bytes);
    let mut reader = BufReader::new(file);
    let deep = args.deep_iteration || args.print_data_log;
    let mut position = 0u64;
    let mut last_offset = None;
    let mut gaps = Vec::new();
    let mut damaged = false;
    loop {
        let left = limit - position;
        if left < LOG_OVERHEAD as u64 {
            break;
        }
        let mut head = [0u8; LOG_OVERHEAD];
        reader.read_exact(&mut head)?;
        let length = i32::from_be_bytes([head[8], head[9], head[10], head[11]]);
        if length < MIN_BATCH_LENGTH {
            let _ = writeln!(
                dump.err,
                "Damaged batch at position {position} of {}: batch length {length} is below the minimum {MIN_BATCH_LENGTH}",
                path.display()
            );
            damaged = true;
            break;
        }
        // `length` is at least MIN_BATCH_LENGTH here, so not negative.
        let total = LOG_OVERHEAD as u64 + u64::from(length.unsigned_abs());
        if total > left {
            // A torn tail (or --max-bytes cutting a batch): Kafka's iterator stops here.
            break;
        }
        // At most the file's length (`total <= left`), which was read into memory's range.
        let Ok(size) = usize::try_from(total) else {
            break;
        };
        let mut batch = vec![0u8; size];
        batch[..LOG_OVERHEAD].copy_from_slice(&head);
        reader.read_exact(&mut batch[LOG_OVERHEAD..])?;
        let header = match batch::frame(&batch) {
            Ok((h, _)) => h,
            Err(e) => {
                let _ = writeln!(
                    dump.err,
                    "Damaged batch at position {position} of {}: {e}",
                    path.display()
                );
                damaged = true;
                break;
            }
        };
        let _ = writeln!(dump.out, "{}", batch_line(&header, &batch, position));
        if deep {
            record_lines(&header, &batch, args, &mut last_offset, &mut gaps, dump);
        }
        dump.flush();
        position += total;
    }
    let trailing = file_len - position;
    if trailing > 0 && (max_bytes >= file_len || damaged) {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        let _ = writeln!(
            dump.out,
            "Found {trailing} invalid bytes at the end of {name}"
        );
    }
    if !gaps.is_empty() {
        let _ = writeln!(dump.err, "Non-consecutive offsets in {}", path.display());
        for (a, b) in gaps {
            let _ = writeln!(dump.err, "  {a} is followed by {b}");
        }
    }
    Ok(())
}

/// The last offset of the batch at `position` of the segment, if one is there.
fn batch_last_offset_at(log: &mut File, position: u64) -> Option<i64> {
    log.seek(SeekFrom::Start(position)).ok()?;
    let mut head = [0u8; batch::RECORD_BATCH_OVERHEAD];
    log.read_exact(&mut head).ok()?;
    BatchHeader::parse(&head).ok().map(|h| h.last_offset())
}

/// Kafka's `dumpIndex`: `offset: N position: P` per entry, and the entries whose offset is not
/// the last offset of the batch at their position reported as mismatches.
fn dump_index(path: &Path, args: &DumpLogArgs, dump: &mut Dump) -> std::io::Result<()> {
    let bytes = read_small(path)?;
    let base = base_offset(path).unwrap_or(0);
    let entries = bytes.len() / 8;
    if entries == 0 {
        let _ = writeln!(dump.out, "{} is empty.", path.display());
        return Ok(());
    }
    let mut log = File::open(path.with_extension("log")).ok();
    let mut mismatches = Vec::new();
    for (i, e) in bytes.chunks_exact(8).enumerate() {
        let relative = i32::from_be_bytes([e[0], e[1], e[2], e[3]]);
        let position = i32::from_be_bytes([e[4], e[5], e[6], e[7]]);
        // A sparse (preallocated) file's zero tail, as Kafka's tool stops at it.
        if relative == 0 && i > 0 {
            break;
        }
        let offset = base.saturating_add(i64::from(relative));
        if let Some(log) = log.as_mut() {
            match u64::try_from(position)
                .ok()
                .and_then(|p| batch_last_offset_at(log, p))
            {
                Some(found) if found == offset => {}
                Some(found) => mismatches.push((offset, found)),
                None => mismatches.push((offset, -1)),
            }
        }
        if !args.verify_index_only {
            let _ = writeln!(dump.out, "offset: {offset} position: {position}");
        }
    }
    if bytes.len() % 8 != 0 {
        let _ = writeln!(
            dump.err,
            "{} has {} trailing bytes that are not an index entry",
            path.display(),
            bytes.len() % 8
        );
    }
    if !mismatches.is_empty() {
        let _ = writeln!(dump.err, "Mismatches in :{}", path.display());
        for (index, log) in mismatches {
            let _ = writeln!(dump.err, "  Index offset: {index}, log offset: {log}");
        }
    }
    Ok(())
}

/// Kafka's `dumpTimeIndex`: `timestamp: T offset: N` per entry.
fn dump_time_index(path: &Path, dump: &mut Dump) -> std::io::Result<()> {
    let bytes = read_small(path)?;
    let base = base_offset(path).unwrap_or(0);
    let mut previous = -1i64;
    for (i, e) in bytes.chunks_exact(12).enumerate() {
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&e[..8]);
        let timestamp = i64::from_be_bytes(ts);
        let relative = i32::from_be_bytes([e[8], e[9], e[10], e[11]]);
        if relative == 0 && i > 0 {
            break;
        }
        if timestamp <= previous {
            let _ = writeln!(
                dump.err,
                "Found out of order timestamp in :{}\n  Index timestamp: {timestamp}, Previously indexed timestamp: {previous}",
                path.display()
            );
        }
        previous = timestamp;
        let _ = writeln!(
            dump.out,
            "timestamp: {timestamp} offset: {}",
            base.saturating_add(i64::from(relative))
        );
    }
    if bytes.len() % 12 != 0 {
        let _ = writeln!(
            dump.err,
            "{} has {} trailing bytes that are not a time index entry",
            path.display(),
            bytes.len() % 12
        );
    }
    Ok(())
}

fn optional_long(v: i64) -> String {
    if v < 0 {
        "OptionalLong.empty".into()
    } else {
        format!("OptionalLong[{v}]")
    }
}

/// Kafka's `dumpProducerIdSnapshot`.
pub fn dump_snapshot(bytes: &[u8], dump: &mut Dump) {
    match runnel_log::producer_snapshot::decode(bytes) {
        Ok(entries) => {
            for e in entries {
                let mut line = format!(
                    "producerId: {} producerEpoch: {} coordinatorEpoch: {} currentTxnFirstOffset: {} lastTimestamp: {} ",
                    e.producer_id,
                    e.epoch,
                    e.coordinator_epoch,
                    optional_long(e.current_txn_first_offset),
                    e.timestamp
                );
                if e.last_offset >= 0 {
                    let first = if e.last_sequence < 0 {
                        -1
                    } else {
                        seq_before(e.last_sequence, e.offset_delta)
                    };
                    let _ = write!(
                        line,
                        "firstSequence: {first} lastSequence: {} lastOffset: {} offsetDelta: {} timestamp: {}",
                        e.last_sequence, e.last_offset, e.offset_delta, e.timestamp
                    );
                }
                let _ = writeln!(dump.out, "{line}");
            }
        }
        Err(e) => {
            let _ = writeln!(dump.err, "{e}");
        }
    }
}

/// Kafka's `dumpTxnIndex`.
pub fn dump_txn_index(bytes: &[u8], dump: &mut Dump) {
    match runnel_log::txn::decode_txn_index(bytes) {
        Some(entries) => {
            for t in entries {
                let _ = writeln!(
                    dump.out,
                    "version: 0 producerId: {} firstOffset: {} lastOffset: {} lastStableOffset: {}",
                    t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset
                );
            }
        }
        None => {
            let _ = writeln!(
                dump.err,
                "the transaction index is damaged ({} bytes is not a whole number of valid entries)",
                bytes.len()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runnel_log::producer_snapshot::SnapshotEntry;
    use runnel_log::txn::AbortedTxn;

    fn args() -> DumpLogArgs {
        DumpLogArgs {
            files: vec![],
            print_data_log: true,
            deep_iteration: false,
            verify_index_only: false,
            skip_record_metadata: false,
            max_bytes: i32::MAX,
            max_message_size: 5 << 20,
            cluster_metadata_decoder: false,
        }
    }

    fn batch(values: &[&str], base_offset: i64) -> Vec<u8> {
        use kafka_protocol::records::*;
        let records: Vec<Record> = values
            .iter()
            .enumerate()
            .map(|(i, v)| Record {
                transactional: false,
                control: false,
                partition_leader_epoch: 0,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: base_offset + i as i64,
                // Constant `offset - sequence` keeps the records one batch (base sequence -1).
                sequence: i as i32 - 1,
                timestamp: 1_700_000_000_000 + i as i64,
                key: (i == 0).then(|| bytes::Bytes::from_static(b"k")),
                value: Some(bytes::Bytes::copy_from_slice(v.as_bytes())),
                headers: Default::default(),
                delete_horizon: false,
            })
            .collect();
        let mut buf = bytes::BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            &records,
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::None,
            },
        )
        .unwrap();
        buf.to_vec()
    }

    fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn segments_print_batches_records_and_damage() {
        let tmp = tempfile::tempdir().unwrap();
        let mut bytes = batch(&["a", "bc"], 0);
        let first = bytes.len();
        bytes.extend(batch(&["d"], 2));
        let mut damaged = bytes.clone();
        let p = write(tmp.path(), "00000000000000000000.log", &bytes);
        let mut d = Dump::default();
        dump_file(&p, &args(), &mut d).unwrap();
        let lines: Vec<&str> = d.out.lines().collect();
        assert_eq!(lines[1], "Log starting offset: 0");
        assert!(lines[2].starts_with("baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000001 size: "), "{}", lines[2]);
        assert!(
            lines[2].contains(" magic: 2 compresscodec: none crc: ")
                && lines[2].ends_with(" isvalid: true")
        );
        assert_eq!(lines[3], "| offset: 0 CreateTime: 1700000000000 keySize: 1 valueSize: 1 sequence: -1 headerKeys: [] key: k payload: a");
        assert_eq!(lines[4], "| offset: 1 CreateTime: 1700000000001 keySize: -1 valueSize: 2 sequence: -1 headerKeys: [] payload: bc");
        assert!(lines[5].contains(&format!("position: {first} ")));
        assert_eq!(lines.len(), 7, "{}", d.out);
        assert!(d.err.is_empty(), "{}", d.err);

        // --skip-record-metadata: Kafka's "| key: .. payload: .." and, without a key,
        // " payload: .." (its "| " prefix only goes before the first printed item).
        let mut skip = args();
        skip.skip_record_metadata = true;
        let mut d = Dump::default();
        dump_file(&p, &skip, &mut d).unwrap();
        let lines: Vec<&str> = d.out.lines().collect();
        assert_eq!(lines[3], "| key: k payload: a");
        assert_eq!(lines[4], " payload: bc");

        // A flipped byte in the second batch's records: the CRC says so, the tool goes on.
        let at = bytes.len() - 1;
        damaged[at] ^= 0xff;
        // And a torn tail.
        damaged.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0]);
        let p = write(tmp.path(), "00000000000000000010.log", &damaged);
        let mut d = Dump::default();
        dump_file(&p, &args(), &mut d).unwrap();
        assert!(d.out.contains("Log starting offset: 10"));
        assert!(d.out.contains("isvalid: false"), "{}", d.out);
        assert!(d
            .out
            .ends_with("Found 11 invalid bytes at the end of 00000000000000000010.log\n"));

        // A length below the minimum stops the dump with a report, never a panic.
        let mut bad = batch(&["a"], 0);
        bad[8..12].copy_from_slice(&5i32.to_be_bytes());
        let p = write(tmp.path(), "00000000000000000020.log", &bad);
        let mut d = Dump::default();
        dump_file(&p, &args(), &mut d).unwrap();
        assert!(
            d.err.contains("batch length 5 is below the minimum"),
            "{}",
            d.err
        );
        assert!(d
            .out
            .contains(&format!("Found {} invalid bytes", bad.len())));
    }

    #[test]
    fn indexes_print_their_entries_and_check_the_log() {
        let tmp = tempfile::tempdir().unwrap();
        let mut log = batch(&["a", "b"], 0);
        let second = log.len() as i32;
        log.extend(batch(&["c"], 2));
        write(tmp.path(), "00000000000000000000.log", &log);
        let mut index = Vec::new();
        for (rel, pos) in [(1i32, 0i32), (3, second), (0, 0)] {
            index.extend(rel.to_be_bytes());
            index.extend(pos.to_be_bytes());
        }
        let p = write(tmp.path(), "00000000000000000000.index", &index);
        let mut d = Dump::default();
        dump_file(&p, &args(), &mut d).unwrap();
        assert_eq!(
            d.out,
            format!(
                "Dumping {}\noffset: 1 position: 0\noffset: 3 position: {second}\n",
                p.display()
            )
        );
        // offset 3 is not the last offset (2) of the batch at that position.
        assert!(
            d.err.contains("  Index offset: 3, log offset: 2"),
            "{}",
            d.err
        );

        let mut tindex = Vec::new();
        for (ts, rel) in [(100i64, 1i32), (200, 2)] {
            tindex.extend(ts.to_be_bytes());
            tindex.extend(rel.to_be_bytes());
        }
        tindex.push(7);
        let p = write(tmp.path(), "00000000000000000000.timeindex", &tindex);
        let mut d = Dump::default();
        dump_file(&p, &args(), &mut d).unwrap();
        assert!(d
            .out
            .ends_with("timestamp: 100 offset: 1\ntimestamp: 200 offset: 2\n"));
        assert!(d.err.contains("1 trailing bytes"));

        let p = write(tmp.path(), "00000000000000000005.index", &[]);
        let mut d = Dump::default();
        dump_file(&p, &args(), &mut d).unwrap();
        assert!(d.out.ends_with("00000000000000000005.index is empty.\n"));
    }

    #[test]
    fn snapshots_and_txn_indexes() {
        let entry = SnapshotEntry {
            producer_id: 7,
            epoch: 1,
            last_sequence: 4,
            last_offset: 10,
            offset_delta: 2,
            timestamp: 99,
            coordinator_epoch: 3,
            current_txn_first_offset: -1,
        };
        let bytes = runnel_log::producer_snapshot::encode(&[entry]).unwrap();
        let mut d = Dump::default();
        dump_snapshot(&bytes, &mut d);
        assert_eq!(d.out, "producerId: 7 producerEpoch: 1 coordinatorEpoch: 3 currentTxnFirstOffset: OptionalLong.empty lastTimestamp: 99 firstSequence: 2 lastSequence: 4 lastOffset: 10 offsetDelta: 2 timestamp: 99\n");
        let mut d = Dump::default();
        dump_snapshot(&bytes[..bytes.len() - 3], &mut d);
        assert!(d.out.is_empty() && !d.err.is_empty());

        let t = AbortedTxn {
            producer_id: 5,
            first_offset: 1,
            last_offset: 4,
            last_stable_offset: 1,
        };
        let mut d = Dump::default();
        dump_txn_index(&t.encode(), &mut d);
        assert_eq!(
            d.out,
            "version: 0 producerId: 5 firstOffset: 1 lastOffset: 4 lastStableOffset: 1\n"
        );
        let mut d = Dump::default();
        dump_txn_index(&t.encode()[..30], &mut d);
        assert!(d.err.contains("damaged"));
    }

    #[test]
    fn sequences_wrap_as_kafkas() {
        let mut h = BatchHeader::parse(&batch(&["a"], 0)).unwrap();
        h.base_sequence = i32::MAX - 1;
        h.last_offset_delta = 3;
        assert_eq!(last_sequence(&h), 1);
        h.base_sequence = -1;
        assert_eq!(last_sequence(&h), -1);
    }
}
