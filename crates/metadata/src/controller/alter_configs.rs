//! AlterConfigs (API 33, replaces the whole override set) and IncrementalAlterConfigs
//! (API 44, SET / DELETE / APPEND / SUBTRACT per key) for topics, brokers and groups.

use std::collections::{BTreeMap, BTreeSet};

use super::Controller;
use crate::errors::ApiError;
use crate::group_config::{group_config_def, validate_group_configs};
use crate::image::MetadataImage;
use crate::records::{ConfigResource, MetadataRecord};
use crate::topic_config::{
    split_list, topic_config_def, topic_config_for_broker_property, validate_topic_config,
    ConfigType, TopicConfigDef,
};

/// IncrementalAlterConfigs operations (Kafka's `AlterConfigOp.OpType`, ids 0..3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum AlterConfigOp {
    Set,
    Delete,
    Append,
    Subtract,
}

impl AlterConfigOp {
    /// From the wire id (0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT).
    pub fn from_id(id: i8) -> Option<Self> {
        match id {
            0 => Some(Self::Set),
            1 => Some(Self::Delete),
            2 => Some(Self::Append),
            3 => Some(Self::Subtract),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Set => "SET",
            Self::Delete => "DELETE",
            Self::Append => "APPEND",
            Self::Subtract => "SUBTRACT",
        }
    }
}

impl Controller {
    /// Alters one resource's dynamic configs. `incremental = false` is the legacy
    /// AlterConfigs: the given keys become the complete override set (every op is a SET).
    /// Records are emitted only for keys whose value changes; none when `validate_only`.
    pub fn alter_configs(
        &mut self,
        image: &MetadataImage,
        resource: &ConfigResource,
        ops: &[(String, AlterConfigOp, Option<String>)],
        incremental: bool,
        validate_only: bool,
    ) -> (Result<(), ApiError>, Vec<MetadataRecord>) {
        match self.plan_configs(image, resource, ops, incremental) {
            Ok(changes) if !validate_only => {
                let records = changes
                    .into_iter()
                    .map(|(name, value)| MetadataRecord::Config {
                        resource: resource.clone(),
                        name,
                        value,
                    })
                    .collect();
                (Ok(()), records)
            }
            Ok(_) => (Ok(()), Vec::new()),
            Err(e) => (Err(e), Vec::new()),
        }
    }

    fn plan_configs(
        &self,
        image: &MetadataImage,
        resource: &ConfigResource,
        ops: &[(String, AlterConfigOp, Option<String>)],
        incremental: bool,
    ) -> Result<BTreeMap<String, Option<String>>, ApiError> {
        check_resource(image, resource)?;
        let mut seen = BTreeSet::new();
        for (key, _, _) in ops {
            if !seen.insert(key.as_str()) {
                return Err(ApiError::invalid_request(
                    "Error due to duplicate config keys",
                ));
            }
        }
        let current = image.configs.get(resource).cloned().unwrap_or_default();
        let mut next = if incremental {
            current.clone()
        } else {
            BTreeMap::new()
        };
        for (key, op, value) in ops {
            let op = if incremental { *op } else { AlterConfigOp::Set };
            match op {
                AlterConfigOp::Set => {
                    let Some(value) = value else {
                        return Err(ApiError::invalid_config(format!(
                            "Null value not supported for : {key}"
                        )));
                    };
                    next.insert(key.clone(), value.clone());
                }
                AlterConfigOp::Delete => {
                    next.remove(key);
                }
                AlterConfigOp::Append | AlterConfigOp::Subtract => {
                    let def = list_def(resource, key, op)?;
                    let base = next
                        .get(key)
                        .cloned()
                        .unwrap_or_else(|| def.default.to_string());
                    let mut items = split_list(&base);
                    let given = split_list(value.as_deref().unwrap_or(""));
                    if op == AlterConfigOp::Append {
                        for item in given {
                            if !items.contains(&item) {
                                items.push(item);
                            }
                        }
                    } else {
                        items.retain(|i| !given.contains(i));
                    }
                    next.insert(key.clone(), items.join(","));
                }
            }
        }
        for (key, value) in &next {
            if current.get(key) != Some(value) {
                validate_key(resource, key, value)?;
            }
        }
        if let ConfigResource::Group(_) = resource {
            // Kafka validates a group's whole resulting set against this controller's
            // `group.consumer.*` / `group.share.*` bounds.
            validate_group_configs(&next, &self.config.defaults)?;
        }
        let mut changes = BTreeMap::new();
        for (key, value) in &next {
            if current.get(key) != Some(value) {
                changes.insert(key.clone(), Some(value.clone()));
            }
        }
        for key in current.keys() {
            if !next.contains_key(key) {
                changes.insert(key.clone(), None);
            }
        }
        Ok(changes)
    }
}

