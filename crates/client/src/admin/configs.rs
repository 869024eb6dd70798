//! DescribeConfigs, AlterConfigs (legacy, whole-set replace) and IncrementalAlterConfigs.

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{
    alter_configs_request, incremental_alter_configs_request, AlterConfigsRequest,
    DescribeConfigsRequest, IncrementalAlterConfigsRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::Admin;
use crate::connection::Connection;
use crate::error::{ClientError, Result};

/// Kinds of config resources (Kafka's `ConfigResource.Type` codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceType {
    /// A topic (2).
    Topic,
    /// A broker (4); an empty name means the cluster-wide default.
    Broker,
    /// A broker's log4j loggers (8).
    BrokerLogger,
}

impl ResourceType {
    /// The wire code.
    pub fn code(self) -> i8 {
        match self {
            ResourceType::Topic => 2,
            ResourceType::Broker => 4,
            ResourceType::BrokerLogger => 8,
        }
    }
}

/// One config resource: a topic name or a broker id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigResource {
    /// What kind of entity.
    pub kind: ResourceType,
    /// Topic name, or broker id as text ("" = cluster default for brokers).
    pub name: String,
}

impl ConfigResource {
    /// A topic resource.
    pub fn topic(name: impl Into<String>) -> Self {
        Self {
            kind: ResourceType::Topic,
            name: name.into(),
        }
    }

    /// A broker resource.
    pub fn broker(name: impl Into<String>) -> Self {
        Self {
            kind: ResourceType::Broker,
            name: name.into(),
        }
    }
}

/// Where a config value comes from (Kafka's `ConfigEntry.ConfigSource`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    /// 0.
    Unknown,
    /// 1: set on the topic.
    DynamicTopicConfig,
    /// 2: set dynamically on this broker.
    DynamicBrokerConfig,
    /// 3: set dynamically as the cluster-wide broker default.
    DynamicDefaultBrokerConfig,
    /// 4: from the broker's properties file.
    StaticBrokerConfig,
    /// 5: Kafka's default.
    DefaultConfig,
    /// 6: a dynamic logger level.
    DynamicBrokerLoggerConfig,
    /// 7: client metrics.
    DynamicClientMetricsConfig,
    /// 8: group config.
    DynamicGroupConfig,
}

impl ConfigSource {
    /// From the wire code.
    pub fn from_code(code: i8) -> Self {
        match code {
            1 => Self::DynamicTopicConfig,
            2 => Self::DynamicBrokerConfig,
            3 => Self::DynamicDefaultBrokerConfig,
            4 => Self::StaticBrokerConfig,
            5 => Self::DefaultConfig,
            6 => Self::DynamicBrokerLoggerConfig,
            7 => Self::DynamicClientMetricsConfig,
            8 => Self::DynamicGroupConfig,
            _ => Self::Unknown,
        }
    }

    /// Java's enum name, as kafka-configs.sh prints it.
    pub fn java_name(self) -> &'static str {
        match self {
            Self::Unknown => "UNKNOWN",
            Self::DynamicTopicConfig => "DYNAMIC_TOPIC_CONFIG",
            Self::DynamicBrokerConfig => "DYNAMIC_BROKER_CONFIG",
            Self::DynamicDefaultBrokerConfig => "DYNAMIC_DEFAULT_BROKER_CONFIG",
            Self::StaticBrokerConfig => "STATIC_BROKER_CONFIG",
            Self::DefaultConfig => "DEFAULT_CONFIG",
            Self::DynamicBrokerLoggerConfig => "DYNAMIC_BROKER_LOGGER_CONFIG",
            Self::DynamicClientMetricsConfig => "DYNAMIC_CLIENT_METRICS_CONFIG",
            Self::DynamicGroupConfig => "DYNAMIC_GROUP_CONFIG",
        }
    }
}

/// One synonym of a config (the same setting from another source, highest precedence first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigSynonym {
    /// Name (may differ from the entry: `log.retention.ms` for `retention.ms`).
    pub name: String,
    /// Value.
    pub value: Option<String>,
    /// Source.
    pub source: ConfigSource,
}

/// One described config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    /// Name.
    pub name: String,
    /// Value (`None` for sensitive or unset values).
    pub value: Option<String>,
    /// Whether it cannot be altered.
    pub read_only: bool,
    /// Where the value comes from.
    pub source: ConfigSource,
    /// Whether the value is secret.
    pub sensitive: bool,
    /// Synonyms, highest precedence first.
    pub synonyms: Vec<ConfigSynonym>,
}

impl ConfigEntry {
    /// Whether this is Kafka's built-in default (kafka-topics hides those).
    pub fn is_default(&self) -> bool {
        self.source == ConfigSource::DefaultConfig
    }
}

/// IncrementalAlterConfigs operation codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigOpType {
    /// 0: set the value.
    Set,
    /// 1: revert to the default.
    Delete,
    /// 2: append to a list config.
    Append,
    /// 3: remove from a list config.
    Subtract,
}

