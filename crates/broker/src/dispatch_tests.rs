//! Advertised == implemented: every version in [`SUPPORTED`] is one kafka-protocol can encode
//! and decode (request and response round-trip at that version), and the table names each API
//! once, with Kafka 4.x's KIP-896 minimums.

use super::*;

/// Round-trips a default request and response of `key` at `version`.
fn round_trip(key: ApiKey, version: i16) {
    macro_rules! rt {
        ($($name:ident),* $(,)?) => {
            paste_free_match!(key, version, $($name),*)
        };
    }
    macro_rules! paste_free_match {
        ($key:expr, $version:expr, $($name:ident),*) => {
            match $key {
                $(ApiKey::$name => {
                    type Req = <$name as Pair>::Req;
                    type Resp = <$name as Pair>::Resp;
                    check::<Req>($version, stringify!($name));
                    check::<Resp>($version, stringify!($name));
                })*
                other => panic!("{other:?} is advertised but not in this test's list"),
            }
        };
    }
    rt!(
        Produce,
        Fetch,
        ListOffsets,
        Metadata,
        ApiVersions,
        SaslHandshake,
        SaslAuthenticate,
        DescribeUserScramCredentials,
        AlterUserScramCredentials,
        CreateTopics,
        DeleteTopics,
        DeleteRecords,
        InitProducerId,
        OffsetForLeaderEpoch,
        DescribeConfigs,
        AlterConfigs,
        CreatePartitions,
        IncrementalAlterConfigs,
        DescribeCluster,
        FindCoordinator,
        JoinGroup,
        Heartbeat,
        LeaveGroup,
        SyncGroup,
        OffsetCommit,
        OffsetFetch,
        ListGroups,
        DescribeGroups,
        DeleteGroups,
        OffsetDelete,
        DescribeQuorum,
        ElectLeaders,
        AlterPartitionReassignments,
        ListPartitionReassignments,
        ConsumerGroupHeartbeat,
        ConsumerGroupDescribe,
        DescribeTopicPartitions,
        DescribeLogDirs,
        AlterReplicaLogDirs,
        AddPartitionsToTxn,
        AddOffsetsToTxn,
        EndTxn,
        DescribeTransactions,
        ListTransactions,
        WriteTxnMarkers,
        DescribeAcls,
        CreateAcls,
        DeleteAcls,
        UpdateFeatures,
        GetTelemetrySubscriptions,
        PushTelemetry,
        ListConfigResources,
        DescribeProducers,
        TxnOffsetCommit,
        DescribeClientQuotas,
        AlterClientQuotas,
    );
}

trait Pair {
    type Req;
    type Resp;
}

macro_rules! pairs {
    ($($name:ident => $req:ty, $resp:ty;)*) => {
        $(
            #[allow(non_camel_case_types, dead_code)]
            enum $name {}
            impl Pair for $name {
                type Req = $req;
                type Resp = $resp;
            }
        )*
    };
}

pairs! {
    Produce => ProduceRequest, ProduceResponse;
    Fetch => FetchRequest, FetchResponse;
    ListOffsets => ListOffsetsRequest, ListOffsetsResponse;
    Metadata => MetadataRequest, MetadataResponse;
    ApiVersions => ApiVersionsRequest, ApiVersionsResponse;
    SaslHandshake => SaslHandshakeRequest, SaslHandshakeResponse;
    SaslAuthenticate => SaslAuthenticateRequest, SaslAuthenticateResponse;
    DescribeUserScramCredentials => DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse;
    AlterUserScramCredentials => AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse;
    CreateTopics => CreateTopicsRequest, CreateTopicsResponse;
    DeleteTopics => DeleteTopicsRequest, DeleteTopicsResponse;
    DeleteRecords => DeleteRecordsRequest, DeleteRecordsResponse;
    InitProducerId => InitProducerIdRequest, InitProducerIdResponse;
    OffsetForLeaderEpoch => OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse;
    DescribeConfigs => DescribeConfigsRequest, DescribeConfigsResponse;
    AlterConfigs => AlterConfigsRequest, AlterConfigsResponse;
    CreatePartitions => CreatePartitionsRequest, CreatePartitionsResponse;
    IncrementalAlterConfigs => IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse;
    DescribeCluster => DescribeClusterRequest, DescribeClusterResponse;
    FindCoordinator => FindCoordinatorRequest, FindCoordinatorResponse;
    JoinGroup => JoinGroupRequest, JoinGroupResponse;
    Heartbeat => HeartbeatRequest, HeartbeatResponse;
    LeaveGroup => LeaveGroupRequest, LeaveGroupResponse;
    SyncGroup => SyncGroupRequest, SyncGroupResponse;
    OffsetCommit => OffsetCommitRequest, OffsetCommitResponse;
    OffsetFetch => OffsetFetchRequest, OffsetFetchResponse;
    ListGroups => ListGroupsRequest, ListGroupsResponse;
    DescribeGroups => DescribeGroupsRequest, DescribeGroupsResponse;
    DeleteGroups => DeleteGroupsRequest, DeleteGroupsResponse;
    OffsetDelete => OffsetDeleteRequest, OffsetDeleteResponse;
    DescribeQuorum => DescribeQuorumRequest, DescribeQuorumResponse;
    ElectLeaders => ElectLeadersRequest, ElectLeadersResponse;
    AlterPartitionReassignments => AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse;
    ListPartitionReassignments => ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse;
    ConsumerGroupHeartbeat => ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse;
    ConsumerGroupDescribe => ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse;
    DescribeTopicPartitions => DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse;
    DescribeLogDirs => DescribeLogDirsRequest, DescribeLogDirsResponse;
    AlterReplicaLogDirs => AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse;
    AddPartitionsToTxn => AddPartitionsToTxnRequest, AddPartitionsToTxnResponse;
    AddOffsetsToTxn => AddOffsetsToTxnRequest, AddOffsetsToTxnResponse;
    EndTxn => EndTxnRequest, EndTxnResponse;
    DescribeTransactions => DescribeTransactionsRequest, DescribeTransactionsResponse;
    ListTransactions => ListTransactionsRequest, ListTransactionsResponse;
    WriteTxnMarkers => WriteTxnMarkersRequest, WriteTxnMarkersResponse;
    DescribeAcls => DescribeAclsRequest, DescribeAclsResponse;
    CreateAcls => CreateAclsRequest, CreateAclsResponse;
    DeleteAcls => DeleteAclsRequest, DeleteAclsResponse;
    UpdateFeatures => UpdateFeaturesRequest, UpdateFeaturesResponse;
    GetTelemetrySubscriptions => GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse;
    PushTelemetry => PushTelemetryRequest, PushTelemetryResponse;
    ListConfigResources => ListConfigResourcesRequest, ListConfigResourcesResponse;
    DescribeProducers => DescribeProducersRequest, DescribeProducersResponse;
    TxnOffsetCommit => TxnOffsetCommitRequest, TxnOffsetCommitResponse;
    DescribeClientQuotas => DescribeClientQuotasRequest, DescribeClientQuotasResponse;
    AlterClientQuotas => AlterClientQuotasRequest, AlterClientQuotasResponse;
}

