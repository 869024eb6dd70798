//! `AclBindingFilter`: which ACLs DescribeAcls lists and DeleteAcls removes (Kafka's
//! `ResourcePatternFilter` and `AccessControlEntryFilter`). `None` fields match anything;
//! ANY matches every value of its enum; a MATCH pattern type matches the ACLs that would apply
//! to the named resource (the literal name, the `*` wildcard, and prefixes of the name).

use serde::{Deserialize, Serialize};

use super::binding::AclBinding;
use super::types::{AclOperation, AclPermission, PatternType, ResourceType};
use crate::errors::ApiError;

/// The resource name that matches every resource of a type in a LITERAL ACL.
pub const WILDCARD_RESOURCE: &str = "*";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclBindingFilter {
    pub resource_type: ResourceType,
    pub resource_name: Option<String>,
    pub pattern_type: PatternType,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: AclOperation,
    pub permission: AclPermission,
}

impl AclBindingFilter {
    /// Matches every ACL.
    pub fn any() -> Self {
        AclBindingFilter {
            resource_type: ResourceType::Any,
            resource_name: None,
            pattern_type: PatternType::Any,
            principal: None,
            host: None,
            operation: AclOperation::Any,
            permission: AclPermission::Any,
        }
    }

    /// Kafka's `AclControlManager.validateFilter`: a filter with an UNKNOWN field is refused.
    pub fn validate(&self) -> Result<(), ApiError> {
        if self.resource_type == ResourceType::Unknown || self.pattern_type == PatternType::Unknown
        {
            return Err(ApiError::invalid_request("Unknown patternFilter."));
        }
        if self.operation == AclOperation::Unknown || self.permission == AclPermission::Unknown {
            return Err(ApiError::invalid_request("Unknown entryFilter."));
        }
        Ok(())
    }

    pub fn matches(&self, acl: &AclBinding) -> bool {
        self.matches_pattern(acl) && self.matches_entry(acl)
    }

    fn matches_pattern(&self, acl: &AclBinding) -> bool {
        if self.resource_type != ResourceType::Any && self.resource_type != acl.resource_type {
            return false;
        }
        let any_or_match = matches!(self.pattern_type, PatternType::Any | PatternType::Match);
        if !any_or_match && self.pattern_type != acl.pattern_type {
            return false;
        }
        let Some(name) = &self.resource_name else {
            return true;
        };
        if self.pattern_type != PatternType::Match {
            return *name == acl.resource_name;
        }
        match acl.pattern_type {
            PatternType::Literal => {
                *name == acl.resource_name || acl.resource_name == WILDCARD_RESOURCE
            }
            PatternType::Prefixed => name.starts_with(&acl.resource_name),
            _ => false,
        }
    }

    fn matches_entry(&self, acl: &AclBinding) -> bool {
        self.principal.as_ref().is_none_or(|p| *p == acl.principal)
            && self.host.as_ref().is_none_or(|h| *h == acl.host)
            && (self.operation == AclOperation::Any || self.operation == acl.operation)
            && (self.permission == AclPermission::Any || self.permission == acl.permission)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(name: &str, pt: PatternType) -> AclBinding {
        AclBinding {
            resource_type: ResourceType::Topic,
            resource_name: name.into(),
            pattern_type: pt,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: AclOperation::Read,
            permission: AclPermission::Allow,
        }
    }

    fn by_name(name: &str, pt: PatternType) -> AclBindingFilter {
        AclBindingFilter {
            resource_type: ResourceType::Topic,
            resource_name: Some(name.into()),
            pattern_type: pt,
            ..AclBindingFilter::any()
        }
    }

    #[test]
    fn any_matches_everything() {
        assert!(AclBindingFilter::any().matches(&acl("x", PatternType::Prefixed)));
    }

    #[test]
    fn literal_and_any_compare_names_exactly() {
        assert!(by_name("foo", PatternType::Literal).matches(&acl("foo", PatternType::Literal)));
        assert!(!by_name("foo", PatternType::Literal).matches(&acl("foo", PatternType::Prefixed)));
        assert!(by_name("foo", PatternType::Any).matches(&acl("foo", PatternType::Prefixed)));
        assert!(!by_name("foo", PatternType::Any).matches(&acl("*", PatternType::Literal)));
    }

    #[test]
    fn match_finds_the_acls_that_apply() {
        let f = by_name("foobar", PatternType::Match);
        assert!(f.matches(&acl("foobar", PatternType::Literal)));
        assert!(f.matches(&acl("*", PatternType::Literal)));
        assert!(f.matches(&acl("foo", PatternType::Prefixed)));
        assert!(f.matches(&acl("foobar", PatternType::Prefixed)));
        assert!(!f.matches(&acl("foo", PatternType::Literal)));
        assert!(!f.matches(&acl("foobarx", PatternType::Prefixed)));
    }

    #[test]
    fn entry_fields_filter() {
        let mut f = AclBindingFilter::any();
        f.principal = Some("User:bob".into());
        assert!(!f.matches(&acl("x", PatternType::Literal)));
        f.principal = None;
        f.permission = AclPermission::Deny;
        assert!(!f.matches(&acl("x", PatternType::Literal)));
        f.permission = AclPermission::Any;
        f.operation = AclOperation::Read;
        assert!(f.matches(&acl("x", PatternType::Literal)));
    }

    #[test]
    fn unknown_fields_are_refused() {
        let mut f = AclBindingFilter::any();
        assert!(f.validate().is_ok());
        f.operation = AclOperation::Unknown;
        assert_eq!(f.validate().unwrap_err().message, "Unknown entryFilter.");
        f = AclBindingFilter {
            pattern_type: PatternType::Unknown,
            ..AclBindingFilter::any()
        };
        assert_eq!(f.validate().unwrap_err().message, "Unknown patternFilter.");
    }
}
