//! KIP-858 in the image: which replicas sit in a failed log dir of their broker.
//!
//! Kafka records every replica's directory (`PartitionRecord.Directories`, assigned by the
//! brokers through AssignReplicasToDirs) and a broker registration's online dirs; a replica is
//! offline when its directory is not among them (`BrokerRegistration.hasOnlineDir`). Runnel
//! keeps only what that rule needs: per registration, the dirs reported offline and the
//! replicas they held ([`crate::records::MetadataRecord::BrokerDirsOffline`]). Every other
//! replica counts as Kafka's `UNASSIGNED` directory, which is online. A new registration (the
//! broker restarted) starts with every dir online, as Kafka's registration lists them all.
//!
//! Such a replica is not live for its partition: the controller takes it out of the ISR and
//! never elects it (Kafka's `LeaderAcceptor`), and Metadata lists it in `offline_replicas`
//! (`KRaftMetadataCache.isReplicaInOfflineDir`).

use std::borrow::Cow;
use std::collections::BTreeSet;

use uuid::Uuid;

use crate::image::MetadataImage;

/// One registration's failed log dirs and the replicas in them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OfflineDirs {
    /// The failed dirs' `directory.id`s.
    pub dirs: BTreeSet<Uuid>,
    /// (topic id, partition) of the replicas those dirs held.
    pub replicas: BTreeSet<(Uuid, i32)>,
}

impl OfflineDirs {
    /// Adds dirs that went offline and the replicas they held.
    pub fn record(&mut self, dirs: &[Uuid], replicas: &[(Uuid, i32)]) {
        self.dirs.extend(dirs.iter().copied());
        self.replicas.extend(replicas.iter().copied());
    }

    pub fn holds(&self, topic_id: Uuid, partition: i32) -> bool {
        self.replicas.contains(&(topic_id, partition))
    }

    /// The topic is gone: so are its replicas (a topic created again later has another id).
    pub fn forget_topic(&mut self, topic_id: Uuid) {
        self.replicas.retain(|(t, _)| *t != topic_id);
    }

    /// The broker no longer holds a replica of the partition (a reassignment moved it away):
    /// a replica assigned to it again later is a new one, placed in an online dir.
    pub fn forget_replica(&mut self, topic_id: Uuid, partition: i32) {
        self.replicas.remove(&(topic_id, partition));
    }
}

impl MetadataImage {
    /// Whether `broker`'s replica of the partition is in one of its failed log dirs.
    pub fn replica_in_offline_dir(&self, topic_id: Uuid, partition: i32, broker: i32) -> bool {
        self.brokers
            .get(&broker)
            .is_some_and(|b| b.offline_dirs.holds(topic_id, partition))
    }

    /// `live` (brokers that may lead and be in sync) without those whose replica of this
    /// partition is in a failed dir: who may lead or stay in sync for this partition.
    pub fn live_for_partition<'a>(
        &self,
        topic_id: Uuid,
        partition: i32,
        live: &'a BTreeSet<i32>,
    ) -> Cow<'a, BTreeSet<i32>> {
        let offline: Vec<i32> = live
            .iter()
            .copied()
            .filter(|b| self.replica_in_offline_dir(topic_id, partition, *b))
            .collect();
        if offline.is_empty() {
            return Cow::Borrowed(live);
        }
        let mut usable = live.clone();
        for b in offline {
            usable.remove(&b);
        }
        Cow::Owned(usable)
    }

    /// Keeps every broker's failed-dir replicas consistent with a partition change: brokers
    /// no longer assigned the partition forget it.
    pub(crate) fn prune_offline_replicas(
        &mut self,
        topic_id: Uuid,
        partition: i32,
        replicas: &[i32],
    ) {
        for b in self.brokers.values_mut() {
            if !replicas.contains(&b.id) {
                b.offline_dirs.forget_replica(topic_id, partition);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::MetadataRecord;

    fn register(id: i32, epoch: i64) -> MetadataRecord {
        MetadataRecord::RegisterBroker {
            broker_id: id,
            incarnation_id: Uuid::from_u128(id as u128),
            broker_epoch: epoch,
            host: "h".into(),
            port: 9092,
            rack: None,
            fenced: false,
            endpoints: Vec::new(),
        }
    }

    fn image() -> MetadataImage {
        let t = Uuid::from_u128(7);
        let records = vec![
            register(1, 1),
            register(2, 2),
            MetadataRecord::Topic {
                name: "t".into(),
                topic_id: t,
            },
            MetadataRecord::Partition {
                topic_id: t,
                partition_id: 0,
                replicas: vec![1, 2],
                isr: vec![1, 2],
                leader: 1,
                leader_epoch: 0,
                partition_epoch: 0,
                adding_replicas: vec![],
                removing_replicas: vec![],
            },
            MetadataRecord::BrokerDirsOffline {
                broker_id: 1,
                broker_epoch: 1,
                dirs: vec![Uuid::from_u128(100)],
                replicas: vec![(t, 0)],
            },
        ];
        let numbered: Vec<(i64, MetadataRecord)> = records
            .into_iter()
            .enumerate()
            .map(|(i, r)| (i as i64, r))
            .collect();
        MetadataImage::empty("c".into()).apply(&numbered).unwrap()
    }

    #[test]
    fn a_replica_in_a_failed_dir_is_not_live_for_its_partition_only() {
        let image = image();
        let t = Uuid::from_u128(7);
        assert!(image.replica_in_offline_dir(t, 0, 1));
        assert!(!image.replica_in_offline_dir(t, 0, 2));
        assert!(!image.replica_in_offline_dir(t, 1, 1));
        let live: BTreeSet<i32> = [1, 2].into();
        assert_eq!(*image.live_for_partition(t, 0, &live), [2].into());
        assert!(matches!(
            image.live_for_partition(t, 1, &live),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn a_new_registration_brings_every_dir_back_and_a_deleted_topic_is_forgotten() {
        let image = image();
        let t = Uuid::from_u128(7);
        let restarted = image.apply(&[(10, register(1, 10))]).unwrap();
        assert!(!restarted.replica_in_offline_dir(t, 0, 1));
        let deleted = image
            .apply(&[(10, MetadataRecord::RemoveTopic { topic_id: t })])
            .unwrap();
        assert!(deleted.brokers[&1].offline_dirs.replicas.is_empty());
        assert_eq!(deleted.brokers[&1].offline_dirs.dirs.len(), 1);
    }

    #[test]
    fn a_record_of_another_registration_is_refused() {
        let image = image();
        let stale = MetadataRecord::BrokerDirsOffline {
            broker_id: 2,
            broker_epoch: 1,
            dirs: vec![Uuid::from_u128(5)],
            replicas: vec![],
        };
        assert!(image.apply(&[(10, stale)]).is_err());
    }

    #[test]
    fn a_replica_moved_away_by_a_reassignment_is_forgotten() {
        let image = image();
        let t = Uuid::from_u128(7);
        let moved = image
            .apply(&[(
                10,
                MetadataRecord::PartitionChange {
                    topic_id: t,
                    partition_id: 0,
                    leader: Some(2),
                    isr: Some(vec![2]),
                    replicas: Some(vec![2]),
                    adding_replicas: None,
                    removing_replicas: None,
                },
            )])
            .unwrap();
        assert!(!moved.replica_in_offline_dir(t, 0, 1));
    }
}