/// The resource must exist: a topic in the image; a broker resource "" (cluster default) or
/// an integer id.
fn check_resource(image: &MetadataImage, resource: &ConfigResource) -> Result<(), ApiError> {
    match resource {
        ConfigResource::Topic(name) if name.is_empty() => Err(ApiError::invalid_request(
            "Default topic resources are not allowed.",
        )),
        ConfigResource::Topic(name) if image.topic(name).is_none() => Err(
            ApiError::unknown_topic_or_partition(format!("The topic '{name}' does not exist.")),
        ),
        ConfigResource::Group(name) if name.is_empty() => Err(ApiError::invalid_request(
            "Default group resources are not allowed.",
        )),
        ConfigResource::Broker(name) if !name.is_empty() && name.parse::<i32>().is_err() => {
            Err(ApiError::invalid_request(format!(
                "Illegal non-integral BROKER resource type name '{name}'"
            )))
        }
        _ => Ok(()),
    }
}

/// APPEND / SUBTRACT apply only to LIST keys (for brokers: properties that are synonyms of a
/// LIST topic key).
fn list_def(
    resource: &ConfigResource,
    key: &str,
    op: AlterConfigOp,
) -> Result<&'static TopicConfigDef, ApiError> {
    let def = match resource {
        ConfigResource::Topic(_) => topic_config_def(key),
        ConfigResource::Broker(_) => topic_config_for_broker_property(key).map(|(d, _)| d),
        ConfigResource::Group(_) => group_config_def(key),
    };
    match def {
        Some(d) if d.ty == ConfigType::List => Ok(d),
        Some(_) => Err(ApiError::invalid_config(format!(
            "Can't {} to key {key} because its type is not LIST.",
            op.name()
        ))),
        None if matches!(resource, ConfigResource::Topic(_)) => Err(ApiError::invalid_config(
            format!("Unknown topic config name: {key}"),
        )),
        None => Err(ApiError::invalid_config(format!(
            "Can't {} to key {key} because its type is not LIST.",
            op.name()
        ))),
    }
}

/// Topic keys are validated by the topic table. Broker keys may be set dynamically when they
/// are the synonym of a topic key (the defaults every topic without an override follows, e.g.
/// `log.retention.ms`, `unclean.leader.election.enable`, `min.insync.replicas`), and must then
/// hold a value of that key's type and range (`log.retention.hours=abc` would otherwise poison
/// every topic's effective config). Kafka's other dynamic broker properties are decided by
/// `dynamic_broker_config`; static ones (listeners' ports, directories, ids, ...) are refused
/// there as Kafka refuses them.
fn validate_key(resource: &ConfigResource, key: &str, value: &str) -> Result<(), ApiError> {
    match resource {
        ConfigResource::Topic(_) => validate_topic_config(key, value),
        // Names, types and floors; the ranges that need the whole set are checked after.
        ConfigResource::Group(_) => match group_config_def(key) {
            Some(def) => crate::topic_config::parse_value(def, value).map(|_| ()),
            None => Err(ApiError::invalid_config(format!(
                "Unknown group config name: {key}"
            ))),
        },
        ConfigResource::Broker(name) => {
            if key.is_empty() {
                return Err(ApiError::invalid_config("Empty config name."));
            }
            match topic_config_for_broker_property(key) {
                Some((def, _)) => crate::topic_config::parse_value(def, value)
                    .map(|_| ())
                    .map_err(|e| ApiError::invalid_config(e.message.replacen(def.name, key, 1))),
                None => crate::dynamic_broker_config::validate_dynamic_broker_property(
                    key,
                    value,
                    !name.is_empty(),
                ),
            }
        }
    }
}

/// The AlterConfigs / IncrementalAlterConfigs operation on one resource.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AlterConfigs {
    pub resource: ConfigResource,
    pub ops: Vec<(String, AlterConfigOp, Option<String>)>,
    pub incremental: bool,
    pub validate_only: bool,
}

impl super::ControllerOp for AlterConfigs {
    const NAME: &'static str = "AlterConfigs";
    type Response = ();

    fn decide(
        &self,
        ctx: &mut super::OpContext<'_>,
    ) -> Result<super::ControllerResult<()>, ApiError> {
        let (result, records) = ctx.controller.alter_configs(
            ctx.image,
            &self.resource,
            &self.ops,
            self.incremental,
            self.validate_only,
        );
        result.map(|()| super::ControllerResult::new(records, ()))
    }
}
