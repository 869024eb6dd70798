//! The metadata image: an immutable snapshot of the cluster metadata at one log offset.
//!
//! Nothing mutates an image in place. [`MetadataImage::apply`] returns a *new* image built from
//! the committed records, so readers holding an `Arc<MetadataImage>` never see a half-applied
//! change, and a rejected batch leaves the caller's image exactly as it was. Topics are kept
//! behind `Arc` so that applying a change to one topic copies only that topic. Applying also
//! yields what changed ([`crate::delta::MetadataDelta`]), so readers need not walk the image.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use thiserror::Error;
use uuid::Uuid;

use crate::acl::AclSet;
use crate::delta::{Applied, MetadataDelta};
use crate::records::{BrokerEndpoint, ConfigResource, MetadataRecord};

/// A registered broker, as recorded by `RegisterBroker` / `BrokerRegistrationChange`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerRegistration {
    pub id: i32,
    pub incarnation_id: Uuid,
    pub epoch: i64,
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
    pub fenced: bool,
    pub in_controlled_shutdown: bool,
    /// Every advertised listener; empty for a registration recorded before brokers
    /// registered them (then `host` / `port` answer every listener).
    pub endpoints: Vec<BrokerEndpoint>,
    /// This registration's failed log dirs and the replicas in them (KIP-858,
    /// `crate::offline_dirs`); empty for a new registration.
    pub offline_dirs: crate::offline_dirs::OfflineDirs,
}

impl BrokerRegistration {
    /// Where a client of `listener` reaches this broker: that listener's endpoint, `None`
    /// when the broker has no such listener (Kafka leaves it out, as
    /// `MetadataCache.getAliveBrokerNodes(listenerName)`). A registration without endpoints
    /// (an old record) answers its one registered address.
    pub fn endpoint(&self, listener: &str) -> Option<(&str, u16)> {
        if self.endpoints.is_empty() {
            return Some((&self.host, self.port));
        }
        self.endpoints
            .iter()
            .find(|e| e.name == listener)
            .map(|e| (e.host.as_str(), e.port))
    }

    /// Registered, unfenced and not shutting down: may lead partitions and receive replicas.
    pub fn is_active(&self) -> bool {
        !self.fenced && !self.in_controlled_shutdown
    }
}

/// One partition's replica set and leadership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionImage {
    pub partition: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub adding_replicas: Vec<i32>,
    pub removing_replicas: Vec<i32>,
}

/// A topic and its partitions (ids are dense: `0..partitions.len()`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicImage {
    pub name: String,
    pub id: Uuid,
    pub partitions: BTreeMap<i32, PartitionImage>,
}

/// Why a record could not be applied. The image it was applied to is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ImageError {
    #[error("record at offset {offset} does not follow offset {previous}")]
    NonIncreasingOffset { offset: i64, previous: i64 },
    #[error("offset {offset}: topic id {topic_id} is unknown")]
    UnknownTopicId { offset: i64, topic_id: Uuid },
    #[error("offset {offset}: topic '{name}' already exists")]
    DuplicateTopicName { offset: i64, name: String },
    #[error("offset {offset}: topic id {topic_id} already exists")]
    DuplicateTopicId { offset: i64, topic_id: Uuid },
    #[error("offset {offset}: invalid topic record: {reason}")]
    InvalidTopic { offset: i64, reason: String },
    #[error("offset {offset}: partition {partition} of topic {topic_id} is unknown")]
    UnknownPartition {
        offset: i64,
        topic_id: Uuid,
        partition: i32,
    },
    #[error("offset {offset}: partition {partition} of topic {topic_id}: {reason}")]
    InvalidPartition {
        offset: i64,
        topic_id: Uuid,
        partition: i32,
        reason: String,
    },
    #[error("offset {offset}: broker {broker_id} is not registered")]
    UnknownBroker { offset: i64, broker_id: i32 },
    #[error("offset {offset}: broker {broker_id}: epoch {epoch} does not match the registration epoch {current}")]
    BrokerEpochMismatch {
        offset: i64,
        broker_id: i32,
        epoch: i64,
        current: i64,
    },
    #[error("offset {offset}: config for unknown topic '{name}'")]
    ConfigForUnknownTopic { offset: i64, name: String },
    #[error("offset {offset}: ACL id {id} already exists")]
    DuplicateAclId { offset: i64, id: Uuid },
    #[error("offset {offset}: ACL id {id} is unknown")]
    UnknownAclId { offset: i64, id: Uuid },
    #[error("offset {offset}: invalid ACL: {reason}")]
    InvalidAcl { offset: i64, reason: String },
    #[error("offset {offset}: next producer id {next} is not above {current}")]
    ProducerIdsNotIncreasing {
        offset: i64,
        next: i64,
        current: i64,
    },
}

