//! A replica's leader-epoch cache (the `leader-epoch-checkpoint` file's content) and the
//! OffsetForLeaderEpoch lookup (spec E.5), with Kafka's `LeaderEpochFileCache` semantics.
//!
//! Offsets alone cannot tell whether two replicas' logs agree: after an unclean or quick
//! failover, both may have offset 150 but written by different leaders. The epoch cache
//! records where each leader's writes began, so two replicas can find the last offset at
//! which their histories are the same.

/// `(epoch, start offset)`: the first offset written in that leader epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

/// The answer to OffsetForLeaderEpoch: the largest known epoch `<=` the requested one and
/// where it ended, or [`EpochEndOffset::UNDEFINED`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EpochEndOffset {
    pub epoch: i32,
    pub end_offset: i64,
}

impl EpochEndOffset {
    /// `(-1, -1)`: the epoch is unknown (Kafka's UNDEFINED_EPOCH / UNDEFINED_EPOCH_OFFSET).
    pub const UNDEFINED: EpochEndOffset = EpochEndOffset {
        epoch: -1,
        end_offset: -1,
    };

    pub fn is_undefined_offset(&self) -> bool {
        self.end_offset == -1
    }
}

/// Entries with strictly increasing epochs and strictly increasing start offsets.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeaderEpochCache {
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a cache from checkpointed entries by assigning them in order, so entries that
    /// break monotonicity are dropped exactly as Kafka would have.
    pub fn from_entries(entries: impl IntoIterator<Item = EpochEntry>) -> Self {
        let mut cache = Self::new();
        for e in entries {
            cache.assign(e.epoch, e.start_offset);
        }
        cache
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub fn latest_entry(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    /// Records that `epoch` starts at `start_offset` (a new leader at its LEO, or a follower
    /// appending the first batch of an epoch). Kafka's `assign`: nothing changes if it is the
    /// latest epoch already at or before that offset; otherwise every tail entry with an epoch
    /// `>=` or a start offset `>=` the new one is removed first, keeping the cache monotonic
    /// (an epoch in which a leader wrote nothing is thus superseded by the next one).
    /// Negative values are ignored (batches without an epoch). Returns whether the cache
    /// changed (the log persists its checkpoint only then).
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> bool {
        if epoch < 0 || start_offset < 0 {
            return false;
        }
        if let Some(last) = self.entries.last() {
            if last.epoch == epoch && start_offset >= last.start_offset {
                return false;
            }
        }
        while let Some(last) = self.entries.last() {
            if last.epoch >= epoch || last.start_offset >= start_offset {
                self.entries.pop();
            } else {
                break;
            }
        }
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        true
    }

    /// The log was truncated to `end_offset`: epochs that started at or after it are gone.
    /// Returns whether the cache changed.
    pub fn truncate_from_end(&mut self, end_offset: i64) -> bool {
        if end_offset < 0 {
            return false;
        }
        let before = self.entries.len();
        self.entries.retain(|e| e.start_offset < end_offset);
        self.entries.len() != before
    }

    /// The log start moved to `start_offset` (retention, DeleteRecords): epochs starting at
    /// or before it are dropped, the last of them kept with its start moved up, so the epoch
    /// of the first remaining record is still known (Kafka's `truncateFromStart`). Returns
    /// whether the cache changed.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> bool {
        let removed = self
            .entries
            .iter()
            .take_while(|e| e.start_offset <= start_offset)
            .count();
        if removed == 0 {
            return false;
        }
        let kept = EpochEntry {
            epoch: self.entries[removed - 1].epoch,
            start_offset,
        };
        if removed == 1 && self.entries[0] == kept {
            return false;
        }
        self.entries.drain(..removed);
        self.entries.insert(0, kept);
        true
    }

    /// OffsetForLeaderEpoch on this replica whose LEO is `log_end_offset` (Kafka's
    /// `endOffsetFor`):
    ///
    /// * the latest epoch: `(epoch, LEO)`, it is still being written;
    /// * otherwise the largest known epoch `E' <= requested`, ending where the next epoch
    ///   starts;
    /// * older than every known epoch: `(requested, start of the first epoch)`. The spec's
    ///   summary says UNDEFINED here; Kafka answers this way so a follower truncates to the
    ///   start of the leader's history instead of falling back to its HW;
    /// * newer than every known epoch, -1, or an empty cache: UNDEFINED.
    pub fn end_offset_for(&self, requested_epoch: i32, log_end_offset: i64) -> EpochEndOffset {
        if requested_epoch < 0 {
            return EpochEndOffset::UNDEFINED;
        }
        if self.latest_epoch() == Some(requested_epoch) {
            return EpochEndOffset {
                epoch: requested_epoch,
                end_offset: log_end_offset,
            };
        }
        let Some(higher) = self.entries.iter().find(|e| e.epoch > requested_epoch) else {
            return EpochEndOffset::UNDEFINED;
        };
        let epoch = self
            .entries
            .iter()
            .rev()
            .find(|e| e.epoch <= requested_epoch)
            .map_or(requested_epoch, |floor| floor.epoch);
        EpochEndOffset {
            epoch,
            end_offset: higher.start_offset,
        }
    }
}
