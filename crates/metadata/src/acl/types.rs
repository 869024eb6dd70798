//! The enums of Kafka's ACL model, with their wire codes (`AclOperation`, `AclPermissionType`,
//! `ResourceType`, `PatternType` in `org.apache.kafka.common`). UNKNOWN (0) is what a code this
//! build does not know decodes to; ANY (1) and MATCH only appear in filters.

use serde::{Deserialize, Serialize};

macro_rules! wire_enum {
    ($(#[$doc:meta])* $name:ident { $($variant:ident = $code:expr, $text:expr;)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum $name {
            $($variant,)*
        }

        impl $name {
            pub const ALL_VALUES: &'static [$name] = &[$($name::$variant,)*];

            /// The wire code; unknown codes decode to `Unknown`.
            pub fn code(self) -> i8 {
                match self {
                    $($name::$variant => $code,)*
                }
            }

            pub fn from_code(code: i8) -> Self {
                match code {
                    $($code => $name::$variant,)*
                    _ => $name::Unknown,
                }
            }

            /// Kafka's name (upper case, as `kafka-acls.sh` prints it).
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }

            /// Parses Kafka's name, case-insensitively, ignoring `-` / `_` (the tools accept
            /// `IdempotentWrite` and `IDEMPOTENT_WRITE`).
            pub fn parse(text: &str) -> Option<Self> {
                let norm = |s: &str| s.chars().filter(|c| *c != '_' && *c != '-')
                    .flat_map(char::to_lowercase).collect::<String>();
                let wanted = norm(text);
                Self::ALL_VALUES.iter().copied().find(|v| norm(v.name()) == wanted)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

wire_enum!(
    /// `org.apache.kafka.common.resource.ResourceType`.
    ResourceType {
        Unknown = 0, "UNKNOWN";
        Any = 1, "ANY";
        Topic = 2, "TOPIC";
        Group = 3, "GROUP";
        Cluster = 4, "CLUSTER";
        TransactionalId = 5, "TRANSACTIONAL_ID";
        DelegationToken = 6, "DELEGATION_TOKEN";
        User = 7, "USER";
    }
);

wire_enum!(
    /// `org.apache.kafka.common.resource.PatternType`.
    PatternType {
        Unknown = 0, "UNKNOWN";
        Any = 1, "ANY";
        Match = 2, "MATCH";
        Literal = 3, "LITERAL";
        Prefixed = 4, "PREFIXED";
    }
);

wire_enum!(
    /// `org.apache.kafka.common.acl.AclOperation`.
    AclOperation {
        Unknown = 0, "UNKNOWN";
        Any = 1, "ANY";
        All = 2, "ALL";
        Read = 3, "READ";
        Write = 4, "WRITE";
        Create = 5, "CREATE";
        Delete = 6, "DELETE";
        Alter = 7, "ALTER";
        Describe = 8, "DESCRIBE";
        ClusterAction = 9, "CLUSTER_ACTION";
        DescribeConfigs = 10, "DESCRIBE_CONFIGS";
        AlterConfigs = 11, "ALTER_CONFIGS";
        IdempotentWrite = 12, "IDEMPOTENT_WRITE";
        CreateTokens = 13, "CREATE_TOKENS";
        DescribeTokens = 14, "DESCRIBE_TOKENS";
    }
);

wire_enum!(
    /// `org.apache.kafka.common.acl.AclPermissionType`.
    AclPermission {
        Unknown = 0, "UNKNOWN";
        Any = 1, "ANY";
        Deny = 2, "DENY";
        Allow = 3, "ALLOW";
    }
);

impl AclOperation {
    /// The operations a resource type supports (Kafka's `AclEntry.supportedOperations`), the
    /// set KIP-430's authorized-operations fields are drawn from.
    pub fn supported_by(resource: ResourceType) -> &'static [AclOperation] {
        use AclOperation::*;
        match resource {
            ResourceType::Topic => &[
                Read,
                Write,
                Create,
                Describe,
                Delete,
                Alter,
                DescribeConfigs,
                AlterConfigs,
            ],
            ResourceType::Group => &[Read, Describe, Delete],
            ResourceType::Cluster => &[
                Create,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
                Alter,
                Describe,
            ],
            ResourceType::TransactionalId => &[Describe, Write],
            ResourceType::DelegationToken => &[Describe],
            ResourceType::User => &[CreateTokens, DescribeTokens],
            ResourceType::Unknown | ResourceType::Any => &[],
        }
    }

    /// Whether an ALLOW ACL for `self` grants `wanted` (StandardAuthorizer: ALL grants
    /// everything; Read / Write / Delete / Alter imply Describe; AlterConfigs implies
    /// DescribeConfigs).
    pub fn allow_grants(self, wanted: AclOperation) -> bool {
        use AclOperation::*;
        match (self, wanted) {
            (All, _) => true,
            (Read | Write | Delete | Alter | Describe, Describe) => true,
            (AlterConfigs | DescribeConfigs, DescribeConfigs) => true,
            (a, b) => a == b,
        }
    }

    /// Whether a DENY ACL for `self` refuses `wanted`: only the same operation or ALL (a
    /// DENY of Read does not deny Describe).
    pub fn deny_refuses(self, wanted: AclOperation) -> bool {
        self == AclOperation::All || self == wanted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_unknown_codes_are_unknown() {
        for op in AclOperation::ALL_VALUES {
            assert_eq!(AclOperation::from_code(op.code()), *op);
        }
        for rt in ResourceType::ALL_VALUES {
            assert_eq!(ResourceType::from_code(rt.code()), *rt);
        }
        assert_eq!(AclOperation::from_code(99), AclOperation::Unknown);
        assert_eq!(PatternType::from_code(-1), PatternType::Unknown);
        assert_eq!(AclPermission::from_code(4), AclPermission::Unknown);
    }

    #[test]
    fn names_parse_in_kafka_spellings() {
        assert_eq!(
            AclOperation::parse("IdempotentWrite"),
            Some(AclOperation::IdempotentWrite)
        );
        assert_eq!(
            AclOperation::parse("describe_configs"),
            Some(AclOperation::DescribeConfigs)
        );
        assert_eq!(
            ResourceType::parse("transactional-id"),
            Some(ResourceType::TransactionalId)
        );
        assert_eq!(PatternType::parse("prefixed"), Some(PatternType::Prefixed));
        assert_eq!(AclOperation::parse("fly"), None);
    }

    #[test]
    fn implications_apply_to_allow_only() {
        use AclOperation::*;
        for op in [Read, Write, Delete, Alter, Describe, All] {
            assert!(op.allow_grants(Describe), "{op}");
            assert!(!op.deny_refuses(Describe) || op == Describe || op == All);
        }
        assert!(AlterConfigs.allow_grants(DescribeConfigs));
        assert!(!AlterConfigs.deny_refuses(DescribeConfigs));
        assert!(!Read.allow_grants(Write));
        assert!(!Create.allow_grants(Describe));
        assert!(All.deny_refuses(Read));
    }
}
