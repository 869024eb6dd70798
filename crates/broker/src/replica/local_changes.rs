//! Which partitions of this node a metadata delta may change (the role of Kafka's
//! `TopicsDelta.localChanges`): the pure half of `ReplicaManager::apply_delta`.
//!
//! A partition must be re-examined when its own registration changed (created, moved, new
//! leader or ISR, deleted with its topic), when the configs its log runs with changed (its
//! topic's overrides, or this broker's dynamic defaults), or when a replica broker started or
//! stopped being able to lead (its role's `live_replicas`). Nothing else in a delta reaches a
//! partition: a heartbeat, an ACL or a quota examines none.

use std::collections::BTreeSet;

use runnel_metadata::{ConfigResource, MetadataDelta, MetadataImage};

/// A hosted partition as the rule sees it: name, index and its replica set.
pub(crate) struct HostedReplica<'a> {
    pub topic: &'a str,
    pub index: i32,
    pub replicas: &'a [i32],
}

/// The (topic name, index) keys `delta` (applied to get `image`) may change on node `node_id`,
/// given the partitions hosted here now.
pub(crate) fn affected<'a>(
    node_id: i32,
    image: &MetadataImage,
    delta: &MetadataDelta,
    hosted: impl Iterator<Item = HostedReplica<'a>>,
) -> BTreeSet<(String, i32)> {
    let mut keys = BTreeSet::new();
    for (topic_id, index) in delta.partitions.keys() {
        // A deleted topic's name is only in the delta.
        let name = image
            .topic_ids
            .get(topic_id)
            .or_else(|| delta.topics.get(topic_id).and_then(|c| c.old.as_ref()));
        if let Some(name) = name {
            keys.insert((name.clone(), *index));
        }
    }
    let node = node_id.to_string();
    let mut all_hosted = false;
    let mut topics = BTreeSet::new();
    for resource in delta.configs.keys() {
        match resource {
            ConfigResource::Topic(name) => {
                topics.insert(name.as_str());
            }
            ConfigResource::Broker(name) if name.is_empty() || *name == node => all_hosted = true,
            _ => {}
        }
    }
    let liveness: BTreeSet<i32> = delta.brokers_with_new_liveness().collect();
    for h in hosted {
        if all_hosted || topics.contains(h.topic) || h.replicas.iter().any(|r| liveness.contains(r))
        {
            keys.insert((h.topic.to_string(), h.index));
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replica::test_records::{partition, registration};
    use runnel_metadata::MetadataRecord;
    use uuid::Uuid;

    const T: Uuid = Uuid::from_u128(7);

    fn register(id: i32, fenced: bool) -> MetadataRecord {
        registration(id, 1, fenced)
    }

    /// Topic "t" with partitions 0 (replicas 1, 2) and 1 (replicas 1, 3), brokers 1-3 active.
    fn base() -> MetadataImage {
        let records = [
            register(1, false),
            register(2, false),
            register(3, false),
            MetadataRecord::Topic {
                name: "t".into(),
                topic_id: T,
            },
            partition(T, 0, vec![1, 2]),
            partition(T, 1, vec![1, 3]),
        ];
        let numbered: Vec<_> = (0..).zip(records).collect();
        MetadataImage::empty("c".into()).apply(&numbered).unwrap()
    }

    fn affected_by(records: Vec<MetadataRecord>) -> Vec<(String, i32)> {
        let image = base();
        let numbered: Vec<_> = (image.offset + 1..).zip(records).collect();
        let applied = image.apply_with_delta(&numbered).unwrap();
        let hosted = [(0, vec![1, 2]), (1, vec![1, 3])];
        let hosted = hosted.iter().map(|(index, replicas)| HostedReplica {
            topic: "t",
            index: *index,
            replicas,
        });
        affected(1, &applied.image, &applied.delta, hosted)
            .into_iter()
            .collect()
    }

    fn keys(indexes: &[i32]) -> Vec<(String, i32)> {
        indexes.iter().map(|i| ("t".to_string(), *i)).collect()
    }

    #[test]
    fn a_heartbeat_or_an_unrelated_broker_touches_no_partition() {
        // A broker re-registering with the same liveness, a new broker, a no-op.
        assert_eq!(
            affected_by(vec![
                register(2, false),
                register(9, false),
                MetadataRecord::NoOp
            ]),
            keys(&[])
        );
    }

    #[test]
    fn a_fenced_replica_touches_only_the_partitions_it_is_in() {
        let fence = MetadataRecord::BrokerRegistrationChange {
            broker_id: 3,
            broker_epoch: 1,
            fenced: Some(true),
            in_controlled_shutdown: None,
        };
        assert_eq!(affected_by(vec![fence]), keys(&[1]));
    }

    #[test]
    fn a_partition_change_touches_that_partition_and_configs_their_scope() {
        let change = MetadataRecord::PartitionChange {
            topic_id: T,
            partition_id: 0,
            leader: Some(2),
            isr: None,
            replicas: None,
            adding_replicas: None,
            removing_replicas: None,
        };
        assert_eq!(affected_by(vec![change]), keys(&[0]));
        let config = |resource| MetadataRecord::Config {
            resource,
            name: "retention.ms".into(),
            value: Some("1".into()),
        };
        assert_eq!(
            affected_by(vec![config(ConfigResource::Topic("t".into()))]),
            keys(&[0, 1])
        );
        assert_eq!(
            affected_by(vec![config(ConfigResource::Broker("2".into()))]),
            keys(&[])
        );
        assert_eq!(
            affected_by(vec![config(ConfigResource::Broker(String::new()))]),
            keys(&[0, 1])
        );
    }

    #[test]
    fn a_deleted_topic_touches_its_partitions_by_their_old_name() {
        assert_eq!(
            affected_by(vec![MetadataRecord::RemoveTopic { topic_id: T }]),
            keys(&[0, 1])
        );
    }
}
