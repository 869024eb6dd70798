//! Pipelined commits (KRaft's model: `QuorumController` deciding on uncommitted in-memory state,
//! `OffsetControlManager` tracking the last committed and the last appended offset,
//! `SnapshotRegistry` reverting to the committed state): the pure bookkeeping, without Raft.
//!
//! The active controller decides against the **speculative** image, the committed image plus
//! every batch it appended that has not committed yet, so a decision never waits for the
//! previous one's commit. Each appended batch is **in flight** with the waiters (responders)
//! attached to it; the commit listener ([`Pipeline::commit`]) releases them in append order
//! once the committed image reaches the batch's last offset. When an append fails or
//! leadership is lost ([`Pipeline::fail`]), the speculative state is dropped, the image is the
//! committed one again, and every waiter still in flight is returned to be failed: nothing is
//! acknowledged that did not commit.
//!
//! Invariant (checked by the property test below): `speculative == committed + in-flight
//! records`, and after a failure `speculative == committed`.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::errors::ApiError;
use crate::image::MetadataImage;
use crate::records::MetadataRecord;

/// One appended batch that has not committed yet.
#[derive(Debug)]
struct InFlight<T> {
    /// Offsets of its first and last record.
    first: i64,
    last: i64,
    records: Vec<MetadataRecord>,
    /// Released (in order) when `last` commits.
    waiters: Vec<T>,
    /// When it was appended, in the caller's clock: for commit deadlines.
    appended_ms: i64,
}

/// Where a batch put in flight sits: the offsets its first and last record must get in the log
/// (Raft or the file log) the caller appends it to next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    pub first: i64,
    pub last: i64,
}

/// The committed image, the speculative image and the in-flight batches between them; `T` is
/// whatever waits for a commit (a responder).
#[derive(Debug)]
pub struct Pipeline<T> {
    committed: Arc<MetadataImage>,
    speculative: Arc<MetadataImage>,
    in_flight: VecDeque<InFlight<T>>,
}

impl<T> Pipeline<T> {
    /// Nothing in flight: both images are `committed`.
    pub fn new(committed: Arc<MetadataImage>) -> Self {
        Pipeline {
            speculative: committed.clone(),
            committed,
            in_flight: VecDeque::new(),
        }
    }

    /// The last committed image (what a new term starts from, what a failure reverts to).
    pub fn committed(&self) -> &Arc<MetadataImage> {
        &self.committed
    }

    /// The image decisions are made against: committed plus in flight.
    pub fn speculative(&self) -> &Arc<MetadataImage> {
        &self.speculative
    }

    /// Batches appended and not committed yet.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// The records in flight, oldest first, with their offsets.
    pub fn in_flight_records(&self) -> impl Iterator<Item = (i64, &MetadataRecord)> {
        self.in_flight
            .iter()
            .flat_map(|b| (b.first..).zip(b.records.iter()))
    }

    /// Applies `records` to the speculative image at the next offsets and puts them in flight
    /// (the caller appends them to the log next). An inconsistent batch changes nothing and
    /// is UNKNOWN_SERVER_ERROR: it must never become durable. `None` for an empty batch.
    pub fn append(
        &mut self,
        records: Vec<MetadataRecord>,
        now_ms: i64,
    ) -> Result<Option<Appended>, ApiError> {
        if records.is_empty() {
            return Ok(None);
        }
        let first = self.speculative.offset + 1;
        let numbered: Vec<(i64, MetadataRecord)> = (first..).zip(records.iter().cloned()).collect();
        let next = self.speculative.apply(&numbered).map_err(|e| ApiError {
            code: crate::codes::UNKNOWN_SERVER_ERROR,
            message: format!("controller produced an inconsistent record: {e}"),
        })?;
        let last = next.offset;
        self.speculative = Arc::new(next);
        self.in_flight.push_back(InFlight {
            first,
            last,
            records,
            waiters: Vec::new(),
            appended_ms: now_ms,
        });
        Ok(Some(Appended { first, last }))
    }

    /// Waits for everything appended so far: `waiter` is released when the newest in-flight
    /// batch commits, or given back at once (`Some`) if nothing is in flight.
    pub fn wait_for_appended(&mut self, waiter: T) -> Option<T> {
        match self.in_flight.back_mut() {
            Some(batch) => {
                batch.waiters.push(waiter);
                None
            }
            None => Some(waiter),
        }
    }

