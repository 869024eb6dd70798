//! A metadata record as Kafka's JSON of the KRaft record (`MetadataJsonConverters.writeJson`,
//! what kafka-dump-log.sh's `--cluster-metadata-decoder` prints): the schema's field names in
//! camelCase, in schema order, tagged fields only when they differ from their default, UUIDs
//! as `Uuid.toString()` (base64url) and `bytes` as padded base64 (Jackson's `BinaryNode`).
//!
//! The schemas are `metadata/src/main/resources/common/metadata/*.json` in Kafka. Each record
//! is written at the lowest schema version that holds every field Runnel's record carries
//! (Runnel keeps no log directories, ELR or broker features in its records, so the versions
//! that add them would only add defaults). Where Runnel's record and Kafka's schema differ,
//! Kafka's reading wins: `PartitionChangeRecord.leader` -2 means unchanged, so a Runnel record
//! that leaves the leader unchanged omits it; `BrokerRegistrationChangeRecord.fenced` is 1
//! (fenced), -1 (unfenced) or absent (no change).

use runnel_metadata::records::{BrokerEndpoint, MetadataRecord};

use crate::cmd::topic_id::{base64_standard, base64url};

/// Kafka's JSON of `record`: its schema version and its `data` object.
pub fn kafka_json(record: &MetadataRecord) -> (i16, String) {
    use MetadataRecord as R;
    match record {
        R::RegisterBroker {
            broker_id,
            incarnation_id,
            broker_epoch,
            host,
            port,
            rack,
            fenced,
            endpoints,
        } => {
            let endpoints = endpoints_json(endpoints, host, *port);
            let data = Obj::new()
                .field("brokerId", broker_id)
                .field("incarnationId", uuid(incarnation_id))
                .field("brokerEpoch", broker_epoch)
                .raw("endPoints", endpoints)
                .raw("features", "[]".into())
                .field("rack", rack)
                .field("fenced", fenced);
            (0, data.render())
        }
        R::BrokerRegistrationChange {
            broker_id,
            broker_epoch,
            fenced,
            in_controlled_shutdown,
        } => {
            let mut data = Obj::new()
                .field("brokerId", broker_id)
                .field("brokerEpoch", broker_epoch);
            if let Some(f) = fenced {
                data = data.field("fenced", if *f { 1 } else { -1 });
            }
            // Kafka's int8 has no "left controlled shutdown" (a registration clears it).
            let in_shutdown = *in_controlled_shutdown == Some(true);
            if in_shutdown {
                data = data.field("inControlledShutdown", 1);
            }
            (i16::from(in_shutdown), data.render())
        }
        // Kafka writes a failed dir as BrokerRegistrationChangeRecord v2 whose `logDirs` are
        // the dirs still online; Runnel's record names the failed dirs and their replicas
        // instead (`runnel_metadata::offline_dirs`), shown under its own field names.
        R::BrokerDirsOffline {
            broker_id,
            broker_epoch,
            dirs,
            replicas,
        } => {
            let dirs: Vec<String> = dirs.iter().map(uuid).collect();
            let replicas: Vec<serde_json::Value> = replicas
                .iter()
                .map(|(t, p)| serde_json::json!({"topicId": uuid(t), "partitionId": p}))
                .collect();
            let data = Obj::new()
                .field("brokerId", broker_id)
                .field("brokerEpoch", broker_epoch)
                .field("offlineLogDirs", dirs)
                .field("offlineReplicas", replicas);
            (2, data.render())
        }
        R::UnregisterBroker {
            broker_id,
            broker_epoch,
        } => (
            0,
            Obj::new()
                .field("brokerId", broker_id)
                .field("brokerEpoch", broker_epoch)
                .render(),
        ),
        R::Topic { name, topic_id } => (
            0,
            Obj::new()
                .field("name", name)
                .field("topicId", uuid(topic_id))
                .render(),
        ),
        R::Partition {
            topic_id,
            partition_id,
            replicas,
            isr,
            leader,
            leader_epoch,
            partition_epoch,
            adding_replicas,
            removing_replicas,
        } => (
            0,
            Obj::new()
                .field("partitionId", partition_id)
                .field("topicId", uuid(topic_id))
                .field("replicas", replicas)
                .field("isr", isr)
                .field("removingReplicas", removing_replicas)
                .field("addingReplicas", adding_replicas)
                .field("leader", leader)
                .field("leaderEpoch", leader_epoch)
                .field("partitionEpoch", partition_epoch)
                .render(),
        ),
        R::PartitionChange {
            topic_id,
            partition_id,
            leader,
            isr,
            replicas,
            adding_replicas,
            removing_replicas,
        } => (
            0,
            Obj::new()
                .field("partitionId", partition_id)
                .field("topicId", uuid(topic_id))
                .tagged("isr", isr)
                .tagged("leader", leader)
                .tagged("replicas", replicas)
                .tagged("removingReplicas", removing_replicas)
                .tagged("addingReplicas", adding_replicas)
                .render(),
        ),
        R::Config {
            resource,
            name,
            value,
        } => (
            0,
            Obj::new()
                .field("resourceType", resource.resource_type())
                .field("resourceName", resource.name())
                .field("name", name)
                .field("value", value)
                .render(),
        ),
        R::RemoveTopic { topic_id } => (0, Obj::new().field("topicId", uuid(topic_id)).render()),
        R::ProducerIds {
            broker_id,
            broker_epoch,
            next_producer_id,
        } => (
            0,
            Obj::new()
                .field("brokerId", broker_id)
                .field("brokerEpoch", broker_epoch)
                .field("nextProducerId", next_producer_id)
                .render(),
        ),
        R::FeatureLevel { name, level } => (
            0,
            Obj::new()
                .field("name", name)
                .field("featureLevel", level)
                .render(),
        ),
        R::AccessControlEntry { id, acl } => (
            0,
            Obj::new()
                .field("id", uuid(id))
                .field("resourceType", acl.resource_type.code())
                .field("resourceName", &acl.resource_name)
                .field("patternType", acl.pattern_type.code())
                .field("principal", &acl.principal)
                .field("host", &acl.host)
                .field("operation", acl.operation.code())
                .field("permissionType", acl.permission.code())
                .render(),
        ),
        R::RemoveAccessControlEntry { id } => (0, Obj::new().field("id", uuid(id)).render()),
        R::NoOp => (0, Obj::new().render()),
        R::UserScramCredential {
            name,
            mechanism,
            salt,
            stored_key,
            server_key,
            iterations,
        } => (
            0,
            Obj::new()
                .field("name", name)
                .field("mechanism", mechanism)
                .field("salt", base64_standard(&salt.0))
                .field("storedKey", base64_standard(&stored_key.0))
                .field("serverKey", base64_standard(&server_key.0))
                .field("iterations", iterations)
                .render(),
        ),
        R::RemoveUserScramCredential { name, mechanism } => (
            0,
            Obj::new()
                .field("name", name)
                .field("mechanism", mechanism)
                .render(),
        ),
        R::ClientQuota { entity, key, value } => {
            let parts = [
                (runnel_metadata::quota::USER, &entity.user),
                (runnel_metadata::quota::CLIENT_ID, &entity.client_id),
            ];
            let entity: Vec<String> = parts
                .iter()
                .filter_map(|(kind, name)| {
                    let name = name.as_ref()?.to_wire();
                    Some(
                        Obj::new()
                            .field("entityType", kind)
                            .field("entityName", name)
                            .render(),
                    )
                })
                .collect();
            let data = Obj::new()
                .raw("entity", format!("[{}]", entity.join(",")))
                .field("key", key)
                // Kafka ignores the value of a removal; its default is 0.0.
                .field("value", value.as_ref().map_or(0.0, |v| v.0))
                .field("remove", value.is_none());
            (0, data.render())
        }
    }
}

