//! The metadata image as the records that rebuild it: the content of a snapshot.
//!
//! KRaft snapshots are the full image written as ordinary metadata records, so a node that
//! loads one goes through the same `apply` code as one replaying the log. The offsets of the
//! original records are gone (they were compacted), so a snapshot also stores the offset of the
//! last record it covers; the rebuilt image is stamped with it and the log continues after it.

use runnel_metadata::{ImageError, MetadataImage, MetadataRecord, SecretBytes};
use serde::{Deserialize, Serialize};

/// The data of a snapshot: the image as records, at `last_offset`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotPayload {
    /// The offset of the last record the image includes (-1: none).
    pub last_offset: i64,
    pub records: Vec<MetadataRecord>,
}

/// Records that rebuild `image` when applied to an empty image, in a valid order: features,
/// brokers (with their failed log dirs), then each topic followed by its partitions, then configs (topic configs need their
/// topic), then the ACLs, then the producer-id block.
pub fn image_to_records(image: &MetadataImage) -> Vec<MetadataRecord> {
    let mut out = Vec::new();
    for (name, level) in &image.features {
        out.push(MetadataRecord::FeatureLevel {
            name: name.clone(),
            level: *level,
        });
    }
    for b in image.brokers.values() {
        out.push(MetadataRecord::RegisterBroker {
            broker_id: b.id,
            incarnation_id: b.incarnation_id,
            broker_epoch: b.epoch,
            host: b.host.clone(),
            port: b.port,
            rack: b.rack.clone(),
            fenced: b.fenced,
            endpoints: b.endpoints.clone(),
        });
        if b.in_controlled_shutdown {
            out.push(MetadataRecord::BrokerRegistrationChange {
                broker_id: b.id,
                broker_epoch: b.epoch,
                fenced: None,
                in_controlled_shutdown: Some(true),
            });
        }
        // KIP-858: the registration's failed log dirs and their replicas (applying it does
        // not need the topics yet).
        let offline = &b.offline_dirs;
        if !offline.dirs.is_empty() || !offline.replicas.is_empty() {
            out.push(MetadataRecord::BrokerDirsOffline {
                broker_id: b.id,
                broker_epoch: b.epoch,
                dirs: offline.dirs.iter().copied().collect(),
                replicas: offline.replicas.iter().copied().collect(),
            });
        }
    }
    for t in image.topics.values() {
        out.push(MetadataRecord::Topic {
            name: t.name.clone(),
            topic_id: t.id,
        });
        for p in t.partitions.values() {
            out.push(MetadataRecord::Partition {
                topic_id: t.id,
                partition_id: p.partition,
                replicas: p.replicas.clone(),
                isr: p.isr.clone(),
                leader: p.leader,
                leader_epoch: p.leader_epoch,
                partition_epoch: p.partition_epoch,
                adding_replicas: p.adding_replicas.clone(),
                removing_replicas: p.removing_replicas.clone(),
            });
        }
    }
    for (resource, entries) in &image.configs {
        for (name, value) in entries {
            out.push(MetadataRecord::Config {
                resource: resource.clone(),
                name: name.clone(),
                value: Some(value.clone()),
            });
        }
    }
    for ((name, mechanism), c) in &image.scram_credentials {
        out.push(MetadataRecord::UserScramCredential {
            name: name.clone(),
            mechanism: *mechanism,
            salt: SecretBytes(c.salt.clone()),
            stored_key: SecretBytes(c.stored_key.clone()),
            server_key: SecretBytes(c.server_key.clone()),
            iterations: c.iterations,
        });
    }
    for (entity, values) in &image.client_quotas {
        for (key, value) in values {
            out.push(MetadataRecord::ClientQuota {
                entity: entity.clone(),
                key: key.clone(),
                value: Some(runnel_metadata::quota::QuotaValue(*value)),
            });
        }
    }
    for (id, acl) in image.acls.iter() {
        out.push(MetadataRecord::AccessControlEntry {
            id: *id,
            acl: acl.clone(),
        });
    }
    if image.next_producer_id > 0 {
        out.push(MetadataRecord::ProducerIds {
            broker_id: -1,
            broker_epoch: -1,
            next_producer_id: image.next_producer_id,
        });
    }
    out
}

