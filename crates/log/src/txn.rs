//! Transactions on a partition's log (KIP-98), as pure computations: the last stable offset
//! (LSO), the aborted transactions a read_committed fetch must be told about, and the
//! `.txnindex` entry format (spec J.8).
//!
//! An aborted transaction spans `first_offset..=last_offset` (its first data batch to its
//! ABORT marker) of one producer; `last_stable_offset` is the partition's LSO right after the
//! marker was written. A `.txnindex` file holds 34-byte big-endian entries: `version: int16
//! = 0`, `producerId: int64`, `firstOffset: int64`, `lastOffset: int64`,
//! `lastStableOffset: int64`, in marker order.

use std::collections::BTreeMap;

/// Size of one `.txnindex` entry.
pub const TXN_INDEX_ENTRY_SIZE: usize = 34;
const TXN_INDEX_VERSION: i16 = 0;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    /// The entry as stored in a `.txnindex` file.
    pub fn encode(&self) -> [u8; TXN_INDEX_ENTRY_SIZE] {
        let mut b = [0u8; TXN_INDEX_ENTRY_SIZE];
        b[0..2].copy_from_slice(&TXN_INDEX_VERSION.to_be_bytes());
        b[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        b[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        b[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        b[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        b
    }
}

/// The entries of a `.txnindex` file. `None` if it is not a whole number of version-0
/// entries (a torn write, or not Kafka's format): the caller rebuilds it from the log.
pub fn decode_txn_index(bytes: &[u8]) -> Option<Vec<AbortedTxn>> {
    if bytes.len() % TXN_INDEX_ENTRY_SIZE != 0 {
        return None;
    }
    let i64_at = |e: &[u8], at: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&e[at..at + 8]);
        i64::from_be_bytes(a)
    };
    bytes
        .chunks_exact(TXN_INDEX_ENTRY_SIZE)
        .map(|e| {
            (i16::from_be_bytes([e[0], e[1]]) == TXN_INDEX_VERSION).then(|| AbortedTxn {
                producer_id: i64_at(e, 2),
                first_offset: i64_at(e, 10),
                last_offset: i64_at(e, 18),
                last_stable_offset: i64_at(e, 26),
            })
        })
        .collect()
}

/// The LSO: the first offset of the earliest ongoing transaction, but never past the high
/// watermark (Kafka's `firstUnstableOffset` capped by the HW).
pub fn last_stable_offset(first_unstable_offset: Option<i64>, high_watermark: i64) -> i64 {
    first_unstable_offset.map_or(high_watermark, |first| first.min(high_watermark))
}

/// The aborted transactions a read of `from..upper` overlaps (Kafka's
/// `collectAbortedTxns`: `lastOffset >= from && firstOffset < upper`), in marker order.
pub fn aborted_in_range(aborted: &[AbortedTxn], from: i64, upper: i64) -> Vec<AbortedTxn> {
    aborted
        .iter()
        .filter(|t| t.last_offset >= from && t.first_offset < upper)
        .copied()
        .collect()
}

/// The open transactions of a partition: producer id -> first offset, and the same ordered
/// by first offset (the earliest is the first unstable offset).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct OngoingTxns {
    by_producer: BTreeMap<i64, i64>,
    by_first_offset: BTreeMap<i64, i64>,
}

impl OngoingTxns {
    /// A transactional data batch of `producer_id` at `offset`: starts its transaction if none
    /// is open.
    pub fn on_data(&mut self, producer_id: i64, offset: i64) {
        if let std::collections::btree_map::Entry::Vacant(e) = self.by_producer.entry(producer_id) {
            e.insert(offset);
            self.by_first_offset.insert(offset, producer_id);
        }
    }

    /// A marker of `producer_id` at `offset`: ends its transaction. Returns the aborted
    /// transaction to index when `commit` is false and a transaction was open, with the LSO
    /// once it is closed (the next open transaction's first offset, else `offset + 1`).
    pub fn on_marker(&mut self, producer_id: i64, offset: i64, commit: bool) -> Option<AbortedTxn> {
        let first_offset = self.by_producer.remove(&producer_id)?;
        self.by_first_offset.remove(&first_offset);
        let last_stable_offset = self.first_unstable_offset().unwrap_or(offset + 1);
        (!commit).then_some(AbortedTxn {
            producer_id,
            first_offset,
            last_offset: offset,
            last_stable_offset,
        })
    }

    /// The first offset of the producer's open transaction.
    pub fn first_offset_of(&self, producer_id: i64) -> Option<i64> {
        self.by_producer.get(&producer_id).copied()
    }

    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.by_first_offset.keys().next().copied()
    }

    /// Forgets a producer (its state expired); its open transaction no longer holds the LSO.
    pub fn remove(&mut self, producer_id: i64) {
        if let Some(first) = self.by_producer.remove(&producer_id) {
            self.by_first_offset.remove(&first);
        }
    }

    pub fn len(&self) -> usize {
        self.by_producer.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_producer.is_empty()
    }
}

/// Which transactional batches belong to an aborted transaction, for the log cleaner (Kafka's
/// `LogCleaner` drops aborted data: it never wins a key, and is removed). Built from the
/// `.txnindex` entries; a batch of producer `p` at offset `o` is aborted when one of `p`'s
/// aborted transactions spans `o` (a producer's transactions never overlap).
#[derive(Debug, Default, Clone)]
pub struct AbortedBatches {
    by_producer: std::collections::HashMap<i64, Vec<(i64, i64)>>,
}

impl AbortedBatches {
    pub fn new(aborted: &[AbortedTxn]) -> Self {
        let mut by_producer: std::collections::HashMap<i64, Vec<(i64, i64)>> = Default::default();
        for a in aborted {
            by_producer
                .entry(a.producer_id)
                .or_default()
                .push((a.first_offset, a.last_offset));
        }
        for ranges in by_producer.values_mut() {
            ranges.sort_unstable();
        }
        AbortedBatches { by_producer }
    }

