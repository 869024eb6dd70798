//! DeleteTopics (API 20), spec C.3. KRaft deletes at once: one `RemoveTopic` record per topic;
//! `on_commit` then walks the removed partitions and replicas to NonExistent.

use std::collections::{HashMap, HashSet};

use uuid::Uuid;

use super::Controller;
use crate::errors::ApiError;
use crate::image::MetadataImage;
use crate::records::MetadataRecord;
use crate::topic_name::is_internal;

/// A topic named in DeleteTopics: by name (v0-v5) or by id (v6+).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum TopicRef {
    Name(String),
    Id(Uuid),
}

/// Per entry: the reference as sent, the topic name if known, the deleted topic's id or the error.
pub type DeleteTopicResult = (TopicRef, Option<String>, Result<Uuid, ApiError>);

impl Controller {
    /// DeleteTopics. In order: deletion disabled (73 for v3+, 42 before), the same reference
    /// twice in the request (42), unknown name (3) / id (100), internal topic (42). A topic
    /// named both by name and by id is removed once and both entries succeed.
    pub fn delete_topics(
        &mut self,
        image: &MetadataImage,
        topics: &[TopicRef],
        api_version: i16,
    ) -> (Vec<DeleteTopicResult>, Vec<MetadataRecord>) {
        let mut counts: HashMap<&TopicRef, usize> = HashMap::new();
        for t in topics {
            *counts.entry(t).or_default() += 1;
        }
        let mut removed: HashSet<Uuid> = HashSet::new();
        let mut records = Vec::new();
        let mut results = Vec::with_capacity(topics.len());
        for t in topics {
            let known = match t {
                TopicRef::Name(n) => image.topic(n),
                TopicRef::Id(id) => image.topic_by_id(id),
            };
            let name = known.map(|topic| topic.name.clone());
            let result = if !self.config.delete_topic_enable {
                let message = "Topic deletion is disabled.";
                Err(if api_version >= 3 {
                    ApiError::topic_deletion_disabled(message)
                } else {
                    ApiError::invalid_request(message)
                })
            } else if counts[t] > 1 {
                Err(ApiError::invalid_request(match t {
                    TopicRef::Name(_) => "Duplicate topic name.",
                    TopicRef::Id(_) => "Duplicate topic id.",
                }))
            } else {
                match (known, t) {
                    (None, TopicRef::Name(_)) => Err(ApiError::unknown_topic_or_partition(
                        "This server does not host this topic-partition.",
                    )),
                    (None, TopicRef::Id(_)) => Err(ApiError::unknown_topic_id(
                        "This server does not host this topic ID.",
                    )),
                    (Some(topic), _) if is_internal(&topic.name) => {
                        Err(ApiError::invalid_request(format!(
                            "Topic '{}' is an internal topic and cannot be deleted.",
                            topic.name
                        )))
                    }
                    (Some(topic), _) => {
                        if removed.insert(topic.id) {
                            records.push(MetadataRecord::RemoveTopic { topic_id: topic.id });
                        }
                        Ok(topic.id)
                    }
                }
            };
            results.push((t.clone(), name, result));
        }
        (results, records)
    }
}

/// The DeleteTopics operation; `api_version` picks the disabled-deletion error (73 for v3+).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeleteTopics {
    pub topics: Vec<TopicRef>,
    pub api_version: i16,
}

impl super::ControllerOp for DeleteTopics {
    const NAME: &'static str = "DeleteTopics";
    type Response = Vec<DeleteTopicResult>;

    fn validate(&self) -> Result<(), ApiError> {
        if self.api_version < 0 {
            return Err(super::op::bad_field("api_version", "negative"));
        }
        Ok(())
    }

    fn decide(
        &self,
        ctx: &mut super::OpContext<'_>,
    ) -> Result<super::ControllerResult<Self::Response>, ApiError> {
        let (results, records) =
            ctx.controller
                .delete_topics(ctx.image, &self.topics, self.api_version);
        Ok(super::ControllerResult::new(records, results))
    }

    fn absorb(response: Self::Response, error: ApiError) -> Result<Self::Response, ApiError> {
        Ok(super::absorb_each(response, &error, |r| &mut r.2))
    }
}
