//! The cluster id: read from `meta.properties` or decided and written there on first start.

use std::collections::BTreeMap;
use std::path::Path;

use crate::BrokerError;

/// Reads `meta.properties` (Kafka's format) or writes a new one (the rules are
/// `meta_properties::decide_cluster_id`'s). A formatted directory (`runnel storage format`)
/// keeps the cluster id it was formatted with; an unformatted one gets a fresh random id on a
/// single node, or one derived from the voter set in a cluster, so every node of one cluster
/// agrees without a separate format step.
pub(super) fn cluster_id(
    data_dir: &Path,
    node_id: i32,
    voters: Option<&BTreeMap<i32, String>>,
) -> Result<String, BrokerError> {
    use crate::meta_properties as mp;
    let path = data_dir.join(mp::META_PROPERTIES);
    let startup = |e: mp::MetaPropertiesError| BrokerError::Startup(e.to_string());
    let stored = mp::read(data_dir).map_err(startup)?;
    let formatted = mp::read_bootstrap(data_dir).map_err(startup)?.is_some();
    let derived = voters.map(cluster_id_from_voters);
    let decision = mp::decide_cluster_id(
        &path,
        stored.as_ref(),
        formatted,
        node_id,
        derived.as_deref(),
        || base64_url(uuid::Uuid::new_v4().as_bytes()),
    )
    .map_err(startup)?;
    if decision.write {
        let props = mp::MetaProperties {
            cluster_id: decision.cluster_id.clone(),
            node_id,
            directory_id: Some(base64_url(uuid::Uuid::new_v4().as_bytes())),
        };
        mp::write(data_dir, &props).map_err(startup)?;
    }
    Ok(decision.cluster_id)
}

/// Every log dir's `meta.properties` (`meta_properties::log_dir_properties`): checked against
/// the cluster and node ids, written where missing, directory ids distinct. The data
/// directory's own file is `cluster_id`'s; it gets a directory id there too. A node whose one
/// log dir is its data directory has nothing more to check (as before JBOD).
pub(super) fn log_dir_properties(
    data_dir: &Path,
    log_dirs: &[std::path::PathBuf],
    cluster_id: &str,
    node_id: i32,
) -> Result<(), BrokerError> {
    use crate::meta_properties as mp;
    if log_dirs.iter().all(|d| d == data_dir) {
        return Ok(());
    }
    let startup = |e: mp::MetaPropertiesError| BrokerError::Startup(e.to_string());
    let mut dirs: Vec<&Path> = vec![data_dir];
    dirs.extend(
        log_dirs
            .iter()
            .map(|d| d.as_path())
            .filter(|d| *d != data_dir),
    );
    let mut ids = Vec::new();
    for dir in dirs {
        std::fs::create_dir_all(dir).map_err(|e| {
            BrokerError::Startup(format!("cannot create log dir {}: {e}", dir.display()))
        })?;
        let stored = mp::read(dir).map_err(startup)?;
        let fresh = base64_url(uuid::Uuid::new_v4().as_bytes());
        let path = dir.join(mp::META_PROPERTIES);
        let write = mp::log_dir_properties(&path, stored.as_ref(), cluster_id, node_id, fresh)
            .map_err(startup)?;
        if let Some(props) = &write {
            mp::write(dir, props).map_err(startup)?;
        }
        ids.push((dir, write.or(stored).and_then(|p| p.directory_id)));
    }
    mp::check_distinct_directory_ids(ids.iter().map(|(d, id)| (*d, id.as_deref()))).map_err(startup)
}

/// A stable 16-byte id from the voter set (CRC-32C of four salted copies), base64url like Kafka's.
fn cluster_id_from_voters(voters: &BTreeMap<i32, String>) -> String {
    let text: String = voters.iter().map(|(id, a)| format!("{id}@{a},")).collect();
    let mut bytes = [0u8; 16];
    for (i, chunk) in bytes.chunks_mut(4).enumerate() {
        let crc = crc32c::crc32c(format!("runnel-cluster-{i}:{text}").as_bytes());
        chunk.copy_from_slice(&crc.to_be_bytes());
    }
    base64_url(&bytes)
}

/// Kafka prints ids (cluster, topic) as unpadded URL-safe base64 of the 16 bytes.
pub fn base64_url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_kafka_encoding() {
        // Kafka's Uuid.toString of all-zero is "AAAAAAAAAAAAAAAAAAAAAA".
        assert_eq!(base64_url(&[0u8; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(base64_url(&[0xff; 3]), "____");
        assert_eq!(base64_url(b"M"), "TQ");
    }
}
