//! The stored form of a [`MetadataRecord`]: the record in an envelope that carries its format
//! version, like the `version` field of every KRaft record frame.
//!
//! A record is written as `{"v": <version>, "r": <record>}`. The version says how `r` is laid
//! out, so a later Runnel that changes a record's fields can still read what an earlier one
//! wrote (it converts old versions), and an earlier Runnel that meets a record written by a
//! later one refuses it with a clear message instead of misreading it. Records written before
//! the envelope existed (`<record>` alone) are version 0, whose layout is version 1's: they
//! keep replaying (`tests/data/golden-metadata/` holds logs of both forms).
//!
//! Every stored copy goes through this: the single-node metadata log, Raft entries and
//! snapshots, and records carried between controllers.
//!
//! Upgrades: a build from before the envelope cannot read enveloped records, so a cluster
//! moves to this format by a full stop and start (the logs on disk are read either way), not a
//! rolling upgrade. A later change of a record's layout must be written only once the
//! finalized `metadata.version` says every node reads it (KIP-778), so that rolling upgrades
//! keep working from then on.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::records::MetadataRecord;

/// The newest layout of each record type this build writes and reads. Bump a type's version
/// when its fields change, and convert the older versions in [`decode`].
pub const RECORD_FORMAT_VERSION: u16 = 1;

impl MetadataRecord {
    /// The format version this build writes `self` with.
    pub fn format_version(&self) -> u16 {
        RECORD_FORMAT_VERSION
    }
}

/// The record's fields, serialised by the derived (remote = "Self") code of the enum.
struct Body<'a>(&'a MetadataRecord);

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        MetadataRecord::serialize(self.0, serializer)
    }
}

#[derive(Serialize)]
struct Envelope<'a> {
    v: u16,
    r: Body<'a>,
}

impl Serialize for MetadataRecord {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Envelope {
            v: self.format_version(),
            r: Body(self),
        }
        .serialize(serializer)
    }
}

struct OwnedBody(MetadataRecord);

impl<'de> Deserialize<'de> for OwnedBody {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        MetadataRecord::deserialize(deserializer).map(OwnedBody)
    }
}

/// What a stored record can look like, tried in this order.
#[derive(Deserialize)]
#[serde(untagged)]
enum Stored {
    Versioned {
        v: u16,
        r: OwnedBody,
    },
    Unversioned(OwnedBody),
    /// An envelope whose body this build cannot read: only its version is looked at.
    Unreadable {
        v: u16,
    },
}

impl<'de> Deserialize<'de> for MetadataRecord {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Stored::deserialize(deserializer)? {
            Stored::Versioned { v, r } => decode(v, r.0).map_err(D::Error::custom),
            Stored::Unversioned(r) => decode(0, r.0).map_err(D::Error::custom),
            Stored::Unreadable { v } if v > RECORD_FORMAT_VERSION => {
                Err(D::Error::custom(newer_than_supported(v)))
            }
            Stored::Unreadable { v } => Err(D::Error::custom(format!(
                "a metadata record of format version {v} has fields this build cannot read"
            ))),
        }
    }
}

/// Converts a record read at `version` to this build's layout.
fn decode(version: u16, record: MetadataRecord) -> Result<MetadataRecord, String> {
    match version {
        // Version 0 (no envelope) has version 1's layout.
        0 | 1 => Ok(record),
        newer => Err(newer_than_supported(newer)),
    }
}

fn newer_than_supported(version: u16) -> String {
    format!(
        "a metadata record has format version {version}, newer than the {RECORD_FORMAT_VERSION} \
         this build supports: it was written by a newer Runnel; upgrade this node rather than \
         letting it misread the metadata log"
    )
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;

    fn topic() -> MetadataRecord {
        MetadataRecord::Topic {
            name: "t".into(),
            topic_id: Uuid::from_u128(7),
        }
    }

    #[test]
    fn records_are_written_in_a_versioned_envelope() {
        let json = serde_json::to_string(&topic()).unwrap();
        assert_eq!(
            json,
            r#"{"v":1,"r":{"Topic":{"name":"t","topic_id":"00000000-0000-0000-0000-000000000007"}}}"#
        );
        assert_eq!(
            serde_json::from_str::<MetadataRecord>(&json).unwrap(),
            topic()
        );
    }

    #[test]
    fn records_written_before_the_envelope_read_as_version_zero() {
        let json = r#"{"Topic":{"name":"t","topic_id":"00000000-0000-0000-0000-000000000007"}}"#;
        assert_eq!(
            serde_json::from_str::<MetadataRecord>(json).unwrap(),
            topic()
        );
        assert_eq!(
            serde_json::from_str::<MetadataRecord>(r#""NoOp""#).unwrap(),
            MetadataRecord::NoOp
        );
    }

    #[test]
    fn a_newer_format_is_refused_with_a_clear_message() {
        for json in [
            // A newer version of a layout this build knows,
            r#"{"v":2,"r":{"Topic":{"name":"t","topic_id":"00000000-0000-0000-0000-000000000007"}}}"#,
            // and a newer record type it does not know at all.
            r#"{"v":9,"r":{"ShareGroupRecord":{"id":1}}}"#,
        ] {
            let err = serde_json::from_str::<MetadataRecord>(json)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("newer than the 1 this build supports"),
                "{err}"
            );
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_record() {
        for json in [
            r#"{"v":1,"r":{"Nope":{}}}"#,
            r#"{"Topic":{}}"#,
            "17",
            r#"{"v":"x"}"#,
        ] {
            assert!(
                serde_json::from_str::<MetadataRecord>(json).is_err(),
                "{json}"
            );
        }
    }
}
