//! DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44).
//!
//! Topic configs, dynamic broker configs and group configs (resource type 32) are metadata:
//! changes go through the controller as Config records. Broker resource "" is the
//! cluster-wide dynamic default, "<id>" one broker; dynamic broker configs are the properties
//! that are topic-config defaults (the controller refuses others). Everything else comes from
//! the static configuration (file and `--override`) and is described read-only. Every entry
//! carries its KIP-569 type, and its documentation when the request includes it.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{
    alter_configs_response, incremental_alter_configs_response, AlterConfigsRequest,
    AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use runnel_metadata::topic_config::{broker_config_info, topic_config_def, topic_config_doc};
use runnel_metadata::{
    describe_group_configs, describe_topic_configs, group_config_def, group_config_doc,
    AlterConfigOp, ApiError, ConfigEntry, ConfigResource, ConfigSource, MetadataImage,
};

use super::str_bytes;
use crate::context::Broker;
use crate::errors::code;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
/// KIP-848 group config resources (Kafka's `ConfigResource.Type.GROUP`).
const GROUP: i8 = 32;
const DYNAMIC_BROKER_CONFIG: i8 = 2;
const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
const STATIC_BROKER_CONFIG: i8 = 4;
const DEFAULT_CONFIG: i8 = 5;
/// DescribeConfigs `config_type` of a key Runnel cannot type (KIP-569 UNKNOWN).
const UNKNOWN_TYPE: i8 = 0;

pub fn source_id(source: &ConfigSource) -> i8 {
    source.id()
}

/// What DescribeConfigs asked to include besides names and values.
#[derive(Clone, Copy)]
struct Include {
    synonyms: bool,
    documentation: bool,
}

/// A key's KIP-569 type id and documentation.
type KeyInfo = (i8, Option<&'static str>);

fn topic_key_info(name: &str) -> KeyInfo {
    let ty = topic_config_def(name).map_or(UNKNOWN_TYPE, |d| d.ty.describe_id());
    (ty, topic_config_doc(name))
}

fn broker_key_info(name: &str) -> KeyInfo {
    broker_config_info(name).map_or((UNKNOWN_TYPE, None), |(ty, doc)| {
        (ty.describe_id(), Some(doc))
    })
}

fn group_key_info(name: &str) -> KeyInfo {
    let ty = group_config_def(name).map_or(UNKNOWN_TYPE, |d| d.ty.describe_id());
    (ty, group_config_doc(name))
}

fn entry(
    name: &str,
    value: Option<&str>,
    source: i8,
    read_only: bool,
    sensitive: bool,
    (config_type, doc): KeyInfo,
    include: Include,
) -> DescribeConfigsResourceResult {
    let value = value.map(str_bytes);
    let synonym_list = if include.synonyms {
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
        .with_config_type(config_type)
        .with_documentation(doc.filter(|_| include.documentation).map(str_bytes))
}

fn described(c: &ConfigEntry, info: KeyInfo, include: Include) -> DescribeConfigsResourceResult {
    entry(
        &c.name,
        c.value.as_deref(),
        c.source.id(),
        c.read_only,
        c.sensitive,
        info,
        include,
    )
}

fn failed(result: DescribeConfigsResult, error: i16, message: String) -> DescribeConfigsResult {
    result
        .with_error_code(error)
        .with_error_message(Some(str_bytes(&message)))
}

pub async fn describe(
    broker: &Arc<Broker>,
    request: DescribeConfigsRequest,
    _version: i16,
) -> DescribeConfigsResponse {
    let image = broker.image();
    let include = Include {
        synonyms: request.include_synonyms,
        documentation: request.include_documentation,
    };
    let results = request
        .resources
        .iter()
        .map(|r| describe_resource(broker, &image, r, include))
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

fn describe_resource(
    broker: &Arc<Broker>,
    image: &MetadataImage,
    r: &DescribeConfigsResource,
    include: Include,
) -> DescribeConfigsResult {
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
                let message = format!("Topic '{name}' does not exist.");
                return failed(result, code::UNKNOWN_TOPIC_OR_PARTITION, message);
            }
            let configs =
                describe_topic_configs(&image.topic_overrides(name), &broker.broker_defaults())
                    .into_iter()
                    .filter(|c| wanted(&c.name))
                    .map(|c| described(&c, topic_key_info(&c.name), include))
                    .collect();
            result.with_configs(configs)
        }
        // The cluster-wide default resource holds only dynamic defaults (as in Kafka).
        BROKER if name.is_empty() => {
            result.with_configs(describe_cluster_default(image, &wanted, include))
        }
        BROKER => {
            if name != broker.node_id.to_string() {
                let message = format!(
                    "Broker {name} is not this broker; send DescribeConfigs for it to that broker"
                );
                return failed(result, code::INVALID_REQUEST, message);
            }
            result.with_configs(describe_this_broker(broker, image, &wanted, include))
        }
        GROUP => {
            if name.is_empty() {
                return failed(
                    result,
                    code::INVALID_REQUEST,
                    "Group name must not be empty".into(),
                );
            }
            let configs =
                describe_group_configs(&image.group_configs(name), &broker.broker_defaults())
                    .into_iter()
                    .filter(|c| wanted(&c.name))
                    .map(|c| described(&c, group_key_info(&c.name), include))
                    .collect();
            result.with_configs(configs)
        }
        other => failed(
            result,
            code::INVALID_REQUEST,
            format!("Unsupported resource type {other}"),
        ),
    }
}

