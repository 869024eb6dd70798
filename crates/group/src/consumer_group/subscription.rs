//! Which topics a member subscribes to: its explicit names plus, for a `subscribed_topic_regex`
//! (v1), every topic whose whole name matches (Kafka resolves RE2J patterns with `matches()`).
//!
//! Like Kafka's `resolvedRegularExpressions`, each group keeps its regexes compiled and
//! resolved in a [`RegexCache`]: a pattern is compiled once, when a member starts using it, and
//! matched against the topic names again only when the topics view changes (its `version`),
//! not on every heartbeat. A newly created topic that matches is picked up by the next
//! heartbeat after the image that created it, which bumps the group epoch through the metadata.

use std::collections::{BTreeMap, BTreeSet};

use super::api::TopicsView;
use super::member::Member;
use super::regex::Regex;

/// One pattern in use: compiled, and the topics it matched in view `version`.
#[derive(Debug, Clone)]
struct Resolved {
    regex: Regex,
    version: u64,
    topics: BTreeSet<String>,
}

/// The regexes a group's members subscribe with, compiled and resolved.
#[derive(Debug, Clone, Default)]
pub(crate) struct RegexCache {
    resolved: BTreeMap<String, Resolved>,
    /// How many patterns were compiled so far (tests prove "once").
    pub compilations: u64,
    /// How many (pattern, topics view) resolutions were run so far.
    pub resolutions: u64,
}

impl RegexCache {
    /// Brings the cache in line with the patterns `members` use: new ones are compiled and
    /// resolved, ones resolved against an older view are matched again, unused ones dropped.
    pub fn refresh<'a>(&mut self, members: impl Iterator<Item = &'a Member>, topics: &TopicsView) {
        let used: BTreeSet<&str> = members
            .filter_map(|m| m.subscribed_topic_regex.as_deref())
            .collect();
        self.resolved.retain(|p, _| used.contains(p.as_str()));
        for pattern in used {
            match self.resolved.get_mut(pattern) {
                Some(r) if r.version == topics.version => {}
                Some(r) => {
                    r.topics = matching(&r.regex, topics);
                    r.version = topics.version;
                    self.resolutions += 1;
                }
                None => {
                    // Validated on the heartbeat that set it; a pattern that does not compile
                    // (cannot happen) matches nothing rather than failing the group.
                    let Ok(regex) = Regex::new(pattern) else {
                        continue;
                    };
                    self.compilations += 1;
                    self.resolutions += 1;
                    let topics_matched = matching(&regex, topics);
                    self.resolved.insert(
                        pattern.to_string(),
                        Resolved {
                            regex,
                            version: topics.version,
                            topics: topics_matched,
                        },
                    );
                }
            }
        }
    }

    /// The topics `pattern` matched at the last refresh (none if it is not cached).
    fn topics(&self, pattern: &str) -> impl Iterator<Item = &String> {
        self.resolved
            .get(pattern)
            .into_iter()
            .flat_map(|r| &r.topics)
    }
}

/// Topic names (internal ones excluded) whose whole name `regex` matches.
fn matching(regex: &Regex, topics: &TopicsView) -> BTreeSet<String> {
    topics
        .topics
        .keys()
        .filter(|n| !n.starts_with("__") && regex.is_full_match(n))
        .cloned()
        .collect()
}

/// The topic names `m` subscribes to (explicit names may not exist yet), its regex resolved
/// through `regexes` (refreshed for the current members and view by the caller).
pub(crate) fn topics_of(m: &Member, regexes: &RegexCache) -> BTreeSet<String> {
    let mut out = m.subscribed_topic_names.clone();
    if let Some(pattern) = &m.subscribed_topic_regex {
        out.extend(regexes.topics(pattern).cloned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn view(version: u64, names: &[&str]) -> TopicsView {
        TopicsView {
            version,
            topics: names
                .iter()
                .enumerate()
                .map(|(i, n)| (n.to_string(), (Uuid::from_u128(i as u128 + 1), 1)))
                .collect(),
        }
    }

    fn member(regex: &str) -> Member {
        let mut m = Member::new("m".into());
        m.subscribed_topic_regex = Some(regex.into());
        m
    }

    /// Caught: every heartbeat compiled the member's regex again and matched it against every
    /// topic (`topics_of` called `Regex::new` per call); now it is compiled once per group and
    /// matched again only when the topics view changes.
    #[test]
    fn a_regex_is_compiled_once_and_resolved_again_only_when_topics_change() {
        let mut cache = RegexCache::default();
        let members = [member("orders-.*")];
        let v1 = view(1, &["orders-eu", "payments"]);
        for _ in 0..100 {
            cache.refresh(members.iter(), &v1);
        }
        assert_eq!((cache.compilations, cache.resolutions), (1, 1));
        assert_eq!(
            topics_of(&members[0], &cache),
            BTreeSet::from(["orders-eu".to_string()])
        );
        let v2 = view(
            2,
            &["orders-eu", "orders-us", "payments", "__consumer_offsets"],
        );
        cache.refresh(members.iter(), &v2);
        cache.refresh(members.iter(), &v2);
        assert_eq!((cache.compilations, cache.resolutions), (1, 2));
        assert_eq!(topics_of(&members[0], &cache).len(), 2);
    }

    #[test]
    fn a_changed_regex_is_compiled_and_an_unused_one_dropped() {
        let mut cache = RegexCache::default();
        let v = view(1, &["a1", "b1"]);
        cache.refresh([member("a.")].iter(), &v);
        let b = member("b.");
        cache.refresh(std::iter::once(&b), &v);
        assert_eq!(cache.compilations, 2);
        assert_eq!(cache.resolved.len(), 1);
        assert_eq!(topics_of(&b, &cache), BTreeSet::from(["b1".to_string()]));
    }
}