/// `RegisterBrokerRecord.EndPoints`. A registration from before Runnel recorded its listeners
/// has only `host` / `port`, its one PLAINTEXT listener then.
fn endpoints_json(endpoints: &[BrokerEndpoint], host: &str, port: u16) -> String {
    let one = |name: &str, host: &str, port: u16, protocol: i16| {
        Obj::new()
            .field("name", name)
            .field("host", host)
            .field("port", port)
            .field("securityProtocol", protocol)
            .render()
    };
    let items: Vec<String> = if endpoints.is_empty() {
        vec![one("PLAINTEXT", host, port, 0)]
    } else {
        endpoints
            .iter()
            .map(|e| one(&e.name, &e.host, e.port, e.security_protocol))
            .collect()
    };
    format!("[{}]", items.join(","))
}

/// Kafka's `Uuid.toString()` of a record's UUID.
fn uuid(id: &impl AsRef<[u8]>) -> String {
    base64url(id.as_ref())
}

/// A JSON object whose members keep the order they were added in (Kafka's schema order).
struct Obj(Vec<(&'static str, String)>);

impl Obj {
    fn new() -> Self {
        Obj(Vec::new())
    }

    fn field(self, name: &'static str, value: impl serde::Serialize) -> Self {
        // Only a non-finite float fails to serialise; Kafka's quotas never hold one.
        let json = serde_json::to_string(&value).unwrap_or_else(|_| "null".into());
        self.raw(name, json)
    }

    /// A tagged field: written only when it differs from its default (`None` here).
    fn tagged<T: serde::Serialize>(self, name: &'static str, value: &Option<T>) -> Self {
        match value {
            Some(v) => self.field(name, v),
            None => self,
        }
    }

    fn raw(mut self, name: &'static str, json: String) -> Self {
        self.0.push((name, json));
        self
    }

    fn render(&self) -> String {
        let members: Vec<String> = self
            .0
            .iter()
            .map(|(name, json)| format!("\"{name}\":{json}"))
            .collect();
        format!("{{{}}}", members.join(","))
    }
}

#[cfg(test)]
mod tests {
    use runnel_metadata::acl::{
        AclBinding, AclOperation, AclPermission, PatternType, ResourceType,
    };
    use runnel_metadata::quota::{EntityName, QuotaEntity, QuotaValue};
    use runnel_metadata::records::{ConfigResource, SecretBytes};
    use uuid::Uuid;

    use super::*;

    fn json(r: MetadataRecord) -> (i16, String) {
        kafka_json(&r)
    }

    #[test]
    fn brokers_as_kafkas_registration_records() {
        let register = MetadataRecord::RegisterBroker {
            broker_id: 2,
            incarnation_id: Uuid::from_u128(1),
            broker_epoch: 7,
            host: "h".into(),
            port: 9092,
            rack: None,
            fenced: true,
            endpoints: vec![],
        };
        assert_eq!(
            json(register).1,
            r#"{"brokerId":2,"incarnationId":"AAAAAAAAAAAAAAAAAAAAAQ","brokerEpoch":7,"endPoints":[{"name":"PLAINTEXT","host":"h","port":9092,"securityProtocol":0}],"features":[],"rack":null,"fenced":true}"#
        );
        let with_listeners = MetadataRecord::RegisterBroker {
            broker_id: 2,
            incarnation_id: Uuid::from_u128(1),
            broker_epoch: 7,
            host: "h".into(),
            port: 9092,
            rack: Some("r1".into()),
            fenced: false,
            endpoints: vec![BrokerEndpoint {
                name: "SASL_SSL".into(),
                host: "h2".into(),
                port: 9094,
                security_protocol: 3,
            }],
        };
        let (_, text) = json(with_listeners);
        assert!(
            text.contains(r#""endPoints":[{"name":"SASL_SSL","host":"h2","port":9094,"securityProtocol":3}],"features":[],"rack":"r1","fenced":false"#),
            "{text}"
        );
        // Tagged int8 fields: 1 fenced / -1 unfenced / absent unchanged; controlled shutdown
        // needs version 1.
        let change = |fenced, in_controlled_shutdown| {
            json(MetadataRecord::BrokerRegistrationChange {
                broker_id: 2,
                broker_epoch: 7,
                fenced,
                in_controlled_shutdown,
            })
        };
        assert_eq!(
            change(Some(false), None),
            (0, r#"{"brokerId":2,"brokerEpoch":7,"fenced":-1}"#.into())
        );
        assert_eq!(
            change(Some(true), None),
            (0, r#"{"brokerId":2,"brokerEpoch":7,"fenced":1}"#.into())
        );
        assert_eq!(
            change(None, Some(true)),
            (
                1,
                r#"{"brokerId":2,"brokerEpoch":7,"inControlledShutdown":1}"#.into()
            )
        );
        assert_eq!(
            json(MetadataRecord::UnregisterBroker {
                broker_id: 3,
                broker_epoch: 9
            }),
            (0, r#"{"brokerId":3,"brokerEpoch":9}"#.into())
        );
    }

    #[test]
    fn topics_and_partitions_in_schema_order() {
        let id = Uuid::from_u128(7);
        assert_eq!(
            json(MetadataRecord::Topic {
                name: "t".into(),
                topic_id: id
            })
            .1,
            r#"{"name":"t","topicId":"AAAAAAAAAAAAAAAAAAAABw"}"#
        );
        let partition = MetadataRecord::Partition {
            topic_id: id,
            partition_id: 1,
            replicas: vec![1, 2],
            isr: vec![2],
            leader: 2,
            leader_epoch: 3,
            partition_epoch: 4,
            adding_replicas: vec![],
            removing_replicas: vec![1],
        };
        assert_eq!(
            json(partition),
            (
                0,
                r#"{"partitionId":1,"topicId":"AAAAAAAAAAAAAAAAAAAABw","replicas":[1,2],"isr":[2],"removingReplicas":[1],"addingReplicas":[],"leader":2,"leaderEpoch":3,"partitionEpoch":4}"#
                    .into()
            )
        );
        // Unchanged (None) fields are left out, as Kafka's tagged defaults; -1 is "no leader".
        let change = MetadataRecord::PartitionChange {
            topic_id: id,
            partition_id: 0,
            leader: Some(-1),
            isr: None,
            replicas: Some(vec![3]),
            adding_replicas: None,
            removing_replicas: Some(vec![]),
        };
        assert_eq!(
            json(change).1,
            r#"{"partitionId":0,"topicId":"AAAAAAAAAAAAAAAAAAAABw","leader":-1,"replicas":[3],"removingReplicas":[]}"#
        );
        assert_eq!(
            json(MetadataRecord::RemoveTopic { topic_id: id }).1,
            r#"{"topicId":"AAAAAAAAAAAAAAAAAAAABw"}"#
        );
    }

    #[test]
    fn configs_features_and_producer_ids() {
        let config = |resource, value| {
            json(MetadataRecord::Config {
                resource,
                name: "retention.ms".into(),
                value,
            })
            .1
        };
        assert_eq!(
            config(ConfigResource::Topic("t".into()), Some("1".into())),
            r#"{"resourceType":2,"resourceName":"t","name":"retention.ms","value":"1"}"#
        );
        assert_eq!(
            config(ConfigResource::Broker(String::new()), None),
            r#"{"resourceType":4,"resourceName":"","name":"retention.ms","value":null}"#
        );
        assert!(
            config(ConfigResource::Group("g".into()), None).starts_with(r#"{"resourceType":32,"#)
        );
        assert_eq!(
            json(MetadataRecord::FeatureLevel {
                name: "metadata.version".into(),
                level: 21
            })
            .1,
            r#"{"name":"metadata.version","featureLevel":21}"#
        );
        assert_eq!(
            json(MetadataRecord::ProducerIds {
                broker_id: 1,
                broker_epoch: 5,
                next_producer_id: 2000
            })
            .1,
            r#"{"brokerId":1,"brokerEpoch":5,"nextProducerId":2000}"#
        );
        assert_eq!(json(MetadataRecord::NoOp), (0, "{}".into()));
    }

    #[test]
    fn security_records() {
        let acl = AclBinding {
            resource_type: ResourceType::Topic,
            resource_name: "t".into(),
            pattern_type: PatternType::Prefixed,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: AclOperation::Read,
            permission: AclPermission::Allow,
        };
        assert_eq!(
            json(MetadataRecord::AccessControlEntry {
                id: Uuid::from_u128(2),
                acl
            })
            .1,
            r#"{"id":"AAAAAAAAAAAAAAAAAAAAAg","resourceType":2,"resourceName":"t","patternType":4,"principal":"User:alice","host":"*","operation":3,"permissionType":3}"#
        );
        assert_eq!(
            json(MetadataRecord::UserScramCredential {
                name: "alice".into(),
                mechanism: 1,
                salt: SecretBytes(b"f".to_vec()),
                stored_key: SecretBytes(b"fo".to_vec()),
                server_key: SecretBytes(b"foo".to_vec()),
                iterations: 4096,
            })
            .1,
            r#"{"name":"alice","mechanism":1,"salt":"Zg==","storedKey":"Zm8=","serverKey":"Zm9v","iterations":4096}"#
        );
        assert_eq!(
            json(MetadataRecord::RemoveUserScramCredential {
                name: "alice".into(),
                mechanism: 2
            })
            .1,
            r#"{"name":"alice","mechanism":2}"#
        );
        let entity = QuotaEntity {
            user: Some(EntityName::Named("u".into())),
            client_id: Some(EntityName::Default),
        };
        assert_eq!(
            json(MetadataRecord::ClientQuota {
                entity: entity.clone(),
                key: "producer_byte_rate".into(),
                value: Some(QuotaValue(1024.0)),
            })
            .1,
            r#"{"entity":[{"entityType":"user","entityName":"u"},{"entityType":"client-id","entityName":null}],"key":"producer_byte_rate","value":1024.0,"remove":false}"#
        );
        let (_, removed) = json(MetadataRecord::ClientQuota {
            entity,
            key: "k".into(),
            value: None,
        });
        assert!(
            removed.ends_with(r#""key":"k","value":0.0,"remove":true}"#),
            "{removed}"
        );
    }
}
