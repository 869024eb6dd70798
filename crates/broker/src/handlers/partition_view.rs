//! What a client is told about one partition's leader and replicas (Metadata,
//! DescribeTopicPartitions), as Kafka's `KRaftMetadataCache.getPartitionMetadata`: a pure
//! function of the image and of which brokers have an endpoint on the client's listener.
//!
//! The invariant: a leader named to a client is always among the brokers the same response
//! lists (live brokers with an endpoint on the listener, `metadata::brokers`). Kafka's
//! controller never leaves a fenced broker leading (fencing elects another leader or none),
//! so its cache only checks registration and listener; Runnel's image can name a fenced
//! leader for a while, so "not alive" here also covers fenced. A client told about a leader
//! it cannot find in the broker list treated it as BROKER_NOT_AVAILABLE (known case 7 of
//! docs/faults.md).

use runnel_metadata::{BrokerRegistration, MetadataImage, PartitionImage};

use crate::errors::code;

/// The client's view of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionView {
    /// Error code of the partition: NONE, LEADER_NOT_AVAILABLE, LISTENER_NOT_FOUND or (v0,
    /// replicas left out) REPLICA_NOT_AVAILABLE.
    pub error: i16,
    /// The leader, -1 when the client cannot reach one.
    pub leader: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// Replicas unregistered, fenced, without an endpoint on the listener, or in a failed
    /// log dir.
    pub offline: Vec<i32>,
}

/// How the view is asked for: Metadata v0 leaves unavailable replicas out of the replica and
/// ISR lists (Kafka's `errorUnavailableEndpoints`), v6+ tells a leader without the listener
/// (LISTENER_NOT_FOUND) from a missing one (`errorUnavailableListeners`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ViewRules {
    pub filter_unavailable_replicas: bool,
    pub listener_not_found_error: bool,
}

impl ViewRules {
    /// The rules of a Metadata request of `version`.
    pub fn metadata(version: i16) -> Self {
        Self {
            filter_unavailable_replicas: version == 0,
            listener_not_found_error: version >= 6,
        }
    }
}

