//! The replicated state machine: committed batches numbered as record offsets, applied to the
//! metadata image, and kept in a tail that readers ([`crate::CommittedReader`]) consume.
//!
//! Why keep an image here and not only the records: snapshots are the image written as records
//! (KRaft's design), so the state machine must know the image at the snapshot point. Applying is
//! deterministic, so every node assigns the same offsets and rejects the same (inconsistent)
//! batches; a rejected batch gets no offsets and readers never see it, which keeps the record
//! stream one that always applies cleanly.
//!
//! The state machine is in memory and rebuilt on start from the last snapshot; openraft then
//! re-applies the committed log entries after it (from the `committed` hint at once, or when the
//! leader tells the commit index).

use std::collections::VecDeque;
use std::io::Cursor;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{EntryPayload, OptionalSend, RaftSnapshotBuilder, StorageIOError};
use runnel_metadata::{MetadataImage, MetadataRecord};
use tokio::sync::watch;

use crate::image_records::{image_from_payload, image_to_records, SnapshotPayload};
use crate::storage::snapshot::{SnapshotStore, StoredSnapshot};
use crate::types::{
    ApplyResult, Entry, LogId, SnapshotMeta, StorageError, StoredMembership, TypeConfig,
};

/// What the state machine holds; shared with readers and the quorum handle.
#[derive(Debug)]
pub(crate) struct SmData {
    /// The image after the last applied record (`image.offset`).
    pub image: Arc<MetadataImage>,
    /// The committed records since the last snapshot, contiguous and ending at `image.offset`.
    pub tail: VecDeque<(i64, MetadataRecord)>,
    pub last_applied: Option<LogId>,
    pub membership: StoredMembership,
}

impl SmData {
    /// The offset of the first record still in the tail.
    pub fn tail_start(&self) -> i64 {
        self.tail.front().map_or(self.image.offset + 1, |(o, _)| *o)
    }
}

/// The state shared between openraft's state machine worker and the readers.
#[derive(Debug)]
pub(crate) struct Shared {
    data: Mutex<SmData>,
    /// The offset of the last committed record; readers wait on it.
    committed: watch::Sender<i64>,
    closed: AtomicBool,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, SmData> {
        // Updates replace whole fields after their fallible work is done, so a poisoned lock
        // still guards a consistent state.
        self.data.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn subscribe(&self) -> watch::Receiver<i64> {
        self.committed.subscribe()
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Wakes every reader for the last time: the quorum is shutting down.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.committed.send_modify(|_| {});
    }

    fn publish(&self, offset: i64) {
        self.committed.send_replace(offset);
    }
}

/// openraft's state machine for the metadata log.
pub struct StateMachine {
    shared: Arc<Shared>,
    snapshots: Arc<SnapshotStore>,
    /// Every image carries it, so readers can share the images built here.
    cluster_id: String,
}

impl StateMachine {
    /// Restores the state machine from the snapshot in `snapshots`, if any.
    pub(crate) fn open(
        snapshots: Arc<SnapshotStore>,
        cluster_id: String,
    ) -> std::io::Result<StateMachine> {
        let mut data = SmData {
            image: Arc::new(MetadataImage::empty(cluster_id.clone())),
            tail: VecDeque::new(),
            last_applied: None,
            membership: StoredMembership::default(),
        };
        if let Some(snap) = snapshots.current() {
            let payload = decode_payload(&snap.data)?;
            let image = image_from_payload(&cluster_id, &payload)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
            data.image = Arc::new(image);
            data.last_applied = snap.meta.last_log_id;
            data.membership = snap.meta.last_membership.clone();
        }
        let offset = data.image.offset;
        let (committed, _) = watch::channel(offset);
        Ok(StateMachine {
            shared: Arc::new(Shared {
                data: Mutex::new(data),
                committed,
                closed: AtomicBool::new(false),
            }),
            snapshots,
            cluster_id,
        })
    }

