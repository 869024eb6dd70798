//! The authorization decision, with Kafka's `StandardAuthorizerData` semantics:
//!
//! 1. a super user (`super.users`) may do anything;
//! 2. the ACLs that apply to the resource (literal name, literal `*`, prefixes of the name)
//!    whose principal is the requester's or `User:*` and whose host is the requester's address
//!    or `*` are considered: any DENY for the operation (or ALL) refuses, whatever ALLOWs say;
//!    otherwise an ALLOW for the operation (ALL, or one implying it: Read/Write/Delete/Alter
//!    imply Describe, AlterConfigs implies DescribeConfigs) grants;
//! 3. if no ACL matched, `allow.everyone.if.no.acl.found` decides (default: refuse).

use std::collections::BTreeSet;

use super::binding::AclBinding;
use super::filter::WILDCARD_RESOURCE;
use super::set::AclSet;
use super::types::{AclOperation, AclPermission, PatternType, ResourceType};

/// The principal that matches every user in an ACL.
pub const WILDCARD_PRINCIPAL: &str = "User:*";

/// Who asks: the principal as `type:name` and the client's address (no leading `/`).
#[derive(Debug, Clone, Copy)]
pub struct Requester<'a> {
    pub principal: &'a str,
    pub host: &'a str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorizer {
    super_users: BTreeSet<String>,
    allow_everyone_if_no_acl_found: bool,
}

impl Authorizer {
    pub fn new(super_users: BTreeSet<String>, allow_everyone_if_no_acl_found: bool) -> Self {
        Authorizer {
            super_users,
            allow_everyone_if_no_acl_found,
        }
    }

    pub fn is_super_user(&self, principal: &str) -> bool {
        self.super_users.contains(principal)
    }

    /// May `who` perform `op` on the resource `(resource_type, name)`?
    pub fn authorize(
        &self,
        acls: &AclSet,
        who: Requester<'_>,
        op: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        if self.is_super_user(who.principal) {
            return true;
        }
        let mut allowed = false;
        for acl in acls.applying(resource_type, name) {
            if !entry_applies(acl, who) {
                continue;
            }
            match acl.permission {
                AclPermission::Deny if acl.operation.deny_refuses(op) => return false,
                AclPermission::Allow if acl.operation.allow_grants(op) => allowed = true,
                _ => {}
            }
        }
        // Here no DENY matched: an ALLOW that matched grants, and if none did, nothing
        // matched at all and the default decides.
        allowed || self.allow_everyone_if_no_acl_found
    }

    /// May `who` perform `op` on at least one resource of the type? Kafka's
    /// `Authorizer.authorizeByResourceType`, used where Kafka 3.x accepts "Write on any topic"
    /// for IdempotentWrite: a super user (or the default, for a name no ACL covers) may; a
    /// matching DENY on `*` refuses; otherwise some ALLOW (exactly `op` or ALL) that no DENY
    /// dominates (the same literal, or a DENY prefix of its name) grants.
    pub fn authorize_by_resource_type(
        &self,
        acls: &AclSet,
        who: Requester<'_>,
        op: AclOperation,
        resource_type: ResourceType,
    ) -> bool {
        // Kafka first authorizes a name no ACL is likely to cover ("hardcode"), so super
        // users and the allow-everyone default pass regardless of DENYs.
        if self.authorize(acls, who, op, resource_type, "hardcode") {
            return true;
        }
        let relevant: Vec<&AclBinding> = acls
            .of_type(resource_type)
            .filter(|acl| entry_applies(acl, who))
            .filter(|acl| acl.operation == op || acl.operation == AclOperation::All)
            .collect();
        let is = |acl: &&AclBinding, perm, pt| acl.permission == perm && acl.pattern_type == pt;
        let deny_literal: BTreeSet<&str> = relevant
            .iter()
            .filter(|a| is(a, AclPermission::Deny, PatternType::Literal))
            .map(|a| a.resource_name.as_str())
            .collect();
        if deny_literal.contains(WILDCARD_RESOURCE) {
            return false;
        }
        let deny_prefixed: BTreeSet<&str> = relevant
            .iter()
            .filter(|a| is(a, AclPermission::Deny, PatternType::Prefixed))
            .map(|a| a.resource_name.as_str())
            .collect();
        let dominated = |name: &str| {
            name.char_indices()
                .any(|(i, c)| deny_prefixed.contains(&name[..i + c.len_utf8()]))
        };
        relevant
            .iter()
            .filter(|a| a.permission == AclPermission::Allow)
            .any(|a| match a.pattern_type {
                PatternType::Literal if a.resource_name == WILDCARD_RESOURCE => true,
                PatternType::Literal => {
                    !deny_literal.contains(a.resource_name.as_str()) && !dominated(&a.resource_name)
                }
                PatternType::Prefixed => !dominated(&a.resource_name),
                _ => false,
            })
    }

    /// The operations of the resource's type `who` may perform on it (KIP-430).
    pub fn authorized_operations(
        &self,
        acls: &AclSet,
        who: Requester<'_>,
        resource_type: ResourceType,
        name: &str,
    ) -> Vec<AclOperation> {
        AclOperation::supported_by(resource_type)
            .iter()
            .copied()
            .filter(|op| self.authorize(acls, who, *op, resource_type, name))
            .collect()
    }
}

/// The ACL names this requester: its principal or `User:*`, its host or `*`.
fn entry_applies(acl: &AclBinding, who: Requester<'_>) -> bool {
    (acl.principal == who.principal || acl.principal == WILDCARD_PRINCIPAL)
        && (acl.host == WILDCARD_RESOURCE || acl.host == who.host)
}