/// The whole cluster metadata at `offset` (the offset of the last applied record; -1 = none).
#[derive(Debug, Clone, PartialEq)]
pub struct MetadataImage {
    pub offset: i64,
    pub cluster_id: String,
    pub brokers: BTreeMap<i32, BrokerRegistration>,
    pub topics: BTreeMap<String, Arc<TopicImage>>,
    pub topic_ids: HashMap<Uuid, String>,
    pub configs: BTreeMap<ConfigResource, BTreeMap<String, String>>,
    pub next_producer_id: i64,
    pub features: BTreeMap<String, i16>,
    /// The ACLs (behind `Arc`: most batches leave them alone, so images share one set).
    pub acls: Arc<AclSet>,
    /// SCRAM credentials by (user, KIP-554 mechanism id).
    pub scram_credentials: BTreeMap<(String, i8), StoredScramCredential>,
    /// Client quotas by entity (KIP-546; `crate::quota`).
    pub client_quotas: crate::quota::ClientQuotas,
}

/// A salted SCRAM credential as the metadata stores it (never the password).
#[derive(Clone, PartialEq, Eq)]
pub struct StoredScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: u32,
}

/// Keeps the keys out of every `{:?}` of the image.
impl std::fmt::Debug for StoredScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "StoredScramCredential {{ iterations: {} }}",
            self.iterations
        )
    }
}

impl MetadataImage {
    /// The image before any record: no brokers, no topics, offset -1.
    pub fn empty(cluster_id: String) -> Self {
        Self {
            offset: -1,
            cluster_id,
            brokers: BTreeMap::new(),
            topics: BTreeMap::new(),
            topic_ids: HashMap::new(),
            configs: BTreeMap::new(),
            next_producer_id: 0,
            features: BTreeMap::new(),
            scram_credentials: BTreeMap::new(),
            client_quotas: BTreeMap::new(),
            acls: Arc::new(AclSet::default()),
        }
    }

    /// Applies records committed at strictly increasing offsets (each above `self.offset`).
    ///
    /// All-or-nothing: the first inconsistent record (unknown topic id, duplicate topic,
    /// replicas that break a partition's invariants, ...) rejects the whole batch, because a
    /// partially applied batch would be an image no log prefix describes.
    pub fn apply(&self, records: &[(i64, MetadataRecord)]) -> Result<MetadataImage, ImageError> {
        let mut next = self.clone();
        for (offset, record) in records {
            if *offset <= next.offset {
                return Err(ImageError::NonIncreasingOffset {
                    offset: *offset,
                    previous: next.offset,
                });
            }
            next.apply_one(*offset, record)?;
            next.offset = *offset;
        }
        debug_assert_eq!(next.check_consistency(), Ok(()));
        Ok(next)
    }

    /// [`MetadataImage::apply`], also returning what the batch changed (a [`MetadataDelta`]:
    /// the net difference between `self` and the new image). Callers that only need the image
    /// (the controller's speculative apply on every decision) use `apply` and build no delta.
    pub fn apply_with_delta(
        &self,
        records: &[(i64, MetadataRecord)],
    ) -> Result<Applied, ImageError> {
        let next = self.apply(records)?;
        let delta = MetadataDelta::of_batch(self, &next, records);
        Ok(Applied { image: next, delta })
    }

    pub fn topic(&self, name: &str) -> Option<&Arc<TopicImage>> {
        self.topics.get(name)
    }

    pub fn topic_by_id(&self, id: &Uuid) -> Option<&Arc<TopicImage>> {
        self.topic_ids
            .get(id)
            .and_then(|name| self.topics.get(name))
    }

    pub fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionImage> {
        self.topics
            .get(topic)
            .and_then(|t| t.partitions.get(&partition))
    }

    /// Registered and not fenced brokers, by id.
    pub fn live_brokers(&self) -> impl Iterator<Item = &BrokerRegistration> {
        self.brokers.values().filter(|b| !b.fenced)
    }

    /// The dynamic overrides of one topic (empty if none or if the topic is unknown).
    pub fn topic_overrides(&self, topic: &str) -> BTreeMap<String, String> {
        self.configs
            .get(&ConfigResource::Topic(topic.to_string()))
            .cloned()
            .unwrap_or_default()
    }

