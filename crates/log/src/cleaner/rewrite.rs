//! Pass 2 for one batch: which records survive, and the bytes of the batch that holds them.
//!
//! A record survives if it has a key, no later record with that key was mapped in pass 1, and
//! it is not a tombstone whose delete horizon has passed. A batch whose records all survive
//! (and needs no new delete horizon) is copied byte for byte; otherwise it is rebuilt the way
//! Kafka's `MemoryRecords.filterTo` does: same base offset (offset deltas, hence sequences,
//! stay valid), partition leader epoch, producer id/epoch, base sequence, compression and
//! timestamp type; last offset delta, record count, max timestamp (CreateTime) and CRC follow
//! the kept records. Tombstones kept for the first time start their `delete.retention.ms`
//! clock: the batch gets the delete-horizon attribute (bit 6, KIP-534) and `baseTimestamp` =
//! horizon, with each record's timestamp delta re-based so record timestamps do not change.

use crate::batch::{BatchHeader, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD};

use super::codec;
use super::offset_map::OffsetMap;
use super::records::{parse_records, RawRecord};

pub(crate) const DELETE_HORIZON_BIT: i16 = 1 << 6;

/// What the cleaner writes for one input batch.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Copy the input bytes unchanged.
    Verbatim,
    /// Nothing survives: write nothing (the offsets become a gap).
    Drop,
    /// A new batch with the surviving records.
    Rebuilt(Vec<u8>),
}

#[derive(Debug)]
pub(crate) struct Filtered {
    pub(crate) verdict: Verdict,
    pub(crate) records_removed: u64,
    /// Delete horizon of the output batch if it still holds tombstones (when to clean again).
    pub(crate) tombstone_horizon: Option<i64>,
}

/// The inputs of the keep/drop decision.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FilterRules<'a> {
    pub(crate) map: &'a OffsetMap,
    pub(crate) aborted: &'a crate::txn::AbortedBatches,
    pub(crate) now_ms: i64,
    pub(crate) delete_retention_ms: i64,
}

/// The decompressed records of a batch, or why they could not be read.
pub(crate) fn batch_records(h: &BatchHeader, bytes: &[u8]) -> Result<Vec<u8>, String> {
    let area = bytes
        .get(RECORD_BATCH_OVERHEAD..)
        .ok_or_else(|| "batch shorter than its header".to_string())?;
    codec::decompress(h.compression(), area)
}

/// Decides the fate of one transaction marker (a control batch) that the pass's
/// [`super::txn_markers::TxnTracker`] found `removable` or not. A removable marker is a
/// tombstone of its transaction: the first pass gives it a delete horizon (`now +
/// delete.retention.ms`, as [`filter_batch`] does for tombstones), a pass after the horizon
/// drops it. Not removable, or undecodable: kept verbatim.
pub(crate) fn filter_marker(
    h: &BatchHeader,
    bytes: &[u8],
    removable: bool,
    rules: FilterRules<'_>,
) -> Filtered {
    let horizon = (h.attributes & DELETE_HORIZON_BIT != 0).then_some(h.base_timestamp);
    let keep = |horizon| Filtered {
        verdict: Verdict::Verbatim,
        records_removed: 0,
        tombstone_horizon: horizon,
    };
    if !removable {
        return keep(None);
    }
    match horizon {
        Some(t) if t <= rules.now_ms => {
            return Filtered {
                verdict: Verdict::Drop,
                records_removed: u64::try_from(h.record_count.max(0)).unwrap_or(0),
                tombstone_horizon: None,
            }
        }
        Some(t) => return keep(Some(t)),
        None => {}
    }
    let records = batch_records(h, bytes).and_then(|data| {
        let records = parse_records(&data, h.record_count, h.base_offset, h.base_timestamp)?;
        let kept: Vec<&RawRecord<'_>> = records.iter().collect();
        if kept.is_empty() {
            return Err("no records".to_string());
        }
        let new_horizon = rules
            .now_ms
            .saturating_add(rules.delete_retention_ms.max(0));
        rebuild(h, &kept, Some(new_horizon)).map(|b| (b, new_horizon))
    });
    match records {
        Ok((b, new_horizon)) => Filtered {
            verdict: Verdict::Rebuilt(b),
            records_removed: 0,
            tombstone_horizon: Some(new_horizon),
        },
        Err(why) => {
            tracing::warn!(base_offset = h.base_offset, %why, "cleaner keeps a marker it could not re-encode");
            keep(None)
        }
    }
}

