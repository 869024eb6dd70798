//! How request handlers reach the active controller, wherever it is.
//!
//! On a single node it is the local shell. In a cluster the local shell (on controller nodes)
//! is tried first and every voter after it: whichever is the quorum leader answers, the others
//! say NOT_CONTROLLER, and the client keeps going round (bounded by a deadline) while an
//! election settles. Admin requests thereby reach the controller from any broker (KRaft's
//! forwarding) and an in-flight request either completes or gets a retriable error.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use runnel_metadata::acl::{AclBinding, AclBindingFilter};
use runnel_metadata::{
    codes, AlterConfigOp, ApiError, ConfigResource, CreatePartitionsRequest, CreateTopicOutcome,
    CreateTopicRequest, TopicRef,
};
use runnel_raft::{RpcRequest, RpcResponse, TcpTransport, Transport};
use uuid::Uuid;

use crate::controller_rpc::{self, ControllerRequest as Rq, ControllerResponse as Rs};
use crate::controller_shell::{
    ControllerHandle, CreatePartitionsResult, DeleteTopicResult, EventsSince,
};

/// How long an admin request may wait for an active controller (Kafka's default request timeout).
const ADMIN_DEADLINE: Duration = Duration::from_secs(30);
/// One remote call's bound: a partitioned peer must not hold the request for long.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
const RETRY_PAUSE: Duration = Duration::from_millis(200);
/// How often a call in flight checks whether the quorum has named another leader.
const LEADER_POLL: Duration = Duration::from_millis(50);

#[derive(Clone)]
struct Remote {
    voters: BTreeMap<i32, String>,
    transport: Arc<TcpTransport>,
}

#[derive(Clone)]
pub struct ControllerClient {
    node_id: i32,
    local: Option<ControllerHandle>,
    quorum: Option<Arc<runnel_raft::MetadataQuorum>>,
    remote: Option<Remote>,
}

fn unexpected(what: &str) -> ApiError {
    ApiError {
        code: codes::UNKNOWN_SERVER_ERROR,
        message: format!("unexpected controller answer to {what}"),
    }
}

/// The deadline passed with no active controller answering.
fn timed_out(deadline: Duration, last: Option<ApiError>) -> ApiError {
    let why = last.map_or_else(|| "no controller was asked".to_string(), |e| e.message);
    ApiError {
        code: codes::REQUEST_TIMED_OUT,
        message: format!(
            "no active controller answered within {} ms ({why})",
            deadline.as_millis()
        ),
    }
}

/// The remote voters to ask in one round: the one the quorum names as leader first (a dead or
/// stopped former leader then costs nothing once the election is known), then the others by
/// id; this node itself only when it has no local shell (asked before the round).
fn remote_order(
    voters: &BTreeMap<i32, String>,
    node_id: i32,
    has_local: bool,
    leader: Option<i32>,
) -> Vec<i32> {
    let askable = |id: i32| voters.contains_key(&id) && !(id == node_id && has_local);
    let first = leader.filter(|&id| askable(id));
    first
        .into_iter()
        .chain(
            voters
                .keys()
                .copied()
                .filter(|&id| askable(id) && Some(id) != first),
        )
        .collect()
}

impl ControllerClient {
    /// Single node: the local shell is always the active controller.
    pub fn local(handle: ControllerHandle) -> Self {
        ControllerClient {
            node_id: -1,
            local: Some(handle),
            quorum: None,
            remote: None,
        }
    }

    /// Cluster member: `local` is this node's shell when it is a controller.
    pub fn cluster(
        node_id: i32,
        local: Option<ControllerHandle>,
        quorum: Arc<runnel_raft::MetadataQuorum>,
        voters: BTreeMap<i32, String>,
        cluster_id: &str,
    ) -> Self {
        // The controller listener's security (TLS / SASL with this node's own credentials).
        let transport = TcpTransport::with_security(cluster_id, quorum.security());
        ControllerClient {
            node_id,
            local,
            quorum: Some(quorum),
            remote: Some(Remote {
                voters,
                transport: Arc::new(transport),
            }),
        }
    }

