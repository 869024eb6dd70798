//! Pass 1 of a cleaning: key -> offset of the latest record with that key in the dirty part.
//!
//! Like Kafka's `SkimpyOffsetMap` the map stores a hash of the key, not the key, so its memory
//! is bounded by the entry count. The hash is 128 bits from two SipHash instances with random
//! keys per map: a collision (which would drop the older key's latest record) is both
//! astronomically unlikely and impossible for a producer to engineer, unlike a fixed hash.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;

/// Default bound on distinct keys per cleaning pass (~48 bytes each in the hash map).
pub(crate) const DEFAULT_MAX_ENTRIES: usize = 4 << 20;

#[derive(Debug)]
pub(crate) struct OffsetMap {
    hashers: (RandomState, RandomState),
    map: HashMap<u128, i64>,
    max_entries: usize,
}

impl OffsetMap {
    pub(crate) fn new(max_entries: usize) -> Self {
        OffsetMap {
            hashers: (RandomState::new(), RandomState::new()),
            map: HashMap::new(),
            max_entries: max_entries.max(1),
        }
    }

    fn hash(&self, key: &[u8]) -> u128 {
        let hi = self.hashers.0.hash_one(key);
        let lo = self.hashers.1.hash_one(key);
        (u128::from(hi) << 64) | u128::from(lo)
    }

    /// Records that `key`'s latest record so far is at `offset` (offsets are fed in order).
    pub(crate) fn put(&mut self, key: &[u8], offset: i64) {
        let h = self.hash(key);
        self.map.insert(h, offset);
    }

    /// The latest offset recorded for `key`.
    pub(crate) fn get(&self, key: &[u8]) -> Option<i64> {
        self.map.get(&self.hash(key)).copied()
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether `more` new keys could still be added without exceeding the bound.
    pub(crate) fn has_room_for(&self, more: usize) -> bool {
        self.map.len().saturating_add(more) <= self.max_entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latest_offset_wins_and_room_is_bounded() {
        let mut m = OffsetMap::new(2);
        m.put(b"a", 1);
        m.put(b"b", 2);
        m.put(b"a", 5);
        assert_eq!(
            (m.get(b"a"), m.get(b"b"), m.get(b"c")),
            (Some(5), Some(2), None)
        );
        assert_eq!(m.len(), 2);
        assert!(m.has_room_for(0));
        assert!(!m.has_room_for(1));
    }
}
