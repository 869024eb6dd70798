//! The routing table: which handler answers each API and how its time is charged to the
//! request quota, one function per API family (so none grows long). [`call_api`] asks each
//! family in turn; a family hands the call back when the API is not one of its own.
//!
//! Every handler is timed for the request-time quota (`request_percentage`): the throttle goes
//! into the response's throttle_time_ms and mutes the connection (`crate::quota`), except the
//! cluster-internal requests Kafka exempts (ClusterAction), whose responses carry no throttle.

use bytes::Bytes;
use kafka_protocol::messages::*;

use super::{decode, fetch, Call, DispatchError};
use crate::handlers::{
    self, admin_authz as admin, cluster_authz as cluster, groups_authz as groups, txn_authz as txn,
};

/// A handler that needs to know who asks (authorization, member ids), timed for the quota.
macro_rules! timed {
    ($call:ident, $buf:ident, $req:ty, $handler:path) => {{
        let request: $req = decode(&mut $buf, $call.key, $call.version)?;
        let (mut response, busy) =
            crate::quota::timed($handler($call.broker, request, $call.version, &$call.ctx)).await;
        response.throttle_time_ms = response.throttle_time_ms.max($call.charge(busy));
        $call.respond(&response)?
    }};
}

/// A handler exempt from the request quota (its response has no throttle_time_ms).
macro_rules! exempt {
    ($call:ident, $buf:ident, $req:ty, $handler:path) => {{
        let request: $req = decode(&mut $buf, $call.key, $call.version)?;
        let response = $handler($call.broker, request, $call.version, &$call.ctx).await;
        $call.respond(&response)?
    }};
}

/// What a family made of a call: the response, or the call back (not one of its APIs).
enum Routing<'a> {
    Done(Option<Bytes>),
    NotMine(Call<'a>, Bytes),
}

impl Call<'_> {
    /// The request-time throttle `busy` earned: recorded for the connection, and returned for
    /// the response's throttle_time_ms.
    fn charge(&mut self, busy: std::time::Duration) -> i32 {
        let throttle_ms = crate::quota::request_throttle(self.broker, &self.ctx, busy);
        let throttles_itself =
            runnel_metadata::quota::request::client_throttles_itself(self.raw_key, self.version);
        *self.throttle = crate::quota::throttle_for(throttle_ms, throttles_itself);
        throttle_ms
    }
}

/// Decodes the body as the API's request and calls its handler (Produce went its own way).
pub(super) async fn call_api(call: Call<'_>, buf: Bytes) -> Result<Option<Bytes>, DispatchError> {
    macro_rules! next {
        ($family:ident, $call:expr, $buf:expr) => {
            match $family($call, $buf).await? {
                Routing::Done(response) => return Ok(response),
                Routing::NotMine(call, buf) => (call, buf),
            }
        };
    }
    let (call, buf) = next!(clients, call, buf);
    let (call, buf) = next!(topics_and_configs, call, buf);
    let (call, buf) = next!(cluster_admin, call, buf);
    let (call, buf) = next!(group_apis, call, buf);
    let (call, _) = next!(txn_apis, call, buf);
    Err(DispatchError(format!("unsupported api {:?}", call.key)))
}

