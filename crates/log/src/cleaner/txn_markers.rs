//! Which transaction markers (and `.txnindex` entries) one cleaning pass may remove: Kafka's
//! `CleanedTransactionMetadata`. The pass reads the cleanable part of the log in offset
//! order; for every producer it remembers whether it saw data of the transaction a marker
//! ends:
//!
//! * a COMMIT marker is removable when no data of its transaction was read in this pass
//!   (compaction removed it all in earlier passes);
//! * an ABORT marker likewise; while aborted data remains (the pass drops it now) the marker
//!   and its index entry stay, so a read_committed reader of that data still learns it was
//!   aborted. An entry whose data is gone is not written to the cleaned segment's index
//!   (Kafka's cleaned `.txnindex` holds only aborted transactions with data left).
//!
//! A removable marker is not dropped at once: as a tombstone, it first gets a delete horizon
//! (`delete.retention.ms` from now, KIP-534's batch attribute) and goes in a later pass after
//! that, so a consumer that read the data before the cleaning still sees the marker
//! ([`super::rewrite::filter_marker`]). Nothing at or above the first open transaction is
//! cleanable, so every marker of the pass ends a complete transaction.

use std::collections::{HashMap, HashSet};

use crate::batch::BatchHeader;
use crate::control::Marker;
use crate::txn::AbortedTxn;

/// One aborted transaction the pass has reached (its first offset is behind it).
#[derive(Debug, Clone, Copy)]
struct OngoingAbort {
    /// The marker's offset (the index entry's `last_offset`).
    marker_offset: i64,
    /// Whether a data batch of it was read in this pass.
    data_seen: bool,
}

/// The pass's view of transactions, fed every batch below the clean-up-to point in order.
#[derive(Debug, Default)]
pub(crate) struct TxnTracker {
    /// Aborted transactions not reached yet, by first offset, the next one last.
    pending: Vec<AbortedTxn>,
    aborted: HashMap<i64, OngoingAbort>,
    /// Producers with committed (not aborted) data read since their last marker.
    committed: HashSet<i64>,
    /// Index entries (producer, marker offset) whose data is gone.
    empty: HashSet<(i64, i64)>,
}

impl TxnTracker {
    /// `aborted`: the `.txnindex` entries of the pass's range.
    pub(crate) fn new(aborted: &[AbortedTxn]) -> Self {
        let mut pending = aborted.to_vec();
        pending.sort_by_key(|t| std::cmp::Reverse(t.first_offset));
        TxnTracker {
            pending,
            ..TxnTracker::default()
        }
    }

    /// Kafka's `consumeAbortedTxnsUpTo`: transactions starting at or before `offset` begin.
    fn reach(&mut self, offset: i64) {
        while self
            .pending
            .last()
            .is_some_and(|t| t.first_offset <= offset)
        {
            if let Some(t) = self.pending.pop() {
                self.aborted.insert(
                    t.producer_id,
                    OngoingAbort {
                        marker_offset: t.last_offset,
                        data_seen: false,
                    },
                );
            }
        }
    }

    /// A data batch (read before compaction decides its records).
    pub(crate) fn on_data(&mut self, h: &BatchHeader) {
        self.reach(h.last_offset());
        if !h.is_transactional() {
            return;
        }
        match self.aborted.get_mut(&h.producer_id) {
            Some(a) => a.data_seen = true,
            None => {
                self.committed.insert(h.producer_id);
            }
        }
    }

    /// A control batch; `marker` is what it carries (`None`: not a COMMIT / ABORT Kafka
    /// knows). Whether it may be removed: no data of the transaction it ends was read.
    pub(crate) fn on_control(&mut self, h: &BatchHeader, marker: Option<Marker>) -> bool {
        self.reach(h.last_offset());
        if h.record_count <= 0 {
            // An empty control batch ends nothing.
            return true;
        }
        let Some(marker) = marker else {
            return false;
        };
        if marker.commit {
            !self.committed.remove(&h.producer_id)
        } else {
            match self.aborted.remove(&h.producer_id) {
                Some(a) if a.data_seen => false,
                Some(a) => {
                    self.empty.insert((h.producer_id, a.marker_offset));
                    true
                }
                None => true,
            }
        }
    }

    /// Whether `entry` stays in the cleaned segment's `.txnindex`: unless the pass reached its
    /// ABORT marker without finding any of its data.
    pub(crate) fn keeps_entry(&self, entry: &AbortedTxn) -> bool {
        !self.empty.contains(&(entry.producer_id, entry.last_offset))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(pid: i64, offset: i64, transactional: bool, control: bool) -> BatchHeader {
        let attributes = i16::from(transactional) << 4 | i16::from(control) << 5;
        BatchHeader {
            base_offset: offset,
            batch_length: 0,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes,
            last_offset_delta: 0,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: pid,
            producer_epoch: 0,
            base_sequence: 0,
            record_count: 1,
        }
    }

    fn marker(pid: i64, commit: bool) -> Option<Marker> {
        Some(Marker {
            producer_id: pid,
            producer_epoch: 0,
            commit,
            coordinator_epoch: 0,
        })
    }

    fn abort(pid: i64, first: i64, last: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id: pid,
            first_offset: first,
            last_offset: last,
            last_stable_offset: last,
        }
    }