    /// The dynamic configs of a broker resource (`""` = cluster default).
    pub fn broker_configs(&self, resource_name: &str) -> BTreeMap<String, String> {
        self.configs
            .get(&ConfigResource::Broker(resource_name.to_string()))
            .cloned()
            .unwrap_or_default()
    }

    /// The config overrides of a group (empty if none).
    pub fn group_configs(&self, group: &str) -> BTreeMap<String, String> {
        self.configs
            .get(&ConfigResource::Group(group.to_string()))
            .cloned()
            .unwrap_or_default()
    }

    /// Checks the invariants every image must satisfy; used by tests and debug builds.
    pub fn check_consistency(&self) -> Result<(), String> {
        if self.topics.len() != self.topic_ids.len() {
            return Err("topic maps differ in size".into());
        }
        for (name, topic) in &self.topics {
            if &topic.name != name || self.topic_ids.get(&topic.id) != Some(name) {
                return Err(format!("topic '{name}' is not indexed consistently"));
            }
            for (i, (id, p)) in topic.partitions.iter().enumerate() {
                if *id != i as i32 || p.partition != *id {
                    return Err(format!(
                        "topic '{name}': partition ids are not dense at {id}"
                    ));
                }
                check_partition(p).map_err(|e| format!("{name}-{id}: {e}"))?;
            }
        }
        for resource in self.configs.keys() {
            if let ConfigResource::Topic(t) = resource {
                if !self.topics.contains_key(t) {
                    return Err(format!("configs for unknown topic '{t}'"));
                }
            }
        }
        Ok(())
    }