    /// Sends `request` to whichever node is the active controller, retrying until `deadline`:
    /// an election in progress (NOT_CONTROLLER everywhere) or a dead or frozen leader
    /// (unreachable, or silent) is waited out, each round asking first the node the quorum
    /// names as leader, and starting over as soon as it names another. When the deadline
    /// passes without an answer, REQUEST_TIMED_OUT, as Kafka's forwarding answers.
    pub async fn call(&self, request: Rq, deadline: Duration) -> Result<Rs, ApiError> {
        let until = Instant::now() + deadline;
        let mut last = None;
        loop {
            if let Some(handle) = &self.local {
                match controller_rpc::serve(handle, self.quorum.as_deref(), request.clone()).await {
                    Rs::Error(e) if e.code == codes::NOT_CONTROLLER => last = Some(e),
                    other => return Ok(other),
                }
            }
            let mut leader_moved = false;
            if let Some(remote) = &self.remote {
                let leader = self.leader();
                for id in remote_order(&remote.voters, self.node_id, self.local.is_some(), leader) {
                    let Some(address) = remote.voters.get(&id) else {
                        continue;
                    };
                    let left = until.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    let bound = CALL_TIMEOUT.min(left);
                    // A frozen (SIGSTOPped) or partitioned node holds a call until its bound;
                    // once the quorum names another leader, that one is asked at once instead.
                    let answer = tokio::select! {
                        answer = self.call_remote(remote, id, address, &request, bound) => Some(answer),
                        () = self.leader_moves_from(leader) => None,
                    };
                    let Some(answer) = answer else {
                        leader_moved = true;
                        break;
                    };
                    match answer {
                        Ok(Rs::Error(e)) if e.code == codes::NOT_CONTROLLER => last = Some(e),
                        Ok(response) => return Ok(response),
                        Err(e) => last = Some(e),
                    }
                }
            }
            if leader_moved {
                continue;
            }
            if Instant::now() + RETRY_PAUSE >= until {
                return Err(timed_out(deadline, last));
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }

    /// The quorum leader as this node knows it now.
    fn leader(&self) -> Option<i32> {
        self.quorum.as_ref().and_then(|q| q.leader())
    }

    /// Returns once the quorum names another leader than `from` (never on a single node).
    async fn leader_moves_from(&self, from: Option<i32>) {
        if self.quorum.is_none() {
            return std::future::pending().await;
        }
        while self.leader() == from {
            tokio::time::sleep(LEADER_POLL).await;
        }
    }

    async fn call_remote(
        &self,
        remote: &Remote,
        id: i32,
        address: &str,
        request: &Rq,
        bound: Duration,
    ) -> Result<Rs, ApiError> {
        let unreachable = |why: String| ApiError {
            code: codes::NOT_CONTROLLER,
            message: format!("controller {id} at {address} unreachable: {why}"),
        };
        let value = serde_json::to_value(request).map_err(|e| unreachable(e.to_string()))?;
        let response = remote
            .transport
            .call(
                u64::try_from(id).unwrap_or(0),
                address,
                RpcRequest::App(value),
                bound,
            )
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        match response {
            RpcResponse::App(value) => {
                serde_json::from_value(value).map_err(|e| unreachable(e.to_string()))
            }
            RpcResponse::Error(e) => Err(unreachable(e)),
            _ => Err(unreachable("unexpected response kind".into())),
        }
    }

    pub async fn create_topics(
        &self,
        requests: Vec<CreateTopicRequest>,
        validate_only: bool,
    ) -> Result<Vec<CreateTopicOutcome>, ApiError> {
        match self
            .call(
                Rq::CreateTopics {
                    requests,
                    validate_only,
                },
                ADMIN_DEADLINE,
            )
            .await?
        {
            Rs::CreateTopics(v) => Ok(v),
            Rs::Error(e) => Err(e),
            _ => Err(unexpected("CreateTopics")),
        }
    }

    pub async fn delete_topics(
        &self,
        topics: Vec<TopicRef>,
        api_version: i16,
    ) -> Result<Vec<DeleteTopicResult>, ApiError> {
        match self
            .call(
                Rq::DeleteTopics {
                    topics,
                    api_version,
                },
                ADMIN_DEADLINE,
            )
            .await?
        {
            Rs::DeleteTopics(v) => Ok(v),
            Rs::Error(e) => Err(e),
            _ => Err(unexpected("DeleteTopics")),
        }
    }

    pub async fn create_partitions(
        &self,
        requests: Vec<CreatePartitionsRequest>,
        validate_only: bool,
    ) -> Result<Vec<CreatePartitionsResult>, ApiError> {
        match self
            .call(
                Rq::CreatePartitions {
                    requests,
                    validate_only,
                },
                ADMIN_DEADLINE,
            )
            .await?
        {
            Rs::CreatePartitions(v) => Ok(v),
            Rs::Error(e) => Err(e),
            _ => Err(unexpected("CreatePartitions")),
        }
    }

    pub async fn alter_client_quotas(
        &self,
        alterations: Vec<runnel_metadata::quota::QuotaAlteration>,
        validate_only: bool,
    ) -> Result<Vec<runnel_metadata::quota::QuotaAlterResult>, ApiError> {
        let request = Rq::AlterClientQuotas {
            alterations,
            validate_only,
        };
        match self.call(request, ADMIN_DEADLINE).await? {
            Rs::QuotaResults(v) => Ok(v),
            Rs::Error(e) => Err(e),
            _ => Err(unexpected("AlterClientQuotas")),
        }
    }

    pub async fn alter_user_scram_credentials(
        &self,
        deletions: Vec<runnel_metadata::ScramDeletion>,
        upsertions: Vec<runnel_metadata::ScramUpsertion>,
    ) -> Result<Vec<runnel_metadata::ScramAlterResult>, ApiError> {
        let request = Rq::AlterUserScramCredentials {
            deletions,
            upsertions,
        };
        match self.call(request, ADMIN_DEADLINE).await? {
            Rs::ScramResults(v) => Ok(v),
            Rs::Error(e) => Err(e),
            _ => Err(unexpected("AlterUserScramCredentials")),
        }
    }

    pub async fn create_acls(
        &self,
        acls: Vec<AclBinding>,
    ) -> Result<Vec<Result<(), ApiError>>, ApiError> {
        match self.call(Rq::CreateAcls { acls }, ADMIN_DEADLINE).await? {
            Rs::AclsCreated(v) => Ok(v),
            Rs::Error(e) => Err(e),
            _ => Err(unexpected("CreateAcls")),
        }
    }

    pub async fn delete_acls(
        &self,
        filters: Vec<AclBindingFilter>,
    ) -> Result<Vec<Result<Vec<AclBinding>, ApiError>>, ApiError> {
        match self
            .call(Rq::DeleteAcls { filters }, ADMIN_DEADLINE)
            .await?
        {
            Rs::AclsDeleted(v) => Ok(v),
            Rs::Error(e) => Err(e),
            _ => Err(unexpected("DeleteAcls")),
        }
    }

    pub async fn alter_configs(
        &self,
        resource: ConfigResource,
        ops: Vec<(String, AlterConfigOp, Option<String>)>,
        incremental: bool,
        validate_only: bool,
    ) -> Result<(), ApiError> {
        let request = Rq::AlterConfigs {
            resource,
            ops,
            incremental,
            validate_only,
        };
        match self.call(request, ADMIN_DEADLINE).await? {
            Rs::Done => Ok(()),
            Rs::Error(e) => Err(e),
            _ => Err(unexpected("AlterConfigs")),
        }
    }

    pub async fn register_broker(
        &self,
        broker_id: i32,
        incarnation_id: Uuid,
        host: String,
        port: u16,
        rack: Option<String>,
        deadline: Duration,
    ) -> Result<i64, ApiError> {
        let request = Rq::RegisterBroker {
            broker_id,
            incarnation_id,
            host,
            port,
            rack,
        };
        match self.call(request, deadline).await? {
            Rs::BrokerEpoch(epoch) => Ok(epoch),
            Rs::Error(e) => Err(e),
            _ => Err(unexpected("RegisterBroker")),
        }
    }

    /// Returns whether this broker is still fenced.
    pub async fn heartbeat(
        &self,
        broker_id: i32,
        broker_epoch: i64,
        metadata_offset: i64,
        deadline: Duration,
    ) -> Result<bool, ApiError> {
        match self
            .call(
                Rq::Heartbeat {
                    broker_id,
                    broker_epoch,
                    metadata_offset,
                },
                deadline,
            )
            .await?
        {
            Rs::Fenced(f) => Ok(f),
            Rs::Error(e) => Err(e),
            _ => Err(unexpected("Heartbeat")),
        }
    }

    pub async fn allocate_producer_ids(&self, broker_id: i32, count: i64) -> Result<i64, ApiError> {
        match self
            .call(Rq::AllocateProducerIds { broker_id, count }, ADMIN_DEADLINE)
            .await?
        {
            Rs::ProducerId(id) => Ok(id),
            Rs::Error(e) => Err(e),
            _ => Err(unexpected("AllocateProducerIds")),
        }
    }

    /// Asks the controller to move this broker's leaderships away; returns how many stay.
    pub async fn controlled_shutdown(
        &self,
        broker_id: i32,
        deadline: Duration,
    ) -> Result<usize, ApiError> {
        match self
            .call(Rq::ControlledShutdown { broker_id }, deadline)
            .await?
        {
            Rs::Remaining(n) => Ok(n),
            Rs::Error(e) => Err(e),
            _ => Err(unexpected("ControlledShutdown")),
        }
    }

    /// The end of a controlled shutdown: fence this broker now (bounded: on failure its session
    /// simply expires).
    pub async fn shutdown_complete(
        &self,
        broker_id: i32,
        deadline: Duration,
    ) -> Result<(), ApiError> {
        match self
            .call(Rq::ShutdownComplete { broker_id }, deadline)
            .await?
        {
            Rs::Done => Ok(()),
            Rs::Error(e) => Err(e),
            _ => Err(unexpected("ShutdownComplete")),
        }
    }

    /// A leader's ISR change: the committed ISR and partition epoch. Bounded, since the
    /// leader decides itself whether to try again.
    pub async fn alter_partition(
        &self,
        request: crate::controller_shell::AlterIsr,
    ) -> Result<(Vec<i32>, i32), ApiError> {
        match self
            .call(Rq::AlterPartition(request), Duration::from_secs(5))
            .await?
        {
            Rs::Isr(isr, epoch) => Ok((isr, epoch)),
            Rs::Error(e) => Err(e),
            _ => Err(unexpected("AlterPartition")),
        }
    }

    pub async fn elect_leaders(
        &self,
        election: runnel_metadata::ElectionType,
        partitions: Option<Vec<(String, i32)>>,
    ) -> Result<Vec<runnel_metadata::ElectionResult>, ApiError> {
        match self
            .call(
                Rq::ElectLeaders {
                    election,
                    partitions,
                },
                ADMIN_DEADLINE,
            )
            .await?
        {
            Rs::Elections(r) => Ok(r),
            Rs::Error(e) => Err(e),
            _ => Err(unexpected("ElectLeaders")),
        }
    }

    pub async fn alter_reassignments(
        &self,
        requests: Vec<runnel_metadata::ReassignmentRequest>,
        allow_replication_factor_change: bool,
    ) -> Result<Vec<runnel_metadata::ReassignmentResult>, ApiError> {
        match self
            .call(
                Rq::AlterReassignments {
                    requests,
                    allow_replication_factor_change,
                },
                ADMIN_DEADLINE,
            )
            .await?
        {
            Rs::Reassignments(r) => Ok(r),
            Rs::Error(e) => Err(e),
            _ => Err(unexpected("AlterPartitionReassignments")),
        }
    }

    /// The quorum's replication state as the leader sees it (None on a single node).
    pub async fn quorum_status(&self) -> Result<Option<runnel_raft::QuorumStatus>, ApiError> {
        if self.remote.is_none() {
            return Ok(None);
        }
        match self.call(Rq::QuorumStatus, ADMIN_DEADLINE).await? {
            Rs::QuorumStatus(s) => Ok(Some(s)),
            Rs::Error(e) => Err(e),
            _ => Err(unexpected("QuorumStatus")),
        }
    }

    pub async fn events(&self, since: u64) -> Result<EventsSince, ApiError> {
        match self.call(Rq::Events { since }, ADMIN_DEADLINE).await? {
            Rs::Events(e) => Ok(e),
            Rs::Error(e) => Err(e),
            _ => Err(unexpected("Events")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn voters(ids: &[i32]) -> BTreeMap<i32, String> {
        ids.iter().map(|&i| (i, format!("127.0.0.1:{i}"))).collect()
    }

    #[test]
    fn named_leader_first_own_shell_never() {
        let v = voters(&[1, 2, 3]);
        assert_eq!(remote_order(&v, 1, true, Some(3)), [3, 2]);
        assert_eq!(remote_order(&v, 1, true, None), [2, 3]);
        assert_eq!(remote_order(&v, 1, true, Some(1)), [2, 3]);
        // A broker-only node asks every voter, itself included if listed.
        assert_eq!(remote_order(&v, 4, false, Some(2)), [2, 1, 3]);
        // A leader outside the voters (stale knowledge) is not asked.
        assert_eq!(remote_order(&v, 1, true, Some(9)), [2, 3]);
    }

    #[test]
    fn the_deadline_answer_is_request_timed_out() {
        let e = timed_out(
            Duration::from_millis(1500),
            Some(ApiError {
                code: codes::NOT_CONTROLLER,
                message: "controller 2 at x unreachable: refused".into(),
            }),
        );
        assert_eq!(e.code, codes::REQUEST_TIMED_OUT);
        assert!(
            e.message.contains("1500 ms") && e.message.contains("refused"),
            "{}",
            e.message
        );
    }

    proptest! {
        #[test]
        fn every_other_voter_once(
            ids in proptest::collection::btree_set(0i32..10, 1..6),
            node_id in 0i32..10,
            has_local: bool,
            leader in proptest::option::of(0i32..12),
        ) {
            let v = voters(&ids.iter().copied().collect::<Vec<_>>());
            let order = remote_order(&v, node_id, has_local, leader);
            let mut sorted = order.clone();
            sorted.sort_unstable();
            let expected: Vec<i32> = ids
                .iter()
                .copied()
                .filter(|&id| !(id == node_id && has_local))
                .collect();
            prop_assert_eq!(sorted, expected);
            if let Some(l) = leader.filter(|l| ids.contains(l) && !(*l == node_id && has_local)) {
                prop_assert_eq!(order.first().copied(), Some(l));
            }
        }
    }
}