/// What every client sends: metadata, reads, producer ids, SASL after authentication, telemetry.
async fn clients(mut call: Call<'_>, mut buf: Bytes) -> Result<Routing<'_>, DispatchError> {
    let response = match call.key {
        ApiKey::Fetch => fetch(call, buf).await?,
        ApiKey::ListOffsets => timed!(call, buf, ListOffsetsRequest, cluster::list_offsets),
        ApiKey::Metadata => timed!(call, buf, MetadataRequest, handlers::metadata::handle),
        ApiKey::ApiVersions => {
            let request: ApiVersionsRequest = decode(&mut buf, call.key, call.version)?;
            let (mut response, busy) = crate::quota::timed(handlers::api_versions::handle(
                call.broker,
                request,
                call.version,
            ))
            .await;
            response.throttle_time_ms = response.throttle_time_ms.max(call.charge(busy));
            call.respond(&response)?
        }
        // A SASL listener answers these itself until the connection has authenticated
        // (`server::authenticate`); here they come after it, or on a listener without SASL.
        ApiKey::SaslHandshake => call.respond(
            &SaslHandshakeResponse::default()
                .with_error_code(crate::server::sasl::ILLEGAL_SASL_STATE),
        )?,
        ApiKey::SaslAuthenticate => call.respond(
            &SaslAuthenticateResponse::default()
                .with_error_code(crate::server::sasl::ILLEGAL_SASL_STATE),
        )?,
        ApiKey::DeleteRecords => timed!(call, buf, DeleteRecordsRequest, cluster::delete_records),
        ApiKey::InitProducerId => {
            timed!(call, buf, InitProducerIdRequest, cluster::init_producer_id)
        }
        ApiKey::OffsetForLeaderEpoch => timed!(
            call,
            buf,
            OffsetForLeaderEpochRequest,
            cluster::offset_for_leader_epoch
        ),
        ApiKey::DescribeCluster => timed!(
            call,
            buf,
            DescribeClusterRequest,
            handlers::describe_cluster::handle
        ),
        ApiKey::GetTelemetrySubscriptions => timed!(
            call,
            buf,
            GetTelemetrySubscriptionsRequest,
            handlers::telemetry::get_subscriptions
        ),
        ApiKey::PushTelemetry => timed!(call, buf, PushTelemetryRequest, handlers::telemetry::push),
        _ => return Ok(Routing::NotMine(call, buf)),
    };
    Ok(Routing::Done(response))
}

/// Topics, partitions, configs and their descriptions.
async fn topics_and_configs(
    mut call: Call<'_>,
    mut buf: Bytes,
) -> Result<Routing<'_>, DispatchError> {
    use handlers::topics;
    let response = match call.key {
        ApiKey::CreateTopics => timed!(call, buf, CreateTopicsRequest, topics::create_topics),
        ApiKey::DeleteTopics => timed!(call, buf, DeleteTopicsRequest, topics::delete_topics),
        ApiKey::CreatePartitions => {
            timed!(
                call,
                buf,
                CreatePartitionsRequest,
                topics::create_partitions
            )
        }
        ApiKey::DescribeConfigs => {
            timed!(call, buf, DescribeConfigsRequest, admin::describe_configs)
        }
        ApiKey::AlterConfigs => timed!(call, buf, AlterConfigsRequest, admin::alter_configs),
        ApiKey::IncrementalAlterConfigs => timed!(
            call,
            buf,
            IncrementalAlterConfigsRequest,
            admin::incremental_alter_configs
        ),
        ApiKey::DescribeLogDirs => {
            timed!(call, buf, DescribeLogDirsRequest, admin::describe_log_dirs)
        }
        ApiKey::AlterReplicaLogDirs => timed!(
            call,
            buf,
            AlterReplicaLogDirsRequest,
            admin::alter_replica_log_dirs
        ),
        ApiKey::DescribeTopicPartitions => timed!(
            call,
            buf,
            DescribeTopicPartitionsRequest,
            admin::describe_topic_partitions
        ),
        ApiKey::ListConfigResources => timed!(
            call,
            buf,
            ListConfigResourcesRequest,
            handlers::list_config_resources::handle
        ),
        _ => return Ok(Routing::NotMine(call, buf)),
    };
    Ok(Routing::Done(response))
}