/// One incremental config change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterConfigOp {
    /// Config name.
    pub name: String,
    /// Operation.
    pub op: ConfigOpType,
    /// Value (ignored for `Delete`).
    pub value: Option<String>,
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

impl Admin {
    /// Broker resources must go to that broker; others to any node.
    async fn conn_for(&self, resource: &ConfigResource) -> Result<std::sync::Arc<Connection>> {
        match (resource.kind, resource.name.parse::<i32>()) {
            (ResourceType::Broker | ResourceType::BrokerLogger, Ok(id)) => {
                self.client.broker_connection(id).await
            }
            _ => self.client.any_connection().await,
        }
    }

    /// Describes the configs of one resource (all keys for `None`), sorted by name, with
    /// synonyms.
    pub async fn describe_configs(
        &self,
        resource: &ConfigResource,
        keys: Option<&[String]>,
    ) -> Result<Vec<ConfigEntry>> {
        let mut res = DescribeConfigsResource::default();
        res.resource_type = resource.kind.code();
        res.resource_name = s(&resource.name);
        res.configuration_keys = keys.map(|k| k.iter().map(|n| s(n)).collect());
        let mut req = DescribeConfigsRequest::default();
        req.resources = vec![res];
        req.include_synonyms = true;
        let resp = self
            .client
            .retry("DescribeConfigs", || async {
                self.conn_for(resource).await?.send(&req).await
            })
            .await?;
        let result = resp.results.into_iter().next().ok_or_else(|| {
            ClientError::Protocol("DescribeConfigs response without results".into())
        })?;
        ClientError::check(result.error_code, result.error_message.as_deref())?;
        let mut entries: Vec<ConfigEntry> = result
            .configs
            .into_iter()
            .map(|c| ConfigEntry {
                name: c.name.to_string(),
                value: c.value.map(|v| v.to_string()),
                read_only: c.read_only,
                source: ConfigSource::from_code(c.config_source),
                sensitive: c.is_sensitive,
                synonyms: c
                    .synonyms
                    .into_iter()
                    .map(|syn| ConfigSynonym {
                        name: syn.name.to_string(),
                        value: syn.value.map(|v| v.to_string()),
                        source: ConfigSource::from_code(syn.source),
                    })
                    .collect(),
            })
            .collect();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    /// Legacy AlterConfigs: replaces the resource's whole dynamic config set with `configs`.
    pub async fn alter_configs(
        &self,
        resource: &ConfigResource,
        configs: &[(String, String)],
        validate_only: bool,
    ) -> Result<()> {
        let mut res = alter_configs_request::AlterConfigsResource::default();
        res.resource_type = resource.kind.code();
        res.resource_name = s(&resource.name);
        res.configs = configs
            .iter()
            .map(|(k, v)| {
                let mut c = alter_configs_request::AlterableConfig::default();
                c.name = s(k);
                c.value = Some(s(v));
                c
            })
            .collect();
        let mut req = AlterConfigsRequest::default();
        req.resources = vec![res];
        req.validate_only = validate_only;
        let resp = self
            .client
            .retry("AlterConfigs", || async {
                self.conn_for(resource).await?.send(&req).await
            })
            .await?;
        for r in resp.responses {
            ClientError::check(r.error_code, r.error_message.as_deref())?;
        }
        Ok(())
    }

    /// IncrementalAlterConfigs: applies `ops` and leaves other configs alone.
    pub async fn incremental_alter_configs(
        &self,
        resource: &ConfigResource,
        ops: &[AlterConfigOp],
        validate_only: bool,
    ) -> Result<()> {
        let mut res = incremental_alter_configs_request::AlterConfigsResource::default();
        res.resource_type = resource.kind.code();
        res.resource_name = s(&resource.name);
        res.configs = ops
            .iter()
            .map(|op| {
                let mut c = incremental_alter_configs_request::AlterableConfig::default();
                c.name = s(&op.name);
                c.config_operation = match op.op {
                    ConfigOpType::Set => 0,
                    ConfigOpType::Delete => 1,
                    ConfigOpType::Append => 2,
                    ConfigOpType::Subtract => 3,
                };
                c.value = op.value.as_deref().map(s);
                c
            })
            .collect();
        let mut req = IncrementalAlterConfigsRequest::default();
        req.resources = vec![res];
        req.validate_only = validate_only;
        let resp = self
            .client
            .retry("IncrementalAlterConfigs", || async {
                self.conn_for(resource).await?.send(&req).await
            })
            .await?;
        for r in resp.responses {
            ClientError::check(r.error_code, r.error_message.as_deref())?;
        }
        Ok(())
    }

    /// Whether the cluster supports IncrementalAlterConfigs (else use the legacy call with a
    /// describe-and-merge).
    pub async fn supports_incremental_alter(&self) -> Result<bool> {
        let conn = self.client.any_connection().await?;
        Ok(conn
            .broker_versions()
            .supports(kafka_protocol::messages::ApiKey::IncrementalAlterConfigs))
    }
}
