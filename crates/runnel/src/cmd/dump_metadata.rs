//! `runnel dump-log --cluster-metadata-decoder`: kafka-dump-log.sh's decoder of the cluster
//! metadata log, on Runnel's own metadata storage (offline).
//!
//! A node keeps its metadata in its data directory, in one of two forms (see runnel-raft's
//! `storage` and runnel-broker's `metadata_log`):
//! * `metadata-quorum/raft.log`: the Raft log, one checksummed frame per Raft entry (a batch of
//!   metadata records, a leader's blank entry, a membership change, or the marker of a purge),
//!   and `metadata-quorum/snapshot.checkpoint`: the image as the records that rebuild it;
//! * `metadata/metadata.log`: the single-node log, one checksummed line per batch.
//!
//! Every frame prints kafka-dump-log.sh's batch line and every record its `| offset: ...
//! payload: {...}` line, whose payload is Kafka's `{"type":"TOPIC_RECORD","version":N,"data":{...}}`
//! (`kafka_json`: the KRaft record type, schema version and fields of Kafka's schemas). Offsets
//! are the metadata log's offsets, as the node assigns them when it applies a batch
//! (`runnel_raft::storage::dump::place_frames` replays the Raft log, from the snapshot beside it
//! when the log was purged). The batch line has Kafka's fields in Kafka's order: position, size
//! and crc (CRC-32C) are the Runnel frame's, `partitionLeaderEpoch` the Raft term, CreateTime
//! -1 (Runnel stores no append time), the producer fields those of any KRaft batch (-1), and a
//! Raft entry ends with Runnel's `raftIndex: I`. Frames without metadata records are control
//! batches of no records that take no offset (unlike Kafka's, which take one): a new leader's
//! blank entry prints Kafka's `controlType: LEADER_CHANGE(2)`; a membership change, a purge
//! marker and a snapshot's header have no Kafka schema and print `RunnelMembership`,
//! `RunnelPurgedUpTo` and `RunnelSnapshotHeader` with Runnel's JSON (docs/kafka4-parity.md). A
//! batch the image refuses (the node applies none of it) prints offset -1 and why; so does
//! every record of a purged log without its snapshot. A record this build cannot decode prints
//! Kafka's `Error at <offset>, skipping. <why>` as its payload; the frames are checked by the
//! node's own readers (`runnel_raft::storage::dump`, `metadata_log::read_raw_lines`), and the
//! first bad frame ends the dump with Kafka's `Found N invalid bytes at the end of <file>`
//! line, plus a line on stderr when valid frames follow it (damage the node refuses to start
//! on, not a torn tail).
//!
//! A directory argument (a data directory, or its `metadata-quorum` / `metadata` directory)
//! dumps every metadata file found in it.

mod kafka_json;
mod lines;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use runnel_raft::storage::dump::{self, Placed, RawLogRecord, RawPayload, SnapshotDump};
use runnel_raft::types::LogId;
use serde_json::Value;

use super::dump_log::{read_small, Dump, DumpLogArgs};
use lines::{batch_line, control_line, record_line, Batch};

/// The metadata files of `path`: itself if it is a file, else those found in it.
pub fn files_of(path: &Path) -> Vec<PathBuf> {
    if !path.is_dir() {
        return vec![path.to_path_buf()];
    }
    let candidates = [
        "metadata-quorum/snapshot.checkpoint",
        "metadata-quorum/raft.log",
        "metadata/metadata.log",
        "snapshot.checkpoint",
        "raft.log",
        "metadata.log",
    ];
    candidates
        .iter()
        .map(|c| path.join(c))
        .filter(|p| p.is_file())
        .collect()
}

