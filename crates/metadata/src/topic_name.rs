//! Topic-name rules (spec C.1, Kafka's `Topic.validate`) and the '.'/'_' collision rule.
//!
//! Kafka turns '.' into '_' in metric names, so `a.b` and `a_b` would share metrics; the broker
//! therefore refuses a name that differs from an existing one only in those characters.

use crate::errors::ApiError;

/// Kafka's maximum topic-name length.
pub const MAX_NAME_LENGTH: usize = 249;

/// Topics the cluster itself owns; clients may not delete them.
pub const INTERNAL_TOPICS: [&str; 3] = [
    "__consumer_offsets",
    "__transaction_state",
    "__cluster_metadata",
];

/// Whether `name` is one of Kafka's internal topics.
pub fn is_internal(name: &str) -> bool {
    INTERNAL_TOPICS.contains(&name)
}

/// Validates a topic name on its own: non-empty, not `.`/`..`, at most 249 characters,
/// only `[a-zA-Z0-9._-]`. Every violation is 17 INVALID_TOPIC_EXCEPTION.
pub fn validate_topic_name(name: &str) -> Result<(), ApiError> {
    let reason = if name.is_empty() {
        "Topic name is illegal, it can't be empty".to_string()
    } else if name == "." || name == ".." {
        "Topic name cannot be \".\" or \"..\"".to_string()
    } else if name.len() > MAX_NAME_LENGTH {
        format!(
            "Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {name}"
        )
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        format!(
            "Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        )
    } else {
        return Ok(());
    };
    Err(ApiError::invalid_topic(format!(
        "Topic name is invalid: {reason}"
    )))
}

/// Whether the name contains a character that collides in metric names.
pub fn has_collision_chars(name: &str) -> bool {
    name.contains('.') || name.contains('_')
}

/// The metric-name form of a topic name ('.' replaced by '_').
pub fn unify_collision_chars(name: &str) -> String {
    name.replace('.', "_")
}

/// The first of `existing` that collides with `name` (equal after unifying '.' and '_', but
/// not identical), if `name` has collision characters at all.
pub fn find_collision<'a, I>(name: &str, existing: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    if !has_collision_chars(name) {
        return None;
    }
    let unified = unify_collision_chars(name);
    existing.into_iter().find(|other| {
        *other != name && has_collision_chars(other) && unify_collision_chars(other) == unified
    })
}

/// Full C.1 check for a *new* topic against the existing names: format, then collision
/// (KRaft's message "Topic 'a.b' collides with existing topic: a_b").
pub fn validate_new_topic_name<'a, I>(name: &str, existing: I) -> Result<(), ApiError>
where
    I: IntoIterator<Item = &'a str>,
{
    validate_topic_name(name)?;
    if let Some(other) = find_collision(name, existing) {
        return Err(ApiError::invalid_topic(format!(
            "Topic '{name}' collides with existing topic: {other}"
        )));
    }
    Ok(())
}