/// Rebuilds the image a snapshot describes; its offset is the snapshot's `last_offset`.
pub fn image_from_payload(
    cluster_id: &str,
    payload: &SnapshotPayload,
) -> Result<MetadataImage, ImageError> {
    let numbered: Vec<(i64, MetadataRecord)> = payload
        .records
        .iter()
        .enumerate()
        .map(|(i, r)| (i as i64, r.clone()))
        .collect();
    let mut image = MetadataImage::empty(cluster_id.to_string()).apply(&numbered)?;
    image.offset = payload.last_offset;
    Ok(image)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use runnel_metadata::ConfigResource;
    use uuid::Uuid;

    /// A log of valid records built from a few choices, so the image exercises every part.
    fn build(ops: &[(u8, u8)]) -> MetadataImage {
        let mut image = MetadataImage::empty("c".into());
        let mut next_pid = 0;
        for (kind, arg) in ops {
            let arg = *arg as i32 % 4;
            let topic_id = Uuid::from_u128(arg as u128 + 1);
            let record = match kind % 10 {
                0 => MetadataRecord::RegisterBroker {
                    broker_id: arg,
                    incarnation_id: Uuid::from_u128(99),
                    broker_epoch: image.offset + 1,
                    host: "h".into(),
                    port: 9092,
                    rack: (arg % 2 == 0).then(|| "r".into()),
                    fenced: arg % 3 == 0,
                    endpoints: Vec::new(),
                },
                1 => match image.brokers.get(&arg) {
                    Some(b) => MetadataRecord::BrokerRegistrationChange {
                        broker_id: arg,
                        broker_epoch: b.epoch,
                        fenced: Some(false),
                        in_controlled_shutdown: Some(arg % 2 == 1),
                    },
                    None => continue,
                },
                2 => MetadataRecord::Topic {
                    name: format!("t{arg}"),
                    topic_id,
                },
                3 => match image.topic_by_id(&topic_id) {
                    Some(t) => MetadataRecord::Partition {
                        topic_id,
                        partition_id: t.partitions.len() as i32,
                        replicas: vec![1, 2, 3],
                        isr: vec![1, 2],
                        leader: 2,
                        leader_epoch: arg,
                        partition_epoch: 3,
                        adding_replicas: vec![],
                        removing_replicas: vec![3],
                    },
                    None => continue,
                },
                4 => MetadataRecord::Config {
                    resource: if arg % 2 == 0 {
                        ConfigResource::Broker(String::new())
                    } else {
                        ConfigResource::Topic(format!("t{arg}"))
                    },
                    name: format!("k{arg}"),
                    value: Some(format!("v{}", image.offset)),
                },
                5 => {
                    next_pid += 1000;
                    MetadataRecord::ProducerIds {
                        broker_id: 1,
                        broker_epoch: 0,
                        next_producer_id: next_pid,
                    }
                }
                6 => MetadataRecord::AccessControlEntry {
                    id: Uuid::from_u128(arg as u128 + 100),
                    acl: runnel_metadata::acl::AclBinding {
                        resource_type: runnel_metadata::acl::ResourceType::Topic,
                        resource_name: format!("t{arg}"),
                        pattern_type: runnel_metadata::acl::PatternType::Prefixed,
                        principal: "User:alice".into(),
                        host: "*".into(),
                        operation: runnel_metadata::acl::AclOperation::Read,
                        permission: runnel_metadata::acl::AclPermission::Allow,
                    },
                },
                7 => MetadataRecord::RemoveAccessControlEntry {
                    id: Uuid::from_u128(arg as u128 + 100),
                },
                8 => match image.brokers.get(&arg) {
                    Some(b) => MetadataRecord::BrokerDirsOffline {
                        broker_id: arg,
                        broker_epoch: b.epoch,
                        dirs: vec![Uuid::from_u128(arg as u128 + 200)],
                        replicas: vec![(topic_id, 0)],
                    },
                    None => continue,
                },
                _ => MetadataRecord::FeatureLevel {
                    name: "metadata.version".into(),
                    level: arg as i16,
                },
            };
            if let Ok(next) = image.apply(&[(image.offset + 1, record)]) {
                image = next;
            }
        }
        image
    }

    proptest! {
        #[test]
        fn records_rebuild_the_same_image(ops in proptest::collection::vec((any::<u8>(), any::<u8>()), 0..60)) {
            let image = build(&ops);
            let payload = SnapshotPayload { last_offset: image.offset, records: image_to_records(&image) };
            let json = serde_json::to_vec(&payload).unwrap();
            let back: SnapshotPayload = serde_json::from_slice(&json).unwrap();
            prop_assert_eq!(image_from_payload("c", &back).unwrap(), image);
        }
    }
}
