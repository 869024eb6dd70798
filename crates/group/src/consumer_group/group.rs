//! One KIP-848 group (Kafka's `ConsumerGroup`): its members, the group epoch (bumped whenever
//! subscriptions or the subscribed topics' metadata change), the target assignment and the
//! epoch it was computed for, and the state derived from them. The target is recomputed
//! lazily, on the first heartbeat that sees `group_epoch > assignment_epoch`, like Kafka.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::api::{Assignment, TopicsView};
use super::assignor::{self, MemberSpec};
use super::member::Member;
use super::subscription::{self, RegexCache};

/// A consumer group's state (Kafka's `ConsumerGroupState`), derived, never stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerGroupState {
    /// No members.
    Empty,
    /// The group epoch moved on; the target assignment is not computed yet.
    Assigning,
    /// Some member has not converged to the target yet.
    Reconciling,
    /// Every member owns exactly its target at the target epoch.
    Stable,
    /// Deleted; never held.
    Dead,
}

impl ConsumerGroupState {
    /// Kafka's name (ListGroups, ConsumerGroupDescribe).
    pub fn name(self) -> &'static str {
        match self {
            ConsumerGroupState::Empty => "Empty",
            ConsumerGroupState::Assigning => "Assigning",
            ConsumerGroupState::Reconciling => "Reconciling",
            ConsumerGroupState::Stable => "Stable",
            ConsumerGroupState::Dead => "Dead",
        }
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct ConsumerGroup {
    pub id: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, Member>,
    /// instance id -> member id.
    pub static_members: BTreeMap<String, String>,
    /// member id -> target assignment (computed at `assignment_epoch`).
    pub target: BTreeMap<String, Assignment>,
    /// Subscribed topics that exist: name -> (id, partitions). A change bumps the group epoch.
    pub subscription_metadata: BTreeMap<String, (Uuid, i32)>,
    /// The members' regexes, compiled once and resolved per topics view.
    pub regexes: RegexCache,
}

impl ConsumerGroup {
    pub fn new(id: &str) -> Self {
        ConsumerGroup {
            id: id.to_string(),
            ..Default::default()
        }
    }

    pub fn state(&self) -> ConsumerGroupState {
        if self.members.is_empty() {
            ConsumerGroupState::Empty
        } else if self.group_epoch > self.assignment_epoch {
            ConsumerGroupState::Assigning
        } else if self
            .members
            .values()
            .all(|m| m.is_reconciled_to(self.assignment_epoch))
        {
            ConsumerGroupState::Stable
        } else {
            ConsumerGroupState::Reconciling
        }
    }

    /// The member holding `instance_id`, if any.
    pub fn static_member(&self, instance_id: &str) -> Option<&Member> {
        self.static_members
            .get(instance_id)
            .and_then(|id| self.members.get(id))
    }

    /// Inserts or replaces a member, keeping the instance-id index in step.
    pub fn put_member(&mut self, m: Member) {
        if let Some(old) = self.members.get(&m.id) {
            if let Some(i) = &old.instance_id {
                if self.static_members.get(i) == Some(&m.id) {
                    self.static_members.remove(i);
                }
            }
        }
        if let Some(i) = &m.instance_id {
            self.static_members.insert(i.clone(), m.id.clone());
        }
        self.members.insert(m.id.clone(), m);
    }

    /// Removes a member with its target and instance id; its partitions become free.
    pub fn remove_member(&mut self, id: &str) -> Option<Member> {
        let m = self.members.remove(id)?;
        if let Some(i) = &m.instance_id {
            if self.static_members.get(i).is_some_and(|o| o == id) {
                self.static_members.remove(i);
            }
        }
        self.target.remove(id);
        Some(m)
    }

