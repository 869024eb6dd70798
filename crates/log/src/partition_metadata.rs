//! `partition.metadata`: the topic id of a partition directory, in Kafka's format
//! (`version: 0\ntopic_id: <base64url uuid, no padding>\n`), so a directory left over from a
//! deleted topic with the same name is recognised.

use std::fs;
use std::io;
use std::path::Path;

use base64::Engine;

pub(crate) const PARTITION_METADATA_FILE: &str = "partition.metadata";

/// Kafka's `Uuid.toString()`: URL-safe base64 of the 16 bytes, without padding.
pub fn topic_id_to_string(id: uuid::Uuid) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id.as_bytes())
}

pub fn topic_id_from_string(s: &str) -> Option<uuid::Uuid> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s.trim())
        .ok()?;
    uuid::Uuid::from_slice(&bytes).ok()
}

/// Reads the topic id; `Ok(None)` if the file is missing or unparsable (it is then rewritten).
pub(crate) fn read(dir: &Path) -> io::Result<Option<uuid::Uuid>> {
    let text = match fs::read_to_string(dir.join(PARTITION_METADATA_FILE)) {
        Ok(t) => t,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::InvalidData
            ) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    let mut version_ok = false;
    let mut id = None;
    for line in text.lines() {
        if let Some((k, v)) = line.split_once(':') {
            match k.trim() {
                "version" => version_ok = v.trim() == "0",
                "topic_id" => id = topic_id_from_string(v),
                _ => {}
            }
        }
    }
    Ok(if version_ok { id } else { None })
}

/// Writes the file atomically (tmp, fsync, rename, fsync dir).
pub(crate) fn write(dir: &Path, id: uuid::Uuid) -> io::Result<()> {
    use std::io::Write;
    let path = dir.join(PARTITION_METADATA_FILE);
    let tmp = dir.join(format!("{PARTITION_METADATA_FILE}.tmp"));
    {
        let mut f = fs::File::create(&tmp)?;
        write!(f, "version: 0\ntopic_id: {}\n", topic_id_to_string(id))?;
        f.sync_all()?;
    }
    fs::rename(&tmp, &path)?;
    crate::checkpoint::sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_format_round_trip() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(read(d.path()).unwrap(), None);
        let id = uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
        write(d.path(), id).unwrap();
        let text = fs::read_to_string(d.path().join(PARTITION_METADATA_FILE)).unwrap();
        assert_eq!(text, "version: 0\ntopic_id: ASNFZ4mrze8BI0VniavN7w\n");
        assert_eq!(read(d.path()).unwrap(), Some(id));
        fs::write(d.path().join(PARTITION_METADATA_FILE), "garbage\u{0}").unwrap();
        assert_eq!(read(d.path()).unwrap(), None);
    }
}
