//! One ACL: a resource pattern and an access-control entry (Kafka's `AclBinding`), and the
//! checks a new ACL passes before it is stored (Kafka's `AclControlManager.validateNewAcl` and
//! the CLUSTER-name rule of `AclApis.handleCreateAcls`).

use serde::{Deserialize, Serialize};

use super::types::{AclOperation, AclPermission, PatternType, ResourceType};
use crate::errors::ApiError;

/// The one name a CLUSTER resource has (Kafka's `Resource.CLUSTER_NAME`).
pub const CLUSTER_NAME: &str = "kafka-cluster";

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub resource_name: String,
    pub pattern_type: PatternType,
    /// `type:name`, e.g. `User:alice` (`User:*` = every user).
    pub principal: String,
    /// A client address as `InetAddress.getHostAddress` prints it, or `*`.
    pub host: String,
    pub operation: AclOperation,
    pub permission: AclPermission,
}

/// Splits `type:name` at the first colon (Kafka's `SecurityUtils.parseKafkaPrincipal`); both
/// parts must be non-empty.
pub fn parse_principal(text: &str) -> Option<(&str, &str)> {
    let (kind, name) = text.split_once(':')?;
    (!kind.is_empty() && !name.is_empty()).then_some((kind, name))
}

impl AclBinding {
    /// Checks an ACL about to be created, in Kafka's order; every refusal is INVALID_REQUEST.
    pub fn validate_new(&self) -> Result<(), ApiError> {
        let invalid = |m: String| Err(ApiError::invalid_request(m));
        if matches!(
            self.resource_type,
            ResourceType::Unknown | ResourceType::Any
        ) {
            return invalid(format!("Invalid resourceType {}", self.resource_type));
        }
        if !matches!(
            self.pattern_type,
            PatternType::Literal | PatternType::Prefixed
        ) {
            return invalid(format!("Invalid patternType {}", self.pattern_type));
        }
        if matches!(self.operation, AclOperation::Unknown | AclOperation::Any) {
            return invalid(format!("Invalid operation {}", self.operation));
        }
        if !matches!(self.permission, AclPermission::Allow | AclPermission::Deny) {
            return invalid(format!("Invalid permissionType {}", self.permission));
        }
        if self.resource_name.is_empty() {
            return invalid("Resource name should not be empty".into());
        }
        if self.resource_type == ResourceType::Cluster && self.resource_name != CLUSTER_NAME {
            return invalid(format!(
                "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
            ));
        }
        if parse_principal(&self.principal).is_none() {
            return invalid(format!(
                "expected a string in format principalType:principalName but got {}",
                self.principal
            ));
        }
        if self.host.is_empty() {
            return invalid("Host should not be empty".into());
        }
        Ok(())
    }

    /// How `kafka-acls.sh --list` prints the entry.
    pub fn describe_entry(&self) -> String {
        format!(
            "(principal={}, host={}, operation={}, permissionType={})",
            self.principal, self.host, self.operation, self.permission
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn acl(rt: ResourceType, name: &str, pt: PatternType) -> AclBinding {
        AclBinding {
            resource_type: rt,
            resource_name: name.into(),
            pattern_type: pt,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: AclOperation::Read,
            permission: AclPermission::Allow,
        }
    }

    #[test]
    fn valid_acls_pass() {
        assert!(acl(ResourceType::Topic, "t", PatternType::Literal)
            .validate_new()
            .is_ok());
        assert!(acl(ResourceType::Group, "g-", PatternType::Prefixed)
            .validate_new()
            .is_ok());
        assert!(
            acl(ResourceType::Cluster, CLUSTER_NAME, PatternType::Literal)
                .validate_new()
                .is_ok()
        );
    }

    #[test]
    fn each_bad_field_is_invalid_request_with_kafkas_message() {
        let base = acl(ResourceType::Topic, "t", PatternType::Literal);
        let cases: Vec<(AclBinding, &str)> = vec![
            (
                AclBinding {
                    resource_type: ResourceType::Any,
                    ..base.clone()
                },
                "Invalid resourceType",
            ),
            (
                AclBinding {
                    pattern_type: PatternType::Match,
                    ..base.clone()
                },
                "Invalid patternType",
            ),
            (
                AclBinding {
                    operation: AclOperation::Any,
                    ..base.clone()
                },
                "Invalid operation",
            ),
            (
                AclBinding {
                    permission: AclPermission::Any,
                    ..base.clone()
                },
                "Invalid permissionType",
            ),
            (
                AclBinding {
                    resource_name: String::new(),
                    ..base.clone()
                },
                "should not be empty",
            ),
            (
                AclBinding {
                    resource_type: ResourceType::Cluster,
                    ..base.clone()
                },
                "CLUSTER resource",
            ),
            (
                AclBinding {
                    principal: "alice".into(),
                    ..base.clone()
                },
                "principalType:principalName",
            ),
            (
                AclBinding {
                    principal: "User:".into(),
                    ..base.clone()
                },
                "principalType:principalName",
            ),
            (
                AclBinding {
                    host: String::new(),
                    ..base.clone()
                },
                "Host",
            ),
        ];
        for (bad, message) in cases {
            let err = bad.validate_new().unwrap_err();
            assert_eq!(err.code, crate::codes::INVALID_REQUEST, "{bad:?}");
            assert!(err.message.contains(message), "{err:?}");
        }
    }
}