/// `on_listener(b)`: whether broker `b` has an endpoint on the client's listener.
/// A replica in a failed log dir of its broker is offline too (KIP-858, Kafka's
/// `isReplicaInOfflineDir`).
pub fn partition_view(
    image: &MetadataImage,
    topic_id: uuid::Uuid,
    p: &PartitionImage,
    rules: ViewRules,
    on_listener: &dyn Fn(&BrokerRegistration) -> bool,
) -> PartitionView {
    let available = |id: &i32| {
        image
            .brokers
            .get(id)
            .is_some_and(|b| !b.fenced && on_listener(b))
            && !image.replica_in_offline_dir(topic_id, p.partition, *id)
    };
    let filter = |ids: &[i32]| -> Vec<i32> {
        if rules.filter_unavailable_replicas {
            ids.iter().copied().filter(|r| available(r)).collect()
        } else {
            ids.to_vec()
        }
    };
    let replicas = filter(&p.replicas);
    let isr = filter(&p.isr);
    let offline = p
        .replicas
        .iter()
        .copied()
        .filter(|r| !available(r))
        .collect();
    let (leader, error) = match image.brokers.get(&p.leader) {
        None => (-1, code::LEADER_NOT_AVAILABLE),
        Some(b) if b.fenced => (-1, code::LEADER_NOT_AVAILABLE),
        Some(b) if !on_listener(b) => {
            let error = if rules.listener_not_found_error {
                code::LISTENER_NOT_FOUND
            } else {
                code::LEADER_NOT_AVAILABLE
            };
            (-1, error)
        }
        Some(_) if replicas.len() < p.replicas.len() || isr.len() < p.isr.len() => {
            (p.leader, code::REPLICA_NOT_AVAILABLE)
        }
        Some(_) => (p.leader, code::NONE),
    };
    PartitionView {
        error,
        leader,
        replicas,
        isr,
        offline,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runnel_metadata::BrokerEndpoint;

    fn broker(id: i32, fenced: bool, listeners: &[&str]) -> BrokerRegistration {
        BrokerRegistration {
            id,
            incarnation_id: uuid::Uuid::nil(),
            epoch: 1,
            host: "127.0.0.1".into(),
            port: 9092,
            rack: None,
            fenced,
            in_controlled_shutdown: false,
            offline_dirs: Default::default(),
            endpoints: listeners
                .iter()
                .map(|name| BrokerEndpoint {
                    name: (*name).into(),
                    host: "127.0.0.1".into(),
                    port: 9092,
                    security_protocol: 0,
                })
                .collect(),
        }
    }

    fn partition(leader: i32) -> PartitionImage {
        PartitionImage {
            partition: 0,
            replicas: vec![1, 2, 3],
            isr: vec![1, 2, 3],
            leader,
            leader_epoch: 7,
            partition_epoch: 9,
            adding_replicas: vec![],
            removing_replicas: vec![],
        }
    }

    /// Broker 1 live on both listeners, 2 fenced, 3 live on INTERNAL only; 4 unregistered.
    fn image() -> MetadataImage {
        let mut image = MetadataImage::empty("c".into());
        for b in [
            broker(1, false, &["PLAINTEXT", "INTERNAL"]),
            broker(2, true, &["PLAINTEXT", "INTERNAL"]),
            broker(3, false, &["INTERNAL"]),
        ] {
            image.brokers.insert(b.id, b);
        }
        image
    }

    fn plaintext(b: &BrokerRegistration) -> bool {
        b.endpoint("PLAINTEXT").is_some()
    }

    /// The brokers a Metadata response lists for the PLAINTEXT listener.
    fn listed(image: &MetadataImage) -> Vec<i32> {
        image
            .live_brokers()
            .filter(|b| plaintext(b))
            .map(|b| b.id)
            .collect()
    }

    /// KIP-858: broker 1's replica sits in a failed log dir: offline, also on v0's lists.
    #[test]
    fn a_replica_in_a_failed_log_dir_is_offline() {
        let topic = uuid::Uuid::from_u128(7);
        let mut image = image();
        if let Some(b) = image.brokers.get_mut(&1) {
            b.offline_dirs
                .record(&[uuid::Uuid::from_u128(100)], &[(topic, 0)]);
        }
        let v = partition_view(
            &image,
            topic,
            &partition(3),
            ViewRules::metadata(12),
            &|_| true,
        );
        assert_eq!(v.offline, vec![1, 2]);
        let v0 = partition_view(
            &image,
            topic,
            &partition(3),
            ViewRules::metadata(0),
            &|_| true,
        );
        assert_eq!(
            (v0.replicas, v0.error),
            (vec![3], code::REPLICA_NOT_AVAILABLE)
        );
        let other = partition_view(
            &image,
            uuid::Uuid::nil(),
            &partition(3),
            ViewRules::metadata(12),
            &|_| true,
        );
        assert_eq!(other.offline, vec![2], "another topic's replica is online");
    }

    #[test]
    fn a_fenced_leader_is_not_available() {
        let v = partition_view(
            &image(),
            uuid::Uuid::nil(),
            &partition(2),
            ViewRules::metadata(12),
            &plaintext,
        );
        assert_eq!((v.leader, v.error), (-1, code::LEADER_NOT_AVAILABLE));
        // v1+ lists replicas and ISR as recorded; the fenced and off-listener ones are offline.
        assert_eq!(v.replicas, vec![1, 2, 3]);
        assert_eq!(v.isr, vec![1, 2, 3]);
        assert_eq!(v.offline, vec![2, 3]);
    }

    #[test]
    fn an_unregistered_or_missing_leader_is_not_available() {
        for leader in [4, -1] {
            let v = partition_view(
                &image(),
                uuid::Uuid::nil(),
                &partition(leader),
                ViewRules::metadata(12),
                &plaintext,
            );
            assert_eq!((v.leader, v.error), (-1, code::LEADER_NOT_AVAILABLE));
        }
    }

    #[test]
    fn a_leader_without_the_listener_is_listener_not_found_from_v6() {
        let v = partition_view(
            &image(),
            uuid::Uuid::nil(),
            &partition(3),
            ViewRules::metadata(6),
            &plaintext,
        );
        assert_eq!((v.leader, v.error), (-1, code::LISTENER_NOT_FOUND));
        let v = partition_view(
            &image(),
            uuid::Uuid::nil(),
            &partition(3),
            ViewRules::metadata(5),
            &plaintext,
        );
        assert_eq!((v.leader, v.error), (-1, code::LEADER_NOT_AVAILABLE));
    }

    #[test]
    fn v0_leaves_unavailable_replicas_out_and_says_so() {
        let v = partition_view(
            &image(),
            uuid::Uuid::nil(),
            &partition(1),
            ViewRules::metadata(0),
            &plaintext,
        );
        assert_eq!((v.leader, v.error), (1, code::REPLICA_NOT_AVAILABLE));
        assert_eq!(v.replicas, vec![1]);
        assert_eq!(v.isr, vec![1]);
        let v = partition_view(
            &image(),
            uuid::Uuid::nil(),
            &partition(1),
            ViewRules::metadata(1),
            &plaintext,
        );
        assert_eq!((v.leader, v.error), (1, code::NONE));
    }

    #[test]
    fn a_named_leader_is_always_a_listed_broker() {
        let image = image();
        let listed = listed(&image);
        for leader in -1..=4 {
            for version in [0, 1, 5, 6, 12, 13] {
                let rules = ViewRules::metadata(version);
                let v = partition_view(
                    &image,
                    uuid::Uuid::nil(),
                    &partition(leader),
                    rules,
                    &plaintext,
                );
                assert!(
                    v.leader == -1 || listed.contains(&v.leader),
                    "leader {leader} v{version}: named {} not in {listed:?}",
                    v.leader
                );
                assert_eq!(
                    v.leader == -1,
                    v.error != code::NONE && v.error != code::REPLICA_NOT_AVAILABLE
                );
            }
        }
    }
}