/// The cluster's administration: credentials, quotas, ACLs, the quorum, leaders and
/// reassignments, features.
async fn cluster_admin(mut call: Call<'_>, mut buf: Bytes) -> Result<Routing<'_>, DispatchError> {
    use handlers::{acls, client_quotas as quotas};
    let response = match call.key {
        ApiKey::DescribeUserScramCredentials => timed!(
            call,
            buf,
            DescribeUserScramCredentialsRequest,
            admin::describe_user_scram_credentials
        ),
        ApiKey::AlterUserScramCredentials => timed!(
            call,
            buf,
            AlterUserScramCredentialsRequest,
            admin::alter_user_scram_credentials
        ),
        ApiKey::DescribeClientQuotas => {
            timed!(call, buf, DescribeClientQuotasRequest, quotas::describe)
        }
        ApiKey::AlterClientQuotas => timed!(call, buf, AlterClientQuotasRequest, quotas::alter),
        ApiKey::DescribeAcls => timed!(call, buf, DescribeAclsRequest, acls::describe),
        ApiKey::CreateAcls => timed!(call, buf, CreateAclsRequest, acls::create),
        ApiKey::DeleteAcls => timed!(call, buf, DeleteAclsRequest, acls::delete),
        ApiKey::DescribeQuorum => {
            exempt!(call, buf, DescribeQuorumRequest, cluster::describe_quorum)
        }
        ApiKey::ElectLeaders => timed!(call, buf, ElectLeadersRequest, cluster::elect_leaders),
        ApiKey::AlterPartitionReassignments => timed!(
            call,
            buf,
            AlterPartitionReassignmentsRequest,
            cluster::alter_reassignments
        ),
        ApiKey::ListPartitionReassignments => timed!(
            call,
            buf,
            ListPartitionReassignmentsRequest,
            cluster::list_reassignments
        ),
        ApiKey::UpdateFeatures => timed!(
            call,
            buf,
            UpdateFeaturesRequest,
            handlers::features::update_features
        ),
        _ => return Ok(Routing::NotMine(call, buf)),
    };
    Ok(Routing::Done(response))
}

/// Consumer groups, classic and KIP-848, and their offsets.
async fn group_apis(mut call: Call<'_>, mut buf: Bytes) -> Result<Routing<'_>, DispatchError> {
    let response = match call.key {
        ApiKey::FindCoordinator => {
            timed!(call, buf, FindCoordinatorRequest, groups::find_coordinator)
        }
        ApiKey::JoinGroup => timed!(call, buf, JoinGroupRequest, groups::join_group),
        ApiKey::SyncGroup => timed!(call, buf, SyncGroupRequest, groups::sync_group),
        ApiKey::Heartbeat => timed!(call, buf, HeartbeatRequest, groups::heartbeat),
        ApiKey::LeaveGroup => timed!(call, buf, LeaveGroupRequest, groups::leave_group),
        ApiKey::ConsumerGroupHeartbeat => timed!(
            call,
            buf,
            ConsumerGroupHeartbeatRequest,
            groups::consumer_group_heartbeat
        ),
        ApiKey::ConsumerGroupDescribe => timed!(
            call,
            buf,
            ConsumerGroupDescribeRequest,
            groups::consumer_group_describe
        ),
        ApiKey::OffsetCommit => timed!(call, buf, OffsetCommitRequest, groups::offset_commit),
        ApiKey::OffsetFetch => timed!(call, buf, OffsetFetchRequest, groups::offset_fetch),
        ApiKey::OffsetDelete => timed!(call, buf, OffsetDeleteRequest, groups::offset_delete),
        ApiKey::ListGroups => timed!(call, buf, ListGroupsRequest, groups::list_groups),
        ApiKey::DescribeGroups => timed!(call, buf, DescribeGroupsRequest, groups::describe_groups),
        ApiKey::DeleteGroups => timed!(call, buf, DeleteGroupsRequest, groups::delete_groups),
        _ => return Ok(Routing::NotMine(call, buf)),
    };
    Ok(Routing::Done(response))
}

/// Transactions and the producers' state.
async fn txn_apis(mut call: Call<'_>, mut buf: Bytes) -> Result<Routing<'_>, DispatchError> {
    let response = match call.key {
        ApiKey::AddPartitionsToTxn => timed!(
            call,
            buf,
            AddPartitionsToTxnRequest,
            txn::add_partitions_to_txn
        ),
        ApiKey::AddOffsetsToTxn => {
            timed!(call, buf, AddOffsetsToTxnRequest, txn::add_offsets_to_txn)
        }
        ApiKey::TxnOffsetCommit => {
            timed!(call, buf, TxnOffsetCommitRequest, txn::txn_offset_commit)
        }
        ApiKey::EndTxn => timed!(call, buf, EndTxnRequest, txn::end_txn),
        ApiKey::WriteTxnMarkers => {
            exempt!(call, buf, WriteTxnMarkersRequest, txn::write_txn_markers)
        }
        ApiKey::DescribeProducers => {
            timed!(call, buf, DescribeProducersRequest, txn::describe_producers)
        }
        ApiKey::DescribeTransactions => timed!(
            call,
            buf,
            DescribeTransactionsRequest,
            txn::describe_transactions
        ),
        ApiKey::ListTransactions => {
            timed!(call, buf, ListTransactionsRequest, txn::list_transactions)
        }
        _ => return Ok(Routing::NotMine(call, buf)),
    };
    Ok(Routing::Done(response))
}
