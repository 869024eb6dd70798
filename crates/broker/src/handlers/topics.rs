//! CreateTopics (19), DeleteTopics (20), CreatePartitions (37): translate to the controller's
//! requests, then wait (bounded by the request's timeout) until the change is visible.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse,
};
use runnel_metadata::acl::AclOperation;
use runnel_metadata::{ApiError, CreateTopicRequest, MetadataImage, TopicRef};

use super::{str_bytes, topic_name};
use crate::context::{Broker, RequestContext};
use crate::errors::code;

fn message(e: &ApiError) -> Option<kafka_protocol::protocol::StrBytes> {
    (!e.message.is_empty()).then(|| str_bytes(&e.message))
}

/// Waits until `done(image)` holds or the timeout passes; returns whether it holds.
async fn wait_for(
    broker: &Arc<Broker>,
    timeout_ms: i32,
    done: impl Fn(&MetadataImage) -> bool,
) -> bool {
    let mut rx = broker.image.clone();
    let deadline = tokio::time::Instant::now() + Duration::from_millis(timeout_ms.max(0) as u64);
    loop {
        if done(&rx.borrow_and_update()) {
            return true;
        }
        match tokio::time::timeout_at(deadline, rx.changed()).await {
            Ok(Ok(())) => {}
            _ => return done(&rx.borrow()),
        }
    }
}

/// Kafka's authorization of CreateTopics: CREATE on the cluster, or else on each topic
/// (TOPIC_AUTHORIZATION_FAILED for the others, which never reach the controller).
pub async fn create_topics(
    broker: &Arc<Broker>,
    mut request: CreateTopicsRequest,
    version: i16,
    ctx: &RequestContext,
) -> CreateTopicsResponse {
    let cluster = broker.authorized_cluster(ctx, AclOperation::Create);
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut request.topics)
        .into_iter()
        .partition(|t| cluster || broker.authorized_topic(ctx, AclOperation::Create, &t.name.0));
    request.topics = allowed;
    let mut response = create_allowed(broker, request, version).await;
    response.topics.extend(refused.into_iter().map(|t| {
        CreatableTopicResult::default()
            .with_name(t.name)
            .with_error_code(code::TOPIC_AUTHORIZATION_FAILED)
            .with_num_partitions(-1)
            .with_replication_factor(-1)
    }));
    fit_create_topics(response, version)
}

async fn create_allowed(
    broker: &Arc<Broker>,
    request: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let requests: Vec<CreateTopicRequest> = request.topics.iter().map(create_request).collect();
    let outcomes = match broker
        .controller
        .run(runnel_metadata::controller::CreateTopics {
            requests,
            validate_only: request.validate_only,
        })
        .await
    {
        Ok(outcomes) => outcomes,
        Err(e) => {
            let topics = request
                .topics
                .iter()
                .map(|t| {
                    CreatableTopicResult::default()
                        .with_name(t.name.clone())
                        .with_error_code(e.code)
                        .with_error_message(message(&e))
                })
                .collect();
            return fit_create_topics(CreateTopicsResponse::default().with_topics(topics), version);
        }
    };
    let created: Vec<String> = outcomes
        .iter()
        .filter(|o| o.result.is_ok())
        .map(|o| o.name.clone())
        .collect();
    let all_led = if request.validate_only || created.is_empty() {
        true
    } else {
        wait_for(broker, request.timeout_ms, |image| {
            created.iter().all(|name| {
                image
                    .topic(name)
                    .is_some_and(|t| t.partitions.values().all(|p| p.leader >= 0))
            })
        })
        .await
    };
    let timed_out = !request.validate_only && (request.timeout_ms <= 0 || !all_led);
    let topics = outcomes
        .into_iter()
        .map(|o| create_result(o, timed_out))
        .collect();
    fit_create_topics(CreateTopicsResponse::default().with_topics(topics), version)
}

/// One topic of a CreateTopics request as the controller's operation takes it.
fn create_request(t: &CreatableTopic) -> CreateTopicRequest {
    CreateTopicRequest {
        name: t.name.0.to_string(),
        num_partitions: t.num_partitions,
        replication_factor: t.replication_factor,
        assignment: t
            .assignments
            .iter()
            .map(|a| {
                (
                    a.partition_index,
                    a.broker_ids.iter().map(|b| b.0).collect(),
                )
            })
            .collect(),
        configs: t
            .configs
            .iter()
            .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
            .collect(),
    }
}