    pub(crate) fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// Applies one batch of records to `data`, all or nothing.
    fn apply_batch(data: &mut SmData, records: Vec<MetadataRecord>, log_id: &LogId) -> ApplyResult {
        let first_offset = data.image.offset + 1;
        let numbered: Vec<(i64, MetadataRecord)> = records
            .into_iter()
            .enumerate()
            .map(|(i, r)| (first_offset + i as i64, r))
            .collect();
        let count = numbered.len();
        match data.image.apply(&numbered) {
            Ok(image) => {
                data.image = Arc::new(image);
                data.tail.extend(numbered);
                ApplyResult::Applied {
                    first_offset,
                    count,
                }
            }
            Err(e) => {
                tracing::error!(%log_id, error = %e, "rejecting an inconsistent metadata batch");
                ApplyResult::Rejected {
                    reason: e.to_string(),
                }
            }
        }
    }
}

fn decode_payload(bytes: &[u8]) -> std::io::Result<SnapshotPayload> {
    serde_json::from_slice(bytes)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

fn to_snapshot(s: StoredSnapshot) -> Snapshot<TypeConfig> {
    Snapshot {
        meta: s.meta,
        snapshot: Box::new(Cursor::new(s.data)),
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let data = self.shared.lock();
        Ok((data.last_applied, data.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<ApplyResult>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut results = Vec::new();
        let offset = {
            let mut data = self.shared.lock();
            for entry in entries {
                data.last_applied = Some(entry.log_id);
                let result = match entry.payload {
                    EntryPayload::Blank => ApplyResult::NoRecords,
                    EntryPayload::Membership(m) => {
                        data.membership = StoredMembership::new(Some(entry.log_id), m);
                        ApplyResult::NoRecords
                    }
                    EntryPayload::Normal(records) => {
                        Self::apply_batch(&mut data, records, &entry.log_id)
                    }
                };
                results.push(result);
            }
            data.image.offset
        };
        self.shared.publish(offset);
        Ok(results)
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder {
        let data = self.shared.lock();
        SnapshotBuilder {
            image: data.image.clone(),
            last_applied: data.last_applied,
            membership: data.membership.clone(),
            snapshots: self.snapshots.clone(),
            shared: self.shared.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let bytes = snapshot.into_inner();
        let read_err = |e: std::io::Error| {
            StorageError::from(StorageIOError::read_snapshot(Some(meta.signature()), &e))
        };
        let payload = decode_payload(&bytes).map_err(read_err)?;
        let image = image_from_payload(&self.cluster_id, &payload).map_err(|e| {
            read_err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                e.to_string(),
            ))
        })?;
        // Durable first: once the state machine moves past the log, the log may be purged.
        self.snapshots
            .save(StoredSnapshot {
                meta: meta.clone(),
                data: bytes,
            })
            .map_err(|e| {
                StorageError::from(StorageIOError::write_snapshot(Some(meta.signature()), &e))
            })?;
        let offset = {
            let mut data = self.shared.lock();
            data.image = Arc::new(image);
            data.tail.clear();
            data.last_applied = meta.last_log_id;
            data.membership = meta.last_membership.clone();
            data.image.offset
        };
        tracing::info!(snapshot = %meta, offset, "installed a metadata snapshot");
        self.shared.publish(offset);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        Ok(self.snapshots.current().map(to_snapshot))
    }
}

/// Builds a snapshot of the state at the moment openraft asked for the builder.
pub struct SnapshotBuilder {
    image: Arc<MetadataImage>,
    last_applied: Option<LogId>,
    membership: StoredMembership,
    snapshots: Arc<SnapshotStore>,
    shared: Arc<Shared>,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let payload = SnapshotPayload {
            last_offset: self.image.offset,
            records: image_to_records(&self.image),
        };
        let data = serde_json::to_vec(&payload)
            .map_err(|e| StorageError::from(StorageIOError::write_snapshot(None, &e)))?;
        let snapshot_id = match self.last_applied {
            Some(l) => format!("{}-{}-{}", l.leader_id.term, l.index, payload.last_offset),
            None => format!("0-0-{}", payload.last_offset),
        };
        let stored = StoredSnapshot {
            meta: SnapshotMeta {
                last_log_id: self.last_applied,
                last_membership: self.membership.clone(),
                snapshot_id,
            },
            data,
        };
        self.snapshots.save(stored.clone()).map_err(|e| {
            StorageError::from(StorageIOError::write_snapshot(
                Some(stored.meta.signature()),
                &e,
            ))
        })?;
        // Readers behind the snapshot now get the image instead of the compacted records.
        self.shared
            .lock()
            .tail
            .retain(|(o, _)| *o > payload.last_offset);
        tracing::debug!(snapshot = %stored.meta, records = payload.records.len(), "built a metadata snapshot");
        Ok(to_snapshot(stored))
    }
}