/// Dumps one metadata file by its name.
pub fn dump_file(path: &Path, args: &DumpLogArgs, dump: &mut Dump) -> std::io::Result<()> {
    let _ = writeln!(dump.out, "Dumping {}", path.display());
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if name == "metadata.log" {
        dump_file_log(path, &read_small(path)?, args, dump);
    } else if name.ends_with(".checkpoint") {
        dump_snapshot(&read_small(path)?, args, dump);
    } else if name.ends_with(".log") {
        let snapshot = sibling_snapshot(path);
        dump_raft_log(path, &read_small(path)?, snapshot.as_ref(), args, dump);
    } else {
        let _ = writeln!(dump.err, "Ignoring unknown file {}", path.display());
    }
    Ok(())
}

/// The `snapshot.checkpoint` beside a `raft.log`: where a purged log's offsets continue from.
fn sibling_snapshot(log: &Path) -> Option<SnapshotDump> {
    let bytes = read_small(&log.with_file_name("snapshot.checkpoint")).ok()?;
    dump::read_snapshot(&bytes).ok()
}

fn invalid_tail(
    path: &Path,
    position: u64,
    trailing: u64,
    damaged: bool,
    unit: &'static str,
    number: u64,
    dump: &mut Dump,
) {
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let _ = writeln!(
        dump.out,
        "Found {trailing} invalid bytes at the end of {name}"
    );
    if damaged {
        let err = runnel_raft::storage::damage::Damage {
            offset: position,
            number,
        }
        .in_file(
            path,
            unit,
            "Dumped the valid records before it; a node does not start on this file.",
        );
        let _ = writeln!(dump.err, "{err}");
    }
}

fn push_line(dump: &mut Dump, line: Option<String>) {
    if let Some(line) = line {
        let _ = writeln!(dump.out, "{line}");
    }
}

/// A `raft.log` frame's Raft log id, its control line (a frame without records) and records.
fn frame_parts(body: &RawLogRecord) -> (&LogId, Option<String>, &[Value]) {
    let e = match body {
        RawLogRecord::Purged(id) => {
            let what = format!(
                r#"RunnelPurgedUpTo {{"raftIndex":{},"term":{},"leaderId":{}}}"#,
                id.index, id.leader_id.term, id.leader_id.node_id
            );
            return (id, Some(what), &[]);
        }
        RawLogRecord::Entry(e) => e,
    };
    match &e.payload {
        RawPayload::Blank => {
            let what = format!(
                "controlType: LEADER_CHANGE(2) leaderId: {}",
                e.log_id.leader_id.node_id
            );
            (&e.log_id, Some(what), &[])
        }
        RawPayload::Membership(m) => (&e.log_id, Some(format!("RunnelMembership {m}")), &[]),
        RawPayload::Normal(records) => (&e.log_id, None, records),
    }
}

/// `raft.log`: a batch line per frame (Runnel's `raftIndex` at its end), a line per record.
fn dump_raft_log(
    path: &Path,
    bytes: &[u8],
    snapshot: Option<&SnapshotDump>,
    args: &DumpLogArgs,
    dump: &mut Dump,
) {
    let log = dump::read_log(bytes);
    let placed = dump::place_frames(&log, snapshot);
    let start = placed.first().map_or(0, |p| match p {
        Placed::At(o) => *o,
        Placed::Rejected { next, .. } => *next,
        Placed::Unknown => -1,
    });
    let _ = writeln!(dump.out, "Log starting offset: {start}");
    for (frame, place) in log.frames.iter().zip(&placed) {
        let (log_id, control, records) = frame_parts(&frame.body);
        let (base, rejected) = match place {
            Placed::At(o) if control.is_none() => (*o, None),
            Placed::At(_) => (-1, None),
            Placed::Rejected { reason, .. } => (-1, Some(reason)),
            Placed::Unknown => (-1, None),
        };
        let batch = Batch {
            base,
            count: records.len(),
            epoch: i64::try_from(log_id.leader_id.term).unwrap_or(i64::MAX),
            control: control.is_some(),
            position: frame.position,
            size: frame.size,
            crc: frame.crc,
        };
        let mut line = format!("{} raftIndex: {}", batch_line(&batch), log_id.index);
        if let Some(reason) = rejected {
            let _ = write!(line, " rejected: {reason}");
        }
        let _ = writeln!(dump.out, "{line}");
        if let Some(what) = control {
            push_line(dump, control_line(&what, args));
        }
        for (i, stored) in (0i64..).zip(records) {
            let offset = if base < 0 { -1 } else { base.saturating_add(i) };
            let _ = writeln!(dump.out, "{}", record_line(offset, stored, args));
        }
    }
    if let Some(bad) = log.invalid {
        let number = log.frames.len() as u64 + 1;
        invalid_tail(
            path,
            bad.position,
            bad.trailing,
            bad.damaged,
            "record",
            number,
            dump,
        );
    }
}