    /// The commit listener: the committed image is now `image`. Every batch up to its offset
    /// leaves the pipeline and its waiters are returned, oldest first. An image older than
    /// the committed one changes nothing. An image past everything appended while batches are
    /// in flight (someone else's records, or records at other offsets than this controller
    /// appended them) means the speculative state is wrong: `Err` with the waiters to fail
    /// (the pipeline is reverted, as [`Pipeline::fail`]).
    pub fn commit(&mut self, image: Arc<MetadataImage>) -> Result<Vec<T>, Vec<T>> {
        if image.offset <= self.committed.offset {
            return Ok(Vec::new());
        }
        if !self.in_flight.is_empty() && image.offset > self.speculative.offset {
            self.committed = image;
            return Err(self.fail());
        }
        // A batch commits atomically: the image never ends inside one of ours.
        if self
            .in_flight
            .iter()
            .any(|b| b.first <= image.offset && image.offset < b.last)
        {
            self.committed = image;
            return Err(self.fail());
        }
        let mut released = Vec::new();
        while self
            .in_flight
            .front()
            .is_some_and(|b| b.last <= image.offset)
        {
            if let Some(batch) = self.in_flight.pop_front() {
                released.extend(batch.waiters);
            }
        }
        self.committed = image;
        if self.in_flight.is_empty() {
            // Share the committed image (it is equal to the speculative one).
            self.speculative = self.committed.clone();
        }
        Ok(released)
    }

    /// An append failed or leadership was lost: the speculative state goes, the image is the
    /// committed one again, and every waiter still in flight is returned (oldest first) to be
    /// failed (NOT_CONTROLLER).
    pub fn fail(&mut self) -> Vec<T> {
        self.speculative = self.committed.clone();
        self.in_flight
            .drain(..)
            .flat_map(|b| b.waiters.into_iter())
            .collect()
    }

    /// The waiters of batches appended at or before `cutoff_ms` (their commit deadline passed):
    /// taken out and returned; the batches stay in flight, since they may still commit.
    pub fn take_overdue(&mut self, cutoff_ms: i64) -> Vec<T> {
        self.in_flight
            .iter_mut()
            .filter(|b| b.appended_ms <= cutoff_ms)
            .flat_map(|b| std::mem::take(&mut b.waiters))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use uuid::Uuid;

    fn broker(id: i32, epoch: i64) -> MetadataRecord {
        MetadataRecord::RegisterBroker {
            broker_id: id,
            incarnation_id: Uuid::from_u128(id as u128 + 1),
            broker_epoch: epoch,
            host: "h".into(),
            port: 9092,
            rack: None,
            fenced: true,
            endpoints: Vec::new(),
        }
    }

    fn empty() -> Arc<MetadataImage> {
        Arc::new(MetadataImage::empty("c".into()))
    }

    /// The committed image once the first `n` in-flight batches commit (what the log's
    /// follower would publish).
    fn committed_after(p: &Pipeline<u32>, n: usize) -> Arc<MetadataImage> {
        let records: Vec<(i64, MetadataRecord)> = p
            .in_flight
            .iter()
            .take(n)
            .flat_map(|b| (b.first..).zip(b.records.iter().cloned()))
            .collect();
        Arc::new(p.committed.apply(&records).unwrap())
    }

    fn replayed(p: &Pipeline<u32>) -> MetadataImage {
        let records: Vec<(i64, MetadataRecord)> =
            p.in_flight_records().map(|(o, r)| (o, r.clone())).collect();
        p.committed.apply(&records).unwrap()
    }

    #[test]
    fn decisions_see_in_flight_records_and_waiters_are_released_in_order() {
        let mut p = Pipeline::new(empty());
        p.append(vec![broker(1, 10), broker(2, 11)], 0).unwrap();
        assert_eq!(p.wait_for_appended(1), None);
        let b = p.append(vec![broker(3, 12)], 0).unwrap().unwrap();
        assert_eq!((b.first, b.last), (2, 2));
        assert_eq!(p.wait_for_appended(2), None);
        // Decided on: all three brokers, none committed.
        assert_eq!(p.speculative().brokers.len(), 3);
        assert_eq!(p.committed().offset, -1);
        let first = committed_after(&p, 1);
        assert_eq!(p.commit(first).unwrap(), vec![1]);
        let both = Arc::new(replayed(&p));
        assert_eq!(p.commit(both).unwrap(), vec![2]);
        assert_eq!(p.in_flight(), 0);
        assert!(Arc::ptr_eq(p.speculative(), p.committed()));
        // Nothing in flight: a waiter is answered at once.
        assert_eq!(p.wait_for_appended(3), Some(3));
    }

    #[test]
    fn a_failure_reverts_to_committed_and_returns_every_in_flight_waiter() {
        let mut p = Pipeline::new(empty());
        p.append(vec![broker(1, 10)], 0).unwrap();
        p.wait_for_appended(1);
        let first = committed_after(&p, 1);
        assert_eq!(p.commit(first).unwrap(), vec![1]);
        p.append(vec![broker(2, 11)], 0).unwrap();
        p.wait_for_appended(2);
        p.append(vec![broker(3, 12)], 0).unwrap();
        p.wait_for_appended(3);
        assert_eq!(p.fail(), vec![2, 3]);
        assert_eq!(**p.speculative(), **p.committed());
        assert_eq!(p.speculative().brokers.len(), 1);
        // The next decision reuses the reverted offsets.
        let b = p.append(vec![broker(4, 13)], 0).unwrap().unwrap();
        assert_eq!(b.first, 1);
    }

    #[test]
    fn an_inconsistent_batch_changes_nothing() {
        let mut p: Pipeline<u32> = Pipeline::new(empty());
        let bad = MetadataRecord::RemoveTopic {
            topic_id: Uuid::from_u128(7),
        };
        let e = p.append(vec![bad], 0).unwrap_err();
        assert_eq!(e.code, crate::codes::UNKNOWN_SERVER_ERROR);
        assert_eq!(p.in_flight(), 0);
        assert_eq!(p.speculative().offset, -1);
    }

    #[test]
    fn a_committed_image_that_is_not_ours_reverts_the_pipeline() {
        let mut p = Pipeline::new(empty());
        p.append(vec![broker(1, 10)], 0).unwrap();
        p.wait_for_appended(1);
        // Another leader's two records committed at offsets 0 and 1.
        let theirs = Arc::new(
            MetadataImage::empty("c".into())
                .apply(&[(0, broker(5, 1)), (1, broker(6, 2))])
                .unwrap(),
        );
        assert_eq!(p.commit(theirs.clone()).unwrap_err(), vec![1]);
        assert_eq!(**p.speculative(), *theirs);
    }

    #[test]
    fn overdue_waiters_are_taken_and_their_batches_stay_in_flight() {
        let mut p = Pipeline::new(empty());
        p.append(vec![broker(1, 10)], 100).unwrap();
        p.wait_for_appended(1);
        p.append(vec![broker(2, 11)], 200).unwrap();
        p.wait_for_appended(2);
        assert_eq!(p.take_overdue(150), vec![1]);
        assert_eq!(p.in_flight(), 2);
        let all = Arc::new(replayed(&p));
        assert_eq!(p.commit(all).unwrap(), vec![2]);
    }

    #[derive(Debug, Clone)]
    enum Step {
        /// Append a batch of this many new brokers and wait for it.
        Decide(u8),
        /// Commit this many of the in-flight batches (modulo how many there are, plus one).
        Commit(u8),
        Fail,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (1u8..4).prop_map(Step::Decide),
            any::<u8>().prop_map(Step::Commit),
            Just(Step::Fail),
        ]
    }

