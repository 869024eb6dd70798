//! Metadata records: the only way the cluster metadata changes (spec I.2).
//!
//! The controller *decides* and emits these; the metadata log *records* them in order; every
//! node *applies* them to an immutable [`crate::image::MetadataImage`]. They mirror KRaft's
//! record types so that the log reads like Kafka's `__cluster_metadata` and a later switch to
//! a replicated log only changes how they are stored, not what they mean.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::acl::AclBinding;

/// One listener of a registered broker, as KRaft's `BrokerRegistrationRecord.BrokerEndpoint`:
/// the listener name, its advertised host and port, and Kafka's `SecurityProtocol` id
/// (0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, 3 SASL_SSL).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerEndpoint {
    pub name: String,
    pub host: String,
    pub port: u16,
    pub security_protocol: i16,
}

/// The resource a [`MetadataRecord::Config`] applies to.
///
/// `Broker("")` is the cluster-wide dynamic default (Kafka's `<default>` entity); `Broker("3")`
/// is broker 3's dynamic config.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ConfigResource {
    Topic(String),
    Broker(String),
    /// A group's config overrides (resource type GROUP, 32), by group id.
    Group(String),
}

impl ConfigResource {
    /// Kafka's `ConfigResource.Type` id (2 = topic, 4 = broker, 32 = group), as in
    /// `ConfigRecord`.
    pub fn resource_type(&self) -> i8 {
        match self {
            ConfigResource::Topic(_) => 2,
            ConfigResource::Broker(_) => 4,
            ConfigResource::Group(_) => 32,
        }
    }

    /// The resource name (topic name, broker id, or "" for the cluster default).
    pub fn name(&self) -> &str {
        match self {
            ConfigResource::Topic(n) | ConfigResource::Broker(n) | ConfigResource::Group(n) => n,
        }
    }
}

/// One metadata change. Field meanings follow KRaft's record JSON schemas.
///
/// Stored inside a versioned envelope (`record_format`): the derives here write and read only
/// the record's body (`remote = "Self"` makes them inherent functions the envelope calls).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub enum MetadataRecord {
    /// A broker (re-)registered; `broker_epoch` grows with every registration.
    RegisterBroker {
        broker_id: i32,
        incarnation_id: Uuid,
        broker_epoch: i64,
        host: String,
        port: u16,
        rack: Option<String>,
        fenced: bool,
        /// Every advertised listener (KRaft's `BrokerRegistrationRecord.EndPoints`); `host` /
        /// `port` stay the inter-broker listener's. Records written before this field have
        /// none (read back as empty) and are answered at `host` / `port` on every listener.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        endpoints: Vec<BrokerEndpoint>,
    },
    /// Fencing / controlled-shutdown change of a registered broker; `None` = unchanged.
    BrokerRegistrationChange {
        broker_id: i32,
        broker_epoch: i64,
        fenced: Option<bool>,
        in_controlled_shutdown: Option<bool>,
    },
    /// A broker was decommissioned.
    UnregisterBroker { broker_id: i32, broker_epoch: i64 },
    /// Log dirs of a broker's current registration went offline (KIP-858: what Kafka writes
    /// as a `BrokerRegistrationChangeRecord` v2 whose `LogDirs` leave them out). `replicas`
    /// are the partitions (topic id, index) the broker reported in them: Kafka reads them
    /// from the `Directories` its brokers assign through AssignReplicasToDirs; Runnel records
    /// only the assignments that matter, those of failed dirs. A later registration of the
    /// broker (a restart) clears both.
    BrokerDirsOffline {
        broker_id: i32,
        broker_epoch: i64,
        dirs: Vec<Uuid>,
        replicas: Vec<(Uuid, i32)>,
    },
    /// A topic was created (its partitions follow as `Partition` records).
    Topic { name: String, topic_id: Uuid },
    /// A partition was created. `leader` is -1 when there is no leader yet.
    Partition {
        topic_id: Uuid,
        partition_id: i32,
        replicas: Vec<i32>,
        isr: Vec<i32>,
        leader: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        adding_replicas: Vec<i32>,
        removing_replicas: Vec<i32>,
    },
    /// A change of an existing partition; `None` fields are unchanged. Applying it bumps the
    /// partition epoch; a leader change bumps the leader epoch (see the image for the one
    /// exception: a partition's first election keeps the recorded epoch).
    PartitionChange {
        topic_id: Uuid,
        partition_id: i32,
        leader: Option<i32>,
        isr: Option<Vec<i32>>,
        replicas: Option<Vec<i32>>,
        adding_replicas: Option<Vec<i32>>,
        removing_replicas: Option<Vec<i32>>,
    },
    /// Set (`Some`) or delete (`None`) one dynamic config key.
    Config {
        resource: ConfigResource,
        name: String,
        value: Option<String>,
    },
    /// The topic and all its partitions (and its config overrides) are gone.
    RemoveTopic { topic_id: Uuid },
    /// A block of producer ids was handed out; the next block starts at `next_producer_id`.
    ProducerIds {
        broker_id: i32,
        broker_epoch: i64,
        next_producer_id: i64,
    },
    /// A finalized feature level (e.g. `metadata.version`).
    FeatureLevel { name: String, level: i16 },
    /// An ACL was created, under a fresh id (KRaft's AccessControlEntryRecord).
    AccessControlEntry { id: Uuid, acl: AclBinding },
    /// The ACL with this id was deleted (KRaft's RemoveAccessControlEntryRecord).
    RemoveAccessControlEntry { id: Uuid },
    /// Heartbeat of the log: advances the offset, changes nothing.
    NoOp,
    /// A user's salted SCRAM credential for one mechanism (KRaft's
    /// `UserScramCredentialRecord`; `mechanism` is KIP-554's id: 1 = SHA-256, 2 = SHA-512).
    /// Only the salted form is stored: the password never reaches the metadata.
    UserScramCredential {
        name: String,
        mechanism: i8,
        salt: SecretBytes,
        stored_key: SecretBytes,
        server_key: SecretBytes,
        iterations: u32,
    },
    /// A user's credential for one mechanism was deleted.
    RemoveUserScramCredential { name: String, mechanism: i8 },
    /// Set (`Some`) or remove (`None`) one quota key of a client quota entity (KRaft's
    /// `ClientQuotaRecord`, KIP-546).
    ClientQuota {
        entity: crate::quota::QuotaEntity,
        key: String,
        value: Option<crate::quota::QuotaValue>,
    },
}

