//! The metadata log offsets of a `raft.log`'s records, offline, for `runnel dump-log
//! --cluster-metadata-decoder` (Kafka's tool prints log offsets).
//!
//! Raft entries are numbered by Raft index, but a metadata record's offset is assigned when its
//! batch is applied (`state_machine`): batches take dense offsets in log order, entries without
//! records (a leader's blank entry, a membership change) take none, and a batch the image
//! rejects takes none either. So the offsets are found the way a node finds them: by replaying
//! the batches on the image, from the start of the log or from the snapshot the log was purged
//! up to, with the same `MetadataImage::apply`.

use runnel_metadata::{MetadataImage, MetadataRecord};

use super::{LogDump, RawLogRecord, RawPayload, SnapshotDump};
use crate::image_records::{image_from_payload, SnapshotPayload};

/// Where one frame of a `raft.log` sits in the metadata log's offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placed {
    /// The entry's records take the offsets from `base` on (for an entry without records,
    /// `base` is the offset the next record takes).
    At(i64),
    /// The image refuses this batch, so a node applies none of it: its records take no
    /// offsets (the next record takes `next`).
    Rejected { next: i64, reason: String },
    /// Not known: the log was purged and no snapshot of that point was given.
    Unknown,
}

/// Replays batches on an image (`None`: counting only, the image is not known) from `next`.
struct Replay {
    image: Option<MetadataImage>,
    next: i64,
}

impl Replay {
    fn batch(&mut self, records: &[serde_json::Value]) -> Placed {
        let base = self.next;
        let count = i64::try_from(records.len()).unwrap_or(i64::MAX);
        let Some(image) = &self.image else {
            self.next = base.saturating_add(count);
            return Placed::At(base);
        };
        let decoded: Result<Vec<MetadataRecord>, _> = records
            .iter()
            .map(|r| serde_json::from_value(r.clone()))
            .collect();
        let Ok(decoded) = decoded else {
            // A record this build cannot read: a node of this build stops there too. Count on
            // as if the batch applied (a newer node would have applied it).
            self.image = None;
            self.next = base.saturating_add(count);
            return Placed::At(base);
        };
        let numbered: Vec<(i64, MetadataRecord)> = (base..).zip(decoded).collect();
        match image.apply(&numbered) {
            Ok(applied) => {
                self.image = Some(applied);
                self.next = base.saturating_add(count);
                Placed::At(base)
            }
            Err(e) => Placed::Rejected {
                next: base,
                reason: e.to_string(),
            },
        }
    }
}

fn records_of(body: &RawLogRecord) -> Option<&[serde_json::Value]> {
    match body {
        RawLogRecord::Entry(e) => match &e.payload {
            RawPayload::Normal(records) => Some(records.as_slice()),
            _ => None,
        },
        RawLogRecord::Purged(_) => None,
    }
}

fn index_of(body: &RawLogRecord) -> u64 {
    match body {
        RawLogRecord::Entry(e) => e.log_id.index,
        RawLogRecord::Purged(id) => id.index,
    }
}

/// The image of a snapshot and the offset after it, if its records read back.
fn snapshot_image(snapshot: &SnapshotDump) -> Option<MetadataImage> {
    let records = snapshot
        .records
        .iter()
        .map(|r| serde_json::from_value(r.clone()))
        .collect::<Result<Vec<MetadataRecord>, _>>()
        .ok()?;
    let payload = SnapshotPayload {
        last_offset: snapshot.last_offset,
        records,
    };
    image_from_payload("", &payload).ok()
}

