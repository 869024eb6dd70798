//! Authorization: Kafka's ACL model and StandardAuthorizer semantics, pure.
//!
//! * `types`: resource types, pattern types, operations and permissions with Kafka's wire codes;
//! * `binding`: one ACL (`AclBinding`) and its validation as a new ACL (AclControlManager);
//! * `filter`: `AclBindingFilter` (DescribeAcls / DeleteAcls), with MATCH and ANY;
//! * `set`: the ACLs of the image, by id, indexed by resource;
//! * `authorizer`: the decision (super users, DENY wins, implied operations, the default);
//! * `config`: `authorizer.class.name`, `super.users`, `allow.everyone.if.no.acl.found`.

mod authorizer;
mod binding;
mod config;
mod filter;
mod set;
mod types;

pub use authorizer::{Authorizer, Requester};
pub use binding::{parse_principal, AclBinding, CLUSTER_NAME};
pub use config::{parse_super_users, AuthorizerConfig, LEGACY_AUTHORIZER, STANDARD_AUTHORIZER};
pub use filter::{AclBindingFilter, WILDCARD_RESOURCE};
pub use set::AclSet;
pub use types::{AclOperation, AclPermission, PatternType, ResourceType};