    fn apply_one(&mut self, offset: i64, record: &MetadataRecord) -> Result<(), ImageError> {
        match record {
            MetadataRecord::RegisterBroker {
                broker_id,
                incarnation_id,
                broker_epoch,
                host,
                port,
                rack,
                fenced,
                endpoints,
            } => {
                if let Some(old) = self.brokers.get(broker_id) {
                    if *broker_epoch < old.epoch {
                        return Err(ImageError::BrokerEpochMismatch {
                            offset,
                            broker_id: *broker_id,
                            epoch: *broker_epoch,
                            current: old.epoch,
                        });
                    }
                }
                self.brokers.insert(
                    *broker_id,
                    BrokerRegistration {
                        id: *broker_id,
                        incarnation_id: *incarnation_id,
                        epoch: *broker_epoch,
                        host: host.clone(),
                        port: *port,
                        rack: rack.clone(),
                        fenced: *fenced,
                        in_controlled_shutdown: false,
                        endpoints: endpoints.clone(),
                        offline_dirs: Default::default(),
                    },
                );
            }
            MetadataRecord::BrokerRegistrationChange {
                broker_id,
                broker_epoch,
                fenced,
                in_controlled_shutdown,
            } => {
                let broker = self.broker_with_epoch(offset, *broker_id, *broker_epoch)?;
                if let Some(f) = fenced {
                    broker.fenced = *f;
                }
                if let Some(s) = in_controlled_shutdown {
                    broker.in_controlled_shutdown = *s;
                }
            }
            MetadataRecord::BrokerDirsOffline {
                broker_id,
                broker_epoch,
                dirs,
                replicas,
            } => {
                let broker = self.broker_with_epoch(offset, *broker_id, *broker_epoch)?;
                broker.offline_dirs.record(dirs, replicas);
            }
            MetadataRecord::UnregisterBroker {
                broker_id,
                broker_epoch,
            } => {
                self.broker_with_epoch(offset, *broker_id, *broker_epoch)?;
                self.brokers.remove(broker_id);
            }
            MetadataRecord::Topic { name, topic_id } => {
                if name.is_empty() || topic_id.is_nil() {
                    return Err(ImageError::InvalidTopic {
                        offset,
                        reason: "empty name or nil topic id".into(),
                    });
                }
                if self.topics.contains_key(name) {
                    return Err(ImageError::DuplicateTopicName {
                        offset,
                        name: name.clone(),
                    });
                }
                if self.topic_ids.contains_key(topic_id) {
                    return Err(ImageError::DuplicateTopicId {
                        offset,
                        topic_id: *topic_id,
                    });
                }
                self.topic_ids.insert(*topic_id, name.clone());
                self.topics.insert(
                    name.clone(),
                    Arc::new(TopicImage {
                        name: name.clone(),
                        id: *topic_id,
                        partitions: BTreeMap::new(),
                    }),
                );
            }
            MetadataRecord::Partition {
                topic_id,
                partition_id,
                replicas,
                isr,
                leader,
                leader_epoch,
                partition_epoch,
                adding_replicas,
                removing_replicas,
            } => {
                let partition = PartitionImage {
                    partition: *partition_id,
                    replicas: replicas.clone(),
                    isr: isr.clone(),
                    leader: *leader,
                    leader_epoch: *leader_epoch,
                    partition_epoch: *partition_epoch,
                    adding_replicas: adding_replicas.clone(),
                    removing_replicas: removing_replicas.clone(),
                };
                let invalid = |reason: String| ImageError::InvalidPartition {
                    offset,
                    topic_id: *topic_id,
                    partition: *partition_id,
                    reason,
                };
                check_partition(&partition).map_err(invalid)?;
                let topic = self.topic_mut(offset, topic_id)?;
                let expected = topic.partitions.len() as i32;
                if *partition_id != expected {
                    return Err(invalid(format!(
                        "partition ids must be dense: expected partition {expected}"
                    )));
                }
                topic.partitions.insert(*partition_id, partition);
            }
            MetadataRecord::PartitionChange {
                topic_id,
                partition_id,
                leader,
                isr,
                replicas,
                adding_replicas,
                removing_replicas,
            } => {
                let topic = self.topic_mut(offset, topic_id)?;
                let Some(current) = topic.partitions.get(partition_id) else {
                    return Err(ImageError::UnknownPartition {
                        offset,
                        topic_id: *topic_id,
                        partition: *partition_id,
                    });
                };
                let changed = apply_partition_change(
                    current,
                    *leader,
                    isr.as_ref(),
                    replicas.as_ref(),
                    adding_replicas.as_ref(),
                    removing_replicas.as_ref(),
                );
                check_partition(&changed).map_err(|reason| ImageError::InvalidPartition {
                    offset,
                    topic_id: *topic_id,
                    partition: *partition_id,
                    reason,
                })?;
                let assigned = replicas.as_ref().map(|_| changed.replicas.clone());
                topic.partitions.insert(*partition_id, changed);
                if let Some(assigned) = assigned {
                    self.prune_offline_replicas(*topic_id, *partition_id, &assigned);
                }
            }
            MetadataRecord::Config {
                resource,
                name,
                value,
            } => {
                if let ConfigResource::Topic(topic) = resource {
                    if !self.topics.contains_key(topic) {
                        return Err(ImageError::ConfigForUnknownTopic {
                            offset,
                            name: topic.clone(),
                        });
                    }
                }
                match value {
                    Some(v) => {
                        self.configs
                            .entry(resource.clone())
                            .or_default()
                            .insert(name.clone(), v.clone());
                    }
                    None => {
                        if let Some(map) = self.configs.get_mut(resource) {
                            map.remove(name);
                            if map.is_empty() {
                                self.configs.remove(resource);
                            }
                        }
                    }
                }
            }
            MetadataRecord::RemoveTopic { topic_id } => {
                let Some(name) = self.topic_ids.remove(topic_id) else {
                    return Err(ImageError::UnknownTopicId {
                        offset,
                        topic_id: *topic_id,
                    });
                };
                self.topics.remove(&name);
                self.configs.remove(&ConfigResource::Topic(name));
                for b in self.brokers.values_mut() {
                    b.offline_dirs.forget_topic(*topic_id);
                }
            }
            MetadataRecord::ProducerIds {
                next_producer_id, ..
            } => {
                if *next_producer_id <= self.next_producer_id {
                    return Err(ImageError::ProducerIdsNotIncreasing {
                        offset,
                        next: *next_producer_id,
                        current: self.next_producer_id,
                    });
                }
                self.next_producer_id = *next_producer_id;
            }
            MetadataRecord::FeatureLevel { name, level } => {
                self.features.insert(name.clone(), *level);
            }
            MetadataRecord::AccessControlEntry { id, acl } => {
                if let Err(e) = acl.validate_new() {
                    return Err(ImageError::InvalidAcl {
                        offset,
                        reason: e.message,
                    });
                }
                if !Arc::make_mut(&mut self.acls).insert(*id, acl.clone()) {
                    return Err(ImageError::DuplicateAclId { offset, id: *id });
                }
            }
            MetadataRecord::RemoveAccessControlEntry { id } => {
                if Arc::make_mut(&mut self.acls).remove(id).is_none() {
                    return Err(ImageError::UnknownAclId { offset, id: *id });
                }
            }
            MetadataRecord::NoOp => {}
            MetadataRecord::UserScramCredential {
                name,
                mechanism,
                salt,
                stored_key,
                server_key,
                iterations,
            } => {
                self.scram_credentials.insert(
                    (name.clone(), *mechanism),
                    StoredScramCredential {
                        salt: salt.0.clone(),
                        stored_key: stored_key.0.clone(),
                        server_key: server_key.0.clone(),
                        iterations: *iterations,
                    },
                );
            }
            MetadataRecord::RemoveUserScramCredential { name, mechanism } => {
                self.scram_credentials.remove(&(name.clone(), *mechanism));
            }
            MetadataRecord::ClientQuota { entity, key, value } => {
                crate::quota::replay(&mut self.client_quotas, entity, key, value.map(|v| v.0));
            }
        }
        Ok(())
    }