impl MetadataRecord {
    /// KRaft's record type id (the `apiKey` in the record frame, spec I.2).
    pub fn api_key(&self) -> i16 {
        match self {
            MetadataRecord::RegisterBroker { .. } => 0,
            MetadataRecord::UnregisterBroker { .. } => 1,
            MetadataRecord::Topic { .. } => 2,
            MetadataRecord::Partition { .. } => 3,
            MetadataRecord::Config { .. } => 4,
            MetadataRecord::PartitionChange { .. } => 5,
            MetadataRecord::AccessControlEntry { .. } => 18,
            MetadataRecord::RemoveAccessControlEntry { .. } => 19,
            MetadataRecord::RemoveTopic { .. } => 9,
            MetadataRecord::FeatureLevel { .. } => 12,
            MetadataRecord::ProducerIds { .. } => 15,
            MetadataRecord::BrokerRegistrationChange { .. } => 17,
            MetadataRecord::BrokerDirsOffline { .. } => 17,
            MetadataRecord::NoOp => 20,
            MetadataRecord::UserScramCredential { .. } => 11,
            MetadataRecord::RemoveUserScramCredential { .. } => 22,
            MetadataRecord::ClientQuota { .. } => 14,
        }
    }

    /// KRaft's record name, for logs.
    pub fn type_name(&self) -> &'static str {
        match self {
            MetadataRecord::RegisterBroker { .. } => "RegisterBrokerRecord",
            MetadataRecord::UnregisterBroker { .. } => "UnregisterBrokerRecord",
            MetadataRecord::Topic { .. } => "TopicRecord",
            MetadataRecord::Partition { .. } => "PartitionRecord",
            MetadataRecord::Config { .. } => "ConfigRecord",
            MetadataRecord::PartitionChange { .. } => "PartitionChangeRecord",
            MetadataRecord::AccessControlEntry { .. } => "AccessControlEntryRecord",
            MetadataRecord::RemoveAccessControlEntry { .. } => "RemoveAccessControlEntryRecord",
            MetadataRecord::RemoveTopic { .. } => "RemoveTopicRecord",
            MetadataRecord::FeatureLevel { .. } => "FeatureLevelRecord",
            MetadataRecord::ProducerIds { .. } => "ProducerIdsRecord",
            MetadataRecord::BrokerRegistrationChange { .. } => "BrokerRegistrationChangeRecord",
            MetadataRecord::BrokerDirsOffline { .. } => "BrokerRegistrationChangeRecord",
            MetadataRecord::NoOp => "NoOpRecord",
            MetadataRecord::UserScramCredential { .. } => "UserScramCredentialRecord",
            MetadataRecord::RemoveUserScramCredential { .. } => "RemoveUserScramCredentialRecord",
            MetadataRecord::ClientQuota { .. } => "ClientQuotaRecord",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_json() {
        let recs = vec![
            MetadataRecord::Topic {
                name: "t".into(),
                topic_id: Uuid::from_u128(7),
            },
            MetadataRecord::Config {
                resource: ConfigResource::Broker(String::new()),
                name: "log.retention.ms".into(),
                value: None,
            },
            MetadataRecord::PartitionChange {
                topic_id: Uuid::from_u128(7),
                partition_id: 0,
                leader: Some(1),
                isr: Some(vec![1, 2]),
                replicas: None,
                adding_replicas: None,
                removing_replicas: None,
            },
            MetadataRecord::NoOp,
        ];
        let json = serde_json::to_string(&recs).unwrap();
        let back: Vec<MetadataRecord> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, recs);
    }