/// `snapshot.checkpoint`: Kafka's `Snapshot end offset` line, the metadata frame as a control
/// batch (`RunnelSnapshotHeader`: openraft's snapshot metadata), then the image's records as
/// one batch numbered from 0, as Kafka numbers a snapshot's records.
fn dump_snapshot(bytes: &[u8], args: &DumpLogArgs, dump: &mut Dump) {
    let snap = match dump::read_snapshot(bytes) {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(dump.err, "{e}");
            return;
        }
    };
    let (index, term, leader) = snap.meta.last_log_id.map_or((-1, 0, 0), |l| {
        (
            i64::try_from(l.index).unwrap_or(i64::MAX),
            l.leader_id.term,
            l.leader_id.node_id,
        )
    });
    let _ = writeln!(
        dump.out,
        "Snapshot end offset: {}, epoch: {term}",
        snap.last_offset.saturating_add(1)
    );
    let epoch = i64::try_from(term).unwrap_or(i64::MAX);
    let header = Batch {
        base: -1,
        count: 0,
        epoch,
        control: true,
        position: 0,
        size: snap.frames[0].0,
        crc: snap.frames[0].1,
    };
    let _ = writeln!(dump.out, "{}", batch_line(&header));
    let membership = serde_json::to_string(&snap.meta.last_membership).unwrap_or_default();
    let header_json = format!(
        r#"RunnelSnapshotHeader {{"snapshotId":{},"lastIncludedRaftIndex":{index},"term":{term},"leaderId":{leader},"membership":{membership}}}"#,
        serde_json::to_string(&snap.meta.snapshot_id).unwrap_or_default(),
    );
    push_line(dump, control_line(&header_json, args));
    let data = Batch {
        base: 0,
        count: snap.records.len(),
        epoch,
        control: false,
        position: snap.frames[0].0,
        size: snap.frames[1].0,
        crc: snap.frames[1].1,
    };
    let _ = writeln!(dump.out, "{}", batch_line(&data));
    for (offset, stored) in (0i64..).zip(&snap.records) {
        let _ = writeln!(dump.out, "{}", record_line(offset, stored, args));
    }
}

/// The single-node `metadata.log`: a batch line per line of the file, its records numbered by
/// offset as the broker replays them (no Raft term: partitionLeaderEpoch -1).
fn dump_file_log(path: &Path, bytes: &[u8], args: &DumpLogArgs, dump: &mut Dump) {
    let _ = writeln!(dump.out, "Log starting offset: 0");
    let (lines, invalid) = runnel_broker::metadata_log::read_raw_lines(bytes);
    let mut offset: i64 = 0;
    for line in &lines {
        let batch = Batch {
            base: offset,
            count: line.records.len(),
            epoch: -1,
            control: false,
            position: line.position,
            size: line.size,
            crc: line.crc,
        };
        let _ = writeln!(dump.out, "{}", batch_line(&batch));
        for stored in &line.records {
            let _ = writeln!(dump.out, "{}", record_line(offset, stored, args));
            offset = offset.saturating_add(1);
        }
    }
    if let Some((position, damaged)) = invalid {
        let trailing = (bytes.len() as u64).saturating_sub(position);
        let number = lines.len() as u64 + 1;
        invalid_tail(path, position, trailing, damaged, "line", number, dump);
    }
}
