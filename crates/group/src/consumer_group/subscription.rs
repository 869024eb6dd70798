//! Which topics a member subscribes to: its explicit names plus, for a `subscribed_topic_regex`
//! (v1), every topic whose whole name matches (Kafka resolves RE2J patterns with `matches()`).
//! Resolved against the topics view of each call, so a newly created topic that matches is
//! picked up by the next heartbeat, which bumps the group epoch through the metadata.

use std::collections::BTreeSet;

use super::api::TopicsView;
use super::member::Member;
use super::regex::Regex;

/// The topic names `m` subscribes to (explicit names may not exist yet).
pub(crate) fn topics_of(m: &Member, topics: &TopicsView) -> BTreeSet<String> {
    let mut out = m.subscribed_topic_names.clone();
    if let Some(pattern) = &m.subscribed_topic_regex {
        // Validated on the heartbeat that set it; a pattern that no longer compiles (cannot
        // happen) matches nothing rather than failing the group.
        if let Ok(re) = Regex::new(pattern) {
            out.extend(
                topics
                    .topics
                    .keys()
                    .filter(|n| !n.starts_with("__") && re.is_full_match(n))
                    .cloned(),
            );
        }
    }
    out
}