/// One topic's answer: a created topic with its configs (REQUEST_TIMED_OUT when
/// `timed_out`: its leaders were not all elected in time), or the controller's error.
fn create_result(
    o: runnel_metadata::controller::CreateTopicOutcome,
    timed_out: bool,
) -> CreatableTopicResult {
    let result = CreatableTopicResult::default()
        .with_name(topic_name(&o.name))
        .with_error_message(None);
    match o.result {
        Ok(created) => {
            let configs = created
                .configs
                .iter()
                .map(|c| {
                    CreatableTopicConfigs::default()
                        .with_name(str_bytes(&c.name))
                        .with_value(c.value.as_deref().map(str_bytes))
                        .with_read_only(c.read_only)
                        .with_config_source(c.source.id())
                        .with_is_sensitive(c.sensitive)
                })
                .collect();
            result
                .with_topic_id(created.topic_id)
                .with_error_code(if timed_out {
                    code::REQUEST_TIMED_OUT
                } else {
                    code::NONE
                })
                .with_num_partitions(created.num_partitions)
                .with_replication_factor(created.replication_factor)
                .with_configs(Some(configs))
        }
        Err(e) => result
            .with_error_code(e.code)
            .with_error_message(message(&e))
            .with_num_partitions(-1)
            .with_replication_factor(-1),
    }
}

/// Clears fields the negotiated version does not carry (the encoder rejects them).
fn fit_create_topics(mut response: CreateTopicsResponse, version: i16) -> CreateTopicsResponse {
    for t in &mut response.topics {
        if version < 7 {
            t.topic_id = uuid::Uuid::nil();
        }
        if version < 5 {
            t.num_partitions = -1;
            t.replication_factor = -1;
            t.configs = Some(Vec::new());
            t.topic_config_error_code = 0;
        }
    }
    response
}

/// Kafka's authorization of DeleteTopics: DELETE on each topic (named, or found by id; an
/// unknown id stays UNKNOWN_TOPIC_ID), TOPIC_AUTHORIZATION_FAILED for the others.
pub async fn delete_topics(
    broker: &Arc<Broker>,
    mut request: DeleteTopicsRequest,
    version: i16,
    ctx: &RequestContext,
) -> DeleteTopicsResponse {
    let image = broker.image();
    let may = |name: &str| broker.authorized_topic(ctx, AclOperation::Delete, name);
    let (names, refused_names): (Vec<_>, Vec<_>) = std::mem::take(&mut request.topic_names)
        .into_iter()
        .partition(|n| may(n));
    request.topic_names = names;
    let (topics, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut request.topics)
        .into_iter()
        .partition(|t| {
            match t
                .name
                .as_ref()
                .map(|n| n.0.to_string())
                .or_else(|| image.topic_by_id(&t.topic_id).map(|ti| ti.name.clone()))
            {
                Some(name) => may(&name),
                None => true,
            }
        });
    request.topics = topics;
    let mut response = delete_allowed(broker, request, version).await;
    let refusal = |name: Option<kafka_protocol::messages::TopicName>, id| {
        DeletableTopicResult::default()
            .with_name(name)
            .with_topic_id(if version >= 6 { id } else { uuid::Uuid::nil() })
            .with_error_code(code::TOPIC_AUTHORIZATION_FAILED)
    };
    let refused = refused_names
        .into_iter()
        .map(|n| refusal(Some(n), uuid::Uuid::nil()))
        .chain(refused.into_iter().map(|t| refusal(t.name, t.topic_id)));
    response.responses.extend(refused);
    response
}

