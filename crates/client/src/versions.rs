//! ApiVersions negotiation (spec K.2): per API, use `min(client max, broker max)` when it is
//! at least `max(client min, broker min)`.

use std::collections::HashMap;

use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};

use crate::error::{ClientError, Result};

/// The version range this client can speak for an API, capped below versions whose semantics
/// it does not implement (e.g. Produce v13 / Fetch v13 identify topics by id only).
pub fn client_range(key: ApiKey) -> Option<(i16, i16)> {
    Some(match key {
        ApiKey::Produce => (3, 12),
        ApiKey::Fetch => (4, 12),
        ApiKey::ListOffsets => (1, 7),
        ApiKey::Metadata => (1, 12),
        ApiKey::ApiVersions => (0, 3),
        ApiKey::CreateTopics => (2, 7),
        ApiKey::DeleteTopics => (1, 5),
        ApiKey::DeleteRecords => (0, 2),
        ApiKey::InitProducerId => (0, 4),
        ApiKey::DescribeConfigs => (1, 4),
        ApiKey::AlterConfigs => (0, 2),
        ApiKey::CreatePartitions => (0, 3),
        ApiKey::IncrementalAlterConfigs => (0, 1),
        ApiKey::DescribeCluster => (0, 1),
        // kafka-log-dirs.sh (v4 adds the filesystem's total and usable bytes).
        ApiKey::DescribeLogDirs => (1, 4),
        // kafka-reassign-partitions.sh's log_dirs (v2 is v1 with flexible fields).
        ApiKey::AlterReplicaLogDirs => (1, 2),
        // v2 adds directory ids and voter endpoints (KIP-853), which the quorum tool does not
        // print in the format it reproduces.
        ApiKey::DescribeQuorum => (0, 1),
        // Consumer groups (classic protocol, spec K.3). OffsetCommit/OffsetFetch v9 and
        // JoinGroup v8+ belong to KIP-848 / KIP-800 extras we do not speak.
        ApiKey::FindCoordinator => (0, 4),
        ApiKey::JoinGroup => (0, 7),
        ApiKey::SyncGroup => (0, 5),
        ApiKey::Heartbeat => (0, 4),
        ApiKey::LeaveGroup => (0, 4),
        ApiKey::OffsetCommit => (2, 8),
        ApiKey::OffsetFetch => (1, 8),
        ApiKey::ListGroups => (0, 4),
        ApiKey::DescribeGroups => (0, 5),
        ApiKey::DeleteGroups => (0, 2),
        ApiKey::OffsetDelete => (0, 0),
        // KIP-848: describing consumer-protocol groups (members, epochs, assignments).
        ApiKey::ConsumerGroupDescribe => (0, 0),
        // Replication administration (kafka-leader-election.sh, kafka-reassign-partitions.sh).
        // ElectLeaders v0 has no election type (preferred only).
        ApiKey::ElectLeaders => (0, 2),
        ApiKey::AlterPartitionReassignments => (0, 1),
        ApiKey::ListPartitionReassignments => (0, 0),
        // Transaction administration (kafka-transactions.sh list / describe).
        ApiKey::DescribeTransactions => (0, 0),
        ApiKey::DescribeProducers => (0, 0),
        ApiKey::WriteTxnMarkers => (1, 1),
        ApiKey::ListTransactions => (0, 1),
        // KIP-554 SCRAM credentials (`runnel configs --entity-type users`).
        ApiKey::DescribeUserScramCredentials => (0, 0),
        ApiKey::AlterUserScramCredentials => (0, 0),
        // KIP-546 client quotas (`runnel configs --entity-type users|clients`).
        ApiKey::DescribeClientQuotas => (0, 1),
        ApiKey::AlterClientQuotas => (0, 1),
        // SASL (security.protocol SASL_*): SaslHandshake v1 frames the tokens in
        // SaslAuthenticate (v0 would send them raw, which this client does not do).
        ApiKey::SaslHandshake => (1, 1),
        ApiKey::SaslAuthenticate => (0, 2),
        // `runnel acls` (v1 adds resource pattern types, KIP-290).
        ApiKey::CreateAcls => (1, 3),
        ApiKey::DescribeAcls => (1, 3),
        ApiKey::DeleteAcls => (1, 3),
        _ => return None,
    })
}