    /// The subscription metadata the members have now (a change bumps the group epoch): the
    /// existing topics they name, and those their regexes matched at the last refresh. A
    /// pattern new to the group matches nothing until [`refresh_regexes`](Self::refresh_regexes).
    pub fn compute_subscription_metadata(
        &mut self,
        topics: &TopicsView,
    ) -> BTreeMap<String, (Uuid, i32)> {
        self.regexes.track(self.members.values());
        let mut out = BTreeMap::new();
        for m in self.members.values() {
            for name in subscription::topics_of(m, &self.regexes) {
                if let Some(v) = topics.topics.get(&name) {
                    out.insert(name, *v);
                }
            }
        }
        out
    }

    /// The background step of regex subscriptions (Kafka's `refreshRegularExpressions` and
    /// `handleRegularExpressionsResult`): when due, resolves the group's regexes and bumps the
    /// group epoch if that changes what the group subscribes to; the next heartbeat of any
    /// member computes the new target.
    pub fn refresh_regexes(&mut self, now_ms: i64, topics: &TopicsView) {
        self.regexes.track(self.members.values());
        if !self.regexes.refresh_due(now_ms, topics) {
            return;
        }
        self.regexes.refresh(now_ms, topics);
        let metadata = self.compute_subscription_metadata(topics);
        if metadata != self.subscription_metadata {
            self.subscription_metadata = metadata;
            self.group_epoch = self.group_epoch.saturating_add(1);
            tracing::info!(group = %self.id, epoch = self.group_epoch, "regexes resolved: bumped group epoch");
        }
    }

    /// Ids of the existing topics `m` subscribes to (regexes as last resolved).
    fn topic_ids_of(&self, m: &Member) -> BTreeSet<Uuid> {
        subscription::topics_of(m, &self.regexes)
            .iter()
            .filter_map(|n| self.subscription_metadata.get(n).map(|(id, _)| *id))
            .collect()
    }

    /// Recomputes the target for the current group epoch with the preferred assignor.
    pub fn update_target(&mut self, default_assignor: &str) {
        let name = assignor::preferred(self.members.values(), default_assignor);
        let partitions: BTreeMap<Uuid, i32> =
            self.subscription_metadata.values().copied().collect();
        let empty = Assignment::new();
        let specs: Vec<MemberSpec<'_>> = self
            .members
            .values()
            .map(|m| MemberSpec {
                id: &m.id,
                topics: self.topic_ids_of(m),
                current: self.target.get(&m.id).unwrap_or(&empty),
            })
            .collect();
        let target = assignor::assign(&name, &specs, &partitions);
        self.target = target;
        self.assignment_epoch = self.group_epoch;
    }

    /// Every owned partition (assigned or pending revocation) -> its owner.
    pub fn owners(&self) -> BTreeMap<(Uuid, i32), &str> {
        let mut out = BTreeMap::new();
        for m in self.members.values() {
            for tp in m.owned() {
                out.insert(tp, m.id.as_str());
            }
        }
        out
    }

    /// Checks the group's invariants; `Err` names the first violation. The key one: no
    /// partition is ever owned by two members, counting partitions pending revocation.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut seen: BTreeMap<(Uuid, i32), &str> = BTreeMap::new();
        for m in self.members.values() {
            for tp in m.owned() {
                if let Some(other) = seen.insert(tp, &m.id) {
                    return Err(format!(
                        "group {}: partition {tp:?} owned by {other} and {}",
                        self.id, m.id
                    ));
                }
            }
        }
        let mut targeted: BTreeSet<(Uuid, i32)> = BTreeSet::new();
        for (id, a) in &self.target {
            if !self.members.contains_key(id) {
                return Err(format!("group {}: target for unknown member {id}", self.id));
            }
            for (t, ps) in a {
                for p in ps {
                    if !targeted.insert((*t, *p)) {
                        return Err(format!("group {}: {t}-{p} targeted twice", self.id));
                    }
                }
            }
        }
        for (i, id) in &self.static_members {
            match self.members.get(id) {
                Some(m) if m.instance_id.as_deref() == Some(i.as_str()) => {}
                _ => return Err(format!("group {}: stale instance id {i}", self.id)),
            }
        }
        if self.assignment_epoch > self.group_epoch {
            return Err(format!("group {}: assignment epoch ahead", self.id));
        }
        Ok(())
    }
}
