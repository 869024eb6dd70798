//! Controller requests between nodes: what a broker asks the active controller (registration,
//! heartbeats, forwarded admin requests), carried as JSON in the quorum listener's `App`
//! frames. One enum per direction, so the wire format is the type.

use std::sync::Arc;

use runnel_metadata::acl::{AclBinding, AclBindingFilter};
use runnel_metadata::{
    AlterConfigOp, ApiError, ConfigResource, CreatePartitionsRequest, CreateTopicOutcome,
    CreateTopicRequest, TopicRef,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::controller_shell::{
    ControllerHandle, CreatePartitionsResult, DeleteTopicResult, EventsSince,
};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ControllerRequest {
    /// KIP-554: credentials arrive salted and hashed (never a password).
    AlterUserScramCredentials {
        deletions: Vec<runnel_metadata::ScramDeletion>,
        upsertions: Vec<runnel_metadata::ScramUpsertion>,
    },
    /// KIP-546: the controller validates and decides each entry.
    AlterClientQuotas {
        alterations: Vec<runnel_metadata::quota::QuotaAlteration>,
        validate_only: bool,
    },
    CreateTopics {
        requests: Vec<CreateTopicRequest>,
        validate_only: bool,
    },
    DeleteTopics {
        topics: Vec<TopicRef>,
        api_version: i16,
    },
    CreatePartitions {
        requests: Vec<CreatePartitionsRequest>,
        validate_only: bool,
    },
    AlterConfigs {
        resource: ConfigResource,
        ops: Vec<(String, AlterConfigOp, Option<String>)>,
        incremental: bool,
        validate_only: bool,
    },
    CreateAcls {
        acls: Vec<AclBinding>,
    },
    DeleteAcls {
        filters: Vec<AclBindingFilter>,
    },
    RegisterBroker {
        broker_id: i32,
        incarnation_id: Uuid,
        host: String,
        port: u16,
        rack: Option<String>,
    },
    Heartbeat {
        broker_id: i32,
        /// The epoch of the registration this process holds: another one is
        /// STALE_BROKER_EPOCH, so an old process never keeps a new one's session alive.
        broker_epoch: i64,
        metadata_offset: i64,
    },
    /// One block of [`runnel_metadata::PRODUCER_ID_BLOCK_SIZE`] ids; `count` must be that
    /// size (Kafka's request has no count at all).
    AllocateProducerIds {
        broker_id: i32,
        count: i64,
    },
    Events {
        since: u64,
    },
    /// DescribeQuorum: only the leader knows how far every replica got.
    QuorumStatus,
    ElectLeaders {
        election: runnel_metadata::ElectionType,
        partitions: Option<Vec<(String, i32)>>,
    },
    AlterPartition(crate::controller_shell::AlterIsr),
    AlterReassignments {
        requests: Vec<runnel_metadata::ReassignmentRequest>,
        allow_replication_factor_change: bool,
    },
    ControlledShutdown {
        broker_id: i32,
    },
    ShutdownComplete {
        broker_id: i32,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ControllerResponse {
    CreateTopics(Vec<CreateTopicOutcome>),
    DeleteTopics(Vec<DeleteTopicResult>),
    CreatePartitions(Vec<CreatePartitionsResult>),
    Done,
    /// CreateAcls' answer: per ACL, in request order.
    AclsCreated(Vec<Result<(), ApiError>>),
    /// DeleteAcls' answer: per filter, the ACLs it removed.
    AclsDeleted(Vec<Result<Vec<AclBinding>, ApiError>>),
    /// RegisterBroker's answer: the broker epoch.
    BrokerEpoch(i64),
    Fenced(bool),
    ProducerId(i64),
    Events(EventsSince),
    QuorumStatus(runnel_raft::QuorumStatus),
    Elections(Vec<runnel_metadata::ElectionResult>),
    Reassignments(Vec<runnel_metadata::ReassignmentResult>),
    Remaining(usize),
    /// AlterPartition's answer: the committed ISR and partition epoch.
    Isr(Vec<i32>, i32),
    ScramResults(Vec<runnel_metadata::ScramAlterResult>),
    QuotaResults(Vec<runnel_metadata::quota::QuotaAlterResult>),
    Error(ApiError),
}

/// Runs a request against this node's controller shell (which answers NOT_CONTROLLER unless
/// it is the active controller).
pub async fn serve(
    handle: &ControllerHandle,
    quorum: Option<&runnel_raft::MetadataQuorum>,
    request: ControllerRequest,
) -> ControllerResponse {
    use ControllerRequest as Rq;
    use ControllerResponse as Rs;
    if let Err(e) = request.validate() {
        return Rs::Error(e);
    }
    let result = match request {
        Rq::CreateTopics {
            requests,
            validate_only,
        } => handle
            .create_topics(requests, validate_only)
            .await
            .map(Rs::CreateTopics),
        Rq::DeleteTopics {
            topics,
            api_version,
        } => handle
            .delete_topics(topics, api_version)
            .await
            .map(Rs::DeleteTopics),
        Rq::CreatePartitions {
            requests,
            validate_only,
        } => handle
            .create_partitions(requests, validate_only)
            .await
            .map(Rs::CreatePartitions),
        Rq::AlterUserScramCredentials {
            deletions,
            upsertions,
        } => handle
            .alter_user_scram_credentials(deletions, upsertions)
            .await
            .map(Rs::ScramResults),
        Rq::AlterClientQuotas {
            alterations,
            validate_only,
        } => handle
            .alter_client_quotas(alterations, validate_only)
            .await
            .map(Rs::QuotaResults),
        Rq::AlterConfigs {
            resource,
            ops,
            incremental,
            validate_only,
        } => handle
            .alter_configs(resource, ops, incremental, validate_only)
            .await
            .map(|()| Rs::Done),
        Rq::CreateAcls { acls } => handle.create_acls(acls).await.map(Rs::AclsCreated),
        Rq::DeleteAcls { filters } => handle.delete_acls(filters).await.map(Rs::AclsDeleted),
        Rq::RegisterBroker {
            broker_id,
            incarnation_id,
            host,
            port,
            rack,
        } => handle
            .register_broker(broker_id, incarnation_id, host, port, rack)
            .await
            .map(Rs::BrokerEpoch),
        Rq::Heartbeat {
            broker_id,
            broker_epoch,
            metadata_offset,
        } => handle
            .heartbeat(broker_id, broker_epoch, metadata_offset)
            .await
            .map(Rs::Fenced),
        Rq::AllocateProducerIds { broker_id, .. } => handle
            .allocate_producer_ids(broker_id)
            .await
            .map(Rs::ProducerId),
        Rq::Events { since } => handle.events(since).await.map(Rs::Events),
        Rq::ControlledShutdown { broker_id } => handle
            .controlled_shutdown(broker_id)
            .await
            .map(Rs::Remaining),
        Rq::ShutdownComplete { broker_id } => {
            handle.shutdown_complete(broker_id).await.map(|()| Rs::Done)
        }
        Rq::AlterPartition(request) => handle
            .alter_partition(request)
            .await
            .map(|(isr, epoch)| Rs::Isr(isr, epoch)),
        Rq::ElectLeaders {
            election,
            partitions,
        } => handle
            .elect_leaders(election, partitions)
            .await
            .map(Rs::Elections),
        Rq::AlterReassignments {
            requests,
            allow_replication_factor_change,
        } => handle
            .alter_reassignments(requests, allow_replication_factor_change)
            .await
            .map(Rs::Reassignments),
        Rq::QuorumStatus => match quorum {
            Some(q) if q.is_leader() => Ok(Rs::QuorumStatus(q.status())),
            Some(q) => Err(ApiError {
                code: runnel_metadata::codes::NOT_CONTROLLER,
                message: format!("not the quorum leader (leader: {:?})", q.leader()),
            }),
            None => Err(ApiError {
                code: runnel_metadata::codes::NOT_CONTROLLER,
                message: "no metadata quorum on this node".into(),
            }),
        },
    };
    result.unwrap_or_else(Rs::Error)
}

/// The quorum listener's handler for `App` frames.
pub fn app_handler(
    handle: ControllerHandle,
    quorum: std::sync::Weak<runnel_raft::MetadataQuorum>,
) -> runnel_raft::AppHandler {
    Arc::new(move |value: serde_json::Value| {
        let handle = handle.clone();
        let quorum = quorum.upgrade();
        Box::pin(async move {
            let response = match serde_json::from_value::<ControllerRequest>(value) {
                Ok(request) => serve(&handle, quorum.as_deref(), request).await,
                Err(e) => ControllerResponse::Error(ApiError {
                    code: 42,
                    message: format!("undecodable controller request: {e}"),
                }),
            };
            serde_json::to_value(response).unwrap_or(serde_json::Value::Null)
        })
    })
}

/// Longest host name or rack id accepted (a DNS name is at most 253 characters).
const MAX_NAME_BYTES: usize = 255;
/// Most replicas one AlterPartition ISR or partition list may name.
const MAX_LIST_LEN: usize = 10_000;

fn bad(field: &str, why: impl std::fmt::Display) -> ApiError {
    ApiError::invalid_request(format!("invalid controller request field {field}: {why}"))
}

fn broker_id(field: &str, id: i32) -> Result<(), ApiError> {
    if id < 0 {
        return Err(bad(field, format!("broker id {id} is negative")));
    }
    Ok(())
}

fn name(field: &str, value: &str, allow_empty: bool) -> Result<(), ApiError> {
    if (!allow_empty && value.is_empty()) || value.len() > MAX_NAME_BYTES {
        return Err(bad(
            field,
            format!("length {} not in 1..={MAX_NAME_BYTES}", value.len()),
        ));
    }
    Ok(())
}

impl ControllerRequest {
    /// Range checks on every field, before anything reaches the controller: anyone who can
    /// reach the controller port can send a frame, so nothing in one is trusted. Deeper
    /// rules (topic names, partition counts, assignments) are the pure controller's.
    pub fn validate(&self) -> Result<(), ApiError> {
        use ControllerRequest as Rq;
        match self {
            Rq::RegisterBroker {
                broker_id: id,
                host,
                port,
                rack,
                ..
            } => {
                broker_id("broker_id", *id)?;
                name("host", host, false)?;
                if *port == 0 {
                    return Err(bad("port", "must be in 1..=65535"));
                }
                if let Some(rack) = rack {
                    name("rack", rack, false)?;
                }
            }
            Rq::Heartbeat {
                broker_id: id,
                broker_epoch,
                metadata_offset,
            } => {
                broker_id("broker_id", *id)?;
                if *broker_epoch < 0 {
                    return Err(bad("broker_epoch", "negative"));
                }
                if *metadata_offset < -1 {
                    return Err(bad("metadata_offset", "below -1"));
                }
            }
            Rq::AllocateProducerIds {
                broker_id: id,
                count,
            } => {
                broker_id("broker_id", *id)?;
                if *count != runnel_metadata::PRODUCER_ID_BLOCK_SIZE {
                    return Err(bad(
                        "count",
                        format!(
                            "{count}: producer ids come in blocks of {}",
                            runnel_metadata::PRODUCER_ID_BLOCK_SIZE
                        ),
                    ));
                }
            }
            Rq::ControlledShutdown { broker_id: id } | Rq::ShutdownComplete { broker_id: id } => {
                broker_id("broker_id", *id)?
            }
            Rq::AlterPartition(r) => {
                broker_id("broker_id", r.broker_id)?;
                if r.partition < 0 || r.leader_epoch < 0 || r.partition_epoch < 0 {
                    return Err(bad("partition/epochs", "negative"));
                }
                if r.new_isr.len() > MAX_LIST_LEN {
                    return Err(bad("new_isr", "too long"));
                }
                for &b in &r.new_isr {
                    broker_id("new_isr", b)?;
                }
            }
            Rq::ElectLeaders {
                partitions: Some(list),
                ..
            } if list.iter().any(|(_, p)| *p < 0) => {
                return Err(bad("partitions", "negative partition index"));
            }
            Rq::DeleteTopics { api_version, .. } if *api_version < 0 => {
                return Err(bad("api_version", "negative"));
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn register(broker_id: i32, host: &str, port: u16) -> ControllerRequest {
        ControllerRequest::RegisterBroker {
            broker_id,
            incarnation_id: Uuid::from_u128(1),
            host: host.into(),
            port,
            rack: None,
        }
    }

    /// Caught: the controller port took any field as sent, e.g. a producer-id count of
    /// 2^62 that exhausted the id space for good, negative broker ids and port 0.
    #[test]
    fn every_controller_request_field_is_range_checked() {
        assert!(register(1, "h", 9092).validate().is_ok());
        for bad in [
            register(-1, "h", 9092),
            register(1, "", 9092),
            register(1, &"h".repeat(256), 9092),
            register(1, "h", 0),
            ControllerRequest::AllocateProducerIds {
                broker_id: 1,
                count: 1 << 62,
            },
            ControllerRequest::AllocateProducerIds {
                broker_id: -3,
                count: 1000,
            },
            ControllerRequest::Heartbeat {
                broker_id: 1,
                broker_epoch: -5,
                metadata_offset: 0,
            },
            ControllerRequest::ControlledShutdown { broker_id: -1 },
        ] {
            let e = bad.validate().unwrap_err();
            assert_eq!(e.code, 42, "{bad:?}");
        }
        assert!(ControllerRequest::AllocateProducerIds {
            broker_id: 1,
            count: 1000
        }
        .validate()
        .is_ok());
    }
}