    #[test]
    fn a_commit_marker_is_removable_once_its_data_is_gone() {
        let mut t = TxnTracker::new(&[]);
        t.on_data(&header(1, 0, true, false));
        assert!(
            !t.on_control(&header(1, 1, true, true), marker(1, true)),
            "data read"
        );
        // The next transaction of producer 1 lost all its data to compaction already.
        assert!(t.on_control(&header(1, 5, true, true), marker(1, true)));
        // A non-transactional batch of the producer is not transaction data.
        t.on_data(&header(1, 6, false, false));
        assert!(t.on_control(&header(1, 7, true, true), marker(1, true)));
    }

    #[test]
    fn an_abort_marker_and_its_entry_stay_while_aborted_data_remains() {
        let live = abort(2, 3, 5);
        let emptied = abort(2, 8, 9);
        let mut t = TxnTracker::new(&[emptied, live]);
        t.on_data(&header(3, 0, true, false)); // another producer's committed data
        t.on_data(&header(2, 3, true, false));
        assert!(!t.on_control(&header(2, 5, true, true), marker(2, false)));
        assert!(t.keeps_entry(&live));
        // Producer 2's second aborted transaction has no data left below its marker.
        assert!(t.on_control(&header(2, 9, true, true), marker(2, false)));
        assert!(!t.keeps_entry(&emptied), "its index entry goes");
        assert!(!t.on_control(&header(3, 10, true, true), marker(3, true)));
        // An ABORT marker the index does not know has nothing left to hide.
        assert!(t.on_control(&header(4, 11, true, true), marker(4, false)));
    }

    #[test]
    fn unknown_control_records_stay_and_empty_control_batches_go() {
        let mut t = TxnTracker::new(&[]);
        assert!(!t.on_control(&header(1, 0, true, true), None));
        let mut empty = header(1, 1, true, true);
        empty.record_count = 0;
        assert!(t.on_control(&empty, None));
    }

    fn rules<'a>(
        map: &'a super::super::offset_map::OffsetMap,
        aborted: &'a crate::txn::AbortedBatches,
        now_ms: i64,
    ) -> super::super::rewrite::FilterRules<'a> {
        super::super::rewrite::FilterRules {
            map,
            aborted,
            now_ms,
            delete_retention_ms: 1000,
        }
    }

    #[test]
    fn a_removable_marker_gets_a_delete_horizon_first_and_goes_after_it() {
        use super::super::rewrite::{filter_marker, Verdict};
        let map = super::super::offset_map::OffsetMap::new(16);
        let aborted = crate::txn::AbortedBatches::default();
        let m = marker(7, true).unwrap();
        let bytes = crate::control::marker_batch(&m, 500);
        let h = BatchHeader::parse(&bytes).unwrap();

        let kept = filter_marker(&h, &bytes, false, rules(&map, &aborted, 10_000));
        assert!(matches!(kept.verdict, Verdict::Verbatim) && kept.tombstone_horizon.is_none());

        let first = filter_marker(&h, &bytes, true, rules(&map, &aborted, 10_000));
        assert_eq!(first.tombstone_horizon, Some(11_000));
        let Verdict::Rebuilt(stamped) = first.verdict else {
            panic!("the first cleaning stamps the horizon: {:?}", first.verdict)
        };
        let sh = BatchHeader::parse(&stamped).unwrap();
        assert_ne!(sh.attributes & super::super::rewrite::DELETE_HORIZON_BIT, 0);
        assert_eq!(
            (sh.base_timestamp, sh.base_offset, sh.producer_id),
            (11_000, 0, 7)
        );
        assert!(sh.is_control() && sh.is_transactional());
        assert_eq!(
            crate::control::parse_marker(&sh, &stamped),
            Some(m),
            "still the same marker"
        );

        let early = filter_marker(&sh, &stamped, true, rules(&map, &aborted, 10_999));
        assert!(matches!(early.verdict, Verdict::Verbatim));
        assert_eq!(
            early.tombstone_horizon,
            Some(11_000),
            "cleaned again when due"
        );
        let due = filter_marker(&sh, &stamped, true, rules(&map, &aborted, 11_000));
        assert!(matches!(due.verdict, Verdict::Drop));
        // Stamped, but its transaction's data is back in view (not removable): kept.
        let held = filter_marker(&sh, &stamped, false, rules(&map, &aborted, 20_000));
        assert!(matches!(held.verdict, Verdict::Verbatim));
    }
}