/// What one broker advertised in its ApiVersions response.
#[derive(Debug, Clone, Default)]
pub struct BrokerVersions {
    ranges: HashMap<i16, (i16, i16)>,
}

impl BrokerVersions {
    /// Collects the advertised ranges from an ApiVersions response.
    pub fn from_response(resp: &ApiVersionsResponse) -> Self {
        let ranges = resp
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect();
        Self { ranges }
    }

    /// The broker's advertised range for an API key, if it supports the API at all.
    pub fn broker_range(&self, key: ApiKey) -> Option<(i16, i16)> {
        self.ranges.get(&(key as i16)).copied()
    }

    /// The version to use for `key`, or UNSUPPORTED_VERSION when the ranges do not overlap.
    pub fn negotiate(&self, key: ApiKey) -> Result<i16> {
        let unsupported =
            |why: String| ClientError::kafka(runnel_codes::UNSUPPORTED_VERSION, Some(why));
        let (cmin, cmax) = client_range(key)
            .ok_or_else(|| unsupported(format!("the client does not implement {key:?}")))?;
        let (bmin, bmax) = self
            .broker_range(key)
            .ok_or_else(|| unsupported(format!("the broker does not support {key:?}")))?;
        let version = cmax.min(bmax);
        if version < cmin.max(bmin) {
            return Err(unsupported(format!(
                "{key:?}: client speaks v{cmin}-v{cmax}, broker v{bmin}-v{bmax}"
            )));
        }
        Ok(version)
    }

    /// Whether the broker supports `key` at a version this client can use.
    pub fn supports(&self, key: ApiKey) -> bool {
        self.negotiate(key).is_ok()
    }
}

/// The next ApiVersions version to try after the broker rejected `requested` with
/// UNSUPPORTED_VERSION and (in its v0-layout answer) advertised `broker_max`: like
/// librdkafka, `min(requested - 1, broker max)`, or v0 when the entry is missing.
pub fn api_versions_fallback(requested: i16, broker_max: Option<i16>) -> Option<i16> {
    if requested == 0 {
        return None;
    }
    Some(match broker_max {
        Some(max) => max.min(requested - 1).max(0),
        None => 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::api_versions_response::ApiVersion;

    fn broker(entries: &[(ApiKey, i16, i16)]) -> BrokerVersions {
        let mut resp = ApiVersionsResponse::default();
        for (k, min, max) in entries {
            let mut v = ApiVersion::default();
            v.api_key = *k as i16;
            v.min_version = *min;
            v.max_version = *max;
            resp.api_keys.push(v);
        }
        BrokerVersions::from_response(&resp)
    }

    #[test]
    fn picks_min_of_maxima() {
        let b = broker(&[
            (ApiKey::Produce, 3, 9),
            (ApiKey::Fetch, 4, 18),
            (ApiKey::Metadata, 0, 13),
        ]);
        assert_eq!(b.negotiate(ApiKey::Produce).unwrap(), 9);
        assert_eq!(b.negotiate(ApiKey::Fetch).unwrap(), 12);
        assert_eq!(b.negotiate(ApiKey::Metadata).unwrap(), 12);
    }

    #[test]
    fn disjoint_or_missing_is_unsupported_version() {
        let b = broker(&[(ApiKey::Produce, 13, 13)]);
        assert_eq!(b.negotiate(ApiKey::Produce).unwrap_err().code(), Some(35));
        assert_eq!(b.negotiate(ApiKey::Fetch).unwrap_err().code(), Some(35));
        assert!(!b.supports(ApiKey::DescribeCluster));
    }

    #[test]
    fn api_versions_step_down() {
        assert_eq!(api_versions_fallback(3, Some(2)), Some(2));
        assert_eq!(api_versions_fallback(3, Some(9)), Some(2));
        assert_eq!(api_versions_fallback(3, None), Some(0));
        assert_eq!(api_versions_fallback(0, Some(0)), None);
    }
}
