//! The ACLs of a metadata image: by id (the records name them by id) and indexed by
//! (resource type, pattern type, name), so an authorization looks up only the ACLs that can
//! apply to one resource: its literal name, the `*` wildcard, and each prefix of its name.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use uuid::Uuid;

use super::binding::AclBinding;
use super::filter::{AclBindingFilter, WILDCARD_RESOURCE};
use super::types::{PatternType, ResourceType};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AclSet {
    by_id: BTreeMap<Uuid, AclBinding>,
    index: HashMap<(ResourceType, PatternType), HashMap<String, BTreeSet<Uuid>>>,
}

impl AclSet {
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Every ACL with its id, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (&Uuid, &AclBinding)> {
        self.by_id.iter()
    }

    pub fn contains_id(&self, id: &Uuid) -> bool {
        self.by_id.contains_key(id)
    }

    /// Adds an ACL; false (and nothing changes) if the id is taken.
    pub fn insert(&mut self, id: Uuid, acl: AclBinding) -> bool {
        if self.by_id.contains_key(&id) {
            return false;
        }
        self.index
            .entry((acl.resource_type, acl.pattern_type))
            .or_default()
            .entry(acl.resource_name.clone())
            .or_default()
            .insert(id);
        self.by_id.insert(id, acl);
        true
    }

    /// Removes an ACL by id; `None` if there is none.
    pub fn remove(&mut self, id: &Uuid) -> Option<AclBinding> {
        let acl = self.by_id.remove(id)?;
        let key = (acl.resource_type, acl.pattern_type);
        if let Some(names) = self.index.get_mut(&key) {
            if let Some(ids) = names.get_mut(&acl.resource_name) {
                ids.remove(id);
                if ids.is_empty() {
                    names.remove(&acl.resource_name);
                }
            }
            if names.is_empty() {
                self.index.remove(&key);
            }
        }
        Some(acl)
    }

    /// Whether an identical ACL exists already (CreateAcls stores it once).
    pub fn contains(&self, acl: &AclBinding) -> bool {
        self.named(acl.resource_type, acl.pattern_type, &acl.resource_name)
            .any(|(_, a)| a == acl)
    }

    /// The ACLs a filter selects, in id order.
    pub fn matching<'a>(
        &'a self,
        filter: &'a AclBindingFilter,
    ) -> impl Iterator<Item = (&'a Uuid, &'a AclBinding)> + 'a {
        self.by_id.iter().filter(|(_, acl)| filter.matches(acl))
    }

    /// The ACLs that apply to the resource `(resource_type, name)`: LITERAL `name`, LITERAL
    /// `*`, and PREFIXED on every prefix of `name` (the whole name included).
    pub fn applying<'a>(
        &'a self,
        resource_type: ResourceType,
        name: &'a str,
    ) -> impl Iterator<Item = &'a AclBinding> + 'a {
        let literal = self.named(resource_type, PatternType::Literal, name);
        let wildcard = (name != WILDCARD_RESOURCE)
            .then(|| self.named(resource_type, PatternType::Literal, WILDCARD_RESOURCE))
            .into_iter()
            .flatten();
        let prefixes = name
            .char_indices()
            .map(|(i, c)| &name[..i + c.len_utf8()])
            .flat_map(move |p| self.named(resource_type, PatternType::Prefixed, p));
        literal.chain(wildcard).chain(prefixes).map(|(_, a)| a)
    }

    /// Every ACL of one resource type.
    pub fn of_type(&self, resource_type: ResourceType) -> impl Iterator<Item = &AclBinding> {
        self.by_id
            .values()
            .filter(move |a| a.resource_type == resource_type)
    }

    fn named<'a>(
        &'a self,
        resource_type: ResourceType,
        pattern_type: PatternType,
        name: &str,
    ) -> impl Iterator<Item = (&'a Uuid, &'a AclBinding)> + 'a {
        self.index
            .get(&(resource_type, pattern_type))
            .and_then(|names| names.get(name))
            .into_iter()
            .flatten()
            .filter_map(|id| self.by_id.get_key_value(id))
    }
}