async fn delete_allowed(
    broker: &Arc<Broker>,
    request: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    let mut refs: Vec<TopicRef> = request
        .topic_names
        .iter()
        .map(|n| TopicRef::Name(n.0.to_string()))
        .collect();
    for t in &request.topics {
        match &t.name {
            Some(name) => refs.push(TopicRef::Name(name.0.to_string())),
            None => refs.push(TopicRef::Id(t.topic_id)),
        }
    }
    let results = match broker
        .controller
        .run(runnel_metadata::controller::DeleteTopics {
            topics: refs.clone(),
            api_version: version,
        })
        .await
    {
        Ok(results) => results,
        Err(e) => refs
            .into_iter()
            .map(|r| {
                let name = match &r {
                    TopicRef::Name(n) => Some(n.clone()),
                    TopicRef::Id(_) => None,
                };
                (r, name, Err(e.clone()))
            })
            .collect(),
    };
    let deleted: Vec<uuid::Uuid> = results
        .iter()
        .filter_map(|r| r.2.as_ref().ok().copied())
        .collect();
    let gone = wait_for(broker, request.timeout_ms, |image| {
        deleted.iter().all(|id| image.topic_by_id(id).is_none())
    })
    .await;
    let responses = results
        .into_iter()
        .map(|(r, name, result)| {
            let name = name.or(match &r {
                TopicRef::Name(n) => Some(n.clone()),
                TopicRef::Id(_) => None,
            });
            let out = DeletableTopicResult::default().with_name(name.as_deref().map(topic_name));
            match result {
                Ok(id) => out.with_topic_id(id).with_error_code(if gone {
                    code::NONE
                } else {
                    code::REQUEST_TIMED_OUT
                }),
                Err(e) => out.with_error_code(e.code).with_error_message(message(&e)),
            }
        })
        .collect();
    fit_delete_topics(
        DeleteTopicsResponse::default().with_responses(responses),
        version,
    )
}

/// Clears fields the negotiated version does not carry: topic ids before v6, messages
/// before v5.
fn fit_delete_topics(mut response: DeleteTopicsResponse, version: i16) -> DeleteTopicsResponse {
    for r in &mut response.responses {
        if version < 6 {
            r.topic_id = uuid::Uuid::nil();
        }
        if version < 5 {
            r.error_message = None;
        }
    }
    response
}

/// Kafka's authorization of CreatePartitions: ALTER on each topic.
pub async fn create_partitions(
    broker: &Arc<Broker>,
    mut request: CreatePartitionsRequest,
    version: i16,
    ctx: &RequestContext,
) -> CreatePartitionsResponse {
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut request.topics)
        .into_iter()
        .partition(|t| broker.authorized_topic(ctx, AclOperation::Alter, &t.name.0));
    request.topics = allowed;
    let mut response = create_partitions_allowed(broker, request, version).await;
    response.results.extend(refused.into_iter().map(|t| {
        CreatePartitionsTopicResult::default()
            .with_name(t.name)
            .with_error_code(code::TOPIC_AUTHORIZATION_FAILED)
    }));
    response
}

async fn create_partitions_allowed(
    broker: &Arc<Broker>,
    request: CreatePartitionsRequest,
    _version: i16,
) -> CreatePartitionsResponse {
    let requests: Vec<runnel_metadata::CreatePartitionsRequest> = request
        .topics
        .iter()
        .map(|t| runnel_metadata::CreatePartitionsRequest {
            name: t.name.0.to_string(),
            count: t.count,
            assignment: t.assignments.as_ref().map(|a| {
                a.iter()
                    .map(|a| a.broker_ids.iter().map(|b| b.0).collect())
                    .collect()
            }),
        })
        .collect();
    let results = match broker
        .controller
        .run(runnel_metadata::controller::CreatePartitions {
            requests,
            validate_only: request.validate_only,
        })
        .await
    {
        Ok(results) => results,
        Err(e) => request
            .topics
            .iter()
            .map(|t| (t.name.0.to_string(), Err(e.clone())))
            .collect(),
    };
    let grown: Vec<(String, i32)> = request
        .topics
        .iter()
        .filter(|t| {
            results
                .iter()
                .any(|(n, r)| n == t.name.0.as_str() && r.is_ok())
        })
        .map(|t| (t.name.0.to_string(), t.count))
        .collect();
    let all_led = request.validate_only
        || wait_for(broker, request.timeout_ms, |image| {
            grown.iter().all(|(name, count)| {
                image.topic(name).is_some_and(|t| {
                    i64::try_from(t.partitions.len()).unwrap_or(i64::MAX) >= i64::from(*count)
                        && t.partitions.values().all(|p| p.leader >= 0)
                })
            })
        })
        .await;
    let results = results
        .into_iter()
        .map(|(name, result)| {
            let out = CreatePartitionsTopicResult::default().with_name(topic_name(&name));
            match result {
                Ok(()) => out.with_error_code(if all_led {
                    code::NONE
                } else {
                    code::REQUEST_TIMED_OUT
                }),
                Err(e) => out.with_error_code(e.code).with_error_message(message(&e)),
            }
        })
        .collect();
    CreatePartitionsResponse::default().with_results(results)
}