    /// A registration written before `endpoints` existed replays with none; one with endpoints
    /// keeps them.
    #[test]
    fn register_broker_endpoints_are_a_defaulted_field() {
        let old = r#"{"v":1,"r":{"RegisterBroker":{"broker_id":1,"incarnation_id":"00000000-0000-0000-0000-000000000001","broker_epoch":3,"host":"h","port":9092,"rack":null,"fenced":true}}}"#;
        let MetadataRecord::RegisterBroker {
            endpoints, port, ..
        } = serde_json::from_str::<MetadataRecord>(old).unwrap()
        else {
            panic!("not a registration")
        };
        assert!(endpoints.is_empty());
        assert_eq!(port, 9092);
        let new = MetadataRecord::RegisterBroker {
            broker_id: 1,
            incarnation_id: Uuid::from_u128(1),
            broker_epoch: 3,
            host: "h".into(),
            port: 9092,
            rack: None,
            fenced: true,
            endpoints: vec![BrokerEndpoint {
                name: "SASL_PLAINTEXT".into(),
                host: "h".into(),
                port: 9093,
                security_protocol: 2,
            }],
        };
        let json = serde_json::to_string(&new).unwrap();
        assert_eq!(serde_json::from_str::<MetadataRecord>(&json).unwrap(), new);
    }

    #[test]
    fn api_keys_match_kraft() {
        assert_eq!(MetadataRecord::NoOp.api_key(), 20);
        assert_eq!(
            MetadataRecord::RemoveTopic {
                topic_id: Uuid::nil()
            }
            .api_key(),
            9
        );
        // AccessControlEntryRecord.json / RemoveAccessControlEntryRecord.json.
        let acl_id = Uuid::from_u128(1);
        assert_eq!(
            MetadataRecord::RemoveAccessControlEntry { id: acl_id }.api_key(),
            19
        );
        assert_eq!(ConfigResource::Topic("a".into()).resource_type(), 2);
        assert_eq!(ConfigResource::Broker("".into()).resource_type(), 4);
        assert_eq!(ConfigResource::Group("g".into()).resource_type(), 32);
    }
}

/// Bytes of a credential (a SCRAM salt or key): stored and replicated as they are, but never
/// shown by `{:?}`, so a logged record cannot leak what a password guess is checked against.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SecretBytes(pub Vec<u8>);

impl std::fmt::Debug for SecretBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<{} secret bytes>", self.0.len())
    }
}

#[cfg(test)]
mod secret_tests {
    use super::*;

    #[test]
    fn a_scram_record_never_shows_its_keys() {
        let record = MetadataRecord::UserScramCredential {
            name: "alice".into(),
            mechanism: 2,
            salt: SecretBytes(vec![0xAB; 16]),
            stored_key: SecretBytes(vec![0xCD; 32]),
            server_key: SecretBytes(vec![0xEF; 32]),
            iterations: 8192,
        };
        let shown = format!("{record:?}");
        assert!(
            !shown.contains("171") && !shown.contains("205") && !shown.contains("239"),
            "{shown}"
        );
        assert!(
            shown.contains("alice") && shown.contains("<32 secret bytes>"),
            "{shown}"
        );
        // The stored form is unchanged: plain byte arrays.
        let json = serde_json::to_string(&SecretBytes(vec![1, 2])).expect("serializes");
        assert_eq!(json, "[1,2]");
    }
}