    proptest! {
        /// Any interleaving of decide / commit / fail keeps speculative == committed +
        /// in flight; after a failure speculative == committed; every waiter is answered
        /// exactly once, released ones in append order, and only released ones committed.
        #[test]
        fn speculative_is_committed_plus_in_flight(steps in proptest::collection::vec(step(), 1..60)) {
            let mut p: Pipeline<u32> = Pipeline::new(empty());
            let mut next_id = 0i32;
            let mut next_waiter = 0u32;
            let mut released: Vec<u32> = Vec::new();
            let mut failed: Vec<u32> = Vec::new();
            // Waiter -> the broker id its batch registered last.
            let mut registered_by: Vec<i32> = Vec::new();
            for s in steps {
                match s {
                    Step::Decide(n) => {
                        let records: Vec<MetadataRecord> = (0..n)
                            .map(|_| { next_id += 1; broker(next_id, i64::from(next_id)) })
                            .collect();
                        p.append(records, 0).unwrap();
                        prop_assert_eq!(p.wait_for_appended(next_waiter), None);
                        registered_by.push(next_id);
                        next_waiter += 1;
                    }
                    Step::Commit(k) => {
                        let n = usize::from(k) % (p.in_flight() + 1);
                        let image = committed_after(&p, n);
                        released.extend(p.commit(image).unwrap());
                    }
                    Step::Fail => {
                        failed.extend(p.fail());
                        prop_assert_eq!(&**p.speculative(), &**p.committed());
                    }
                }
                prop_assert_eq!(&**p.speculative(), &replayed(&p));
            }
            // Released in order, each answered once, released ones are in the committed image.
            prop_assert!(released.windows(2).all(|w| w[0] < w[1]));
            for w in &released {
                prop_assert!(!failed.contains(w));
                let id = registered_by[*w as usize];
                prop_assert!(p.committed().brokers.contains_key(&id));
            }
            for w in &failed {
                let id = registered_by[*w as usize];
                prop_assert!(!p.committed().brokers.contains_key(&id));
            }
        }
    }
}