fn check<T: Encodable + Decodable + Default + PartialEq + std::fmt::Debug>(
    version: i16,
    what: &str,
) {
    let value = T::default();
    let mut buf = BytesMut::new();
    value
        .encode(&mut buf, version)
        .unwrap_or_else(|e| panic!("{what} v{version}: cannot encode: {e}"));
    let mut bytes = buf.freeze();
    let back = T::decode(&mut bytes, version)
        .unwrap_or_else(|e| panic!("{what} v{version}: cannot decode: {e}"));
    assert_eq!(back, value, "{what} v{version}");
    assert!(bytes.is_empty(), "{what} v{version}: trailing bytes");
}

#[test]
fn every_advertised_version_encodes_and_decodes() {
    for &(key, lo, hi) in SUPPORTED {
        let valid = key.valid_versions();
        assert!(
            valid.min <= lo && hi <= valid.max,
            "{key:?} {lo}..={hi} outside kafka-protocol's {}..={}",
            valid.min,
            valid.max
        );
        for v in lo..=hi {
            round_trip(key, v);
        }
    }
}

#[test]
fn each_api_is_listed_once() {
    let mut keys: Vec<i16> = SUPPORTED.iter().map(|&(k, _, _)| k as i16).collect();
    keys.sort_unstable();
    let n = keys.len();
    keys.dedup();
    assert_eq!(keys.len(), n);
}

/// Kafka 4.x's levels (KIP-896 minimums and 4.x maximums) for the APIs issue 12 names.
#[test]
fn kafka_4x_levels() {
    let want: &[(ApiKey, i16, i16)] = &[
        (ApiKey::Produce, 3, 13),
        (ApiKey::Fetch, 4, 18),
        (ApiKey::ListOffsets, 1, 10),
        (ApiKey::Metadata, 0, 13),
        (ApiKey::ApiVersions, 0, 4),
        (ApiKey::FindCoordinator, 0, 6),
        (ApiKey::JoinGroup, 0, 9),
        (ApiKey::LeaveGroup, 0, 5),
        (ApiKey::DescribeGroups, 0, 6),
        (ApiKey::InitProducerId, 0, 6),
        (ApiKey::DescribeCluster, 0, 2),
        (ApiKey::DescribeQuorum, 0, 2),
        (ApiKey::ConsumerGroupDescribe, 0, 1),
        (ApiKey::DeleteTopics, 1, 6),
        (ApiKey::OffsetCommit, 2, 10),
        (ApiKey::OffsetFetch, 1, 10),
        (ApiKey::ListTransactions, 0, 2),
        (ApiKey::UpdateFeatures, 0, 2),
        (ApiKey::GetTelemetrySubscriptions, 0, 0),
        (ApiKey::PushTelemetry, 0, 0),
        (ApiKey::ListConfigResources, 0, 1),
    ];
    for &(key, lo, hi) in want {
        assert_eq!(supported_range(key), Some((lo, hi)), "{key:?}");
    }
}

/// Every advertised range against Kafka's own schemas (kafka-protocol's `valid_versions`,
/// generated from Kafka 4.x's clients/src/main/resources/common/message/*.json): the minimum
/// is Kafka's (KIP-896: keep every version Kafka 4.x keeps, no fewer), the maximum Kafka's
/// except for the newer versions listed here, which Runnel does not implement yet
/// (docs/kafka4-parity.md).
#[test]
fn levels_match_kafkas_schemas() {
    const NOT_YET: &[(ApiKey, i16)] = &[];
    for &(key, lo, hi) in SUPPORTED {
        let upstream = key.valid_versions();
        assert_eq!(
            lo, upstream.min,
            "{key:?}: the lowest version Kafka 4.x keeps"
        );
        let newest = NOT_YET
            .iter()
            .find(|(k, _)| *k == key)
            .map_or(upstream.max, |&(_, first_missing)| first_missing - 1);
        assert_eq!(
            hi, newest,
            "{key:?}: the newest version (Kafka's: {})",
            upstream.max
        );
    }
}