    /// Whether the transactional batch of `producer_id` starting at `offset` was aborted.
    pub fn contains(&self, producer_id: i64, offset: i64) -> bool {
        let Some(ranges) = self.by_producer.get(&producer_id) else {
            return false;
        };
        let after = ranges.partition_point(|&(first, _)| first <= offset);
        after > 0 && offset <= ranges[after - 1].1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn index_entries_round_trip_and_torn_files_are_refused() {
        let t = AbortedTxn {
            producer_id: 9,
            first_offset: 10,
            last_offset: 20,
            last_stable_offset: 21,
        };
        let mut file = t.encode().to_vec();
        file.extend_from_slice(&t.encode());
        assert_eq!(decode_txn_index(&file), Some(vec![t, t]));
        assert_eq!(decode_txn_index(&file[..40]), None);
        file[0] = 1;
        assert_eq!(decode_txn_index(&file), None);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Data(i64),
        Marker(i64, bool),
    }

    fn ops() -> impl Strategy<Value = Vec<Op>> {
        prop::collection::vec(
            prop_oneof![
                (0i64..4).prop_map(Op::Data),
                (0i64..4, any::<bool>()).prop_map(|(p, c)| Op::Marker(p, c)),
            ],
            0..60,
        )
    }

    /// A naive model: each offset's producer and whether it is a marker; a record is stable
    /// when its transaction ended, and aborted when that end was an ABORT.
    fn replay(ops: &[Op]) -> (OngoingTxns, Vec<AbortedTxn>) {
        let mut ongoing = OngoingTxns::default();
        let mut aborted = Vec::new();
        for (offset, op) in ops.iter().enumerate() {
            match *op {
                Op::Data(p) => ongoing.on_data(p, offset as i64),
                Op::Marker(p, commit) => {
                    aborted.extend(ongoing.on_marker(p, offset as i64, commit))
                }
            }
        }
        (ongoing, aborted)
    }

    proptest! {
        /// Every offset below the LSO belongs to a finished transaction (or is a marker),
        /// and the LSO itself (when below the HW) is the first record of an open one.
        #[test]
        fn lso_is_the_first_offset_no_open_transaction_covers(ops in ops(), hw_cut in 0usize..70) {
            let (ongoing, _) = replay(&ops);
            let hw = hw_cut.min(ops.len()) as i64;
            let lso = last_stable_offset(ongoing.first_unstable_offset(), hw);
            prop_assert!(lso <= hw);
            for (offset, op) in ops.iter().enumerate().take(lso as usize) {
                if let Op::Data(p) = op {
                    // Open transactions start at or after the LSO.
                    prop_assert!(ongoing.first_offset_of(*p).is_none_or(|f| f > offset as i64 || f >= lso));
                }
            }
            if lso < hw {
                prop_assert!(matches!(ops[lso as usize], Op::Data(_)));
            }
        }

        /// Aborted ranges: each starts at its producer's first data record after its previous
        /// marker, ends at an ABORT marker of that producer, and a record is inside some
        /// aborted range of its producer exactly when its transaction ended with ABORT.
        #[test]
        fn aborted_ranges_cover_exactly_the_aborted_records(ops in ops()) {
            let (_, aborted) = replay(&ops);
            for t in &aborted {
                prop_assert!(matches!(ops[t.last_offset as usize], Op::Marker(p, false) if p == t.producer_id));
                prop_assert!(matches!(ops[t.first_offset as usize], Op::Data(p) if p == t.producer_id));
                // An earlier open transaction of another producer still holds the LSO back.
                prop_assert!(t.last_stable_offset <= t.last_offset + 1);
            }
            for (offset, op) in ops.iter().enumerate() {
                let Op::Data(p) = *op else { continue };
                let offset = offset as i64;
                let end = ops.iter().enumerate().skip(offset as usize)
                    .find_map(|(i, o)| matches!(o, Op::Marker(q, _) if *q == p).then_some(i));
                let was_aborted = end.is_some_and(|i| matches!(ops[i], Op::Marker(_, false)));
                let in_range = aborted.iter().any(|t| t.producer_id == p && t.first_offset <= offset && offset <= t.last_offset);
                prop_assert_eq!(was_aborted, in_range);
            }
        }

        /// A fetch gets exactly the aborted transactions overlapping its range.
        #[test]
        fn fetch_range_gets_the_overlapping_aborted(ops in ops(), from in 0i64..70, len in 0i64..70) {
            let (_, aborted) = replay(&ops);
            let got = aborted_in_range(&aborted, from, from + len);
            for t in &aborted {
                let overlaps = t.first_offset < from + len && t.last_offset >= from;
                prop_assert_eq!(got.contains(t), overlaps);
            }
        }
    }

    #[test]
    fn aborted_batches_are_those_inside_an_aborted_range_of_their_producer() {
        let a = |producer_id, first_offset, last_offset| AbortedTxn {
            producer_id,
            first_offset,
            last_offset,
            last_stable_offset: 0,
        };
        let b = AbortedBatches::new(&[a(1, 10, 20), a(1, 30, 31), a(2, 0, 5)]);
        for (pid, offset, aborted) in [
            (1, 9, false),
            (1, 10, true),
            (1, 20, true),
            (1, 21, false),
            (1, 30, true),
            (1, 32, false),
            (2, 3, true),
            (2, 10, false),
            (3, 10, false),
        ] {
            assert_eq!(
                b.contains(pid, offset),
                aborted,
                "producer {pid} offset {offset}"
            );
        }
    }
}
