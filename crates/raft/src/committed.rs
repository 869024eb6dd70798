//! Reading the committed metadata log, on every node (voters and observers alike).
//!
//! A reader is a cursor over record offsets. While its position is inside the retained tail it
//! gets the records themselves, in order and exactly once; if it fell behind a snapshot (or
//! starts on a node that restarted from one), it gets the whole current image instead and
//! continues after it — the same "snapshot plus tail" a KRaft broker loads.

use std::sync::Arc;

use runnel_metadata::{MetadataImage, MetadataRecord};
use tokio::sync::watch;

use crate::state_machine::Shared;

/// One step of the committed log as a reader sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum Committed {
    /// Replace your image with this one (the records before it were compacted into a
    /// snapshot); the next records follow `image.offset`.
    Image(Arc<MetadataImage>),
    /// Committed records with consecutive offsets, and the image after them: the state
    /// machine applied them already, so a reader whose image is the one before them shares
    /// this one instead of applying them again (its delta: `MetadataDelta::of_batch`).
    Records(Vec<(i64, MetadataRecord)>, Arc<MetadataImage>),
}

/// A cursor over the committed metadata log (see [`crate::MetadataQuorum::committed`]).
pub struct CommittedReader {
    shared: Arc<Shared>,
    rx: watch::Receiver<i64>,
    next: i64,
}

impl CommittedReader {
    pub(crate) fn new(shared: Arc<Shared>, from: i64) -> Self {
        let rx = shared.subscribe();
        CommittedReader {
            shared,
            rx,
            next: from.max(0),
        }
    }

    /// The offset of the next record this reader will return.
    pub fn position(&self) -> i64 {
        self.next
    }

    /// The offset of the last committed record on this node (-1: none yet).
    pub fn last_committed(&self) -> i64 {
        *self.rx.borrow()
    }

    /// A watch of the last committed offset, for callers that only want to be woken.
    pub fn watch(&self) -> watch::Receiver<i64> {
        self.rx.clone()
    }

    /// What is committed beyond the position, without waiting.
    pub fn try_next(&mut self) -> Option<Committed> {
        let data = self.shared.lock();
        if self.next > data.image.offset {
            return None;
        }
        let start = data.tail_start();
        if self.next >= start {
            let skip = usize::try_from(self.next - start).ok()?;
            let records: Vec<_> = data.tail.iter().skip(skip).cloned().collect();
            self.next = data.image.offset + 1;
            Some(Committed::Records(records, data.image.clone()))
        } else {
            self.next = data.image.offset + 1;
            Some(Committed::Image(data.image.clone()))
        }
    }

    /// Waits for the next committed step; `None` once the quorum has shut down.
    pub async fn next(&mut self) -> Option<Committed> {
        loop {
            self.rx.borrow_and_update();
            if let Some(c) = self.try_next() {
                return Some(c);
            }
            if self.shared.is_closed() || self.rx.changed().await.is_err() {
                return None;
            }
        }
    }
}
