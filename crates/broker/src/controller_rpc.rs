//! Controller requests between nodes: what a broker asks the active controller (registration,
//! heartbeats, forwarded admin requests), carried as JSON in the quorum listener's `App`
//! frames. One enum per direction, so the wire format is the type.

use std::sync::Arc;

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
    RegisterBroker {
        broker_id: i32,
        incarnation_id: Uuid,
        host: String,
        port: u16,
        rack: Option<String>,
    },
    Heartbeat {
        broker_id: i32,
        metadata_offset: i64,
    },
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
    Fenced(bool),
    ProducerId(i64),
    Events(EventsSince),
    QuorumStatus(runnel_raft::QuorumStatus),
    Elections(Vec<runnel_metadata::ElectionResult>),
    Reassignments(Vec<runnel_metadata::ReassignmentResult>),
    Remaining(usize),
    /// AlterPartition's answer: the committed ISR and partition epoch.
    Isr(Vec<i32>, i32),
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
        Rq::AlterConfigs {
            resource,
            ops,
            incremental,
            validate_only,
        } => handle
            .alter_configs(resource, ops, incremental, validate_only)
            .await
            .map(|()| Rs::Done),
        Rq::RegisterBroker {
            broker_id,
            incarnation_id,
            host,
            port,
            rack,
        } => handle
            .register_broker(broker_id, incarnation_id, host, port, rack)
            .await
            .map(|()| Rs::Done),
        Rq::Heartbeat {
            broker_id,
            metadata_offset,
        } => handle
            .heartbeat(broker_id, metadata_offset)
            .await
            .map(Rs::Fenced),
        Rq::AllocateProducerIds { broker_id, count } => handle
            .allocate_producer_ids(broker_id, count)
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