    fn topic_mut(&mut self, offset: i64, topic_id: &Uuid) -> Result<&mut TopicImage, ImageError> {
        let name = self
            .topic_ids
            .get(topic_id)
            .ok_or(ImageError::UnknownTopicId {
                offset,
                topic_id: *topic_id,
            })?;
        let topic = self
            .topics
            .get_mut(name)
            .ok_or(ImageError::UnknownTopicId {
                offset,
                topic_id: *topic_id,
            })?;
        Ok(Arc::make_mut(topic))
    }

    fn broker_with_epoch(
        &mut self,
        offset: i64,
        broker_id: i32,
        epoch: i64,
    ) -> Result<&mut BrokerRegistration, ImageError> {
        let broker = self
            .brokers
            .get_mut(&broker_id)
            .ok_or(ImageError::UnknownBroker { offset, broker_id })?;
        if broker.epoch != epoch {
            return Err(ImageError::BrokerEpochMismatch {
                offset,
                broker_id,
                epoch,
                current: broker.epoch,
            });
        }
        Ok(broker)
    }
}

/// The partition after a `PartitionChange`.
///
/// The partition epoch always grows (it plays the role of the ZooKeeper znode version). The
/// leader epoch grows when the leader changes, except for the partition's *first* election
/// (leader -1 and partition epoch 0, i.e. untouched since its `Partition` record): Kafka
/// gives a new partition's first leader epoch 0 (spec D.1), and our controller creates
/// partitions leaderless and elects in a separate change.
fn apply_partition_change(
    current: &PartitionImage,
    leader: Option<i32>,
    isr: Option<&Vec<i32>>,
    replicas: Option<&Vec<i32>>,
    adding: Option<&Vec<i32>>,
    removing: Option<&Vec<i32>>,
) -> PartitionImage {
    let mut next = current.clone();
    next.partition_epoch = current.partition_epoch.saturating_add(1);
    if let Some(l) = leader {
        let first_election = current.leader == -1 && current.partition_epoch == 0;
        if l != current.leader && !first_election {
            next.leader_epoch = current.leader_epoch.saturating_add(1);
        }
        next.leader = l;
    }
    if let Some(v) = isr {
        next.isr = v.clone();
    }
    if let Some(v) = replicas {
        next.replicas = v.clone();
    }
    if let Some(v) = adding {
        next.adding_replicas = v.clone();
    }
    if let Some(v) = removing {
        next.removing_replicas = v.clone();
    }
    next
}

/// The invariants of a partition: non-empty replicas without duplicates; ISR, adding and
/// removing replicas are duplicate-free subsets of the replicas; the leader (if any) is a
/// replica in the ISR.
fn check_partition(p: &PartitionImage) -> Result<(), String> {
    if p.partition < 0 {
        return Err(format!("negative partition id {}", p.partition));
    }
    if p.replicas.is_empty() {
        return Err("empty replica list".into());
    }
    let replicas = distinct(&p.replicas).ok_or("duplicate broker in replicas")?;
    for (what, list) in [
        ("isr", &p.isr),
        ("adding_replicas", &p.adding_replicas),
        ("removing_replicas", &p.removing_replicas),
    ] {
        let set = distinct(list).ok_or_else(|| format!("duplicate broker in {what}"))?;
        if !set.is_subset(&replicas) {
            return Err(format!(
                "{what} {list:?} is not a subset of replicas {:?}",
                p.replicas
            ));
        }
    }
    if p.leader != -1 && !p.isr.contains(&p.leader) {
        return Err(format!("leader {} is not in the ISR {:?}", p.leader, p.isr));
    }
    if p.leader < -1 {
        return Err(format!("invalid leader {}", p.leader));
    }
    Ok(())
}

fn distinct(list: &[i32]) -> Option<HashSet<i32>> {
    let set: HashSet<i32> = list.iter().copied().collect();
    (set.len() == list.len()).then_some(set)
}
