//! DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44).
//!
//! Topic configs and dynamic broker configs are metadata: changes go through the controller as
//! Config records. Broker resource "" is the cluster-wide dynamic default, "<id>" one broker;
//! dynamic broker configs are the properties that are topic-config defaults (the controller
//! refuses others). Everything else comes from the static configuration (file and
//! `--override`) and is described read-only.

use std::sync::Arc;

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{
    alter_configs_response, incremental_alter_configs_response, AlterConfigsRequest,
    AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use runnel_metadata::{
    describe_topic_configs, AlterConfigOp, ApiError, ConfigResource, ConfigSource,
};

use super::str_bytes;
use crate::context::Broker;
use crate::errors::code;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const DYNAMIC_BROKER_CONFIG: i8 = 2;
const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
const STATIC_BROKER_CONFIG: i8 = 4;
const DEFAULT_CONFIG: i8 = 5;

pub fn source_id(source: &ConfigSource) -> i8 {
    match source {
        ConfigSource::TopicOverride => 1,
        ConfigSource::DynamicBroker => 2,
        ConfigSource::DynamicDefaultBroker => 3,
        ConfigSource::StaticBroker => 4,
        ConfigSource::Default => 5,
    }
}

fn entry(
    name: &str,
    value: Option<&str>,
    source: i8,
    read_only: bool,
    sensitive: bool,
    synonyms: bool,
) -> DescribeConfigsResourceResult {
    let value = value.map(str_bytes);
    let synonym_list = if synonyms {
        vec![DescribeConfigsSynonym::default()
            .with_name(str_bytes(name))
            .with_value(value.clone())
            .with_source(source)]
    } else {
        Vec::new()
    };
    DescribeConfigsResourceResult::default()
        .with_name(str_bytes(name))
        .with_value(value)
        .with_read_only(read_only)
        .with_config_source(source)
        .with_is_sensitive(sensitive)
        .with_synonyms(synonym_list)
}

pub async fn describe(
    broker: &Arc<Broker>,
    request: DescribeConfigsRequest,
    _version: i16,
) -> DescribeConfigsResponse {
    let image = broker.image();
    let defaults = broker.broker_defaults();
    let results = request
        .resources
        .iter()
        .map(|r| {
            let name = r.resource_name.as_str();
            let wanted = |key: &str| {
                // Null or empty = every config (Kafka treats both alike).
                r.configuration_keys
                    .as_ref()
                    .is_none_or(|keys| keys.is_empty() || keys.iter().any(|k| k.as_str() == key))
            };
            let result = DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            match r.resource_type {
                TOPIC => {
                    if image.topic(name).is_none() {
                        return result
                            .with_error_code(code::UNKNOWN_TOPIC_OR_PARTITION)
                            .with_error_message(Some(str_bytes(&format!("Topic '{name}' does not exist."))));
                    }
                    let configs = describe_topic_configs(&image.topic_overrides(name), &defaults)
                        .into_iter()
                        .filter(|c| wanted(&c.name))
                        .map(|c| {
                            entry(
                                &c.name,
                                c.value.as_deref(),
                                source_id(&c.source),
                                c.read_only,
                                c.sensitive,
                                request.include_synonyms,
                            )
                        })
                        .collect();
                    result.with_configs(configs)
                }
                // The cluster-wide default resource holds only dynamic defaults (as in Kafka).
                BROKER if name.is_empty() => {
                    let configs = image
                        .broker_configs("")
                        .iter()
                        .filter(|(k, _)| wanted(k))
                        .map(|(k, v)| {
                            entry(k, Some(v), DYNAMIC_DEFAULT_BROKER_CONFIG, false, false, request.include_synonyms)
                        })
                        .collect();
                    result.with_configs(configs)
                }
                BROKER => {
                    if name != broker.node_id.to_string() {
                        return result
                            .with_error_code(code::INVALID_REQUEST)
                            .with_error_message(Some(str_bytes(&format!(
                                "Broker {name} is not this broker; send DescribeConfigs for it to that broker"
                            ))));
                    }
                    let own = image.broker_configs(name);
                    let cluster = image.broker_configs("");
                    let mut configs: Vec<_> = broker
                        .config
                        .all()
                        .iter()
                        .filter(|(k, _, _)| wanted(k))
                        .map(|(k, v, explicit)| {
                            if let Some(d) = own.get(k.as_str()) {
                                entry(k, Some(d), DYNAMIC_BROKER_CONFIG, false, false, request.include_synonyms)
                            } else if let Some(d) = cluster.get(k.as_str()) {
                                entry(k, Some(d), DYNAMIC_DEFAULT_BROKER_CONFIG, false, false, request.include_synonyms)
                            } else {
                                let source = if *explicit { STATIC_BROKER_CONFIG } else { DEFAULT_CONFIG };
                                entry(k, Some(v), source, true, false, request.include_synonyms)
                            }
                        })
                        .collect();
                    // Dynamic keys the static table does not list.
                    let listed = broker.config.all();
                    for (source, map) in [(DYNAMIC_BROKER_CONFIG, &own), (DYNAMIC_DEFAULT_BROKER_CONFIG, &cluster)] {
                        for (k, v) in map.iter().filter(|(k, _)| wanted(k)) {
                            let known = listed.iter().any(|(l, _, _)| l == k)
                                || configs.iter().any(|c| c.name.as_str() == k.as_str());
                            if !known {
                                configs.push(entry(k, Some(v), source, false, false, request.include_synonyms));
                            }
                        }
                    }
                    result.with_configs(configs)
                }
                other => result
                    .with_error_code(code::INVALID_REQUEST)
                    .with_error_message(Some(str_bytes(&format!("Unsupported resource type {other}")))),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

/// Runs one resource's change through the controller; returns (code, message).
async fn alter_resource(
    broker: &Arc<Broker>,
    resource_type: i8,
    name: &StrBytes,
    ops: Vec<(String, AlterConfigOp, Option<String>)>,
    incremental: bool,
    validate_only: bool,
) -> (i16, Option<StrBytes>) {
    let resource = match resource_type {
        TOPIC => ConfigResource::Topic(name.to_string()),
        // Dynamic broker configs: "" is the cluster-wide default, "<id>" one broker. The
        // controller accepts the properties that are synonyms of topic configs (the defaults
        // every topic without an override follows, e.g. log.retention.ms or
        // unclean.leader.election.enable); deleting an unset key is a no-op, as in Kafka.
        BROKER => ConfigResource::Broker(name.to_string()),
        other => {
            return (
                code::INVALID_REQUEST,
                Some(str_bytes(&format!("Unsupported resource type {other}"))),
            )
        }
    };
    match broker
        .controller
        .alter_configs(resource, ops, incremental, validate_only)
        .await
    {
        Ok(()) => (code::NONE, None),
        Err(ApiError { code, message }) => (code, Some(str_bytes(&message))),
    }
}

pub async fn alter(
    broker: &Arc<Broker>,
    request: AlterConfigsRequest,
    _version: i16,
) -> AlterConfigsResponse {
    let mut responses = Vec::with_capacity(request.resources.len());
    for r in request.resources {
        let ops = r
            .configs
            .iter()
            .map(|c| {
                let value = c.value.as_ref().map(|v| v.to_string());
                let op = if value.is_some() {
                    AlterConfigOp::Set
                } else {
                    AlterConfigOp::Delete
                };
                (c.name.to_string(), op, value)
            })
            .collect();
        let (error_code, error_message) = alter_resource(
            broker,
            r.resource_type,
            &r.resource_name,
            ops,
            false,
            request.validate_only,
        )
        .await;
        responses.push(
            alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(error_code)
                .with_error_message(error_message)
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name),
        );
    }
    AlterConfigsResponse::default().with_responses(responses)
}

pub async fn incremental_alter(
    broker: &Arc<Broker>,
    request: IncrementalAlterConfigsRequest,
    _version: i16,
) -> IncrementalAlterConfigsResponse {
    let mut responses = Vec::with_capacity(request.resources.len());
    for r in request.resources {
        let mut ops = Vec::with_capacity(r.configs.len());
        let mut bad_op = None;
        for c in &r.configs {
            let op = match c.config_operation {
                0 => AlterConfigOp::Set,
                1 => AlterConfigOp::Delete,
                2 => AlterConfigOp::Append,
                3 => AlterConfigOp::Subtract,
                other => {
                    bad_op = Some(other);
                    break;
                }
            };
            ops.push((
                c.name.to_string(),
                op,
                c.value.as_ref().map(|v| v.to_string()),
            ));
        }
        let (error_code, error_message) = match bad_op {
            Some(op) => (
                code::INVALID_REQUEST,
                Some(str_bytes(&format!("Unknown config operation {op}"))),
            ),
            None => {
                alter_resource(
                    broker,
                    r.resource_type,
                    &r.resource_name,
                    ops,
                    true,
                    request.validate_only,
                )
                .await
            }
        };
        responses.push(
            incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(error_code)
                .with_error_message(error_message)
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name),
        );
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}