/// Decides the fate of one data batch (`bytes` is the whole batch, CRC already verified).
/// Control batches go to [`filter_marker`] and are kept verbatim here; batches whose records
/// cannot be decoded are kept verbatim too: keeping too much is always safe, dropping on a
/// guess is not. A batch of an aborted transaction is dropped whole.
pub(crate) fn filter_batch(h: &BatchHeader, bytes: &[u8], rules: FilterRules<'_>) -> Filtered {
    let verbatim = |horizon| Filtered {
        verdict: Verdict::Verbatim,
        records_removed: 0,
        tombstone_horizon: horizon,
    };
    if h.is_control() {
        return verbatim(None);
    }
    if super::plan::aborted(rules.aborted, h) {
        // Aborted data is never read by read_committed consumers and holds no key's value.
        return Filtered {
            verdict: Verdict::Drop,
            records_removed: u64::try_from(h.record_count.max(0)).unwrap_or(0),
            tombstone_horizon: None,
        };
    }
    let data = match batch_records(h, bytes) {
        Ok(d) => d,
        Err(why) => {
            tracing::warn!(base_offset = h.base_offset, %why, "cleaner keeps an undecodable batch");
            return verbatim(None);
        }
    };
    let records = match parse_records(&data, h.record_count, h.base_offset, h.base_timestamp) {
        Ok(r) => r,
        Err(why) => {
            tracing::warn!(base_offset = h.base_offset, %why, "cleaner keeps a malformed batch");
            return verbatim(None);
        }
    };
    let horizon = (h.attributes & DELETE_HORIZON_BIT != 0).then_some(h.base_timestamp);
    let kept: Vec<&RawRecord<'_>> = records
        .iter()
        .filter(|r| {
            let Some(key) = r.key else { return false };
            let latest = rules.map.get(key).is_none_or(|o| r.offset >= o);
            let expired = r.null_value && horizon.is_some_and(|t| t <= rules.now_ms);
            latest && !expired
        })
        .collect();
    let records_removed = (records.len() - kept.len()) as u64;
    if kept.is_empty() {
        return Filtered {
            verdict: Verdict::Drop,
            records_removed,
            tombstone_horizon: None,
        };
    }
    let has_tombstones = kept.iter().any(|r| r.null_value);
    let new_horizon = (has_tombstones && horizon.is_none()).then(|| {
        rules
            .now_ms
            .saturating_add(rules.delete_retention_ms.max(0))
    });
    let tombstone_horizon = if has_tombstones {
        horizon.or(new_horizon)
    } else {
        None
    };
    if records_removed == 0 && new_horizon.is_none() {
        return verbatim(tombstone_horizon);
    }
    match rebuild(h, &kept, new_horizon) {
        Ok(b) => Filtered {
            verdict: Verdict::Rebuilt(b),
            records_removed,
            tombstone_horizon,
        },
        Err(why) => {
            tracing::warn!(base_offset = h.base_offset, %why, "cleaner keeps a batch it could not re-encode");
            verbatim(horizon.filter(|_| records.iter().any(|r| r.null_value)))
        }
    }
}

/// Encodes `kept` (non-empty, in offset order) as a batch modelled on `h`.
fn rebuild(
    h: &BatchHeader,
    kept: &[&RawRecord<'_>],
    new_horizon: Option<i64>,
) -> Result<Vec<u8>, String> {
    let base_timestamp = new_horizon.unwrap_or(h.base_timestamp);
    let mut area = Vec::new();
    for r in kept {
        if new_horizon.is_none() {
            area.extend_from_slice(r.raw());
        } else {
            r.encode_with_base_timestamp(base_timestamp, &mut area);
        }
    }
    let area = codec::compress(h.compression(), &area)?;
    let last = kept[kept.len() - 1];
    let last_offset_delta = i32::try_from(last.offset - h.base_offset)
        .map_err(|_| "offset delta out of range".to_string())?;
    let max_timestamp = if h.timestamp_type_is_log_append() {
        h.max_timestamp
    } else {
        kept.iter()
            .map(|r| r.timestamp)
            .max()
            .unwrap_or(h.max_timestamp)
    };
    let attributes = h.attributes
        | if new_horizon.is_some() {
            DELETE_HORIZON_BIT
        } else {
            0
        };
    let total = RECORD_BATCH_OVERHEAD + area.len();
    let batch_length =
        i32::try_from(total - LOG_OVERHEAD).map_err(|_| "rebuilt batch too large".to_string())?;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&h.base_offset.to_be_bytes());
    out.extend_from_slice(&batch_length.to_be_bytes());
    out.extend_from_slice(&h.partition_leader_epoch.to_be_bytes());
    out.push(2); // magic
    out.extend_from_slice(&[0; 4]); // CRC, filled below
    out.extend_from_slice(&attributes.to_be_bytes());
    out.extend_from_slice(&last_offset_delta.to_be_bytes());
    out.extend_from_slice(&base_timestamp.to_be_bytes());
    out.extend_from_slice(&max_timestamp.to_be_bytes());
    out.extend_from_slice(&h.producer_id.to_be_bytes());
    out.extend_from_slice(&h.producer_epoch.to_be_bytes());
    out.extend_from_slice(&h.base_sequence.to_be_bytes());
    out.extend_from_slice(&(kept.len() as i32).to_be_bytes());
    out.extend_from_slice(&area);
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    Ok(out)
}
