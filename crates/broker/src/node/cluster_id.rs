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
///
/// Returns each log dir's id (KIP-858), in `log.dirs` order, as the heartbeat reports a
/// failed one: its `directory.id`, or for a dir without one (a single data directory) an id
/// derived from its path.
pub(super) fn log_dir_properties(
    data_dir: &Path,
    log_dirs: &[std::path::PathBuf],
    cluster_id: &str,
    node_id: i32,
) -> Result<Vec<uuid::Uuid>, BrokerError> {
    use crate::meta_properties as mp;
    let startup = |e: mp::MetaPropertiesError| BrokerError::Startup(e.to_string());
    if log_dirs.iter().all(|d| d == data_dir) {
        let stored = mp::read(data_dir)
            .ok()
            .flatten()
            .and_then(|p| p.directory_id);
        return Ok(log_dirs
            .iter()
            .map(|d| directory_uuid(d, stored.as_deref()))
            .collect());
    }
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
    mp::check_distinct_directory_ids(ids.iter().map(|(d, id)| (*d, id.as_deref())))
        .map_err(startup)?;
    Ok(log_dirs
        .iter()
        .map(|d| {
            let stored = ids.iter().find(|(p, _)| *p == d.as_path());
            directory_uuid(d, stored.and_then(|(_, id)| id.as_deref()))
        })
        .collect())
}

/// A dir's KIP-858 id: its `directory.id` decoded, else one derived from its path (CRC-32C of
/// four salted copies), never one of Kafka's reserved ids (all below 100).
fn directory_uuid(dir: &Path, stored: Option<&str>) -> uuid::Uuid {
    if let Some(id) = stored.and_then(base64_url_decode) {
        return id;
    }
    let text = dir.display().to_string();
    let mut bytes = [0u8; 16];
    for (i, chunk) in bytes.chunks_mut(4).enumerate() {
        let crc = crc32c::crc32c(format!("runnel-log-dir-{i}:{text}").as_bytes());
        chunk.copy_from_slice(&crc.to_be_bytes());
    }
    bytes[0] |= 0x80;
    uuid::Uuid::from_bytes(bytes)
}

/// A stored `directory.id` (Kafka's `Uuid` text); `None` if it is not one or is one of Kafka's
/// reserved ids (all below 100).
fn base64_url_decode(text: &str) -> Option<uuid::Uuid> {
    let id = runnel_log::partition_metadata::topic_id_from_string(text)?;
    (id.as_u128() >= 100).then_some(id)
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
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
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

    #[test]
    fn a_directory_id_decodes_back_and_a_dir_without_one_gets_a_stable_id() {
        let id = uuid::Uuid::from_u128(0x1234_5678_9abc_def0_1234_5678_9abc_def0);
        assert_eq!(base64_url_decode(&base64_url(id.as_bytes())), Some(id));
        assert_eq!(base64_url_decode("not an id"), None);
        let reserved = base64_url(uuid::Uuid::from_u128(1).as_bytes());
        assert_eq!(base64_url_decode(&reserved), None, "Kafka's UNASSIGNED");
        let a = directory_uuid(Path::new("/d/a"), None);
        assert_eq!(a, directory_uuid(Path::new("/d/a"), Some("garbage")));
        assert_ne!(a, directory_uuid(Path::new("/d/b"), None));
        assert!(a.as_u128() >= 100);
    }
}