/// The place of every frame of `log` (one per frame, in order). A log that starts after a
/// purge needs the snapshot the node took there (`snapshot`, the one beside the log): the
/// entries after the snapshot are replayed on its image; entries the snapshot already covers
/// (a purge that lagged the snapshot) are numbered back from its end offset, as if every one
/// applied.
pub fn place_frames(log: &LogDump, snapshot: Option<&SnapshotDump>) -> Vec<Placed> {
    let purged = log.frames.iter().find_map(|f| match &f.body {
        RawLogRecord::Purged(id) => Some(id.index),
        RawLogRecord::Entry(_) => None,
    });
    let mut replay = Replay {
        image: Some(MetadataImage::empty(String::new())),
        next: 0,
    };
    // The Raft index up to which the entries are counted back from the snapshot.
    let mut covered_to = None;
    if let Some(purged) = purged {
        let snap = snapshot.and_then(|s| Some((s, s.meta.last_log_id?.index)));
        let Some((snap, snap_index)) = snap.filter(|(_, i)| *i >= purged) else {
            return vec![Placed::Unknown; log.frames.len()];
        };
        let covered: usize = log
            .frames
            .iter()
            .filter(|f| index_of(&f.body) <= snap_index)
            .filter_map(|f| records_of(&f.body))
            .map(<[_]>::len)
            .sum();
        let covered = i64::try_from(covered).unwrap_or(i64::MAX);
        let Some(first) = snap.last_offset.saturating_add(1).checked_sub(covered) else {
            return vec![Placed::Unknown; log.frames.len()];
        };
        if first < 0 {
            return vec![Placed::Unknown; log.frames.len()];
        }
        replay = Replay {
            image: None,
            next: first,
        };
        covered_to = Some((snap_index, snapshot_image(snap)));
    }
    let mut out = Vec::with_capacity(log.frames.len());
    for frame in &log.frames {
        if let Some((to, _)) = &covered_to {
            if index_of(&frame.body) > *to {
                // Past the snapshot: replay on its image from here.
                let image = covered_to.take().and_then(|(_, image)| image);
                replay.image = image;
            }
        }
        out.push(match records_of(&frame.body) {
            Some(records) => replay.batch(records),
            None => Placed::At(replay.next),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use openraft::CommittedLeaderId;
    use serde_json::json;

    use super::super::{Frame, RawEntry};
    use super::*;
    use crate::types::{LogId, SnapshotMeta};

    fn id(index: u64) -> LogId {
        LogId::new(CommittedLeaderId::new(1, 1), index)
    }

    fn frame(body: RawLogRecord) -> Frame<RawLogRecord> {
        Frame {
            position: 0,
            size: 0,
            crc: 0,
            body,
        }
    }

    fn entry(index: u64, payload: RawPayload) -> Frame<RawLogRecord> {
        frame(RawLogRecord::Entry(RawEntry {
            log_id: id(index),
            payload,
        }))
    }

    fn topic(name: &str, n: u128) -> serde_json::Value {
        serde_json::to_value(MetadataRecord::Topic {
            name: name.into(),
            topic_id: uuid::Uuid::from_u128(n),
        })
        .unwrap()
    }

    fn log(frames: Vec<Frame<RawLogRecord>>) -> LogDump {
        LogDump {
            frames,
            invalid: None,
        }
    }

    /// Batches take dense offsets; entries without records and rejected batches take none.
    #[test]
    fn offsets_are_assigned_as_the_state_machine_assigns_them() {
        let noop = serde_json::to_value(MetadataRecord::NoOp).unwrap();
        let l = log(vec![
            entry(0, RawPayload::Membership(json!({}))),
            entry(1, RawPayload::Blank),
            entry(2, RawPayload::Normal(vec![topic("a", 1), noop.clone()])),
            // The same name again: the image refuses the batch.
            entry(3, RawPayload::Normal(vec![noop.clone(), topic("a", 2)])),
            entry(4, RawPayload::Normal(vec![noop.clone()])),
            entry(5, RawPayload::Blank),
        ]);
        let placed = place_frames(&l, None);
        assert_eq!(placed[0], Placed::At(0));
        assert_eq!(placed[1], Placed::At(0));
        assert_eq!(placed[2], Placed::At(0));
        assert!(
            matches!(&placed[3], Placed::Rejected { next: 2, .. }),
            "{placed:?}"
        );
        assert_eq!(placed[4], Placed::At(2));
        assert_eq!(placed[5], Placed::At(3));
    }

    fn snapshot(index: u64, last_offset: i64, records: Vec<serde_json::Value>) -> SnapshotDump {
        SnapshotDump {
            meta: SnapshotMeta {
                last_log_id: Some(id(index)),
                last_membership: Default::default(),
                snapshot_id: "s".into(),
            },
            last_offset,
            records,
            frames: [(0, 0), (0, 0)],
        }
    }

    /// After a purge the snapshot of that point gives the offsets (and the image: a batch it
    /// refuses is found); without one they are unknown.
    #[test]
    fn a_purged_log_continues_from_its_snapshot() {
        let l = log(vec![
            frame(RawLogRecord::Purged(id(7))),
            entry(8, RawPayload::Normal(vec![topic("b", 3)])),
            entry(9, RawPayload::Normal(vec![topic("a", 4)])),
        ]);
        assert_eq!(place_frames(&l, None), vec![Placed::Unknown; 3]);
        let snap = snapshot(7, 41, vec![topic("a", 1)]);
        let placed = place_frames(&l, Some(&snap));
        assert_eq!(placed[..2], [Placed::At(42), Placed::At(42)]);
        assert!(matches!(&placed[2], Placed::Rejected { next: 43, .. }));
        // A snapshot older than the purge point cannot place them.
        let old = snapshot(5, 30, vec![]);
        assert_eq!(place_frames(&l, Some(&old)), vec![Placed::Unknown; 3]);
    }

    /// A snapshot taken past the purge point: the entries it covers are numbered back from its
    /// end offset, the later ones replayed on its image.
    #[test]
    fn entries_the_snapshot_covers_are_numbered_back_from_it() {
        let noop = serde_json::to_value(MetadataRecord::NoOp).unwrap();
        let l = log(vec![
            frame(RawLogRecord::Purged(id(3))),
            entry(4, RawPayload::Normal(vec![noop.clone(), noop.clone()])),
            entry(5, RawPayload::Normal(vec![noop.clone()])),
            entry(6, RawPayload::Normal(vec![noop.clone()])),
        ]);
        // The snapshot ends at entry 5, whose last record is offset 20.
        let snap = snapshot(5, 20, vec![]);
        let placed = place_frames(&l, Some(&snap));
        assert_eq!(
            placed,
            vec![
                Placed::At(18),
                Placed::At(18),
                Placed::At(20),
                Placed::At(21)
            ]
        );
        // More covered records than the snapshot's offsets allow: unknown, not negative.
        let short = snapshot(5, 1, vec![]);
        assert_eq!(place_frames(&l, Some(&short)), vec![Placed::Unknown; 4]);
    }
}
