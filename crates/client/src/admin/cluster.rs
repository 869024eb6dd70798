//! DescribeCluster, falling back to Metadata for brokers that lack API 60.

use kafka_protocol::messages::{ApiKey, DescribeClusterRequest};

use super::Admin;
use crate::error::{ClientError, Result};
use crate::metadata::BrokerInfo;

/// The cluster id, controller and live brokers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterDescription {
    /// Cluster id, when reported.
    pub cluster_id: Option<String>,
    /// Controller node id, when reported.
    pub controller_id: Option<i32>,
    /// Brokers sorted by id.
    pub brokers: Vec<BrokerInfo>,
}

impl Admin {
    /// Describes the cluster with DescribeCluster when the broker supports it, else Metadata.
    pub async fn describe_cluster(&self) -> Result<ClusterDescription> {
        let conn = self.client.any_connection().await?;
        if conn.broker_versions().supports(ApiKey::DescribeCluster) {
            let resp = conn.send(&DescribeClusterRequest::default()).await?;
            ClientError::check(resp.error_code, resp.error_message.as_deref())?;
            let mut brokers: Vec<BrokerInfo> = resp
                .brokers
                .iter()
                .map(|b| BrokerInfo {
                    id: b.broker_id.0,
                    host: b.host.to_string(),
                    port: b.port,
                    rack: b.rack.as_ref().map(|r| r.to_string()),
                })
                .collect();
            brokers.sort_by_key(|b| b.id);
            return Ok(ClusterDescription {
                cluster_id: Some(resp.cluster_id.to_string()),
                controller_id: (resp.controller_id.0 >= 0).then_some(resp.controller_id.0),
                brokers,
            });
        }
        let meta = self.client.refresh_metadata(Some(&[])).await?;
        Ok(ClusterDescription {
            cluster_id: meta.cluster_id.clone(),
            controller_id: meta.controller_id,
            brokers: meta.brokers.values().cloned().collect(),
        })
    }
}
