//! Which topics a member subscribes to: its explicit names plus, for a `subscribed_topic_regex`
//! (v1), every topic whose whole name matches (Kafka resolves RE2J patterns with `matches()`).
//!
//! Like Kafka's `resolvedRegularExpressions`, each group keeps its regexes compiled and
//! resolved in a [`RegexCache`], and resolving is a background step, not part of the
//! heartbeat: a pattern no member used before matches nothing until the next refresh (run by
//! `tick`), so a member that subscribes to a regex plus a literal topic first gets the literal
//! topic's partitions and the matched topics on a later epoch, as with Kafka (librdkafka's
//! `0045_resubscribe_with_regex` expects exactly that). A refresh resolves the unresolved
//! patterns and matches the others again against a newer topics view; refreshes are batched at
//! most one per [`REGEX_BATCH_REFRESH_INTERVAL_MS`] once the group has resolved regexes
//! (Kafka's `REGEX_BATCH_REFRESH_INTERVAL_MS`), so churn causes one rebalance, not many.

use std::collections::{BTreeMap, BTreeSet};

use super::api::TopicsView;
use super::member::Member;
use super::regex::Regex;

/// Kafka's minimum time between two refreshes of a group's resolved regexes.
pub const REGEX_BATCH_REFRESH_INTERVAL_MS: i64 = 10_000;

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
    /// Patterns in use that no refresh has resolved yet: they match nothing meanwhile.
    unresolved: BTreeSet<String>,
    /// When the last refresh ran (`None`: never, or every resolved pattern has gone since).
    last_refresh_ms: Option<i64>,
    /// How many patterns were compiled so far (tests prove "once").
    pub compilations: u64,
    /// How many (pattern, topics view) resolutions were run so far.
    pub resolutions: u64,
}

impl RegexCache {
    /// Brings the set of patterns in line with what `members` use (done on every heartbeat):
    /// unused patterns are dropped, new ones wait unresolved for the next refresh.
    pub fn track<'a>(&mut self, members: impl Iterator<Item = &'a Member>) {
        let used: BTreeSet<&str> = members
            .filter_map(|m| m.subscribed_topic_regex.as_deref())
            .collect();
        self.resolved.retain(|p, _| used.contains(p.as_str()));
        self.unresolved.retain(|p| used.contains(p.as_str()));
        for p in used {
            if !self.resolved.contains_key(p) {
                self.unresolved.insert(p.to_string());
            }
        }
        if self.resolved.is_empty() {
            self.last_refresh_ms = None;
        }
    }

    /// Whether the background step should refresh now: some pattern is unresolved or was
    /// resolved against an older view, and the last refresh is not too recent.
    pub fn refresh_due(&self, now_ms: i64, topics: &TopicsView) -> bool {
        let stale = self.resolved.values().any(|r| r.version != topics.version);
        (!self.unresolved.is_empty() || stale)
            && self
                .last_refresh_ms
                .is_none_or(|t| now_ms > t.saturating_add(REGEX_BATCH_REFRESH_INTERVAL_MS))
    }

    /// Resolves every unresolved pattern (compiling it) and matches the stale ones again.
    pub fn refresh(&mut self, now_ms: i64, topics: &TopicsView) {
        for r in self.resolved.values_mut() {
            if r.version != topics.version {
                r.topics = matching(&r.regex, topics);
                r.version = topics.version;
                self.resolutions += 1;
            }
        }
        for pattern in std::mem::take(&mut self.unresolved) {
            // Validated on the heartbeat that set it; a pattern that does not compile
            // (cannot happen) matches nothing rather than failing the group.
            let Ok(regex) = Regex::new(&pattern) else {
                continue;
            };
            self.compilations += 1;
            self.resolutions += 1;
            let topics_matched = matching(&regex, topics);
            self.resolved.insert(
                pattern,
                Resolved {
                    regex,
                    version: topics.version,
                    topics: topics_matched,
                },
            );
        }
        self.last_refresh_ms = Some(now_ms);
    }

    /// Whether `pattern` has been resolved (an unresolved one matches nothing yet).
    #[cfg(test)]
    pub fn is_resolved(&self, pattern: &str) -> bool {
        self.resolved.contains_key(pattern)
    }

    /// The topics `pattern` matched at the last refresh (none if it is not resolved).
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
        let mut now = 0;
        for _ in 0..100 {
            cache.track(members.iter());
            if cache.refresh_due(now, &v1) {
                cache.refresh(now, &v1);
            }
            now += 1_000;
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
        now += REGEX_BATCH_REFRESH_INTERVAL_MS;
        cache.track(members.iter());
        assert!(cache.refresh_due(now, &v2));
        cache.refresh(now, &v2);
        for _ in 0..5 {
            now += REGEX_BATCH_REFRESH_INTERVAL_MS + 1;
            cache.track(members.iter());
            assert!(!cache.refresh_due(now, &v2), "nothing changed since");
        }
        assert_eq!((cache.compilations, cache.resolutions), (1, 2));
        assert_eq!(topics_of(&members[0], &cache).len(), 2);
    }

    /// Caught: a new regex was resolved inside the heartbeat that brought it, so a member
    /// switching to a regex got every matched topic at once; Kafka resolves it in the
    /// background and the matched topics follow on a later epoch.
    #[test]
    fn a_new_regex_matches_nothing_until_refreshed() {
        let mut cache = RegexCache::default();
        let m = member("a.");
        let v = view(1, &["a1", "b1"]);
        cache.track(std::iter::once(&m));
        assert!(topics_of(&m, &cache).is_empty());
        assert!(!cache.is_resolved("a."));
        assert!(cache.refresh_due(0, &v));
        cache.refresh(0, &v);
        assert_eq!(topics_of(&m, &cache), BTreeSet::from(["a1".to_string()]));
    }

    /// Once the group has resolved regexes, refreshes are batched: a newly created topic or
    /// a new pattern waits until 10 s after the last refresh.
    #[test]
    fn refreshes_are_batched_every_ten_seconds() {
        let mut cache = RegexCache::default();
        let (a, b) = (member("a."), member("b."));
        cache.track(std::iter::once(&a));
        cache.refresh(0, &view(1, &["a1", "b1"]));
        cache.track([&a, &b].into_iter());
        let v2 = view(2, &["a1", "a2", "b1"]);
        assert!(!cache.refresh_due(REGEX_BATCH_REFRESH_INTERVAL_MS, &v2));
        assert!(cache.refresh_due(REGEX_BATCH_REFRESH_INTERVAL_MS + 1, &v2));
        cache.refresh(REGEX_BATCH_REFRESH_INTERVAL_MS + 1, &v2);
        assert_eq!(topics_of(&a, &cache).len(), 2);
        assert_eq!(topics_of(&b, &cache), BTreeSet::from(["b1".to_string()]));
    }

    #[test]
    fn a_changed_regex_is_compiled_and_an_unused_one_dropped() {
        let mut cache = RegexCache::default();
        let v = view(1, &["a1", "b1"]);
        cache.track([member("a.")].iter());
        cache.refresh(0, &v);
        let b = member("b.");
        cache.track(std::iter::once(&b));
        assert!(
            cache.refresh_due(1, &v),
            "the group has no resolved regex left"
        );
        cache.refresh(1, &v);
        assert_eq!(cache.compilations, 2);
        assert_eq!(cache.resolved.len(), 1);
        assert_eq!(topics_of(&b, &cache), BTreeSet::from(["b1".to_string()]));
    }
}
