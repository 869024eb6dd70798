//! Request validation before any state is touched (Kafka's
//! `throwIfConsumerGroupHeartbeatRequestIsInvalid`): the field combinations each member epoch
//! requires, the assignor name and the regex. Failing here never changes the group.

use super::api::ConsumerHeartbeat;
use super::codes::*;
use super::member::{LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH};
use super::regex::Regex;
use crate::errors::KafkaError;

/// v1+: the client generates its member id (KIP-1082), so it must always be present.
pub const CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION: i16 = 1;

/// Kafka counts whitespace-only strings as empty.
fn blank(s: &str) -> bool {
    s.trim().is_empty()
}

/// The code and message for an invalid request.
pub(crate) fn validate(req: &ConsumerHeartbeat, assignors: &[String]) -> Result<(), KafkaError> {
    let invalid = |m: &str| Err(KafkaError::new(INVALID_REQUEST, m));
    if (req.api_version >= CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION
        || req.member_epoch > 0
        || req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH)
        && blank(&req.member_id)
    {
        return invalid("MemberId can't be empty.");
    }
    if blank(&req.group_id) {
        return invalid("GroupId can't be empty.");
    }
    // Both go into int16-length record keys (`records`).
    if !crate::codec::fits_int16_string(&req.group_id)
        || !crate::codec::fits_int16_string(&req.member_id)
    {
        return invalid("GroupId and MemberId must be at most 32767 bytes.");
    }
    if req.instance_id.as_deref().is_some_and(blank) {
        return invalid("InstanceId can't be empty.");
    }
    if req.rack_id.as_deref().is_some_and(blank) {
        return invalid("RackId can't be empty.");
    }
    if req.member_epoch == 0 {
        if req.rebalance_timeout_ms == -1 {
            return invalid("RebalanceTimeoutMs must be provided in first request.");
        }
        if !req.topic_partitions.as_ref().is_some_and(Vec::is_empty) {
            return invalid("TopicPartitions must be empty when (re-)joining.");
        }
        if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
            return invalid(
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
            );
        }
    } else if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
        if req.instance_id.is_none() {
            return invalid("InstanceId can't be null.");
        }
    } else if req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH {
        return invalid("MemberEpoch is invalid.");
    }
    if let Some(a) = &req.server_assignor {
        if !assignors.contains(a) {
            return Err(KafkaError::new(
                UNSUPPORTED_ASSIGNOR,
                format!(
                    "ServerAssignor {a} is not supported. Supported assignors: {}.",
                    assignors.join(", ")
                ),
            ));
        }
    }
    if let Some(r) = req
        .subscribed_topic_regex
        .as_deref()
        .filter(|r| !r.is_empty())
    {
        if let Err(e) = Regex::new(r) {
            return Err(KafkaError::new(
                INVALID_REGULAR_EXPRESSION,
                format!("SubscribedTopicRegex `{r}` is not a valid regular expression: {e}."),
            ));
        }
    }
    Ok(())
}