/// The cluster-wide default broker resource: its dynamic defaults.
fn describe_cluster_default(
    image: &MetadataImage,
    wanted: &dyn Fn(&str) -> bool,
    include: Include,
) -> Vec<DescribeConfigsResourceResult> {
    image
        .broker_configs("")
        .iter()
        .filter(|(k, _)| wanted(k))
        .map(|(k, v)| {
            entry(
                k,
                Some(v),
                DYNAMIC_DEFAULT_BROKER_CONFIG,
                false,
                false,
                broker_key_info(k),
                include,
            )
        })
        .collect()
}

/// Every property of this broker: dynamic (its own, then the cluster default), static or
/// Kafka's default; plus the identity and listener properties Kafka always lists.
fn describe_this_broker(
    broker: &Arc<Broker>,
    image: &MetadataImage,
    wanted: &dyn Fn(&str) -> bool,
    include: Include,
) -> Vec<DescribeConfigsResourceResult> {
    let own = image.broker_configs(&broker.node_id.to_string());
    let cluster = image.broker_configs("");
    let mut listed = broker.config.all();
    for (key, value, explicit) in identity_and_listeners(broker, image) {
        if !listed.iter().any(|(k, _, _)| *k == key) {
            listed.push((key, value, explicit));
        }
    }
    listed.sort();
    let mut configs: Vec<_> = listed
        .iter()
        .filter(|(k, _, _)| wanted(k))
        .map(|(k, v, explicit)| in_force(k, v, *explicit, [&own, &cluster], include))
        .collect();
    // Dynamic keys the static table does not list.
    for (source, map) in [
        (DYNAMIC_BROKER_CONFIG, &own),
        (DYNAMIC_DEFAULT_BROKER_CONFIG, &cluster),
    ] {
        for (k, v) in map.iter().filter(|(k, _)| wanted(k)) {
            let known = listed.iter().any(|(l, _, _)| l == k)
                || configs.iter().any(|c| c.name.as_str() == k.as_str());
            if !known {
                configs.push(entry(
                    k,
                    Some(v),
                    source,
                    false,
                    false,
                    broker_key_info(k),
                    include,
                ));
            }
        }
    }
    configs
}

/// A broker property's entry: this broker's dynamic value, else the cluster's dynamic
/// default, else the static value (`explicit`) or Kafka's default `value`.
fn in_force(
    k: &str,
    value: &str,
    explicit: bool,
    [own, cluster]: [&BTreeMap<String, String>; 2],
    include: Include,
) -> DescribeConfigsResourceResult {
    let info = broker_key_info(k);
    if let Some(d) = own.get(k) {
        entry(
            k,
            Some(d),
            DYNAMIC_BROKER_CONFIG,
            false,
            false,
            info,
            include,
        )
    } else if let Some(d) = cluster.get(k) {
        let source = DYNAMIC_DEFAULT_BROKER_CONFIG;
        entry(k, Some(d), source, false, false, info, include)
    } else {
        let source = if explicit {
            STATIC_BROKER_CONFIG
        } else {
            DEFAULT_CONFIG
        };
        entry(k, Some(value), source, true, false, info, include)
    }
}

/// `node.id` / `broker.id` (the `--node-id` flag), `listeners` (the `--listen` address, or
/// the bound one when it asked for port 0) and `advertised.listeners` (`--advertise`, else,
/// as in Kafka, the listeners), as (key, value, set explicitly).
fn identity_and_listeners(broker: &Broker, image: &MetadataImage) -> Vec<(String, String, bool)> {
    let registered = image
        .brokers
        .get(&broker.node_id)
        .map(|b| format!("{}:{}", b.host, b.port));
    let config = &broker.config;
    let listen = match (&registered, config.listen.port(), &config.advertise) {
        (Some(bound), 0, None) => bound.clone(),
        _ => config.listen.to_string(),
    };
    let advertised = config
        .advertise
        .clone()
        .or(registered)
        .unwrap_or_else(|| listen.clone());
    let id = broker.node_id.to_string();
    vec![
        (
            "advertised.listeners".into(),
            format!("PLAINTEXT://{advertised}"),
            config.advertise.is_some(),
        ),
        ("broker.id".into(), id.clone(), true),
        ("listeners".into(), format!("PLAINTEXT://{listen}"), true),
        ("node.id".into(), id, true),
    ]
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
        // Group config resources (KIP-848): validated by the controller against its
        // `group.consumer.*` / `group.share.*` bounds and stored as Config records.
        GROUP => ConfigResource::Group(name.to_string()),
        other => {
            return (
                code::INVALID_REQUEST,
                Some(str_bytes(&format!("Unsupported resource type {other}"))),
            )
        }
    };
    match broker
        .controller
        .run(runnel_metadata::controller::AlterConfigs {
            resource,
            ops,
            incremental,
            validate_only,
        })
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
